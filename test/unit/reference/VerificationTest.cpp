//===- VerificationTest.cpp - Greedy decoding, perplexity, comparisons ----===//
//
// A small random decoder in sits ops runs as a full-sequence function and,
// after --sits-kv-cache, as prefill/decode steps with a KV cache: both must
// give the same logits, the same greedy stream and the same perplexity. This
// is what `sitsc --verify-greedy` relies on.
//
//===----------------------------------------------------------------------===//

#include "compiler/reference/Verification.h"
#include "compiler/registration/Registration.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "llvm/ADT/StringExtras.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>

using namespace sits::reference;

namespace {

constexpr int64_t kVocab = 40, kHidden = 16, kHeads = 4, kKvHeads = 2,
                  kHeadDim = 4, kInter = 24;

/// dense<"0x..."> of `count` random floats (raw little-endian data).
std::string randomDense(std::mt19937 &random, int64_t count, float scale,
                        float offset = 0.0f) {
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

class Verification : public ::testing::Test {
protected:
  Verification() {
    mlir::DialectRegistry registry;
    sits::registerAllDialects(registry);
    sits::registerAllPasses();
    context.appendDialectRegistry(registry);
    context.loadAllAvailableDialects();
    std::string source = decoderSource();
    full = mlir::parseSourceString<mlir::ModuleOp>(source, &context);
    cached = mlir::parseSourceString<mlir::ModuleOp>(source, &context);
    EXPECT_TRUE(full && cached);
    mlir::PassManager pm(&context);
    EXPECT_TRUE(mlir::succeeded(mlir::parsePassPipeline(
        "sits-kv-cache{max-seq-len=24 max-batch=2}", pm)));
    EXPECT_TRUE(mlir::succeeded(pm.run(*cached)));
  }

  mlir::MLIRContext context;
  mlir::OwningOpRef<mlir::ModuleOp> full, cached;
};

TEST_F(Verification, FindsTheProgramOfEachStage) {
  llvm::Expected<Program> fullProgram = findProgram(*full);
  ASSERT_TRUE(bool(fullProgram)) << llvm::toString(fullProgram.takeError());
  EXPECT_EQ(fullProgram->forward, "forward");
  EXPECT_FALSE(fullProgram->hasCache());
  llvm::Expected<Program> cachedProgram = findProgram(*cached);
  ASSERT_TRUE(bool(cachedProgram)) << llvm::toString(cachedProgram.takeError());
  EXPECT_TRUE(cachedProgram->hasCache());
  EXPECT_EQ(cachedProgram->prefill, "prefill");
  EXPECT_EQ(cachedProgram->decode, "decode");
}

TEST_F(Verification, PrefillMatchesTheFullSequence) {
  Executor fullExecutor(*full), cachedExecutor(*cached);
  Tensor ids = Tensor::fromInts(ElementType::I64, {2, 7},
                                {1, 5, 9, 2, 33, 0, 7, 39, 4, 4, 8, 12, 3, 21});
  llvm::Expected<Tensor> expected =
      runLogits(fullExecutor, *full, "forward", ids);
  ASSERT_TRUE(bool(expected)) << llvm::toString(expected.takeError());
  llvm::Expected<Tensor> actual =
      runLogits(cachedExecutor, *cached, "prefill", ids);
  ASSERT_TRUE(bool(actual)) << llvm::toString(actual.takeError());
  llvm::Expected<Comparison> comparison = compareTensors(*actual, *expected);
  ASSERT_TRUE(bool(comparison)) << llvm::toString(comparison.takeError());
  EXPECT_EQ(comparison->maxAbsError, 0.0);
  EXPECT_EQ(comparison->argmaxAgreements(), 14);
  EXPECT_TRUE(comparison->withinTolerance(1e-3));
}

TEST_F(Verification, GreedyWithTheCacheMatchesRecomputation) {
  Executor fullExecutor(*full), cachedExecutor(*cached);
  std::vector<int64_t> prompt = {3, 17, 25, 8};
  auto reference =
      greedyDecode(fullExecutor, *full, *findProgram(*full), prompt, 12);
  ASSERT_TRUE(bool(reference)) << llvm::toString(reference.takeError());
  auto withCache =
      greedyDecode(cachedExecutor, *cached, *findProgram(*cached), prompt, 12);
  ASSERT_TRUE(bool(withCache)) << llvm::toString(withCache.takeError());
  ASSERT_EQ(withCache->size(), 12u);
  std::vector<int64_t> tokens;
  for (size_t i = 0; i < reference->size(); ++i) {
    tokens.push_back((*reference)[i].token);
    EXPECT_EQ((*withCache)[i].token, (*reference)[i].token) << "step " << i;
    for (size_t v = 0; v < (*reference)[i].logits.size(); ++v)
      ASSERT_NEAR((*withCache)[i].logits[v], (*reference)[i].logits[v], 1e-5)
          << "step " << i << ", token " << v;
    EXPECT_GE((*withCache)[i].margin, 0.0f);
  }
  EXPECT_FALSE(findGreedyMismatch(*withCache, tokens));

  // A different expected token at step 5 is reported with the margin.
  std::vector<int64_t> altered = tokens;
  altered[5] = (tokens[5] + 1) % kVocab;
  std::optional<GreedyMismatch> mismatch =
      findGreedyMismatch(*withCache, altered);
  ASSERT_TRUE(mismatch);
  EXPECT_EQ(mismatch->step, 5);
  EXPECT_EQ(mismatch->actualToken, tokens[5]);
  EXPECT_EQ(mismatch->expectedToken, altered[5]);
  const std::vector<float> &row = (*withCache)[5].logits;
  EXPECT_FLOAT_EQ(mismatch->margin, row[tokens[5]] - row[altered[5]]);
  EXPECT_GT(mismatch->margin, 0.0f);
}

TEST_F(Verification, DecodingPastTheCapacityIsAnError) {
  Executor executor(*cached);
  std::vector<int64_t> prompt(20, 1);
  auto steps =
      greedyDecode(executor, *cached, *findProgram(*cached), prompt, 8);
  ASSERT_FALSE(bool(steps));
  std::string message = llvm::toString(steps.takeError());
  EXPECT_NE(message.find("KV cache full"), std::string::npos) << message;
}

TEST_F(Verification, PerplexityAgreesAcrossStages) {
  Executor fullExecutor(*full), cachedExecutor(*cached);
  std::vector<int64_t> ids;
  for (int i = 0; i < 45; ++i)
    ids.push_back((i * 7 + 3) % kVocab);
  auto a = teacherForcedPerplexity(fullExecutor, *full, *findProgram(*full),
                                   ids, 16);
  ASSERT_TRUE(bool(a)) << llvm::toString(a.takeError());
  auto b = teacherForcedPerplexity(cachedExecutor, *cached,
                                   *findProgram(*cached), ids, 16);
  ASSERT_TRUE(bool(b)) << llvm::toString(b.takeError());
  // Windows of 16, 16 and 13 tokens predict 15 + 15 + 12.
  EXPECT_EQ(a->predictedTokens, 42);
  EXPECT_EQ(b->predictedTokens, 42);
  EXPECT_NEAR(a->meanNll, b->meanNll, 1e-9);
  EXPECT_GT(a->perplexity(), 1.0);
  EXPECT_LT(a->perplexity(), 1e6);

  // By hand for the first window: -log softmax(logits[t])[ids[t + 1]].
  Tensor window = Tensor::fromInts(ElementType::I64, {1, 16},
                                   {ids.begin(), ids.begin() + 16});
  auto logits = runLogits(fullExecutor, *full, "forward", window);
  ASSERT_TRUE(bool(logits));
  double nll = 0;
  for (int t = 0; t < 15; ++t) {
    double sum = 0;
    for (int v = 0; v < kVocab; ++v)
      sum += std::exp(double(logits->floats()[t * kVocab + v]));
    nll += std::log(sum) - logits->floats()[t * kVocab + ids[t + 1]];
  }
  auto first = teacherForcedPerplexity(fullExecutor, *full, *findProgram(*full),
                                       ids, 16, 16);
  ASSERT_TRUE(bool(first));
  EXPECT_EQ(first->predictedTokens, 15);
  EXPECT_NEAR(first->meanNll, nll / 15, 1e-6);
}

TEST(Comparison, ReportsErrorsAndArgmax) {
  Tensor expected = Tensor::fromFloats(ElementType::F32, {1, 2, 3},
                                       {1, 5, 2, 0.5f, 0.1f, 0.2f});
  Tensor actual = Tensor::fromFloats(ElementType::F32, {1, 2, 3},
                                     {1, 5.01f, 2, 0.1f, 0.6f, 0.2f});
  llvm::Expected<Comparison> result = compareTensors(actual, expected);
  ASSERT_TRUE(bool(result));
  EXPECT_NEAR(result->maxAbsError, 0.5, 1e-6);
  EXPECT_EQ(result->worstIndex, 4);
  EXPECT_EQ(result->positions(), 2);
  EXPECT_EQ(result->argmaxAgreements(), 1);
  EXPECT_FALSE(result->withinTolerance(1e-3));
  std::string report;
  llvm::raw_string_ostream os(report);
  result->print(os);
  EXPECT_NE(report.find("argmax agrees at 1 of 2 positions"), std::string::npos)
      << report;
  EXPECT_NE(report.find("batch 0, position 1: argmax 1, reference 0"),
            std::string::npos)
      << report;
  llvm::Expected<Comparison> mismatched =
      compareTensors(actual, actual.reshaped({2, 3}));
  ASSERT_FALSE(bool(mismatched));
  EXPECT_NE(llvm::toString(mismatched.takeError())
                .find("differs from the reference shape"),
            std::string::npos);
}

TEST(OnnxData, DecodesTensorProtoBytes) {
  std::vector<char> bytes(16);
  int64_t ids[2] = {7, -3};
  std::memcpy(bytes.data(), ids, 16);
  llvm::Expected<Tensor> tensor = tensorFromOnnxData(7, {1, 2}, bytes);
  ASSERT_TRUE(bool(tensor));
  EXPECT_EQ(tensor->getElementType(), ElementType::I64);
  EXPECT_EQ(tensor->ints()[1], -3);
  llvm::Expected<Tensor> wrongSize = tensorFromOnnxData(1, {3}, bytes);
  ASSERT_FALSE(bool(wrongSize));
  EXPECT_NE(llvm::toString(wrongSize.takeError()).find("needs 12"),
            std::string::npos);
  llvm::Expected<Tensor> doubles = tensorFromOnnxData(11, {2}, bytes);
  ASSERT_FALSE(bool(doubles));
  EXPECT_NE(llvm::toString(doubles.takeError()).find("ONNX element type 11"),
            std::string::npos);
}

} // namespace
