//===- gemm.cuh - Prefill linear layers: tiled shared-memory GEMM ---------===//
//
// `out[T, N] = x[T, K] . W[N, K]^T` for the T = B * S tokens of a prefill
// chunk. A block computes a 64 x 64 tile of the output with 256 threads, each
// thread 4 x 4 outputs (rows ty + 16 i, columns tx + 16 j, so that the
// shared-memory reads of a warp are broadcasts or consecutive). K advances in
// steps of 32: x and W tiles are staged transposed in shared memory, W
// widened to f32 as it is stored; sums are in f32.
//
// Segments, the residual and the gated (GLU) epilogues are those of
// gemv.cuh. Launch: grid = (ceil(T / 64), tiles of all segments), block 256.
// With f16/bf16 weights on sm_80 and newer, gemmTensorCore (below) runs
// instead; this kernel stays for f32 weights and unaligned rows.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_KERNELS_GEMM_CUH
#define SITS_KERNELS_GEMM_CUH

#include "sits/common.cuh"
#include "sits/gemv.cuh"

namespace sits {

constexpr int kGemmTileM = 64;
constexpr int kGemmTileN = 64;
constexpr int kGemmTileK = 32;
constexpr int kGemmThreads = 256;

/// Loads 8 consecutive weights of `row` from column `k` (zeros past kK).
template <class Cfg>
__device__ __forceinline__ void
gemmLoadWeights(const typename Cfg::Weight::Storage *SITS_RESTRICT row, int k,
                float *out) {
  typedef typename Cfg::Weight W;
  if (Cfg::kVecW && k + 8 <= Cfg::kK) {
    for (int e = 0; e < 8; e += Vec16<W>::kElems)
      load16<W>(row + k + e, out + e);
  } else {
    for (int e = 0; e < 8; ++e)
      out[e] = k + e < Cfg::kK ? W::load(row[k + e]) : 0.0f;
  }
}

/// Loads 8 consecutive inputs of `row` from column `k` (zeros past kK).
template <class Cfg>
__device__ __forceinline__ void gemmLoadInputs(const float *SITS_RESTRICT row,
                                               int k, float *out) {
  if (Cfg::kVecX && k + 8 <= Cfg::kK) {
    loadFloats<8>(row + k, out);
  } else {
    for (int e = 0; e < 8; ++e)
      out[e] = k + e < Cfg::kK ? row[k + e] : 0.0f;
  }
}

/// Config: as gemv (Weight, kK, kSegments, rows(s), hasBias(s), kEpilogue,
/// kActivation) plus tiles(s) (column tiles of segment s), kVecW (weight
/// rows are 16-byte aligned), kVecX (input rows are).
template <class Cfg>
__device__ void gemm(const float *SITS_RESTRICT x,
                     const typename Cfg::Weight::Storage *const *weights,
                     const float *const *biases, float *const *outs,
                     const float *SITS_RESTRICT residual, int tokens) {
  constexpr bool kGated = Cfg::kEpilogue == kGlu;
  constexpr int kMats = kGated ? 2 : 1;
  __shared__ float xs[kGemmTileK][kGemmTileM];
  __shared__ float ws[kMats][kGemmTileK][kGemmTileN];

  // Which segment and which column tile of it this block computes.
  int tile = tileIndex().y, segment = 0;
  if constexpr (!kGated) {
    for (int s = 0; s + 1 < Cfg::kSegments; ++s) {
      if (tile < Cfg::tiles(segment))
        break;
      tile -= Cfg::tiles(segment);
      ++segment;
    }
  }
  const int width = Cfg::rows(segment);
  const int m0 = tileIndex().x * kGemmTileM, n0 = tile * kGemmTileN;
  const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
  // Loader mapping: consecutive threads take consecutive rows, so the
  // transposed shared-memory stores of a warp hit consecutive banks.
  const int loadRow = tid % 64, loadK = (tid / 64) * 8;

  float acc[kMats][4][4];
  for (int g = 0; g < kMats; ++g)
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 4; ++j)
        acc[g][i][j] = 0.0f;

  const int m = m0 + loadRow, n = n0 + loadRow;
  const float *xRow = x + static_cast<long>(m < tokens ? m : 0) * Cfg::kK;
  const typename Cfg::Weight::Storage *wRow[kMats];
  for (int g = 0; g < kMats; ++g)
    wRow[g] = select<Cfg::kSegments>(weights, kGated ? g : segment) +
              static_cast<long>(n < width ? n : 0) * Cfg::kK;
  for (int k0 = 0; k0 < Cfg::kK; k0 += kGemmTileK) {
    float values[8];
    if (m < tokens) {
      gemmLoadInputs<Cfg>(xRow, k0 + loadK, values);
    } else {
      for (int e = 0; e < 8; ++e)
        values[e] = 0.0f;
    }
    for (int e = 0; e < 8; ++e)
      xs[loadK + e][loadRow] = values[e];
    for (int g = 0; g < kMats; ++g) {
      if (n < width) {
        gemmLoadWeights<Cfg>(wRow[g], k0 + loadK, values);
      } else {
        for (int e = 0; e < 8; ++e)
          values[e] = 0.0f;
      }
      for (int e = 0; e < 8; ++e)
        ws[g][loadK + e][loadRow] = values[e];
    }
    syncTile();
    for (int kk = 0; kk < kGemmTileK; ++kk) {
      float a[4];
      for (int i = 0; i < 4; ++i)
        a[i] = xs[kk][ty + 16 * i];
      for (int g = 0; g < kMats; ++g) {
        float b[4];
        for (int j = 0; j < 4; ++j)
          b[j] = ws[g][kk][tx + 16 * j];
        for (int i = 0; i < 4; ++i)
          for (int j = 0; j < 4; ++j)
            acc[g][i][j] += a[i] * b[j];
      }
    }
    syncTile();
  }

  for (int i = 0; i < 4; ++i) {
    const int row = m0 + ty + 16 * i;
    if (row >= tokens)
      continue;
    for (int j = 0; j < 4; ++j) {
      const int column = n0 + tx + 16 * j;
      if (column >= width)
        continue;
      const long index = static_cast<long>(row) * width + column;
      if constexpr (kGated) {
        float gate = acc[0][i][j], up = acc[kMats - 1][i][j];
        if (Cfg::hasBias(0))
          gate += biases[0][column];
        if (Cfg::hasBias(1))
          up += biases[1][column];
        outs[0][index] = activate<Cfg::kActivation>(gate) * up;
      } else {
        float value = acc[0][i][j];
        if (Cfg::hasBias(segment))
          value += select<Cfg::kSegments>(biases, segment)[column];
        if constexpr (Cfg::kEpilogue == kResidual)
          value += residual[index];
        select<Cfg::kSegments>(outs, segment)[index] = value;
      }
    }
  }
}

//===----------------------------------------------------------------------===//
// Tensor-core GEMM
//===----------------------------------------------------------------------===//
//
// A block computes 128 tokens x 128 weight rows with mma.m16n8k16 (f32
// accumulators), 4 warps of 64 x 64 each (2 x 2: a warp's operands are as
// many bytes per mma as a square tile allows). K advances in steps of 32
// through a ring of Cfg::kStages stages in dynamic shared memory, all
// filled by cp.async: the weights as they are, the activations as f32, or
// (Cfg::kHalfX) as the 16-bit operands their producer wrote in input order
// (an rms_norm or a gate/up GEMM with output_operand_bits = 16). A step
// waits only for its own stage (cp.async.wait_group kStages - 2), so the
// copies of the next kStages - 1 steps are in flight during its mma; one
// barrier per step. From f32 rows the warps round their A fragments to the
// weights' type as they read them (as the decode GEMV rounds its inputs),
// the rows padded to 40 floats so that a warp's 8-byte fragment reads fall
// in distinct banks; 16-bit rows (half the shared-memory bytes, no
// conversion, the same rounding) and the weight rows are padded to 40
// halves so that ldmatrix rows do. With kGlu the 128 rows are 64 gate rows
// and the same 64 up rows, interleaved by 16, so that a thread holds gate
// and up of the same output; with Cfg::kOutOperandBits = 16 act(gate) * up
// goes out as 16-bit operand rows for the GEMM that reads it.
//
// Launch: grid = (ceil(T / 128), kTotalTiles, splits) (in groups of
// kTcGemmGroup token tiles, see below), block kTcGemmThreads, dynamic shared
// memory gemmTensorCoreSharedBytes(kStages, kHalfX).
//
// Split over K (Cfg::kSplitK, grid.z > 1): a step of few token tiles has
// as few blocks as column tiles (32 for a 4096-wide output), too few to
// keep the GPU's memory system busy. Block z then sums its share of the K
// steps and stores the raw sums in `partial` ([splits][grid.x * 128
// tokens][kTotalTiles * 128 columns] floats); the last block of a tile to
// arrive, counted in `counters` (one int per tile, reset by that block),
// adds the splits in split order, so that the result does not depend on
// which block came last, and applies the epilogue.

constexpr int kTcGemmM = 128;
constexpr int kTcGemmN = 128;
constexpr int kTcGemmK = 32;
constexpr int kTcGemmWarps = 4;
constexpr int kTcGemmGroup = 8; ///< token tiles a block group shares
constexpr int kTcGemmThreads = kTcGemmWarps * kWarpSize;
constexpr int kTcGemmXStride = kTcGemmK + 8; ///< elements per shared x row
constexpr int kTcGemmWStride = kTcGemmK + 8; ///< halves per shared W row

/// A stage's activation bytes: f32 rows, or (halfX) 16-bit ones.
__host__ __device__ constexpr int gemmTensorCoreXBytes(bool halfX) {
  return kTcGemmM * kTcGemmXStride * (halfX ? 2 : 4);
}
__host__ __device__ constexpr int gemmTensorCoreStageBytes(bool halfX) {
  return gemmTensorCoreXBytes(halfX) + kTcGemmN * kTcGemmWStride * 2;
}

/// Dynamic shared memory of gemmTensorCore (also computed by
/// LinearKernels.cpp).
__host__ __device__ constexpr int gemmTensorCoreSharedBytes(int stages,
                                                            bool halfX) {
  return stages * gemmTensorCoreStageBytes(halfX);
}

/// Split over K: stores this block's sums into its split's partial slab;
/// in the last block of the tile to arrive, replaces them by the sum of
/// every split's, in split order, and returns true (the others return
/// false). Called by every thread of the block.
template <class Cfg>
__device__ __forceinline__ bool
sumSplits(float (&acc)[4][8][4], float *SITS_RESTRICT partial,
          int *SITS_RESTRICT counters, int tokens, int tokenTile,
          int columnTile) {
  const int tid = threadIdx.x, lane = tid % kWarpSize, warp = tid / kWarpSize;
  const int wm = warp / 2, wn = warp % 2;
  const int g = lane / 4, t = lane % 4;
  const int splits = tileGridDim().z, split = tileIndex().z;
  constexpr long kColumns = static_cast<long>(Cfg::kTotalTiles) * kTcGemmN;
  const long slab = static_cast<long>(tileGridDim().x) * kTcGemmM * kColumns;
  // Element (token row r of the block, column c of its tile) of slab s:
  // two consecutive columns per fragment pair (i % 2), stored as one float2.
  const int rowBase = tokenTile * kTcGemmM + wm * 64 + g;
  const long columnBase = columnTile * kTcGemmN + wn * 64 + 2 * t;
  auto at = [&](int s, int mi, int half, int ni) {
    return partial + s * slab + (rowBase + mi * 16 + half * 8) * kColumns +
           columnBase + ni * 8;
  };
#pragma unroll
  for (int mi = 0; mi < 4; ++mi)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      if (rowBase + mi * 16 + half * 8 >= tokens)
        continue;
#pragma unroll
      for (int ni = 0; ni < 8; ++ni)
        *reinterpret_cast<float2 *>(at(split, mi, half, ni)) =
            make_float2(acc[mi][ni][2 * half], acc[mi][ni][2 * half + 1]);
    }

  if (!lastBlockToArrive(counters + tokenTile * Cfg::kTotalTiles + columnTile,
                         splits))
    return false;
#pragma unroll
  for (int mi = 0; mi < 4; ++mi)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      if (rowBase + mi * 16 + half * 8 >= tokens)
        continue;
#pragma unroll
      for (int ni = 0; ni < 8; ++ni) {
        float2 sum = make_float2(0.0f, 0.0f);
        for (int s = 0; s < splits; ++s) {
          const float2 part =
              __ldcg(reinterpret_cast<const float2 *>(at(s, mi, half, ni)));
          sum.x += part.x;
          sum.y += part.y;
        }
        acc[mi][ni][2 * half] = sum.x;
        acc[mi][ni][2 * half + 1] = sum.y;
      }
    }
  return true;
}

/// Config: Weight (F16/BF16), kK (a multiple of 8), kSegments, rows(s),
/// hasBias(s), tiles(s) (ceil(rows(s) / 128), or / 64 with kGlu),
/// kTotalTiles, kEpilogue, kActivation, kStages (of the ring, at least 2),
/// kSplitK (grid.z may be more than 1: `partial` and `counters` are used),
/// kHalfX (x is rows of kK 16-bit operands of the weights' type, else f32),
/// kOutOperandBits (0, or 16 with kGlu: the output is such rows). Arguments
/// as for gemm.
template <class Cfg>
__device__ void
gemmTensorCore(const void *SITS_RESTRICT xRows,
               const typename Cfg::Weight::Storage *const *weights,
               const float *const *biases, float *const *outs,
               const float *SITS_RESTRICT residual, int tokens,
               float *SITS_RESTRICT partial = nullptr,
               int *SITS_RESTRICT counters = nullptr) {
  typedef typename Cfg::Weight W;
  typedef typename W::Storage Storage;
  constexpr bool kGated = Cfg::kEpilogue == kGlu;
  constexpr int kStages = Cfg::kStages;
  constexpr int kSteps = (Cfg::kK + kTcGemmK - 1) / kTcGemmK;
  static_assert(Cfg::kK % 8 == 0, "rows must be 16-byte aligned");
  static_assert(kStages >= 2, "the ring overlaps a copy with an mma");
  static_assert(Cfg::kOutOperandBits == 0 ||
                    (Cfg::kOutOperandBits == 16 && kGated),
                "a gate/up GEMM writes the input-order operands of a GEMM");
  typedef typename InputElement<Cfg::kHalfX>::Type XElem;
  constexpr int kXBytes = gemmTensorCoreXBytes(Cfg::kHalfX);
  constexpr int kStageBytes = gemmTensorCoreStageBytes(Cfg::kHalfX);
  const XElem *SITS_RESTRICT x = static_cast<const XElem *>(xRows);
  SITS_DYNAMIC_SHARED(unsigned char, shared);

  const int tid = threadIdx.x, lane = tid % kWarpSize, warp = tid / kWarpSize;
  const int wm = warp / 2, wn = warp % 2;
  const int g = lane / 4, t = lane % 4;
  // Blocks start in launch order (tileIndex().x fastest). Taken as they are,
  // the blocks running at once would share one column tile and read every
  // token's activations, which for thousands of tokens do not fit in L2;
  // instead each group of kTcGemmGroup token tiles runs through all column
  // tiles, token tile fastest, so that a group's activations and the
  // column tiles in flight stay in L2.
  const int linear = tileIndex().y * tileGridDim().x + tileIndex().x;
  const int first = linear / (kTcGemmGroup * Cfg::kTotalTiles) * kTcGemmGroup;
  const int groupTiles =
      min(static_cast<int>(tileGridDim().x) - first, kTcGemmGroup);
  const int inGroup = linear - first * Cfg::kTotalTiles;
  const int tokenTile = first + inGroup % groupTiles;
  const int m0 = tokenTile * kTcGemmM;

  // Which segment and rows this block's column tile covers.
  const int columnTile = inGroup / groupTiles;
  int tile = columnTile, segment = 0;
  if constexpr (!kGated) {
    for (int s = 0; s + 1 < Cfg::kSegments; ++s) {
      if (tile < Cfg::tiles(segment))
        break;
      tile -= Cfg::tiles(segment);
      ++segment;
    }
  }
  const int width = Cfg::rows(segment);
  const int n0 = tile * (kGated ? kTcGemmN / 2 : kTcGemmN);

  // Loader. Activations: 16-byte chunk tid % kXChunks of tile rows
  // tid / kXChunks + kXRowStep j (f32: 8 chunks a row, 16 rows a pass, 8
  // passes; 16-bit: 4, 32, 4). Weights: chunk tid % 4 of tile rows r =
  // tid / 4 + 32 j (j < 4); with kGlu tile row r is row 16 (r / 32) + r % 16
  // of the gate (r % 32 < 16) or the up matrix, so all of a thread's rows
  // are of one matrix.
  constexpr int kXElemBytes = static_cast<int>(sizeof(XElem));
  constexpr int kXChunks = kTcGemmK * kXElemBytes / 16;
  constexpr int kXRowStep = kTcGemmThreads / kXChunks;
  constexpr int kXPasses = kTcGemmM / kXRowStep;
  const int xK = (tid % kXChunks) * (16 / kXElemBytes), wK = (tid % 4) * 8;
  const int xRow0 = tid / kXChunks;
  const int xRowsLeft = tokens - (m0 + xRow0); // j valid while step j < it
  const XElem *xRow = x + static_cast<long>(m0 + xRow0) * Cfg::kK + xK;
  constexpr int kWRowStep = kGated ? 16 : 32;
  const int matrix = kGated ? (tid / 4 < 16 ? 0 : 1) : segment;
  const int wRow0 = n0 + (kGated ? (tid / 4) % 16 : tid / 4);
  const int wRows = Cfg::rows(matrix) - wRow0; // valid while step j < wRows
  const Storage *wRow = select<Cfg::kSegments>(weights, matrix) +
                        static_cast<long>(wRow0) * Cfg::kK + wK;
  const int xOffset = (xRow0 * kTcGemmXStride + xK) * kXElemBytes;
  const int wOffset = kXBytes + ((tid / 4) * kTcGemmWStride + wK) * 2;
  const SharedAddress ring = sharedAddressOf(shared);

  // The K steps of this block: all, or its split's share.
  int firstStep = 0, steps = kSteps;
  if constexpr (Cfg::kSplitK) {
    const int splits = tileGridDim().z, split = tileIndex().z;
    firstStep = kSteps * split / splits;
    steps = kSteps * (split + 1) / splits - firstStep;
  }

  // Copies the tiles of the block's step `step` into its stage and commits
  // them; past the last step an empty group, so that the groups still count
  // steps.
  auto copyStage = [&](int step) {
    if (step < steps) {
      const SharedAddress stage = ring + (step % kStages) * kStageBytes;
      const int k0 = (firstStep + step) * kTcGemmK;
      const bool xIn = k0 + xK < Cfg::kK, wIn = k0 + wK < Cfg::kK;
#pragma unroll
      for (int j = 0; j < kXPasses; ++j) {
        const bool valid = xIn && kXRowStep * j < xRowsLeft;
        copyAsync16At(
            stage, xOffset + j * kXRowStep * kTcGemmXStride * kXElemBytes,
            valid ? xRow + static_cast<long>(kXRowStep * j) * Cfg::kK + k0 : x,
            valid);
      }
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const bool valid = wIn && kWRowStep * j < wRows;
        copyAsync16At(
            stage, wOffset + j * 32 * kTcGemmWStride * 2,
            valid ? wRow + static_cast<long>(kWRowStep * j) * Cfg::kK + k0
                  : weights[0],
            valid);
      }
    }
    copyAsyncCommit();
  };

  float acc[4][8][4];
#pragma unroll
  for (int mi = 0; mi < 4; ++mi)
#pragma unroll
    for (int ni = 0; ni < 8; ++ni)
#pragma unroll
      for (int i = 0; i < 4; ++i)
        acc[mi][ni][i] = 0.0f;

  // With kSplitK (the form for steps of few tokens), the token rows of the
  // warp's 64 (a warp-uniform bound): the mmas of 16-row tiles past the
  // step's tokens are skipped, so that such a step costs its rows'
  // arithmetic, not the whole tile's. Without it the bound is the tile and
  // the tests fold away (the measured kernel).
  const int warpRows = Cfg::kSplitK ? tokens - (m0 + wm * 64) : kTcGemmM;
  for (int step = 0; step + 1 < kStages; ++step)
    copyStage(step);
  for (int step = 0; step < steps; ++step) {
    copyAsyncWait<kStages - 2>();
    syncTile(); // stage `step` is in place; step - 1's is read
    copyStage(step + kStages - 1); // into step - 1's stage
    const unsigned char *stage = shared + (step % kStages) * kStageBytes;
    const XElem *xs = reinterpret_cast<const XElem *>(stage);
    const u16 *ws = reinterpret_cast<const u16 *>(stage + kXBytes);
#pragma unroll
    for (int kk = 0; kk < kTcGemmK; kk += 16) {
      // A fragments (PTX layout): rows g and g + 8, k 2t and 2t + 8.
      u32 a[4][4], b[4][4];
      if (warpRows <= 0)
        continue; // none of the warp's 64 rows is a token
#pragma unroll
      for (int mi = 0; mi < 4; ++mi) {
        if (mi * 16 >= warpRows)
          continue;
        if constexpr (Cfg::kHalfX) {
          // Lanes 0-15 address rows 0-15 at k, 16-31 the same at k + 8.
          loadMatrix4(&xs[(wm * 64 + mi * 16 + lane % 16) * kTcGemmXStride +
                          kk + 8 * (lane / 16)],
                      a[mi]);
        } else {
          const float *row =
              xs + (wm * 64 + mi * 16 + g) * kTcGemmXStride + kk + 2 * t;
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            const float2 pair = *reinterpret_cast<const float2 *>(
                row + (i % 2) * 8 * kTcGemmXStride + (i / 2) * 8);
            a[mi][i] = packPairRn<W>(pair.x, pair.y);
          }
        }
      }
#pragma unroll
      for (int nj = 0; nj < 4; ++nj) {
        const int row = wn * 64 + nj * 16 + lane % 8 + 8 * (lane / 16);
        loadMatrix4(&ws[row * kTcGemmWStride + kk + 8 * ((lane / 8) % 2)],
                    b[nj]);
      }
#pragma unroll
      for (int mi = 0; mi < 4; ++mi) {
        if (mi * 16 >= warpRows)
          continue;
#pragma unroll
        for (int ni = 0; ni < 8; ++ni)
          mma16816<W>(acc[mi][ni], a[mi][0], a[mi][1], a[mi][2], a[mi][3],
                      b[ni / 2][2 * (ni % 2)], b[ni / 2][2 * (ni % 2) + 1]);
      }
    }
  }

  // acc[mi][ni][i]: token row g + 8 (i / 2) of m-tile mi, tile row
  // wn * 64 + ni * 8 + 2t + i % 2.
  if constexpr (Cfg::kSplitK) {
    if (tileGridDim().z > 1 &&
        !sumSplits<Cfg>(acc, partial, counters, tokens, tokenTile, columnTile))
      return; // another split's block applies the epilogue
  }
#pragma unroll
  for (int mi = 0; mi < 4; ++mi)
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int token = m0 + wm * 64 + mi * 16 + g + (i >= 2 ? 8 : 0);
      if (token >= tokens)
        continue;
#pragma unroll
      for (int ni = 0; ni < 8; ++ni) {
        if constexpr (kGated) {
          if (ni % 4 >= 2) // up rows: taken with their gate rows
            continue;
          const int row =
              n0 + wn * 32 + (ni / 4) * 16 + (ni % 2) * 8 + 2 * t + (i % 2);
          if (row >= width)
            continue;
          float gate = acc[mi][ni][i], up = acc[mi][ni + 2][i];
          if (Cfg::hasBias(0))
            gate += biases[0][row];
          if (Cfg::hasBias(1))
            up += biases[1][row];
          const float out = activate<Cfg::kActivation>(gate) * up;
          const long base = static_cast<long>(token) * width;
          if constexpr (Cfg::kOutOperandBits != 0)
            // The GEMM reading it would round it so (packPairRn).
            reinterpret_cast<u16 *>(
                outs[0])[base + operandHalfIndex<Cfg::kOutOperandBits>(row)] =
                W::store(out);
          else
            outs[0][base + row] = out;
        } else {
          const int row = n0 + wn * 64 + ni * 8 + 2 * t + (i % 2);
          if (row >= width)
            continue;
          float value = acc[mi][ni][i];
          if (Cfg::hasBias(segment))
            value += select<Cfg::kSegments>(biases, segment)[row];
          const long index = static_cast<long>(token) * width + row;
          if constexpr (Cfg::kEpilogue == kResidual)
            value += residual[index];
          select<Cfg::kSegments>(outs, segment)[index] = value;
        }
      }
    }
}

} // namespace sits

#endif // SITS_KERNELS_GEMM_CUH
