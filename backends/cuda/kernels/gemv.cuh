//===- gemv.cuh - Decode linear layers and the LM head --------------------===//
//
// A decode step multiplies a few token rows (B <= max_batch) by each weight,
// so it is bound by reading the weights once: a warp owns one output row,
// its lanes stream the row with 16-byte loads (8 f16/bf16 or 4 f32 weights),
// and every token of a tile of up to kTokenTile reuses the loaded weights
// from registers. Sums are in f32 and finish with a warp reduction.
//
// One launch can compute several projections of the same input (segments:
// Q, K and V), a gated pair (gate and up, then act(gate) * up), or add a
// residual in the epilogue. In gather mode (the LM head) the rows are each
// sequence's last new token, `b * S + step_lengths[b] - 1`, and the result
// row is the sequence's row of the logits buffer.
//
// Launch: grid.x = ceil(rows / kWarps), block = kWarps * 32.
//
// With f16/bf16 weights on sm_80 and newer, gemvTensorCore does the same on
// tensor cores (below); `gemv` stays for f32 weights, rows that are not
// 16-byte aligned and older GPUs.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_KERNELS_GEMV_CUH
#define SITS_KERNELS_GEMV_CUH

#include "sits/common.cuh"

namespace sits {

enum Epilogue { kPlain = 0, kResidual = 1, kGlu = 2 };

/// Adds this lane's share of `row . x[token]` for each token of a tile.
template <class Cfg>
__device__ __forceinline__ void
gemvAccumulate(const typename Cfg::Weight::Storage *SITS_RESTRICT row,
               const float *const *xRows, int count, float *acc) {
  typedef typename Cfg::Weight W;
  const int lane = threadIdx.x % kWarpSize;
  for (int k = lane * Cfg::kVec; k < Cfg::kK; k += kWarpSize * Cfg::kVec) {
    float w[Cfg::kVec];
    if constexpr (Cfg::kVec > 1)
      load16<W>(row + k, w);
    else
      w[0] = W::load(row[k]);
    for (int tt = 0; tt < Cfg::kTokenTile; ++tt) {
      if (tt >= count)
        break;
      float x[Cfg::kVec];
      if constexpr (Cfg::kVec > 1)
        loadFloats<Cfg::kVec>(xRows[tt] + k, x);
      else
        x[0] = xRows[tt][k];
      for (int e = 0; e < Cfg::kVec; ++e)
        acc[tt] += w[e] * x[e];
    }
  }
}

/// The warp-per-row GEMV that gemv and gemvQuant share: warp w takes row w
/// of the segments laid end to end (with kGlu, row w of the gate and of the
/// up matrix), tiles of kTokenTile tokens (in gather mode each sequence's
/// last real token), and writes each token's sum with the epilogue.
/// `accumulate(segment, row, xRows, count, acc)` adds this lane's share of
/// the row of `segment` times each of the tile's `count` x rows into `acc`.
template <class Cfg, class Accumulate>
__device__ __forceinline__ void
gemvWarpRows(const float *SITS_RESTRICT x, const float *const *biases,
             float *const *outs, const float *SITS_RESTRICT residual,
             int tokens, StepRows stepRows, Accumulate accumulate) {
  const int lane = threadIdx.x % kWarpSize;
  int row = tileIndex().x * Cfg::kWarps + threadIdx.x / kWarpSize;
  if (row >= Cfg::kTotalRows)
    return; // the whole warp leaves together
  int segment = 0;
  if constexpr (Cfg::kEpilogue != kGlu) {
    for (int s = 0; s + 1 < Cfg::kSegments; ++s) {
      if (row < Cfg::rows(segment))
        break;
      row -= Cfg::rows(segment);
      ++segment;
    }
  }
  const int width = Cfg::rows(segment);

  // Gather mode: the first row of sequence t, carried from t - 1 (every
  // warp row visits the sequences in order, so StepRows::first's walk over
  // the lengths would repeat for each).
  long first = 0;
  for (int t0 = 0; t0 < tokens; t0 += Cfg::kTokenTile) {
    const int count = min(Cfg::kTokenTile, tokens - t0);
    const float *xRows[Cfg::kTokenTile];
    bool live[Cfg::kTokenTile];
    for (int tt = 0; tt < Cfg::kTokenTile; ++tt) {
      int t = t0 + tt;
      long source = t;
      live[tt] = tt < count;
      if constexpr (Cfg::kGatherLast) {
        int length = tt < count ? stepRows.gatherLengths()[t] : 0;
        live[tt] = length > 0;
        source = length > 0 ? first + length - 1 : 0;
        if (tt < count)
          first += stepRows.owned(t);
      }
      xRows[tt] = x + (tt < count ? source : 0) * Cfg::kK;
    }
    float acc[Cfg::kTokenTile];
    for (int tt = 0; tt < Cfg::kTokenTile; ++tt)
      acc[tt] = 0.0f;
    accumulate(segment, row, xRows, count, acc);

    if constexpr (Cfg::kEpilogue == kGlu) {
      float up[Cfg::kTokenTile];
      for (int tt = 0; tt < Cfg::kTokenTile; ++tt)
        up[tt] = 0.0f;
      accumulate(1, row, xRows, count, up);
      for (int tt = 0; tt < Cfg::kTokenTile; ++tt) {
        if (tt >= count)
          break;
        float gate = warpSum(acc[tt]);
        float upValue = warpSum(up[tt]);
        if (lane == tt) {
          if (Cfg::hasBias(0))
            gate += biases[0][row];
          if (Cfg::hasBias(1))
            upValue += biases[1][row];
          outs[0][static_cast<long>(t0 + tt) * width + row] =
              activate<Cfg::kActivation>(gate) * upValue;
        }
      }
    } else {
      for (int tt = 0; tt < Cfg::kTokenTile; ++tt) {
        if (tt >= count)
          break;
        float sum = warpSum(acc[tt]);
        if (lane == tt && live[tt]) {
          if (Cfg::hasBias(segment))
            sum += select<Cfg::kSegments>(biases, segment)[row];
          long index = static_cast<long>(t0 + tt) * width + row;
          if constexpr (Cfg::kEpilogue == kResidual)
            sum += residual[index];
          select<Cfg::kSegments>(outs, segment)[index] = sum;
        }
      }
    }
  }
}

/// Config: Weight, kK, kSegments, rows(s), hasBias(s), kTotalRows (rows
/// the warps cover: the sum of the segments, or one segment's rows with
/// kGlu), kEpilogue, kActivation, kWarps, kTokenTile, kVec, kGatherLast.
/// `tokens` is T (or B in gather mode); `stepRows` is read only in gather mode
/// (sequence b's last real token).
template <class Cfg>
__device__ void gemv(const float *SITS_RESTRICT x,
                     const typename Cfg::Weight::Storage *const *weights,
                     const float *const *biases, float *const *outs,
                     const float *SITS_RESTRICT residual, int tokens,
                     StepRows stepRows) {
  gemvWarpRows<Cfg>(x, biases, outs, residual, tokens, stepRows,
                    [&](int segment, int row, const float *const *xRows,
                        int count, float *acc) {
                      gemvAccumulate<Cfg>(
                          select<Cfg::kSegments>(weights, segment) +
                              static_cast<long>(row) * Cfg::kK,
                          xRows, count, acc);
                    });
}

//===----------------------------------------------------------------------===//
// Tensor-core GEMV
//===----------------------------------------------------------------------===//
//
// out[t, n] = W[n, :] . x[t, :] for up to 8 tokens at once as mma.m16n8k16:
// A = 16 weight rows x 16 k, B = 16 k x the 8 tokens (x rounded to the
// weights' type, as PyTorch's half-precision linears do), f32 accumulators.
// Since the sum runs over k, A and B may number k in any order they agree
// on: lane (g, t) takes 16 bytes of rows g and g + 8 at k = 8t (one vector
// load each, straight into its A registers: no shuffles) and 16 bytes of
// token g's x at the same k (its B registers). One 32-wide chunk of k is
// then two mmas per 16-row tile.
//
// An item is kTilesPerBlock tiles of 16 rows over the whole of K. A block
// takes items tileIndex().x, tileIndex().x + tileGridDim().x, ... (the grid is
// at most two blocks per SM, so that a large matrix is streamed by resident
// blocks without a gap between items); its 8 warps take the chunks of K in turn
// (warp w: chunks w, w + 8, ...), kUnroll chunks per step. The weights of a
// step travel by cp.async into the lane's own slots of a ring of kStages steps
// in shared memory, so that kStages - 1 steps (8 x 16 bytes each) per lane are
// in flight while the lane computes; no lane reads another's slots, so no
// barrier is needed. The ring runs on across the block's items: the next item's
// first copies are in flight while the last one's sums are added. x comes from
// L1. The warps' partial sums meet in shared memory and are added in warp order
// (deterministic; a token's result does not depend on the other tokens of
// the batch), and the epilogue adds the bias, the residual, or computes
// act(gate) * up.
//
// With kNorm the input is RMS-normalized on the way in (the decode
// program's rms_norm fused into the linears that read it, so that the
// normalized row never goes through memory and a launch is saved): warp w
// first sums the squares of token w's row of x, and every x value is then
// x / rms * (norm_weight + offset), norm.cuh's formula, before rounding.
//
// Launch: grid.x = min(ceil(kTotalTiles / kTilesPerBlock), 2 * SMs) (any
// grid is correct), block 256, dynamic shared memory
// gemvTensorCoreSharedBytes<...>().

constexpr int kTcWarps = 8;
constexpr int kTcThreads = kTcWarps * kWarpSize;
constexpr int kTcChunk = 32; ///< k per warp step: 4 lanes x 8 elements

/// 16-byte pieces a lane copies per step: rows g and g + 8 of every tile of
/// every matrix, for kUnroll chunks.
__host__ __device__ constexpr int tcPieces(int mats, int tilesPerBlock,
                                           int unroll) {
  return unroll * mats * tilesPerBlock * 2;
}

/// Dynamic shared memory of gemvTensorCore (also computed by Launches.cpp).
__host__ __device__ constexpr int
gemvTensorCoreSharedBytes(int mats, int tilesPerBlock, int unroll, int stages) {
  return 16 * (stages * tcPieces(mats, tilesPerBlock, unroll) * kTcThreads +
               kTcWarps * mats * tilesPerBlock * kWarpSize);
}

/// Segment and first row of tile `tile` of the tile space (segments padded
/// to whole tiles); segment 0 with kGlu, where the tiles are the gate's.
template <class Cfg>
__device__ __forceinline__ void tcTileRows(int tile, int *segment,
                                           int *firstRow) {
  int s = 0;
  if constexpr (Cfg::kEpilogue != kGlu) {
    for (int i = 0; i + 1 < Cfg::kSegments; ++i) {
      if (tile < Cfg::tiles(s))
        break;
      tile -= Cfg::tiles(s);
      ++s;
    }
  }
  *segment = s;
  *firstRow = tile * 16;
}

/// x[e] / rms * (weight[e] + offset) for the 8 floats of `x` and of
/// `weight` (their bits), norm.cuh's rms_norm formula.
__device__ __forceinline__ void
normalize8(uint4 (&x)[2], const uint4 (&weight)[2], float rms, float offset) {
  u32 *bits = reinterpret_cast<u32 *>(x);
  const u32 *w = reinterpret_cast<const u32 *>(weight);
  for (int e = 0; e < 8; ++e)
    bits[e] = __float_as_uint(__uint_as_float(bits[e]) / rms *
                              (__uint_as_float(w[e]) + offset));
}

/// Lane (g, t)'s rows g and g + 8 of the M tiles from `firstTile`, for
/// every matrix (gate and up with kGlu), each `laneOffset` elements in; null
/// past the end of a segment or of the tile space. `rowStride` is a row's
/// length in elements of T.
template <class Cfg, class T, int kMats, int M>
__device__ __forceinline__ void
tcRowPointers(int firstTile, const T *const *matrices, long rowStride,
              int laneOffset, const T *(&rowPtr)[kMats][M][2]) {
  const int g = (threadIdx.x % kWarpSize) / 4;
  for (int m = 0; m < M; ++m) {
    const int tile = firstTile + m;
    int segment = 0, firstRow = 0;
    tcTileRows<Cfg>(tile, &segment, &firstRow);
    for (int mat = 0; mat < kMats; ++mat) {
      const int s = Cfg::kEpilogue == kGlu ? mat : segment;
      for (int h = 0; h < 2; ++h) {
        const int row = firstRow + g + 8 * h;
        rowPtr[mat][m][h] = tile < Cfg::kTotalTiles && row < Cfg::rows(s)
                                ? select<Cfg::kSegments>(matrices, s) +
                                      row * rowStride + laneOffset
                                : nullptr;
      }
    }
  }
}

/// The items (kTilesPerBlock tiles each) of block tileIndex().x of a
/// persistent tensor-core GEMV: tileIndex().x, then every tileGridDim().x-th;
/// the block's copies run on across its items, so that it streams its weights
/// without a gap between tiles.
template <class Cfg> __device__ __forceinline__ int tcBlockItems() {
  constexpr int kItems =
      (Cfg::kTotalTiles + Cfg::kTilesPerBlock - 1) / Cfg::kTilesPerBlock;
  const int block = static_cast<int>(tileIndex().x);
  const int grid = static_cast<int>(tileGridDim().x);
  return block < kItems ? (kItems - block + grid - 1) / grid : 0;
}

/// The first tile of the block's item `item` (tcBlockItems).
template <class Cfg> __device__ __forceinline__ int tcItemFirstTile(int item) {
  return (static_cast<int>(tileIndex().x) +
          item * static_cast<int>(tileGridDim().x)) *
         Cfg::kTilesPerBlock;
}

/// Elements of an item's output tile per thread of tcFinishItem.
template <int M>
constexpr int
    kTcItemElements = (M * kWarpSize * 4 + kTcThreads - 1) / kTcThreads;

/// Element e (< M * 128) of the item's output tiles from `firstTile`, for
/// tokens t0 .. t0 + 7: its token, row and segment (false: outside).
template <class Cfg>
__device__ __forceinline__ bool tcItemElement(int e, int firstTile, int t0,
                                              int tokens, int *token, int *row,
                                              int *segment) {
  const int m = e / (kWarpSize * 4), r = e % (kWarpSize * 4);
  const int owner = r / 4, i = r % 4;
  *token = t0 + 2 * (owner % 4) + (i & 1);
  const int tile = firstTile + m;
  int firstRow = 0;
  *segment = 0;
  tcTileRows<Cfg>(tile, segment, &firstRow);
  *row = firstRow + owner / 4 + (i >= 2 ? 8 : 0);
  return tile < Cfg::kTotalTiles && *token < tokens &&
         *row < Cfg::rows(*segment);
}

/// With a residual epilogue, this thread's residual values of the item
/// (loaded when the item starts, so that its end does not wait for them).
template <class Cfg, int M>
__device__ __forceinline__ void
tcLoadResidual(int firstTile, int t0, const float *SITS_RESTRICT residual,
               int tokens, float (&values)[kTcItemElements<M>]) {
  if constexpr (Cfg::kEpilogue == kResidual) {
    int j = 0;
    for (int e = threadIdx.x; e < M * kWarpSize * 4; e += kTcThreads, ++j) {
      int token, row, segment;
      values[j] =
          tcItemElement<Cfg>(e, firstTile, t0, tokens, &token, &row, &segment)
              ? residual[static_cast<long>(token) * Cfg::rows(segment) + row]
              : 0.0f;
    }
  }
}

/// The end of an item of gemvTensorCore and gemvQuantTensorCore: the
/// warps' accumulators of the M tiles from `firstTile` meet in `partial`,
/// are added in warp order (deterministic) and go through the epilogue
/// (bias, the residual values of tcLoadResidual, or act(gate) * up) for
/// tokens t0 .. t0 + 7; `partial` is free again on return. With
/// Cfg::kOutOperandBits (16, 8 or 4; gated only), act(gate) * up goes out
/// as rows of f16 (bf16) halves in the operand order of the tensor-core
/// GEMV over weights of those bits that reads it (common.cuh's
/// operandHalfIndex; kHalfX).
template <class Cfg, int kMats, int M>
__device__ __forceinline__ void
tcFinishItem(const float (&acc)[kMats][M][4], float4 *partial, int firstTile,
             int t0, const float *const *biases, float *const *outs,
             const float (&residualValues)[kTcItemElements<M>], int tokens,
             const int *SITS_RESTRICT stepLengths) {
  constexpr bool kGated = Cfg::kEpilogue == kGlu;
  static_assert(Cfg::kOutOperandBits == 0 || kGated,
                "only act(gate) * up goes out as GEMV operands");
  const int tid = threadIdx.x;
  const int lane = tid % kWarpSize, warp = tid / kWarpSize;
  for (int mat = 0; mat < kMats; ++mat)
    for (int m = 0; m < M; ++m)
      partial[(warp * kMats + mat) * M * kWarpSize + m * kWarpSize + lane] =
          make_float4(acc[mat][m][0], acc[mat][m][1], acc[mat][m][2],
                      acc[mat][m][3]);
  syncTile();

  const float *sums = reinterpret_cast<const float *>(partial);
  constexpr int kPerWarp = kMats * M * kWarpSize * 4;
  int j = 0;
  for (int e = tid; e < M * kWarpSize * 4; e += kTcThreads, ++j) {
    const int m = e / (kWarpSize * 4), r = e % (kWarpSize * 4);
    int token, row, segment;
    if (!tcItemElement<Cfg>(e, firstTile, t0, tokens, &token, &row, &segment))
      continue;
    float value[kMats];
    for (int mat = 0; mat < kMats; ++mat) {
      float sum = 0.0f;
      for (int v = 0; v < kTcWarps; ++v)
        sum += sums[v * kPerWarp + (mat * M + m) * kWarpSize * 4 + r];
      value[mat] = sum;
    }
    if constexpr (kGated) {
      if (Cfg::hasBias(0))
        value[0] += biases[0][row];
      if (Cfg::hasBias(1))
        value[kMats - 1] += biases[1][row];
      const float out = activate<Cfg::kActivation>(value[0]) * value[kMats - 1];
      const long base = static_cast<long>(token) * Cfg::rows(0);
      if constexpr (Cfg::kOutOperandBits != 0)
        // The GEMV reading it would round it so (packPair, packPairRn).
        reinterpret_cast<u16 *>(
            outs[0])[base + operandHalfIndex<Cfg::kOutOperandBits>(row)] =
            Cfg::Weight::store(out);
      else
        outs[0][base + row] = out;
    } else {
      if constexpr (Cfg::kGatherLast) {
        if (stepLengths[token] <= 0)
          continue;
      }
      float sum = value[0];
      if (Cfg::hasBias(segment))
        sum += select<Cfg::kSegments>(biases, segment)[row];
      const long index = static_cast<long>(token) * Cfg::rows(segment) + row;
      if constexpr (Cfg::kEpilogue == kResidual)
        sum += residualValues[j];
      select<Cfg::kSegments>(outs, segment)[index] = sum;
    }
  }
  syncTile(); // `partial` is read before the next item reuses it
}

/// gemvTensorCore's passes over the weights, each multiplying G groups of 8
/// tokens, through a ring of kStages steps of U chunks a warp: each weight
/// piece, once in shared memory, feeds one mma per group, so that a pass
/// reads the weights once for up to 8 * G tokens. The groups past the
/// step's tokens skip their loads and mmas (a test the whole block agrees
/// on). Each token's sums are computed exactly as with one group (the
/// chunks of K in the same order, the warps added in the same order): its
/// result depends neither on G nor on U.
template <class Cfg, int G, int U, int kStages>
__device__ void
gemvTensorCorePasses(const void *SITS_RESTRICT xInput,
                     const typename Cfg::Weight::Storage *const *weights,
                     const float *const *biases, float *const *outs,
                     const float *SITS_RESTRICT residual, int tokens,
                     StepRows stepRows, const float *SITS_RESTRICT normWeight) {
  typedef typename Cfg::Weight W;
  typedef typename W::Storage Storage;
  constexpr bool kGated = Cfg::kEpilogue == kGlu;
  constexpr int kMats = kGated ? 2 : 1;
  constexpr int M = Cfg::kTilesPerBlock;
  constexpr int kPieces = tcPieces(kMats, M, U);
  constexpr int kChunks = (Cfg::kK + kTcChunk - 1) / kTcChunk;
  static_assert(Cfg::kK % 8 == 0, "rows must be 16-byte aligned");
  static_assert(W::kBytes == 2, "tensor cores take f16 or bf16 weights");
  static_assert(kStages >= 2, "a ring of at least two steps");
  static_assert(!Cfg::kHalfX || !Cfg::kNorm,
                "a fused norm reads its input as f32 rows");
  // x: rows of f32, or with kHalfX of the B operands themselves (16-bit, in
  // input order: lane t's 8 inputs of a chunk are its 4 B registers).
  typedef typename InputElement<Cfg::kHalfX>::Type XElem;
  const XElem *x = static_cast<const XElem *>(xInput);
  constexpr int kXLoads = Cfg::kHalfX ? 1 : 2; ///< 16-byte loads a chunk

  SITS_DYNAMIC_SHARED(uint4, shared);
  uint4 *ring = shared; // [kStages][kPieces][kTcThreads]
  // Per warp, per matrix and tile: the 32 lanes' four accumulators.
  float4 *partial =
      reinterpret_cast<float4 *>(shared + kStages * kPieces * kTcThreads);

  const int tid = threadIdx.x;
  const int lane = tid % kWarpSize, warp = tid / kWarpSize;
  const int g = lane / 4, t = lane % 4;
  // Steps of this warp: its chunks, kUnroll at a time.
  const int steps =
      warp < kChunks ? (kChunks - warp + kTcWarps * U - 1) / (kTcWarps * U) : 0;

  const int items = tcBlockItems<Cfg>();
  auto firstTile = [](int item) { return tcItemFirstTile<Cfg>(item); };

  // This lane's rows g and g + 8 of every tile of item `rowItem`, at its k
  // offset 8t (null past the end of a segment or of the tile space).
  const Storage *rowPtr[kMats][M][2];
  int rowItem = -1;
  auto setRows = [&](int item) {
    rowItem = item;
    tcRowPointers<Cfg>(firstTile(item), weights, Cfg::kK, 8 * t, rowPtr);
  };
  // Starts the copies of the block's step `index` (item index / steps, step
  // index % steps) into its ring slot (an empty group past the last step,
  // so that every wait counts the same groups).
  auto issue = [&](int index) {
    if (index < items * steps) {
      const int item = index / steps, step = index - item * steps;
      if (item != rowItem)
        setRows(item);
      uint4 *slot = ring + (index % kStages) * kPieces * kTcThreads + tid;
      const int c0 = warp + step * kTcWarps * U;
      for (int u = 0; u < U; ++u) {
        const int c = c0 + u * kTcWarps;
        const bool inside = c < kChunks && c * kTcChunk + 8 * t < Cfg::kK;
        const long offset = static_cast<long>(c) * kTcChunk;
        for (int mat = 0; mat < kMats; ++mat)
          for (int m = 0; m < M; ++m)
            for (int h = 0; h < 2; ++h) {
              const Storage *row = rowPtr[mat][m][h];
              const bool valid = inside && row;
              const int piece = ((u * kMats + mat) * M + m) * 2 + h;
              copyAsync16<false>(slot + piece * kTcThreads,
                                 valid ? row + offset : weights[0], valid);
            }
      }
    }
    copyAsyncCommit();
  };

  // The weights are constants: the first steps' copies start before the
  // wait for the kernels that produce x (common.cuh).
  for (int s = 0; s + 1 < kStages; ++s)
    issue(s);
  waitForPrecedingKernels();

  // The input row of `token` (null: a padding row or past the tokens).
  auto inputRow = [&](int token) -> const XElem * {
    if (token >= tokens)
      return nullptr;
    long source = token;
    if constexpr (Cfg::kGatherLast) {
      const int length = stepRows.gatherLengths()[token];
      if (length <= 0)
        return nullptr;
      source = stepRows.first(token) + length - 1;
    }
    return x + source * Cfg::kK;
  };
  static_assert(G >= 1, "at least one group of 8 tokens a pass");
  __shared__ float normRms[G][kTcWarps];

  for (int t0 = 0; t0 < tokens; t0 += 8 * G) {
    // Groups of this pass that hold tokens (the same in the whole block).
    const int groups = min(G, (tokens - t0 + 7) / 8);
    auto active = [&](int group) { return group == 0 || group < groups; };
    // Token g of each group: its input row at this lane's k offset (null: a
    // zero column), and with kNorm its rms.
    const XElem *xRow[G];
    float rms[G];
    for (int group = 0; group < G; ++group) {
      xRow[group] = inputRow(t0 + 8 * group + g);
      if (xRow[group])
        xRow[group] += 8 * t;
      rms[group] = 1.0f;
    }
    if constexpr (Cfg::kNorm) {
      static_assert(kTcWarps == 8, "a warp per token of the group");
      for (int group = 0; group < G; ++group) {
        if (!active(group))
          break;
        const float *row = inputRow(t0 + 8 * group + warp);
        float squares = 0.0f;
        if (row)
          for (int k = lane * 4; k < Cfg::kK; k += kWarpSize * 4) {
            float v[4];
            loadFloats<4>(row + k, v);
            squares += v[0] * v[0] + v[1] * v[1] + v[2] * v[2] + v[3] * v[3];
          }
        squares = warpSum(squares);
        if (lane == 0)
          normRms[group][warp] =
              sqrtf(squares / static_cast<float>(Cfg::kK) + Cfg::kNormEpsilon);
      }
      syncTile();
      for (int group = 0; group < G; ++group)
        if (active(group))
          rms[group] = normRms[group][g];
    }

    if (t0 > 0)
      for (int s = 0; s + 1 < kStages; ++s)
        issue(s);
    for (int item = 0; item < items; ++item) {
      float acc[G][kMats][M][4] = {}; // the item's f32 accumulators
      float residualValues[G][kTcItemElements<M>] = {};
      for (int group = 0; group < G; ++group)
        if (active(group))
          tcLoadResidual<Cfg, M>(firstTile(item), t0 + 8 * group, residual,
                                 tokens, residualValues[group]);

      for (int step = 0; step < steps; ++step) {
        const int index = item * steps + step;
        issue(index + kStages - 1);
        uint4 xv[G][U][kXLoads];
        // With kNorm, the norm weights of the same k (loaded with x, before
        // the wait, so that no load is left in the loop of mmas).
        uint4 gamma[Cfg::kNorm ? U : 1][2];
        const int c0 = warp + step * kTcWarps * U;
        for (int u = 0; u < U; ++u) {
          const int c = c0 + u * kTcWarps;
          const bool inRow = c < kChunks && c * kTcChunk + 8 * t < Cfg::kK;
          for (int group = 0; group < G; ++group) {
            const bool hasX = xRow[group] && inRow;
            const XElem *p = xRow[group] + static_cast<long>(c) * kTcChunk;
            for (int v = 0; v < kXLoads; ++v)
              xv[group][u][v] = load16If<false>(hasX, p + 4 * v);
          }
          if constexpr (Cfg::kNorm) {
            const float *w =
                normWeight + static_cast<long>(c) * kTcChunk + 8 * t;
            // Group 0 holds this lane's token if any group does.
            const bool hasX = xRow[0] && inRow;
            gamma[u][0] = load16If<false>(hasX, w);
            gamma[u][1] = load16If<false>(hasX, w + 4);
          }
        }
        copyAsyncWait<kStages - 1>(); // this step's copies have landed
        const uint4 *slot =
            ring + (index % kStages) * kPieces * kTcThreads + tid;
        for (int u = 0; u < U; ++u) {
          u32 b[G][4]; // each group's x as B operands
          for (int group = 0; group < G; ++group) {
            if constexpr (Cfg::kHalfX) {
              const uint4 &v = xv[group][u][0];
              b[group][0] = v.x;
              b[group][1] = v.y;
              b[group][2] = v.z;
              b[group][3] = v.w;
            } else {
              if constexpr (Cfg::kNorm)
                normalize8(xv[group][u], gamma[u], rms[group],
                           Cfg::kNormWeightOffset);
              const uint4(&v)[2] = xv[group][u];
              b[group][0] =
                  packPair<W>(__uint_as_float(v[0].x), __uint_as_float(v[0].y));
              b[group][1] =
                  packPair<W>(__uint_as_float(v[0].z), __uint_as_float(v[0].w));
              b[group][2] =
                  packPair<W>(__uint_as_float(v[1].x), __uint_as_float(v[1].y));
              b[group][3] =
                  packPair<W>(__uint_as_float(v[1].z), __uint_as_float(v[1].w));
            }
          }
          for (int mat = 0; mat < kMats; ++mat)
            for (int m = 0; m < M; ++m) {
              const int piece = ((u * kMats + mat) * M + m) * 2;
              const uint4 lo = slot[piece * kTcThreads];
              const uint4 hi = slot[(piece + 1) * kTcThreads];
              // Elements 0-3 of the 16 bytes are one mma's k, 4-7 the next's.
              for (int group = 0; group < G; ++group) {
                if (!active(group))
                  break;
                mma16816<W>(acc[group][mat][m], lo.x, hi.x, lo.y, hi.y,
                            b[group][0], b[group][1]);
                mma16816<W>(acc[group][mat][m], lo.z, hi.z, lo.w, hi.w,
                            b[group][2], b[group][3]);
              }
            }
        }
      }

      // The next item's first copies are in flight meanwhile.
      for (int group = 0; group < G; ++group)
        if (active(group))
          tcFinishItem<Cfg>(acc[group], partial, firstTile(item),
                            t0 + 8 * group, biases, outs, residualValues[group],
                            tokens, stepRows.gatherLengths());
    }
  }
  copyAsyncWait<0>(); // the prologue's copies, when there were no tokens
}

/// Config: Weight (F16/BF16), kK (a multiple of 8), kSegments, rows(s),
/// hasBias(s), tiles(s) (ceil(rows(s) / 16)), kTotalTiles (all segments',
/// or the gate's with kGlu), kEpilogue, kActivation, kTilesPerBlock,
/// kUnroll and kStages (the ring of one group of 8 tokens a pass),
/// kGatherLast, kOutOperandBits (tcFinishItem), kHalfX (x is rows of kK
/// 16-bit operands in input order, written by rms_norm or a gate/up GEMV
/// with operand bits 16: one 16-byte load per chunk and token, no
/// conversion; not with kNorm), kTokenGroups (with more
/// than one, kGroupsUnroll and kGroupsStages: their ring), kNorm (and with
/// it kNormEpsilon, kNormWeightOffset). Arguments as for gemv, and the
/// RMSNorm weight [kK] with kNorm. A step of at most 8 tokens takes the
/// one-group passes (a batch-1 step runs as without the groups); more
/// tokens take kTokenGroups groups a pass. Dynamic shared memory: the
/// larger of the two rings, with the partial sums.
template <class Cfg>
__device__ void
gemvTensorCore(const void *SITS_RESTRICT x,
               const typename Cfg::Weight::Storage *const *weights,
               const float *const *biases, float *const *outs,
               const float *SITS_RESTRICT residual, int tokens,
               StepRows stepRows,
               const float *SITS_RESTRICT normWeight = nullptr) {
  if constexpr (Cfg::kTokenGroups > 1) {
    if (tokens > 8) {
      gemvTensorCorePasses<Cfg, Cfg::kTokenGroups, Cfg::kGroupsUnroll,
                           Cfg::kGroupsStages>(
          x, weights, biases, outs, residual, tokens, stepRows, normWeight);
      return;
    }
  }
  gemvTensorCorePasses<Cfg, 1, Cfg::kUnroll, Cfg::kStages>(
      x, weights, biases, outs, residual, tokens, stepRows, normWeight);
}

} // namespace sits

#endif // SITS_KERNELS_GEMV_CUH
