//===- TestDecoder.cpp - A small random decoder for the reference tests ---===//

#include "test/unit/reference/TestDecoder.h"

#include "llvm/ADT/StringExtras.h"

#include <cstring>

namespace sits::reference::test {

constexpr int64_t kVocab = kDecoderVocab, kHidden = 16;

/// dense<"0x..."> of `count` random floats (raw little-endian data).
std::string randomDense(std::mt19937 &random, int64_t count, float scale,
                        float offset) {
  std::normal_distribution<float> normal(0.0f, scale);
  std::string bytes;
  for (int64_t i = 0; i < count; ++i) {
    float value = normal(random) + offset;
    char raw[4];
    std::memcpy(raw, &value, 4);
    bytes.append(raw, 4);
  }
  return "dense<\"0x" + llvm::toHex(bytes) + "\">";
}

/// A two-layer Llama-style model: GQA, RoPE, SwiGLU, untied head.
std::string decoderSource() {
  std::mt19937 random(7);
  std::string s;
  auto weight = [&](const std::string &name, const std::string &shape,
                    int64_t count, float scale, float offset = 0.0f) {
    s += "  %" + name + " = sits.weight \"" + name + "\" " +
         randomDense(random, count, scale, offset) + " : tensor<" + shape +
         "xf32>\n";
  };
  s += "func.func @forward(%ids: tensor<?x?xi64>) -> tensor<?x?x40xf32> {\n";
  weight("embed", "40x16", kVocab * kHidden, 1.0f);
  weight("head", "40x16", kVocab * kHidden, 0.5f);
  s += "  %x0 = sits.embedding %embed[%ids] : tensor<40x16xf32>, "
       "tensor<?x?xi64> -> tensor<?x?x16xf32>\n"
       "  %pos = sits.position_ids %ids : tensor<?x?xi64> -> tensor<?x?xi64>\n"
       "  %cos, %sin = sits.rope_cos_sin %pos {inv_freq = dense<[1.0, 0.01]> "
       ": tensor<2xf32>} : tensor<?x?xi64> -> tensor<?x?x2xf32>, "
       "tensor<?x?x2xf32>\n";
  const char *act = "tensor<?x?x16xf32>";
  for (int layer = 0; layer < 2; ++layer) {
    std::string l = std::to_string(layer), x = "%x" + l,
                next = "%x" + std::to_string(layer + 1);
    weight("n1_" + l, "16", kHidden, 0.1f, 1.0f);
    weight("n2_" + l, "16", kHidden, 0.1f, 1.0f);
    weight("q" + l, "16x16", 256, 0.3f);
    weight("k" + l, "8x16", 128, 0.3f);
    weight("v" + l, "8x16", 128, 0.3f);
    weight("o" + l, "16x16", 256, 0.3f);
    weight("g" + l, "24x16", 384, 0.3f);
    weight("u" + l, "24x16", 384, 0.3f);
    weight("d" + l, "16x24", 384, 0.3f);
    s += "  %h" + l + " = sits.rms_norm " + x + ", %n1_" + l +
         " {epsilon = 1.0e-6 : f32} : " + act + ", tensor<16xf32> -> " + act +
         "\n";
    s += "  %qp" + l + " = sits.linear %h" + l + ", %q" + l + " : " + act +
         ", tensor<16x16xf32> -> " + act + "\n";
    s += "  %kp" + l + " = sits.linear %h" + l + ", %k" + l + " : " + act +
         ", tensor<8x16xf32> -> tensor<?x?x8xf32>\n";
    s += "  %vp" + l + " = sits.linear %h" + l + ", %v" + l + " : " + act +
         ", tensor<8x16xf32> -> tensor<?x?x8xf32>\n";
    s += "  %qh" + l + " = sits.split_heads %qp" + l +
         " {num_heads = 4} : " + act + " -> tensor<?x4x?x4xf32>\n";
    s += "  %kh" + l + " = sits.split_heads %kp" + l +
         " {num_heads = 2} : tensor<?x?x8xf32> -> tensor<?x2x?x4xf32>\n";
    s += "  %vh" + l + " = sits.split_heads %vp" + l +
         " {num_heads = 2} : tensor<?x?x8xf32> -> tensor<?x2x?x4xf32>\n";
    s += "  %qr" + l + " = sits.rope %qh" + l +
         ", %cos, %sin {style = #sits.rope_style<rotate_half>, rotary_dim = 4} "
         ": tensor<?x4x?x4xf32>, tensor<?x?x2xf32>, tensor<?x?x2xf32> -> "
         "tensor<?x4x?x4xf32>\n";
    s += "  %kr" + l + " = sits.rope %kh" + l +
         ", %cos, %sin {style = #sits.rope_style<rotate_half>, rotary_dim = 4} "
         ": tensor<?x2x?x4xf32>, tensor<?x?x2xf32>, tensor<?x?x2xf32> -> "
         "tensor<?x2x?x4xf32>\n";
    s += "  %a" + l + " = sits.attention %qr" + l + ", %kr" + l + ", %vh" + l +
         " {num_heads = 4, num_kv_heads = 2, scale = 0.5 : f32, causal = "
         "#sits.causal<bottom_right>} : tensor<?x4x?x4xf32>, "
         "tensor<?x2x?x4xf32>, tensor<?x2x?x4xf32> -> tensor<?x4x?x4xf32>\n";
    s += "  %m" + l + " = sits.merge_heads %a" + l +
         " : tensor<?x4x?x4xf32> -> " + act + "\n";
    s += "  %op" + l + " = sits.linear %m" + l + ", %o" + l + " : " + act +
         ", tensor<16x16xf32> -> " + act + "\n";
    s += "  %r" + l + " = sits.add " + x + ", %op" + l + " : " + act + "\n";
    s += "  %h2" + l + " = sits.rms_norm %r" + l + ", %n2_" + l +
         " {epsilon = 1.0e-6 : f32} : " + act + ", tensor<16xf32> -> " + act +
         "\n";
    s += "  %gp" + l + " = sits.linear %h2" + l + ", %g" + l + " : " + act +
         ", tensor<24x16xf32> -> tensor<?x?x24xf32>\n";
    s += "  %up" + l + " = sits.linear %h2" + l + ", %u" + l + " : " + act +
         ", tensor<24x16xf32> -> tensor<?x?x24xf32>\n";
    s += "  %gu" + l + " = sits.glu <silu> %gp" + l + ", %up" + l +
         " : tensor<?x?x24xf32>\n";
    s += "  %dp" + l + " = sits.linear %gu" + l + ", %d" + l +
         " : tensor<?x?x24xf32>, tensor<16x24xf32> -> " + act + "\n";
    s += "  " + next + " = sits.add %r" + l + ", %dp" + l + " : " + act + "\n";
  }
  s += "  %logits = sits.lm_head %x2, %head : tensor<?x?x16xf32>, "
       "tensor<40x16xf32> -> tensor<?x?x40xf32>\n"
       "  return %logits : tensor<?x?x40xf32>\n}\n";
  return s;
}

} // namespace sits::reference::test
