//===- kernel_tests.cpp - The kernel library on the CPU, kernel by kernel -===//
//
// Compiled as host C++ with the emulator (emulation.h: every GPU thread a
// fiber, warp shuffles and mma.sync emulated) and the kernel library, by
// kernel-tests.test. Each case draws fresh random inputs, runs one kernel
// over buffers poisoned with NaN, and compares with a float64 reference:
// sizes that are not multiples of the tiles, batches of 1 to 8 (and more),
// contexts that cross split boundaries, GQA ratios. Prints one line per
// case and "N passed, N failed".
//
//===----------------------------------------------------------------------===//

#include "sits/attention.cuh"
#include "sits/attention_decode.cuh"
#include "sits/attention_prefill.cuh"
#include "sits/gemm.cuh"
#include "sits/gemv.cuh"

#include "kernel_test_harness.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

using harness::failed;
using harness::launch;
using harness::passed;
using harness::randomFloats;
using harness::report;
using harness::rng;
using harness::uniform;

template <class T> std::vector<typename T::Storage> randomStorage(size_t n) {
  std::vector<typename T::Storage> out(n);
  for (auto &v : out)
    v = T::store(uniform(-1.0f, 1.0f));
  return out;
}

/// Rounds through the storage type `T` (what an mma operand holds).
template <class T> double rounded(float v) { return T::load(T::store(v)); }

//===----------------------------------------------------------------------===//
// Tensor-core GEMV
//===----------------------------------------------------------------------===//

template <class WeightT, int K, int Rows0, int Rows1, int Rows2, int Segments,
          int Epi, bool Gather, int TilesPerBlock, int Unroll,
          bool Norm = false, int TokenGroups = 1, int GroupsUnroll = 1,
          int GroupsStages = 3, bool HalfX = false>
struct GemvConfig {
  typedef WeightT Weight;
  static constexpr int kK = K;
  static constexpr int kSegments = Segments;
  __host__ __device__ static constexpr int rows(int s) {
    return s == 0 ? Rows0 : s == 1 ? Rows1 : Rows2;
  }
  __host__ __device__ static constexpr bool hasBias(int s) { return s != 1; }
  __host__ __device__ static constexpr int tiles(int s) {
    return (rows(s) + 15) / 16;
  }
  static constexpr int kTotalTiles =
      Epi == sits::kGlu ? tiles(0)
                        : tiles(0) + (Segments > 1 ? tiles(1) : 0) +
                              (Segments > 2 ? tiles(2) : 0);
  static constexpr int kEpilogue = Epi;
  static constexpr int kActivation = sits::kSilu;
  static constexpr int kTilesPerBlock = TilesPerBlock;
  static constexpr int kUnroll = Unroll;
  static constexpr int kStages = 3;
  static constexpr bool kGatherLast = Gather;
  static constexpr int kOutOperandBits = 0;
  static constexpr int kTokenGroups = TokenGroups;
  static constexpr int kGroupsUnroll = GroupsUnroll;
  static constexpr int kGroupsStages = GroupsStages;
  // The fused RMSNorm prologue, with a weight offset (Gemma's 1 + w).
  static constexpr bool kNorm = Norm;
  static constexpr float kNormEpsilon = 1e-5f;
  static constexpr float kNormWeightOffset = 0.25f;
  // x as the 16-bit operands a producer wrote (operandHalfIndex<16>).
  static constexpr bool kHalfX = HalfX;
};

template <class Cfg> void gemvEntry(void **args) {
  typedef typename Cfg::Weight::Storage S;
  const S *weights[3] = {sits_emu::arg<const S *>(args[1]),
                         sits_emu::arg<const S *>(args[2]),
                         sits_emu::arg<const S *>(args[3])};
  const float *biases[3] = {sits_emu::arg<const float *>(args[4]),
                            sits_emu::arg<const float *>(args[5]),
                            sits_emu::arg<const float *>(args[6])};
  float *outs[3] = {sits_emu::arg<float *>(args[7]),
                    sits_emu::arg<float *>(args[8]),
                    sits_emu::arg<float *>(args[9])};
  sits::gemvTensorCore<Cfg>(
      sits_emu::arg<const void *>(args[0]), weights, biases, outs,
      sits_emu::arg<const float *>(args[10]), sits_emu::arg<int>(args[11]),
      sits::StepRows{sits_emu::arg<const int *>(args[13]),
                     sits_emu::arg<int>(args[12]), 0},
      sits_emu::arg<const float *>(args[14]));
}

template <class Cfg> void checkGemv(const std::string &name, int tokens) {
  typedef typename Cfg::Weight W;
  constexpr int K = Cfg::kK;
  constexpr bool kGated = Cfg::kEpilogue == sits::kGlu;
  const int segments = Cfg::kSegments;
  const int seqLen = Cfg::kGatherLast ? 3 : 1;
  std::vector<int> stepLengths(tokens);
  for (int b = 0; b < tokens; ++b)
    stepLengths[b] = Cfg::kGatherLast ? b % 4 : 1; // 0: a finished sequence
  std::vector<float> x = randomFloats(size_t(tokens) * seqLen * K);
  std::vector<float> normWeight = randomFloats(K);
  // What the GEMV multiplies: x, or with kNorm x / rms * (w + offset) per
  // row (norm.cuh's formula, in double here).
  std::vector<double> input(x.begin(), x.end());
  if (Cfg::kNorm)
    for (size_t row = 0; row < size_t(tokens) * seqLen; ++row) {
      double squares = 0.0;
      for (int k = 0; k < K; ++k)
        squares += double(x[row * K + k]) * x[row * K + k];
      double rms = std::sqrt(squares / K + Cfg::kNormEpsilon);
      for (int k = 0; k < K; ++k)
        input[row * K + k] =
            x[row * K + k] / rms * (normWeight[k] + Cfg::kNormWeightOffset);
    }
  std::vector<std::vector<typename W::Storage>> w(3);
  std::vector<std::vector<float>> bias(3), out(3);
  std::vector<float> residual;
  for (int s = 0; s < segments; ++s) {
    w[s] = randomStorage<W>(size_t(Cfg::rows(s)) * K);
    bias[s] = randomFloats(Cfg::rows(s));
    out[s].assign(size_t(tokens) * Cfg::rows(s), NAN);
  }
  if (Cfg::kEpilogue == sits::kResidual)
    residual = randomFloats(size_t(tokens) * Cfg::rows(0));
  void *pointers[15];
  // With kHalfX, x goes in as its operands: rounded to W in input order.
  std::vector<typename W::Storage> xHalves(x.size());
  for (size_t i = 0; i < x.size(); ++i)
    xHalves[sits::operandHalfIndex<16>(static_cast<int>(i % K)) + i / K * K] =
        W::store(x[i]);
  const void *xp = Cfg::kHalfX ? static_cast<const void *>(xHalves.data())
                               : static_cast<const void *>(x.data());
  const void *wp[3], *bp[3];
  float *op[3];
  for (int s = 0; s < 3; ++s) {
    wp[s] = s < segments ? w[s].data() : nullptr;
    bp[s] = s < segments && Cfg::hasBias(s) ? bias[s].data() : nullptr;
    op[s] = s < segments ? out[s].data() : nullptr;
  }
  const float *rp = residual.empty() ? nullptr : residual.data();
  const int *lp = stepLengths.data();
  pointers[0] = &xp;
  for (int s = 0; s < 3; ++s) {
    pointers[1 + s] = &wp[s];
    pointers[4 + s] = &bp[s];
    pointers[7 + s] = &op[s];
  }
  pointers[10] = &rp;
  pointers[11] = &tokens;
  int seq = seqLen;
  pointers[12] = &seq;
  pointers[13] = &lp;
  const float *np = Cfg::kNorm ? normWeight.data() : nullptr;
  pointers[14] = &np;
  const unsigned blocks =
      (Cfg::kTotalTiles + Cfg::kTilesPerBlock - 1) / Cfg::kTilesPerBlock;
  // The larger of the one-group ring and the groups' (Launches.cpp).
  const unsigned shared = std::max(
      sits::gemvTensorCoreSharedBytes(kGated ? 2 : 1, Cfg::kTilesPerBlock,
                                      Cfg::kUnroll, Cfg::kStages),
      sits::gemvTensorCoreSharedBytes(kGated ? 2 : 1, Cfg::kTilesPerBlock,
                                      Cfg::kGroupsUnroll, Cfg::kGroupsStages));
  if (!launch(gemvEntry<Cfg>, blocks, 1, 1, sits::kTcThreads, shared,
              pointers)) {
    report(name, INFINITY, 0, false);
    return;
  }
  double worst = 0.0, scale = 0.0;
  bool written = true;
  const int outputs = kGated ? 1 : segments;
  for (int s = 0; s < outputs; ++s)
    for (int b = 0; b < tokens; ++b) {
      bool live = !Cfg::kGatherLast || stepLengths[b] > 0;
      long source = Cfg::kGatherLast
                        ? long(b) * seqLen + std::max(stepLengths[b] - 1, 0)
                        : b;
      for (int r = 0; r < Cfg::rows(s); ++r) {
        float got = out[s][size_t(b) * Cfg::rows(s) + r];
        if (!live) {
          written &= std::isnan(got); // a finished sequence's row is left
          continue;
        }
        auto dot = [&](int matrix) {
          double sum = 0.0;
          for (int k = 0; k < K; ++k)
            sum += double(W::load(w[matrix][size_t(r) * K + k])) *
                   rounded<W>(static_cast<float>(input[source * K + k]));
          return sum + (Cfg::hasBias(matrix) ? bias[matrix][r] : 0.0);
        };
        const bool addResidual = Cfg::kEpilogue == sits::kResidual;
        double want = harness::expectedGemvOutput(
            kGated, s, dot, addResidual,
            addResidual ? residual[size_t(b) * Cfg::rows(0) + r] : 0.0);
        written &= !std::isnan(got);
        worst = std::max(worst, std::fabs(got - want));
        scale = std::max(scale, std::fabs(want));
      }
    }
  // With kNorm, x is normalized in f32 (the reference: in double) before
  // rounding to the weight type, so a value may round the other way.
  report(name + " B=" + std::to_string(tokens), worst / std::max(scale, 1.0),
         Cfg::kNorm ? 1e-4 : 2e-6, written);
}

void gemvCases() {
  using sits::BF16;
  using sits::F16;
  // Q, K, V segments with rows that are not whole tiles; K a multiple of 8
  // but not of the 32-wide chunk.
  typedef GemvConfig<F16, 88, 40, 24, 24, 3, sits::kPlain, false, 1, 4> Qkv;
  for (int b : {1, 3, 8, 11})
    checkGemv<Qkv>("gemv f16 qkv K=88 rows 40/24/24", b);
  typedef GemvConfig<BF16, 344, 40, 24, 24, 3, sits::kPlain, false, 2, 2>
      QkvBf16;
  checkGemv<QkvBf16>("gemv bf16 qkv K=344 2 tiles/block", 5);
  typedef GemvConfig<F16, 1048, 344, 344, 0, 2, sits::kGlu, false, 2, 2> Glu;
  for (int b : {1, 8})
    checkGemv<Glu>("gemv f16 gate/up K=1048 rows 344", b);
  typedef GemvConfig<F16, 344, 136, 0, 0, 1, sits::kResidual, false, 4, 1> Down;
  for (int b : {2, 7})
    checkGemv<Down>("gemv f16 residual K=344 rows 136 4 tiles/block", b);
  typedef GemvConfig<BF16, 264, 300, 0, 0, 1, sits::kPlain, true, 3, 1> Head;
  checkGemv<Head>("gemv bf16 lm_head gather K=264 rows 300", 8);
  // The decode rms_norm fused into the GEMV that reads it: QKV (11 tokens:
  // two token tiles), gate/up, and the LM head's gathered rows (with
  // finished sequences).
  typedef GemvConfig<F16, 88, 40, 24, 24, 3, sits::kPlain, false, 1, 4, true>
      NormQkv;
  for (int b : {1, 8, 11})
    checkGemv<NormQkv>("gemv f16 rmsnorm+qkv K=88", b);
  typedef GemvConfig<BF16, 1048, 344, 344, 0, 2, sits::kGlu, false, 1, 2, true>
      NormGlu;
  checkGemv<NormGlu>("gemv bf16 rmsnorm+gate/up K=1048", 5);
  typedef GemvConfig<F16, 264, 300, 0, 0, 1, sits::kPlain, true, 2, 2, true>
      NormHead;
  checkGemv<NormHead>("gemv f16 rmsnorm+lm_head gather K=264", 8);
  // Several groups of 8 tokens per pass over the weights, in the rings
  // gemvTensorCoreRing gives (steps of fewer chunks, a deeper ring); steps
  // of at most 8 tokens take the one-group ring: passes with all groups,
  // with groups left empty, more than one pass, and one group.
  typedef GemvConfig<F16, 88, 40, 24, 24, 3, sits::kPlain, false, 1, 4, false,
                     4, 1, 9>
      Qkv4;
  for (int b : {1, 8, 9, 32, 37})
    checkGemv<Qkv4>("gemv f16 qkv K=88 4 token groups", b);
  // f16: with bf16, one normalized value in some 60,000 rounds the other
  // way than in the double reference, by more than the tolerance.
  typedef GemvConfig<F16, 1048, 344, 344, 0, 2, sits::kGlu, false, 1, 2, true,
                     4, 1, 5>
      NormGlu4;
  for (int b : {5, 20, 32})
    checkGemv<NormGlu4>("gemv f16 rmsnorm+gate/up K=1048 4 token groups", b);
  typedef GemvConfig<F16, 344, 136, 0, 0, 1, sits::kResidual, false, 2, 2,
                     false, 2, 1, 5>
      Down2;
  for (int b : {16, 17})
    checkGemv<Down2>("gemv f16 residual K=344 2 tiles/block 2 token groups", b);
  typedef GemvConfig<F16, 264, 300, 0, 0, 1, sits::kPlain, true, 2, 2, true, 3,
                     1, 5>
      NormHead3;
  checkGemv<NormHead3>("gemv f16 rmsnorm+lm_head gather K=264 3 token groups",
                       21);
  // x as 16-bit operands (kernel-choose-operand-layout), one group a pass
  // and several, gated, residual, and gathered by the LM head.
  typedef GemvConfig<F16, 88, 40, 24, 24, 3, sits::kPlain, false, 1, 4, false,
                     4, 1, 9, true>
      QkvHalves;
  for (int b : {1, 8, 9, 32, 37})
    checkGemv<QkvHalves>("gemv f16 qkv K=88 16-bit x 4 token groups", b);
  typedef GemvConfig<BF16, 1048, 344, 344, 0, 2, sits::kGlu, false, 1, 2, false,
                     4, 1, 5, true>
      GluHalves;
  for (int b : {5, 20})
    checkGemv<GluHalves>("gemv bf16 gate/up K=1048 16-bit x 4 token groups", b);
  typedef GemvConfig<F16, 344, 136, 0, 0, 1, sits::kResidual, false, 2, 2,
                     false, 2, 1, 5, true>
      DownHalves;
  checkGemv<DownHalves>("gemv f16 residual K=344 16-bit x 2 token groups", 17);
  typedef GemvConfig<BF16, 264, 300, 0, 0, 1, sits::kPlain, true, 2, 2, false,
                     3, 1, 5, true>
      HeadHalves;
  for (int b : {8, 21})
    checkGemv<HeadHalves>("gemv bf16 lm_head gather K=264 16-bit x", b);
}

//===----------------------------------------------------------------------===//
// Tensor-core GEMM (prefill)
//===----------------------------------------------------------------------===//

/// HalfX: x as 16-bit operand rows; OutBits 16 (with kGlu): the output too.
template <class WeightT, int K, int Rows0, int Rows1, int Segments, int Epi,
          int Stages = 3, bool SplitK = false, bool HalfX = false,
          int OutBits = 0>
struct GemmConfig {
  typedef WeightT Weight;
  static constexpr int kK = K;
  static constexpr int kSegments = Segments;
  __host__ __device__ static constexpr int rows(int s) {
    return s == 0 ? Rows0 : Rows1;
  }
  __host__ __device__ static constexpr bool hasBias(int s) { return s == 0; }
  __host__ __device__ static constexpr int tiles(int s) {
    return (rows(s) + (Epi == sits::kGlu ? 63 : 127)) /
           (Epi == sits::kGlu ? 64 : 128);
  }
  static constexpr int kTotalTiles =
      Epi == sits::kGlu ? tiles(0) : tiles(0) + (Segments > 1 ? tiles(1) : 0);
  static constexpr int kEpilogue = Epi;
  static constexpr int kActivation = sits::kSilu;
  static constexpr int kStages = Stages;
  static constexpr bool kSplitK = SplitK;
  static constexpr bool kHalfX = HalfX;
  static constexpr int kOutOperandBits = OutBits;
};

template <class Cfg> void gemmEntry(void **args) {
  typedef typename Cfg::Weight::Storage S;
  const S *weights[2] = {sits_emu::arg<const S *>(args[1]),
                         sits_emu::arg<const S *>(args[2])};
  const float *biases[2] = {sits_emu::arg<const float *>(args[3]), nullptr};
  float *outs[2] = {sits_emu::arg<float *>(args[4]),
                    sits_emu::arg<float *>(args[5])};
  sits::gemmTensorCore<Cfg>(
      sits_emu::arg<const void *>(args[0]), weights, biases, outs,
      sits_emu::arg<const float *>(args[6]), sits_emu::arg<int>(args[7]),
      sits_emu::arg<float *>(args[8]), sits_emu::arg<int *>(args[9]));
}

/// `splits` > 1 (Cfg::kSplitK): the grid's z splits K; run twice, the
/// counters must be back at zero after a launch.
template <class Cfg>
void checkGemm(const std::string &name, int tokens, int splits = 1) {
  typedef typename Cfg::Weight W;
  constexpr int K = Cfg::kK;
  constexpr bool kGated = Cfg::kEpilogue == sits::kGlu;
  const int segments = Cfg::kSegments;
  std::vector<float> x = randomFloats(size_t(tokens) * K);
  std::vector<std::vector<typename W::Storage>> w(2);
  std::vector<std::vector<float>> out(2);
  for (int s = 0; s < segments; ++s) {
    w[s] = randomStorage<W>(size_t(Cfg::rows(s)) * K);
    out[s].assign(size_t(tokens) * Cfg::rows(s), NAN);
  }
  std::vector<float> bias = randomFloats(Cfg::rows(0));
  std::vector<float> residual = randomFloats(size_t(tokens) * Cfg::rows(0));
  // With kHalfX, x goes in as its operands: rounded to W in input order.
  std::vector<typename W::Storage> xHalves(x.size());
  for (size_t i = 0; i < x.size(); ++i)
    xHalves[i] = W::store(x[i]);
  const void *xp = Cfg::kHalfX ? static_cast<const void *>(xHalves.data())
                               : static_cast<const void *>(x.data());
  const float *bp = bias.data(), *rp = residual.data();
  const void *w0 = w[0].data(), *w1 = segments > 1 ? w[1].data() : nullptr;
  const int tokenTiles = (tokens + 127) / 128;
  std::vector<float> partial(
      size_t(splits) * tokenTiles * 128 * Cfg::kTotalTiles * 128, NAN);
  std::vector<int> counters(size_t(tokenTiles) * Cfg::kTotalTiles, 0);
  float *pp = partial.data();
  int *cp = counters.data();
  bool written = true;
  // Unwritten outputs: all bits set, a NaN as f32 and as each 16-bit half.
  float kAllOnes;
  const unsigned ones = ~0u;
  std::memcpy(&kAllOnes, &ones, sizeof ones);
  for (int run = 0; run < (splits > 1 ? 2 : 1); ++run) {
    for (int s = 0; s < segments; ++s)
      std::fill(out[s].begin(), out[s].end(), kAllOnes);
    float *o0 = out[0].data(), *o1 = segments > 1 ? out[1].data() : nullptr;
    void *args[10] = {&xp, &w0, &w1, &bp, &o0, &o1, &rp, &tokens, &pp, &cp};
    if (!launch(gemmEntry<Cfg>, tokenTiles, Cfg::kTotalTiles, splits,
                sits::kTcGemmThreads,
                sits::gemmTensorCoreSharedBytes(Cfg::kStages, Cfg::kHalfX),
                args)) {
      report(name, INFINITY, 0, false);
      return;
    }
    for (int c : counters)
      written &= c == 0;
  }
  double worst = 0.0, scale = 0.0;
  for (int s = 0; s < (kGated ? 1 : segments); ++s)
    for (int m = 0; m < tokens; ++m)
      for (int r = 0; r < Cfg::rows(s); ++r) {
        auto dot = [&](int matrix) {
          double sum = 0.0;
          for (int k = 0; k < K; ++k)
            sum += double(W::load(w[matrix][size_t(r) * K + k])) *
                   rounded<W>(x[size_t(m) * K + k]);
          return sum + (Cfg::hasBias(matrix) ? bias[r] : 0.0);
        };
        double want;
        if (kGated) {
          double gate = dot(0), up = dot(1);
          want = gate / (1.0 + std::exp(-gate)) * up;
        } else {
          want = dot(s);
          if (Cfg::kEpilogue == sits::kResidual)
            want += residual[size_t(m) * Cfg::rows(0) + r];
        }
        const size_t at = size_t(m) * Cfg::rows(s) + r;
        // kOutOperandBits: 16-bit rows in the f32 buffer's first half (NaN
        // bytes until written), compared with the output rounded as the
        // kernel rounds it.
        float got = out[s][at];
        if (Cfg::kOutOperandBits) {
          got = W::load(reinterpret_cast<const typename W::Storage *>(
              out[s].data())[at]);
          want = rounded<W>(static_cast<float>(want));
        }
        written &= !std::isnan(got);
        worst = std::max(worst, std::fabs(got - want));
        scale = std::max(scale, std::fabs(want));
      }
  // 16-bit outputs: an f32 sum a few ulps off may round to the next half.
  const double tolerance =
      !Cfg::kOutOperandBits ? 2e-6 : W::kIsBf16 ? 1.0 / 128 : 1.0 / 1024;
  report(name + " T=" + std::to_string(tokens), worst / std::max(scale, 1.0),
         tolerance, written);
}

void gemmCases() {
  using sits::BF16;
  using sits::F16;
  typedef GemmConfig<F16, 72, 136, 40, 2, sits::kPlain> TwoSegments;
  checkGemm<TwoSegments>("gemm f16 2 segments K=72 rows 136/40", 130);
  typedef GemmConfig<BF16, 104, 88, 88, 2, sits::kGlu> Glu;
  checkGemm<Glu>("gemm bf16 gate/up K=104 rows 88", 37);
  typedef GemmConfig<F16, 88, 64, 0, 1, sits::kResidual> Residual;
  checkGemm<Residual>("gemm f16 residual K=88 rows 64", 5);
  // More steps than stages (the ring wraps), K not a multiple of the step,
  // tokens and rows past a tile; with 2 and 4 stages as well.
  typedef GemmConfig<BF16, 232, 200, 72, 2, sits::kPlain> Ring;
  checkGemm<Ring>("gemm bf16 2 segments K=232 rows 200/72", 131);
  typedef GemmConfig<F16, 264, 136, 136, 2, sits::kGlu> RingGlu;
  checkGemm<RingGlu>("gemm f16 gate/up K=264 rows 136", 150);
  // Nine token tiles: a group of eight and a group of one.
  typedef GemmConfig<F16, 40, 200, 72, 2, sits::kPlain> Groups;
  checkGemm<Groups>("gemm f16 2 segments K=40 rows 200/72", 1100);
  typedef GemmConfig<BF16, 200, 136, 0, 1, sits::kResidual, 2> TwoStages;
  checkGemm<TwoStages>("gemm bf16 residual K=200 rows 136 2 stages", 129);
  typedef GemmConfig<F16, 168, 72, 0, 1, sits::kResidual, 4> FourStages;
  checkGemm<FourStages>("gemm f16 residual K=168 rows 72 4 stages", 40);
  // Split over K: shares of 1 to 3 steps, two token tiles, a gate/up pair,
  // a residual; one split (grid.z 1) runs the plain path of the same
  // kernel.
  typedef GemmConfig<F16, 232, 136, 40, 2, sits::kPlain, 3, true> Split;
  checkGemm<Split>("gemm f16 2 segments K=232 rows 136/40 3 splits", 37, 3);
  checkGemm<Split>("gemm f16 2 segments K=232 rows 136/40 8 splits", 150, 8);
  checkGemm<Split>("gemm f16 2 segments K=232 rows 136/40 1 split", 20, 1);
  typedef GemmConfig<BF16, 264, 136, 136, 2, sits::kGlu, 3, true> SplitGlu;
  checkGemm<SplitGlu>("gemm bf16 gate/up K=264 rows 136 4 splits", 130, 4);
  typedef GemmConfig<F16, 200, 72, 0, 1, sits::kResidual, 2, true> SplitRes;
  checkGemm<SplitRes>("gemm f16 residual K=200 rows 72 2 stages 2 splits", 9,
                      2);
  // x as 16-bit operand rows (ldmatrix A fragments), an output as such rows
  // (a gate/up pair for the down projection's GEMM): the ring wraps, tokens
  // and rows past a tile, split K.
  typedef GemmConfig<BF16, 232, 200, 72, 2, sits::kPlain, 3, false, true>
      HalfX;
  checkGemm<HalfX>("gemm bf16 2 segments K=232 rows 200/72 16-bit x", 131);
  typedef GemmConfig<F16, 264, 136, 136, 2, sits::kGlu, 3, false, true, 16>
      HalfGlu;
  checkGemm<HalfGlu>("gemm f16 gate/up K=264 rows 136 16-bit x and out", 150);
  typedef GemmConfig<BF16, 104, 88, 88, 2, sits::kGlu, 4, false, false, 16>
      HalfOutGlu;
  checkGemm<HalfOutGlu>("gemm bf16 gate/up K=104 rows 88 16-bit out", 37);
  typedef GemmConfig<F16, 200, 72, 0, 1, sits::kResidual, 2, true, true>
      HalfSplit;
  checkGemm<HalfSplit>("gemm f16 residual K=200 16-bit x 3 splits", 40, 3);
}

//===----------------------------------------------------------------------===//
// Split-K decode attention
//===----------------------------------------------------------------------===//

template <class CacheT, int Heads, int KvHeads, int HeadDim, int Capacity,
          int SplitKeys, int Window, bool Softcap>
struct DecodeConfig {
  typedef CacheT Cache;
  static constexpr int kHeads = Heads;
  static constexpr int kKvHeads = KvHeads;
  static constexpr int kHeadDim = HeadDim;
  static constexpr int kCapacity = Capacity;
  static constexpr float kScale = 0.25f;
  static constexpr float kSoftcap = Softcap ? 3.0f : 0.0f;
  static constexpr int kWindow = Window;
  static constexpr int kSplitKeys = SplitKeys;
  static constexpr int kSplits = (Capacity + SplitKeys - 1) / SplitKeys;
  static constexpr int kUnroll = 4;
  static constexpr int kStages = 3;
};

template <class Cfg> void decodeEntry(void **args) {
  typedef typename Cfg::Cache::Storage S;
  sits::attentionDecode<Cfg>(
      sits_emu::arg<const float *>(args[0]), sits_emu::arg<const S *>(args[1]),
      sits_emu::arg<const S *>(args[2]), sits_emu::arg<float *>(args[3]),
      sits_emu::arg<float *>(args[4]), sits_emu::arg<int *>(args[5]),
      sits_emu::arg<const int *>(args[6]), sits_emu::arg<const int *>(args[7]));
}

/// `past[b]` keys are cached before sequence b's query (step length 0:
/// a padding row, which must come out as zeros). Runs twice: the counters
/// must be back at zero after a launch.
template <class Cfg>
void checkDecode(const std::string &name, std::vector<int> past,
                 std::vector<int> step) {
  typedef typename Cfg::Cache C;
  constexpr int H = Cfg::kHeads, KV = Cfg::kKvHeads, D = Cfg::kHeadDim;
  constexpr int G = H / KV;
  const int batch = static_cast<int>(past.size());
  std::vector<float> q = randomFloats(size_t(batch) * H * D, 2.0f);
  auto keys = randomStorage<C>(size_t(batch) * KV * Cfg::kCapacity * D);
  auto values = randomStorage<C>(keys.size());
  std::vector<float> partial(
      size_t(batch) * H * Cfg::kSplits * sits::decodePartialFloats(D), NAN);
  std::vector<int> counters(size_t(batch) * KV, 0);
  double worst = 0.0;
  bool written = true;
  for (int run = 0; run < 2; ++run) {
    std::vector<float> out(size_t(batch) * H * D, NAN);
    const float *qp = q.data();
    const void *kp = keys.data(), *vp = values.data();
    float *op = out.data(), *pp = partial.data();
    int *cp = counters.data();
    const int *pastp = past.data(), *stepp = step.data();
    void *args[8] = {&qp, &kp, &vp, &op, &pp, &cp, &pastp, &stepp};
    const unsigned shared =
        sits::attentionDecodeSharedBytes(D, G, Cfg::kUnroll, Cfg::kStages);
    if (!launch(decodeEntry<Cfg>, Cfg::kSplits, KV, batch, sits::kDecodeThreads,
                shared, args)) {
      report(name, INFINITY, 0, false);
      return;
    }
    for (int c : counters)
      written &= c == 0;
    for (int b = 0; b < batch; ++b)
      for (int h = 0; h < H; ++h) {
        const int kv = h / G, p = past[b];
        std::vector<double> scores;
        double best = -INFINITY;
        for (int j = 0; j <= p; ++j) {
          if (Cfg::kWindow > 0 && j <= p - Cfg::kWindow) {
            scores.push_back(-INFINITY);
            continue;
          }
          double dot = 0.0;
          for (int d = 0; d < D; ++d)
            dot +=
                double(q[(size_t(b) * H + h) * D + d]) *
                C::load(
                    keys[((size_t(b) * KV + kv) * Cfg::kCapacity + j) * D + d]);
          double score = Cfg::kScale * dot;
          if (Cfg::kSoftcap > 0)
            score = Cfg::kSoftcap * std::tanh(score / Cfg::kSoftcap);
          scores.push_back(score);
          best = std::max(best, score);
        }
        for (int d = 0; d < D; ++d) {
          double sum = 0.0, value = 0.0;
          for (int j = 0; j <= p; ++j) {
            double weight = std::exp(scores[j] - best);
            sum += weight;
            value +=
                weight *
                C::load(
                    values[((size_t(b) * KV + kv) * Cfg::kCapacity + j) * D +
                           d]);
          }
          const double want = step[b] > 0 ? value / sum : 0.0;
          const float got = out[(size_t(b) * H + h) * D + d];
          written &= !std::isnan(got);
          worst = std::max(worst, std::fabs(got - want));
        }
      }
  }
  report(name, worst, 2e-5, written);
}

void decodeCases() {
  using sits::BF16;
  using sits::F16;
  // TinyLlama's ratio (8 query heads per KV head) at head_dim 64, lengths
  // across and exactly at split boundaries; a padding row.
  typedef DecodeConfig<F16, 16, 2, 64, 300, 64, 0, false> Tiny;
  checkDecode<Tiny>("decode f16 G=8 D=64 splits of 64",
                    {0, 63, 64, 65, 199, 299}, {1, 1, 1, 1, 0, 1});
  // Llama-3-8B's ratio (4) at head_dim 128, keys per split not a multiple
  // of the block's keys per step.
  typedef DecodeConfig<BF16, 8, 2, 128, 260, 48, 0, false> Big;
  checkDecode<Big>("decode bf16 G=4 D=128 splits of 48", {5, 47, 48, 259},
                   {1, 1, 1, 1});
  // MHA, small head_dim (many key groups), a sliding window and softcap.
  typedef DecodeConfig<F16, 4, 4, 16, 100, 16, 7, true> Window;
  checkDecode<Window>("decode f16 G=1 D=16 window 7 softcap", {0, 6, 7, 40, 99},
                      {1, 1, 1, 1, 1});
  typedef DecodeConfig<F16, 4, 1, 32, 40, 40, 0, false> OneSplit;
  checkDecode<OneSplit>("decode f16 MQA G=4 D=32 one split", {0, 39}, {1, 1});
  // More splits than a warp has lanes (the combine's weights loop twice),
  // with a window that starts past the first split.
  typedef DecodeConfig<F16, 16, 2, 64, 1100, 16, 600, false> ManySplits;
  checkDecode<ManySplits>("decode f16 G=8 D=64 69 splits window 600",
                          {15, 520, 1099}, {1, 1, 1});
  // Splits longer than the default 256 keys (sitsc --decode-split-keys):
  // many steps of the block's ring per split.
  typedef DecodeConfig<F16, 8, 2, 128, 2100, 1024, 0, false> LongSplits;
  checkDecode<LongSplits>("decode f16 G=4 D=128 splits of 1024",
                          {3, 1023, 1024, 2099}, {1, 1, 0, 1});
}

//===----------------------------------------------------------------------===//
// Flash prefill attention
//===----------------------------------------------------------------------===//

template <class CacheT, int Heads, int KvHeads, int HeadDim, int Capacity,
          int Window, bool Softcap>
struct PrefillConfig {
  typedef CacheT Cache;
  static constexpr int kHeads = Heads;
  static constexpr int kKvHeads = KvHeads;
  static constexpr int kHeadDim = HeadDim;
  static constexpr int kCapacity = Capacity;
  static constexpr float kScale = 0.3f;
  static constexpr float kSoftcap = Softcap ? 2.5f : 0.0f;
  static constexpr int kWindow = Window;
};

template <class Cfg> void prefillEntry(void **args) {
  typedef typename Cfg::Cache::Storage S;
  sits::attentionPrefill<Cfg>(
      sits_emu::arg<const float *>(args[0]), sits_emu::arg<const S *>(args[1]),
      sits_emu::arg<const S *>(args[2]), sits_emu::arg<float *>(args[3]),
      sits_emu::arg<const int *>(args[4]),
      sits::StepRows{sits_emu::arg<const int *>(args[5]),
                     sits_emu::arg<int>(args[6]), 0});
}

/// A chunk of `seqLen` tokens per sequence after `past[b]` cached ones, of
/// which `step[b]` are real (the rest padding: zero rows).
template <class Cfg>
void checkPrefill(const std::string &name, int seqLen, std::vector<int> past,
                  std::vector<int> step) {
  typedef typename Cfg::Cache C;
  constexpr int H = Cfg::kHeads, KV = Cfg::kKvHeads, D = Cfg::kHeadDim;
  constexpr int G = H / KV;
  const int batch = static_cast<int>(past.size());
  std::vector<float> q = randomFloats(size_t(batch) * seqLen * H * D, 2.0f);
  auto keys = randomStorage<C>(size_t(batch) * KV * Cfg::kCapacity * D);
  auto values = randomStorage<C>(keys.size());
  std::vector<float> out(q.size(), NAN);
  const float *qp = q.data();
  const void *kp = keys.data(), *vp = values.data();
  float *op = out.data();
  const int *pastp = past.data(), *stepp = step.data();
  void *args[7] = {&qp, &kp, &vp, &op, &pastp, &stepp, &seqLen};
  if (!launch(prefillEntry<Cfg>, (seqLen + 63) / 64, H, batch, 128,
              sits::attentionPrefillSharedBytes(D), args)) {
    report(name, INFINITY, 0, false);
    return;
  }
  double worst = 0.0;
  bool written = true;
  for (int b = 0; b < batch; ++b)
    for (int i = 0; i < seqLen; ++i)
      for (int h = 0; h < H; ++h) {
        const int kv = h / G, p = past[b] + i;
        std::vector<double> scores(p + 1, -INFINITY);
        double best = -INFINITY;
        for (int j = 0; j <= p && i < step[b]; ++j) {
          if (Cfg::kWindow > 0 && j <= p - Cfg::kWindow)
            continue;
          double dot = 0.0;
          for (int d = 0; d < D; ++d)
            dot +=
                rounded<C>(q[((size_t(b) * seqLen + i) * H + h) * D + d]) *
                C::load(
                    keys[((size_t(b) * KV + kv) * Cfg::kCapacity + j) * D + d]);
          double score = Cfg::kScale * dot;
          if (Cfg::kSoftcap > 0)
            score = Cfg::kSoftcap * std::tanh(score / Cfg::kSoftcap);
          scores[j] = score;
          best = std::max(best, score);
        }
        for (int d = 0; d < D; ++d) {
          double sum = 0.0, value = 0.0;
          for (int j = 0; j <= p && i < step[b]; ++j) {
            double weight = std::exp(scores[j] - best);
            sum += weight;
            value +=
                weight *
                C::load(
                    values[((size_t(b) * KV + kv) * Cfg::kCapacity + j) * D +
                           d]);
          }
          const double want = i < step[b] ? value / sum : 0.0;
          const float got = out[((size_t(b) * seqLen + i) * H + h) * D + d];
          written &= !std::isnan(got);
          worst = std::max(worst, std::fabs(got - want));
        }
      }
  // The probabilities are rounded to the cache's type for P V.
  report(name, worst,
         sizeof(typename C::Storage) == 2 && C::kIsBf16 ? 2e-2 : 3e-3, written);
}

void prefillCases() {
  using sits::BF16;
  using sits::F16;
  typedef PrefillConfig<F16, 4, 2, 64, 256, 0, false> Gqa;
  checkPrefill<Gqa>("prefill f16 G=2 D=64 S=70 (two row blocks)", 70, {0, 100},
                    {70, 33});
  typedef PrefillConfig<BF16, 2, 1, 128, 200, 0, false> Wide;
  checkPrefill<Wide>("prefill bf16 MQA D=128 S=9 past 130", 9, {130}, {9});
  typedef PrefillConfig<F16, 2, 2, 16, 160, 20, true> Window;
  checkPrefill<Window>("prefill f16 D=16 window 20 softcap", 40, {0, 90},
                       {40, 17});
}

} // namespace

int main(int argc, char **argv) {
  rng.seed(20261202);
  // `decode`: the decode attention cases alone (a build that takes the
  // GQA group in passes of a few heads, as the persistent kernel does).
  const bool decodeOnly = argc > 1 && std::string(argv[1]) == "decode";
  auto all = [&] {
    if (!decodeOnly) {
      gemvCases();
      gemmCases();
    }
    decodeCases();
    if (!decodeOnly)
      prefillCases();
  };
  all();
  // Threads last to first between barriers: a missing barrier shows.
  sits_emu_set_reverse_schedule(1);
  std::printf("reverse schedule:\n");
  all();
  std::printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
