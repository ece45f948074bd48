//===- kv_quant_tests.cpp - quantize_kv on the CPU, bit for bit -----------===//
//
// Compiled as host C++ with the emulator by emulate-kv-quant-kernel.test.
// Fills a hot ring with rows that reach every branch of sits.quantize's rule
// (random values, exact ties, a NaN, an infinity, zeros, magnitudes whose
// f16 scale is subnormal, so that levels clip, or underflows to 0, a partial
// last group) and checks quantizeKV's cold bytes and f16 scales against an
// independent reference (the compiler's own _Float16 conversion, nearbyint),
// for int8 and int4, per-token and per-channel keys, and its calibration
// counters. Prints one line per case and "N passed, N failed".
//
//===----------------------------------------------------------------------===//

#include "sits/kv_quant.cuh"

#include "half_bits.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace {

int passed = 0, failed = 0;
std::mt19937_64 rng(8);

template <int Bits, int HeadDim, int Group, bool PerChannel, int Block>
struct Config {
  typedef sits::F16 Hot;
  static constexpr int kKvHeads = 2;
  static constexpr int kHeadDim = HeadDim;
  static constexpr int kCapacity = 32;
  static constexpr int kBits = Bits;
  static constexpr int kGroup = Group;
  static constexpr int kGroups = (HeadDim + Group - 1) / Group;
  static constexpr int kRowBytes = HeadDim * Bits / 8;
  static constexpr int kHotWindow = 3;
  static constexpr int kHotRows = 32; // the whole capacity: rows stay put
  static constexpr bool kPerChannelKeys = PerChannel;
  static constexpr int kChannelBlock = Block;
  static constexpr int kScaleBlocks = (32 + Block - 1) / Block;
  static constexpr int kThreads = 128;
};

template <class Cfg> void entry(void **args) {
  using sits_emu::arg;
  sits::quantizeKV<Cfg>(
      arg<const unsigned short *>(args[0]),
      arg<const unsigned short *>(args[1]), arg<signed char *>(args[2]),
      arg<unsigned short *>(args[3]), arg<signed char *>(args[4]),
      arg<unsigned short *>(args[5]), arg<unsigned long long *>(args[6]),
      arg<const int *>(args[7]), arg<const int *>(args[8]), arg<int>(args[9]));
}


/// The reference scale of a group (sits.quantize steps 1 and 2).
float referenceScale(const std::vector<float> &group, int bits) {
  float absMax = 0.0f;
  for (float x : group) {
    if (!std::isfinite(x))
      return std::numeric_limits<float>::quiet_NaN();
    absMax = std::max(absMax, std::fabs(x));
  }
  float s = halfValue(halfBits(absMax / float((1 << (bits - 1)) - 1)));
  return std::min(s, 65504.0f);
}

int referenceLevel(float x, float s, int bits, bool *clipped) {
  *clipped = false;
  if (!(s > 0.0f))
    return 0;
  float limit = float((1 << (bits - 1)) - 1);
  float level = std::nearbyint(x / s);
  if (std::fabs(level) > limit) {
    *clipped = true;
    level = level > 0 ? limit : -limit;
  }
  return int(level);
}

/// Row `t` of the test ring: a pattern per token.
float valueAt(int t, int d, int headDim) {
  switch (t % 8) {
  case 0: // exact ties at scale 1 (absmax L): x.5 rounds to even
    return d == 0 ? 127.0f : (d % 4 == 1 ? 2.5f : d % 4 == 2 ? -3.5f : 0.5f);
  case 1:
    return d == 5 ? std::numeric_limits<float>::quiet_NaN() : 0.25f;
  case 2:
    return d == headDim - 1 ? std::numeric_limits<float>::infinity() : -1.0f;
  case 3:
    return 0.0f;
  case 4: // absmax 316 f16 ulps: the int8 scale 2.49 ulps rounds to 2,
          // levels up to 158 clip (int4: 45.1 ulps, no clip)
    return std::ldexp(d % 2 ? 316.0f : -float(100 + d % 7), -24);
  case 5: // a scale that underflows to zero
    return d % 2 ? 6.0e-8f : -6.0e-8f;
  case 6: // absmax 17 ulps: the int4 scale 2.43 ulps rounds to 2, level
          // 8.5 rounds to 8 and clips (int8: the scale underflows)
    return std::ldexp(d % 3 ? 17.0f : -5.0f, -24);
  default:
    return std::uniform_real_distribution<float>(-3.0f, 3.0f)(rng);
  }
}

template <class Cfg> void check(const std::string &name) {
  constexpr int B = 2, H = Cfg::kKvHeads, D = Cfg::kHeadDim, C = Cfg::kCapacity;
  constexpr int RB = Cfg::kRowBytes, G = Cfg::kGroup, NG = Cfg::kGroups;
  constexpr int CB = Cfg::kChannelBlock, N = Cfg::kHotWindow;
  std::vector<unsigned short> keyHot(B * H * C * D), valueHot(B * H * C * D);
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h)
      for (int t = 0; t < C; ++t)
        for (int d = 0; d < D; ++d) {
          size_t at = ((size_t(b) * H + h) * C + t) * D + d;
          keyHot[at] = halfBits(valueAt(t + h + b, d, D));
          valueHot[at] = halfBits(valueAt(t + 3 * h + b + 1, d, D));
        }
  std::vector<signed char> keyCold(B * H * C * RB, 0x55),
      valueCold(B * H * C * RB, 0x55);
  size_t keyScaleCount = Cfg::kPerChannelKeys
                             ? size_t(B) * H * Cfg::kScaleBlocks * D
                             : size_t(B) * H * C * NG;
  std::vector<unsigned short> keyScales(keyScaleCount, 0xffff),
      valueScales(size_t(B) * H * C * NG, 0xffff);
  std::vector<unsigned long long> stats(H * 2 * 8, 0);
  // One step of S = C - 1 query tokens per sequence from position 1
  // (sequence 1: 20 of them): tokens p - N leave the window.
  const int seq = C - 1;
  std::vector<int> past = {1, 1}, steps = {seq, 20};
  int seqArg = seq;
  // Kernel parameters as CUDA passes them: each argument's address.
  void *pointers[] = {keyHot.data(),    valueHot.data(),  keyCold.data(),
                      keyScales.data(), valueCold.data(), valueScales.data(),
                      stats.data(),     past.data(),      steps.data()};
  void *args[10];
  for (int i = 0; i < 9; ++i)
    args[i] = &pointers[i];
  args[9] = &seqArg;
  unsigned grid[3] = {unsigned(seq), H, B}, block[3] = {Cfg::kThreads, 1, 1};
  char error[512];
  if (sits_emu_launch(entry<Cfg>, grid, block, 0, args, error, sizeof(error)) !=
      0) {
    std::printf("%-44s launch failed: %s FAIL\n", name.c_str(), error);
    ++failed;
    return;
  }

  int wrong = 0;
  unsigned long long tokens[2][2] = {}, clipped[2][2] = {}; // [head][K/V]
  auto expectRow = [&](bool isKey, int b, int h, int t,
                       const std::vector<float> &scales) {
    const auto &hot = isKey ? keyHot : valueHot;
    const auto &cold = isKey ? keyCold : valueCold;
    for (int d = 0; d < D; d += 2) {
      size_t at = ((size_t(b) * H + h) * C + t) * D + d;
      bool c0, c1;
      int q0 = referenceLevel(halfValue(hot[at]), scales[d], Cfg::kBits, &c0);
      int q1 = referenceLevel(halfValue(hot[at + 1]), scales[d + 1], Cfg::kBits,
                              &c1);
      clipped[h][isKey ? 0 : 1] += c0 + c1;
      const signed char *row = cold.data() + ((size_t(b) * H + h) * C + t) * RB;
      if (Cfg::kBits == 8) {
        wrong += row[d] != q0 || row[d + 1] != q1;
      } else {
        wrong += static_cast<unsigned char>(row[d / 2]) !=
                 ((q0 & 0xf) | ((q1 & 0xf) << 4));
      }
    }
  };
  auto sameScale = [](unsigned short got, float want) {
    float value = halfValue(got);
    return std::isnan(want) ? std::isnan(value)
                            : halfBits(want) == got && value == want;
  };
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h) {
      // Tokens that left the window: p - N for p in [past, past + steps).
      int first = past[b] - N, end = past[b] + steps[b] - N;
      for (int t = std::max(0, first); t < end; ++t)
        for (bool isKey : {false, true}) {
          if (isKey && Cfg::kPerChannelKeys)
            continue;
          const auto &hot = isKey ? keyHot : valueHot;
          std::vector<float> scales(D);
          for (int g = 0; g < NG; ++g) {
            std::vector<float> group;
            for (int d = g * G; d < std::min(D, (g + 1) * G); ++d)
              group.push_back(
                  halfValue(hot[((size_t(b) * H + h) * C + t) * D + d]));
            float s = referenceScale(group, Cfg::kBits);
            for (int d = g * G; d < std::min(D, (g + 1) * G); ++d)
              scales[d] = s;
            const auto &stored = isKey ? keyScales : valueScales;
            wrong +=
                !sameScale(stored[((size_t(b) * H + h) * C + t) * NG + g], s);
          }
          expectRow(isKey, b, h, t, scales);
          ++tokens[h][isKey ? 0 : 1];
        }
      if (Cfg::kPerChannelKeys)
        for (int c = 0; (c + 1) * CB - 1 < end; ++c) {
          if ((c + 1) * CB - 1 < std::max(0, first))
            continue; // completed before this step
          std::vector<float> scales(D);
          for (int d = 0; d < D; ++d) {
            std::vector<float> group;
            for (int r = c * CB; r < (c + 1) * CB; ++r)
              group.push_back(
                  halfValue(keyHot[((size_t(b) * H + h) * C + r) * D + d]));
            scales[d] = referenceScale(group, Cfg::kBits);
            wrong += !sameScale(
                keyScales[((size_t(b) * H + h) * Cfg::kScaleBlocks + c) * D +
                          d],
                scales[d]);
          }
          for (int r = c * CB; r < (c + 1) * CB; ++r)
            expectRow(true, b, h, r, scales);
          tokens[h][0] += CB;
        }
    }
  // Calibration: tokens and clipped values per head, K and V.
  for (int h = 0; h < H; ++h)
    for (int kind = 0; kind < 2; ++kind) {
      const unsigned long long *w = stats.data() + (h * 2 + kind) * 8;
      wrong += w[0] != tokens[h][kind] || w[3] != clipped[h][kind];
    }
  unsigned long long allClipped = 0;
  for (int h = 0; h < H; ++h)
    allClipped += clipped[h][0] + clipped[h][1];
  bool ok = wrong == 0 && allClipped > 0;
  (ok ? passed : failed)++;
  std::printf("%-44s %d mismatches, %llu clipped %s\n", name.c_str(), wrong,
              allClipped, ok ? "ok" : "FAIL");
}

} // namespace

int main() {
  check<Config<8, 64, 64, false, 1>>("int8 D=64 per-token keys");
  check<Config<4, 64, 64, false, 1>>("int4 D=64 per-token keys");
  check<Config<8, 40, 32, true, 4>>("int8 D=40 (partial group) per-channel");
  check<Config<4, 64, 32, true, 4>>("int4 D=64 groups of 32 per-channel");
  check<Config<4, 256, 64, true, 8>>("int4 D=256 per-channel blocks of 8");
  sits_emu_set_reverse_schedule(1);
  check<Config<4, 40, 32, true, 4>>("reverse schedule: int4 D=40 per-channel");
  std::printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
