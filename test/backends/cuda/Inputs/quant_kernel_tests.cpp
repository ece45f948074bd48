//===- quant_kernel_tests.cpp - int8/int4 weight kernels on the CPU -------===//
//
// Compiled as host C++ with the emulator by emulate-quant-kernels.test. Each
// case draws random levels (the full range, -8 for int4 included: the op
// reads it although quantize never writes it), random f16 scales and inputs,
// runs gemvQuantTensorCore, gemvQuant or dequantize over NaN-poisoned
// outputs, and compares with a float64 reference of
// `sum_k f32(s) * q * x` (x rounded to the mma type on tensor cores): odd
// row counts, K not a multiple of a group or of a chunk, padded rows,
// segments, gate/up, residual, the LM head's gather, batches 1 to 11, and
// rows stored in sitsc's interleaved chunks.
//
//===----------------------------------------------------------------------===//

#include "sits/gemv_quant.cuh"

#include "backends/cuda/QuantLayout.h"

#include "kernel_test_harness.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

using harness::failed;
using harness::passed;
using harness::randomFloats;
using harness::report;
using harness::rng;
using harness::uniform;

bool launch(void (*entry)(void **), unsigned blocks, unsigned threads,
            unsigned shared, void **args) {
  return harness::launch(entry, blocks, 1, 1, threads, shared, args);
}

/// A quantized matrix [rows, K]: levels as stored (padded rows) and the
/// exact f32 of each f16 scale.
struct QuantMatrix {
  std::vector<unsigned char> data;
  std::vector<unsigned short> scales;
  std::vector<int> levels; ///< [rows, K]
  std::vector<double> scaleValues;
};

/// With `interleaved`, each row's 64-byte chunks in sitsc's interleaved
/// order (backends/cuda/QuantLayout.h, as WeightSection stores them).
QuantMatrix randomMatrix(int rows, int k, int bits, int group, int rowBytes,
                         bool interleaved = false) {
  QuantMatrix m;
  const int groups = (k + group - 1) / group;
  m.data.assign(size_t(rows) * rowBytes, 0);
  m.levels.resize(size_t(rows) * k);
  const int lo = bits == 8 ? -128 : -8, hi = bits == 8 ? 127 : 7;
  for (int r = 0; r < rows; ++r)
    for (int i = 0; i < k; ++i) {
      int q = std::uniform_int_distribution<int>(lo, hi)(rng);
      m.levels[size_t(r) * k + i] = q;
      unsigned char &byte =
          m.data[size_t(r) * rowBytes + (bits == 8 ? i : i / 2)];
      if (bits == 8)
        byte = static_cast<unsigned char>(q);
      else if (i % 2 == 0)
        byte = static_cast<unsigned char>((byte & 0xf0) | (q & 0xf));
      else
        byte = static_cast<unsigned char>((byte & 0x0f) | ((q & 0xf) << 4));
    }
  if (interleaved) {
    constexpr int kChunk = sits::codegen::kQuantChunkBytes;
    std::vector<unsigned char> inOrder = m.data;
    for (size_t chunk = 0; chunk < inOrder.size(); chunk += kChunk)
      for (int n = 0; n < kChunk; ++n)
        m.data[chunk + n] =
            inOrder[chunk + sits::codegen::interleavedSourceByte(bits, n)];
  }
  for (int i = 0; i < rows * groups; ++i) {
    unsigned short bits16 = sits::floatToHalf(uniform(0.001f, 0.05f));
    m.scales.push_back(bits16);
    m.scaleValues.push_back(sits::halfToFloat(bits16));
  }
  return m;
}

//===----------------------------------------------------------------------===//
// The GEMVs
//===----------------------------------------------------------------------===//

template <class WeightT, int Bits, int Group, int K, int Rows0, int Rows1,
          int Rows2, int Segments, int Epi, bool Gather, int TilesPerBlock,
          int Unroll, bool Interleaved = false, bool HalfX = false,
          int OutOperandBits = 0>
struct Config {
  typedef WeightT Weight;
  static constexpr int kBits = Bits;
  static constexpr bool kInterleaved = Interleaved;
  static constexpr bool kHalfX = HalfX;
  static constexpr int kOutOperandBits = OutOperandBits;
  /// The same GEMV writing f32 outputs.
  typedef Config<WeightT, Bits, Group, K, Rows0, Rows1, Rows2, Segments, Epi,
                 Gather, TilesPerBlock, Unroll, Interleaved, HalfX, 0>
      WithF32Output;
  static constexpr int kGroup = Group;
  static constexpr int kGroups = (K + Group - 1) / Group;
  static constexpr int kRowBytes =
      ((Bits == 8 ? K : (K + 1) / 2) + 15) / 16 * 16;
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
  static constexpr int kTotalRows =
      Epi == sits::kGlu
          ? Rows0
          : Rows0 + (Segments > 1 ? Rows1 : 0) + (Segments > 2 ? Rows2 : 0);
  static constexpr int kEpilogue = Epi;
  static constexpr int kActivation = sits::kSilu;
  static constexpr int kTilesPerBlock = TilesPerBlock;
  static constexpr int kUnroll = Unroll;
  static constexpr int kStages = 3;
  static constexpr bool kGatherLast = Gather;
  static constexpr int kWarps = 4;
  static constexpr int kTokenTile = 8;
};

template <class Cfg, bool kTensor> void entry(void **args) {
  const unsigned char *data[3];
  const unsigned short *scales[3];
  const float *biases[3];
  float *outs[3];
  for (int s = 0; s < 3; ++s) {
    data[s] = sits_emu::arg<const unsigned char *>(args[1 + s]);
    scales[s] = sits_emu::arg<const unsigned short *>(args[4 + s]);
    biases[s] = sits_emu::arg<const float *>(args[7 + s]);
    outs[s] = sits_emu::arg<float *>(args[10 + s]);
  }
  const void *x = sits_emu::arg<const void *>(args[0]);
  const float *residual = sits_emu::arg<const float *>(args[13]);
  int tokens = sits_emu::arg<int>(args[14]),
      seqLen = sits_emu::arg<int>(args[15]);
  const int *lengths = sits_emu::arg<const int *>(args[16]);
  if constexpr (kTensor)
    sits::gemvQuantTensorCore<Cfg>(x, data, scales, biases, outs, residual,
                                   tokens, sits::StepRows{lengths, seqLen, 0});
  else
    sits::gemvQuant<Cfg>(static_cast<const float *>(x), data, scales, biases,
                         outs, residual, tokens,
                         sits::StepRows{lengths, seqLen, 0});
}

/// Poison for outputs: a NaN as f32, and as each f16 or bf16 half of it.
float poison() {
  const unsigned bits = 0xffffffffu;
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

/// Runs the GEMV of `Cfg` on random inputs and checks its outputs against
/// float64; returns the first output as the kernel left it. With
/// kOutOperandBits that output holds halves, which checkOperandOutput
/// checks instead.
template <class Cfg, bool kTensor>
std::vector<float> checkGemv(const std::string &name, int tokens,
                             unsigned gridBlocks = 0) {
  typedef typename Cfg::Weight W;
  constexpr int K = Cfg::kK;
  constexpr bool kGated = Cfg::kEpilogue == sits::kGlu;
  const int segments = Cfg::kSegments;
  const int seqLen = Cfg::kGatherLast ? 3 : 1;
  std::vector<int> stepLengths(tokens);
  for (int b = 0; b < tokens; ++b)
    stepLengths[b] = Cfg::kGatherLast ? b % 4 : 1; // 0: a finished sequence
  std::vector<float> x = randomFloats(size_t(tokens) * seqLen * K);
  std::vector<QuantMatrix> w(3);
  std::vector<std::vector<float>> bias(3), out(3);
  std::vector<float> residual;
  for (int s = 0; s < segments; ++s) {
    w[s] = randomMatrix(Cfg::rows(s), K, Cfg::kBits, Cfg::kGroup,
                        Cfg::kRowBytes, Cfg::kInterleaved);
    bias[s] = randomFloats(Cfg::rows(s));
    out[s].assign(size_t(tokens) * Cfg::rows(s), poison());
  }
  if (Cfg::kEpilogue == sits::kResidual)
    residual = randomFloats(size_t(tokens) * Cfg::rows(0));
  // kHalfX: x as rms_norm writes it for the GEMV, each value rounded to
  // the mma type at its operand position (common.cuh's operandHalfIndex).
  std::vector<unsigned short> xHalf;
  if constexpr (Cfg::kHalfX) {
    xHalf.resize(x.size());
    for (size_t row = 0; row < x.size() / K; ++row)
      for (int k = 0; k < K; ++k)
        xHalf[row * K + sits::operandHalfIndex<Cfg::kBits>(k)] =
            W::store(x[row * K + k]);
  }
  const void *xp = Cfg::kHalfX ? static_cast<const void *>(xHalf.data())
                               : static_cast<const void *>(x.data());
  const void *dp[3], *sp[3], *bp[3];
  float *op[3];
  for (int s = 0; s < 3; ++s) {
    dp[s] = s < segments ? w[s].data.data() : nullptr;
    sp[s] = s < segments ? w[s].scales.data() : nullptr;
    bp[s] = s < segments && Cfg::hasBias(s) ? bias[s].data() : nullptr;
    op[s] = s < segments ? out[s].data() : nullptr;
  }
  const float *rp = residual.empty() ? nullptr : residual.data();
  const int *lp = stepLengths.data();
  int seq = seqLen;
  void *pointers[17];
  pointers[0] = &xp;
  for (int s = 0; s < 3; ++s) {
    pointers[1 + s] = &dp[s];
    pointers[4 + s] = &sp[s];
    pointers[7 + s] = &bp[s];
    pointers[10 + s] = &op[s];
  }
  pointers[13] = &rp;
  pointers[14] = &tokens;
  pointers[15] = &seq;
  pointers[16] = &lp;
  bool ok;
  if constexpr (kTensor) {
    // One item per block, or gridBlocks blocks looping over several (the
    // next item's scales loaded during an item, two tables in turn).
    const unsigned blocks = gridBlocks
                                ? gridBlocks
                                : (Cfg::kTotalTiles + Cfg::kTilesPerBlock - 1) /
                                      Cfg::kTilesPerBlock;
    ok = launch(entry<Cfg, true>, blocks, sits::kTcThreads,
                sits::gemvQuantTensorCoreSharedBytes(
                    kGated ? 2 : 1, Cfg::kTilesPerBlock, Cfg::kUnroll,
                    Cfg::kStages, Cfg::kGroups),
                pointers);
  } else {
    ok = launch(entry<Cfg, false>,
                (Cfg::kTotalRows + Cfg::kWarps - 1) / Cfg::kWarps,
                Cfg::kWarps * 32, 0, pointers);
  }
  if (!ok) {
    report(name, INFINITY, 0, false);
    return {};
  }
  if constexpr (Cfg::kOutOperandBits != 0)
    return out[0];
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
          const QuantMatrix &m = w[matrix];
          double sum = 0.0;
          for (int k = 0; k < K; ++k) {
            float xv = x[source * K + k];
            double xr = kTensor ? double(W::load(W::store(xv))) : double(xv);
            sum += m.scaleValues[size_t(r) * Cfg::kGroups + k / Cfg::kGroup] *
                   m.levels[size_t(r) * K + k] * xr;
          }
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
  report(name + " B=" + std::to_string(tokens), worst / std::max(scale, 1.0),
         2e-6, written);
  return out[0];
}

/// A gate/up GEMV writing act(gate) * up as the f16 (bf16) operands of the
/// quantized GEMV that reads it: bit for bit its f32 output (checked
/// against float64 on the same inputs) rounded to the mma type, at
/// common.cuh's operandHalfIndex, and nothing written past the halves.
template <class Cfg>
void checkOperandOutput(const std::string &name, int tokens,
                        unsigned gridBlocks = 0) {
  typedef typename Cfg::Weight W;
  static_assert(Cfg::kEpilogue == sits::kGlu, "gate/up outputs only");
  const std::mt19937_64 inputs = rng;
  std::vector<float> f32 = checkGemv<typename Cfg::WithF32Output, true>(
      name + " f32 out", tokens, gridBlocks);
  rng = inputs; // the same inputs again
  std::vector<float> raw = checkGemv<Cfg, true>(name, tokens, gridBlocks);
  const size_t n = size_t(tokens) * Cfg::rows(0);
  if (f32.size() != n || raw.size() != n) {
    report(name + " B=" + std::to_string(tokens), INFINITY, 0, false);
    return;
  }
  std::vector<unsigned short> halves(2 * n);
  std::memcpy(halves.data(), raw.data(), n * sizeof(float));
  int mismatches = 0;
  for (int b = 0; b < tokens; ++b)
    for (int r = 0; r < Cfg::rows(0); ++r) {
      const size_t row = size_t(b) * Cfg::rows(0);
      const unsigned short want = W::store(f32[row + r]);
      mismatches +=
          halves[row + sits::operandHalfIndex<Cfg::kOutOperandBits>(r)] != want;
    }
  // The second half of each f32 row is not the kernel's to write.
  bool untouched = true;
  for (size_t i = n; i < 2 * n; ++i)
    untouched &= halves[i] == 0xffffu;
  report(name + " half out B=" + std::to_string(tokens), mismatches, 0,
         untouched);
}

void gemvCases() {
  using sits::BF16;
  using sits::F16;
  using sits::F32;
  // Tensor cores: int8 groups of 64 (one chunk), int4 groups of 128; K not
  // a multiple of the group (a short last group) nor of the chunk.
  typedef Config<F16, 8, 64, 200, 40, 24, 24, 3, sits::kPlain, false, 1, 4>
      Qkv8;
  for (int b : {1, 3, 8, 11})
    checkGemv<Qkv8, true>("tc int8 f16 qkv K=200 G=64 rows 40/24/24", b);
  typedef Config<F16, 4, 128, 328, 40, 24, 24, 3, sits::kPlain, false, 2, 2>
      Qkv4;
  for (int b : {1, 8})
    checkGemv<Qkv4, true>("tc int4 f16 qkv K=328 G=128 2 tiles/block", b);
  typedef Config<BF16, 4, 256, 1048, 344, 344, 0, 2, sits::kGlu, false, 1, 2>
      Glu4;
  checkGemv<Glu4, true>("tc int4 bf16 gate/up K=1048 G=256 rows 344", 5);
  typedef Config<BF16, 8, 128, 344, 136, 0, 0, 1, sits::kResidual, false, 4, 1>
      Down8;
  checkGemv<Down8, true>("tc int8 bf16 residual K=344 rows 136 4 tiles/block",
                         7);
  typedef Config<F16, 4, 128, 264, 300, 0, 0, 1, sits::kPlain, true, 2, 2>
      Head4;
  checkGemv<Head4, true>("tc int4 f16 lm_head gather K=264 rows 300", 8);
  // Persistent blocks over several items each; rows of scales copied in
  // pieces of 16 bytes (8 groups), 4 bytes (2 groups) and 2 bytes (3).
  typedef Config<F16, 4, 128, 1024, 200, 0, 0, 1, sits::kResidual, false, 1, 4>
      Res4;
  for (int b : {1, 8})
    checkGemv<Res4, true>("tc int4 f16 residual K=1024 G=128 2 blocks", b, 2);
  typedef Config<F16, 8, 64, 128, 120, 120, 0, 2, sits::kGlu, false, 1, 2> Glu8;
  checkGemv<Glu8, true>("tc int8 f16 gate/up K=128 G=64 3 blocks", 3, 3);
  for (int b : {1, 11})
    checkGemv<Qkv4, true>("tc int4 f16 qkv K=328 G=128 2 tiles 1 block", b, 1);
  // Whole tiles and whole chunks, as at every Llama shape: row g + 8 is
  // copied at a fixed distance from row g, and x is read without checks.
  typedef Config<F16, 4, 128, 1024, 64, 0, 0, 1, sits::kResidual, false, 1, 4>
      Res4w;
  for (int b : {1, 8})
    checkGemv<Res4w, true>("tc int4 f16 residual K=1024 rows 64 whole", b, 2);
  typedef Config<F16, 4, 128, 512, 48, 48, 0, 2, sits::kGlu, false, 1, 2> Glu4w;
  checkGemv<Glu4w, true>("tc int4 f16 gate/up K=512 rows 48 whole", 5, 2);
  typedef Config<F16, 8, 64, 256, 32, 16, 16, 3, sits::kPlain, false, 1, 4>
      Qkv8w;
  checkGemv<Qkv8w, true>("tc int8 f16 qkv K=256 rows 32/16/16 whole", 2);
  typedef Config<F16, 4, 128, 256, 64, 0, 0, 1, sits::kPlain, true, 1, 4>
      Head4w;
  checkGemv<Head4w, true>("tc int4 f16 lm_head gather K=256 rows 64 whole", 5);
  // The same in sitsc's interleaved chunks (where rows are whole chunks),
  // and rows that are not whole tiles; the warp-per-row GEMV reads them too
  // when the tensor-core one does not fit.
  typedef Config<F16, 4, 128, 1024, 64, 0, 0, 1, sits::kResidual, false, 1, 4,
                 true>
      Res4i;
  for (int b : {1, 8})
    checkGemv<Res4i, true>("tc int4 f16 residual K=1024 rows 64 interleaved", b,
                           2);
  typedef Config<BF16, 4, 256, 512, 40, 40, 0, 2, sits::kGlu, false, 1, 2, true>
      Glu4i;
  checkGemv<Glu4i, true>("tc int4 bf16 gate/up K=512 rows 40 interleaved", 5,
                         2);
  typedef Config<F16, 8, 64, 256, 32, 24, 16, 3, sits::kPlain, false, 1, 4,
                 true>
      Qkv8i;
  for (int b : {2, 11})
    checkGemv<Qkv8i, true>("tc int8 f16 qkv K=256 rows 32/24/16 interleaved",
                           b);
  typedef Config<F16, 4, 128, 384, 72, 0, 0, 1, sits::kPlain, true, 2, 2, true>
      Head4i;
  checkGemv<Head4i, true>("tc int4 f16 lm_head gather K=384 interleaved", 6);
  typedef Config<F16, 4, 128, 256, 40, 40, 0, 2, sits::kGlu, false, 1, 1, true>
      Cc4i;
  checkGemv<Cc4i, false>("cuda-core int4 gate/up K=256 rows 40 interleaved", 3);
  // x written by rms_norm as the GEMV's f16 (bf16) operands.
  typedef Config<F16, 4, 128, 1024, 64, 0, 0, 1, sits::kResidual, false, 1, 4,
                 true, true>
      Res4h;
  for (int b : {1, 8})
    checkGemv<Res4h, true>("tc int4 f16 residual K=1024 half x", b, 2);
  typedef Config<BF16, 4, 256, 512, 40, 40, 0, 2, sits::kGlu, false, 1, 2, true,
                 true>
      Glu4h;
  checkGemv<Glu4h, true>("tc int4 bf16 gate/up K=512 half x", 5, 2);
  typedef Config<F16, 8, 64, 256, 32, 24, 16, 3, sits::kPlain, false, 1, 4,
                 true, true>
      Qkv8h;
  for (int b : {3, 11})
    checkGemv<Qkv8h, true>("tc int8 f16 qkv K=256 half x", b);
  typedef Config<F16, 4, 128, 384, 72, 0, 0, 1, sits::kPlain, true, 2, 2, true,
                 true>
      Head4h;
  checkGemv<Head4h, true>("tc int4 f16 lm_head gather K=384 half x", 6);
  // act(gate) * up written as the down GEMV's operands (rows = its K, whole
  // chunks of its bits), from x in f32 or as operands.
  typedef Config<F16, 4, 128, 512, 256, 256, 0, 2, sits::kGlu, false, 1, 2,
                 true, true, 4>
      GluOut4;
  for (int b : {1, 8})
    checkOperandOutput<GluOut4>("tc int4 f16 gate/up K=512 rows 256 op. out", b,
                                3);
  typedef Config<BF16, 8, 64, 256, 192, 192, 0, 2, sits::kGlu, false, 1, 2,
                 true, false, 8>
      GluOut8;
  checkOperandOutput<GluOut8>("tc int8 bf16 gate/up K=256 rows 192 op. out", 5);
  typedef Config<F16, 4, 128, 256, 128, 128, 0, 2, sits::kGlu, false, 1, 2,
                 true, true, 8>
      GluOut48;
  checkOperandOutput<GluOut48>("tc int4 f16 gate/up rows 128 int8 op. out", 11,
                               2);
  typedef Config<F16, 8, 64, 192, 24, 0, 0, 1, sits::kResidual, false, 1, 1,
                 true>
      Cc8i;
  checkGemv<Cc8i, false>("cuda-core int8 residual K=192 interleaved", 4);
  // CUDA cores: small groups (16 int8, 32 int4), K not a multiple of 4.
  typedef Config<F32, 8, 16, 90, 40, 24, 0, 2, sits::kPlain, false, 1, 1> Cc8;
  for (int b : {1, 9})
    checkGemv<Cc8, false>("cuda-core int8 K=90 G=16 rows 40/24", b);
  typedef Config<F16, 4, 32, 200, 72, 72, 0, 2, sits::kGlu, false, 1, 1> Cc4;
  checkGemv<Cc4, false>("cuda-core int4 gate/up K=200 G=32 rows 72", 4);
  typedef Config<F16, 4, 64, 136, 50, 0, 0, 1, sits::kResidual, false, 1, 1>
      Cc4r;
  checkGemv<Cc4r, false>("cuda-core int4 residual K=136 G=64 rows 50", 3);
  typedef Config<F32, 4, 32, 100, 70, 0, 0, 1, sits::kPlain, true, 1, 1> Cc4h;
  checkGemv<Cc4h, false>("cuda-core int4 lm_head gather K=100 G=32", 6);
}

//===----------------------------------------------------------------------===//
// Dequantization (prefill)
//===----------------------------------------------------------------------===//

template <class WeightT, int Bits, int Group, int K, int Rows,
          bool Interleaved = false>
struct DequantConfig {
  typedef WeightT Weight;
  static constexpr int kBits = Bits;
  static constexpr bool kInterleaved = Interleaved;
  static constexpr int kGroup = Group;
  static constexpr int kGroups = (K + Group - 1) / Group;
  static constexpr int kRowBytes =
      ((Bits == 8 ? K : (K + 1) / 2) + 15) / 16 * 16;
  static constexpr int kK = K;
  static constexpr int kRows = Rows;
};

template <class Cfg> void dequantEntry(void **args) {
  sits::dequantizeWeights<Cfg>(
      sits_emu::arg<const unsigned char *>(args[0]),
      sits_emu::arg<const unsigned short *>(args[1]),
      sits_emu::arg<typename Cfg::Weight::Storage *>(args[2]));
}

template <class Cfg> void checkDequantize(const std::string &name) {
  typedef typename Cfg::Weight W;
  QuantMatrix m = randomMatrix(Cfg::kRows, Cfg::kK, Cfg::kBits, Cfg::kGroup,
                               Cfg::kRowBytes, Cfg::kInterleaved);
  std::vector<typename W::Storage> out(size_t(Cfg::kRows) * Cfg::kK,
                                       W::store(NAN));
  const void *dp = m.data.data(), *sp = m.scales.data();
  void *op = out.data();
  void *pointers[3] = {&dp, &sp, &op};
  const int pieces = Cfg::kRows * Cfg::kRowBytes / 16;
  if (!launch(dequantEntry<Cfg>, (pieces + 255) / 256, 256, 0, pointers)) {
    report(name, INFINITY, 0, false);
    return;
  }
  // Exact: f32(s) * q, then rounded to the weight type once.
  double worst = 0.0;
  bool written = true;
  for (int r = 0; r < Cfg::kRows; ++r)
    for (int k = 0; k < Cfg::kK; ++k) {
      float product =
          float(m.scaleValues[size_t(r) * Cfg::kGroups + k / Cfg::kGroup]) *
          float(m.levels[size_t(r) * Cfg::kK + k]);
      float got = W::load(out[size_t(r) * Cfg::kK + k]);
      written &= !std::isnan(got);
      worst =
          std::max(worst, double(std::fabs(got - W::load(W::store(product)))));
    }
  report(name, worst, 0.0, written);
}

void dequantizeCases() {
  checkDequantize<DequantConfig<sits::F16, 4, 32, 100, 37>>(
      "dequantize int4 f16 K=100 G=32 rows 37");
  checkDequantize<DequantConfig<sits::F32, 8, 48, 200, 9>>(
      "dequantize int8 f32 K=200 G=48 rows 9");
  checkDequantize<DequantConfig<sits::BF16, 8, 128, 136, 20>>(
      "dequantize int8 bf16 K=136 G=128 rows 20");
  checkDequantize<DequantConfig<sits::F16, 4, 128, 256, 24, true>>(
      "dequantize int4 f16 K=256 G=128 rows 24 interleaved");
  checkDequantize<DequantConfig<sits::BF16, 8, 64, 192, 10, true>>(
      "dequantize int8 bf16 K=192 G=64 rows 10 interleaved");
}

} // namespace

int main() {
  rng.seed(20261203);
  harness::nameWidth = 64;
  gemvCases();
  dequantizeCases();
  sits_emu_set_reverse_schedule(1);
  std::printf("reverse schedule:\n");
  gemvCases();
  dequantizeCases();
  std::printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
