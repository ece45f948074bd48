//===- gemv_quant.cuh - Linear layers over int8/int4 weights --------------===//
//
// Weights quantized by --sits-insert-qdq: `data` [rows, kRowBytes] holds
// int8 values, or int4 values two per byte (element 2k in the low nibble of
// byte k), each row padded with zeros to a multiple of 16 bytes (with
// kInterleaved, rows of whole 64-byte chunks, each chunk's bytes in the
// order of levelInput); `scales`
// [rows, kGroups] holds one f16 scale per group of kGroup consecutive
// inputs. The weight is `f32(scale) * f32(q)` (sits.dequantize). The kernels
// read the quantized bytes with 16-byte loads (16 int8 or 32 int4 values,
// always inside one group: kGroup is a multiple of 16 or 32) and multiply
// each group's partial dot product by its scale once:
//   out[t, n] = sum_g s[n, g] * (sum_{k in g} q[n, k] * x[t, k]).
//
// * gemvQuantTensorCore (decode, the LM head; f16/bf16 engines on sm_80+,
//   kGroup a multiple of the 4 lanes' chunk: 64 for int8, 128 for int4):
//   the tensor-core GEMV of gemv.cuh with quantized A operands. The levels
//   are exact in f16 and bf16, so the mma multiplies q exactly by x rounded
//   to the engine's type; each chunk's f32 sums are scaled in registers.
// * gemvQuant (everything else): a warp per row, as gemv.cuh's gemv.
// * dequantizeWeights (prefill): the weight in the engine's type into a
//   workspace value that the tiled GEMM (gemm.cuh) then reads like any
//   weight.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_KERNELS_GEMV_QUANT_CUH
#define SITS_KERNELS_GEMV_QUANT_CUH

#include "sits/common.cuh"
#include "sits/gemv.cuh"

namespace sits {

typedef unsigned char u8;

//===----------------------------------------------------------------------===//
// Unpacking levels
//===----------------------------------------------------------------------===//

/// Helpers of the quantized-weight kernels (a namespace of their own: other
/// kernel families may define similar ones).
namespace qweights {

/// The exact f32 of a biased level `u` (0..255): u - bias.
__device__ __forceinline__ float biasedToFloat(u32 u, float bias) {
  // 2^23 + u is exact; so is the difference.
  return __uint_as_float(0x4b000000u | u) - (8388608.0f + bias);
}

/// The levels of one 32-bit word as mma operand pairs of type T (F16/BF16).
/// int8 (4 levels v0..v3): pairs[0] = (v0, v1), pairs[1] = (v2, v3).
/// int4 (8 levels v0..v7): pairs[j] = (v_j, v_{j+4}) for j = 0..3.
/// Levels are small integers, exact in both types.
template <class T, int kBits>
__device__ __forceinline__ void levelPairs(u32 word, u32 *pairs) {
  if constexpr (!T::kIsBf16) {
    levelPairsF16<kBits>(word, pairs);
  } else if constexpr (kBits == 8) {
    const u32 biased = word ^ 0x80808080u; // level + 128, unsigned
    for (int j = 0; j < 2; ++j)
      pairs[j] =
          packPair<T>(biasedToFloat((biased >> (16 * j)) & 0xffu, 128.0f),
                      biasedToFloat((biased >> (16 * j + 8)) & 0xffu, 128.0f));
  } else {
    const u32 biased = word ^ 0x88888888u; // level + 8, unsigned nibbles
    for (int j = 0; j < 4; ++j)
      pairs[j] =
          packPair<T>(biasedToFloat((biased >> (4 * j)) & 0xfu, 8.0f),
                      biasedToFloat((biased >> (4 * j + 16)) & 0xfu, 8.0f));
  }
}

/// The levels of a 16-byte piece as f32 (16 int8 or 32 int4, in order).
template <int kBits>
__device__ __forceinline__ void levelsToFloat(const uint4 &raw, float *out) {
  const u32 words[4] = {raw.x, raw.y, raw.z, raw.w};
  for (int w = 0; w < 4; ++w) {
    if constexpr (kBits == 8) {
      for (int e = 0; e < 4; ++e)
        out[4 * w + e] =
            static_cast<float>(static_cast<signed char>(words[w] >> (8 * e)));
    } else {
      for (int e = 0; e < 8; ++e) {
        int nibble = static_cast<int>((words[w] >> (4 * e)) & 0xfu);
        out[8 * w + e] = static_cast<float>(nibble >= 8 ? nibble - 16 : nibble);
      }
    }
  }
}

/// kBytes (16, 8, 4 or 2) of scales at `src` (aligned to kBytes), in the
/// first bytes of a uint4.
template <int kBytes>
__device__ __forceinline__ uint4 loadPiece(const u16 *src) {
  const u32 *words = reinterpret_cast<const u32 *>(src);
  if constexpr (kBytes == 16)
    return *reinterpret_cast<const uint4 *>(src);
  else if constexpr (kBytes == 8)
    return make_uint4(words[0], words[1], 0u, 0u);
  else if constexpr (kBytes == 4)
    return make_uint4(words[0], 0u, 0u, 0u);
  else
    return make_uint4(src[0], 0u, 0u, 0u);
}

/// The first kBytes of `piece` to shared memory at `dst`.
template <int kBytes>
__device__ __forceinline__ void storePiece(void *dst, const uint4 &piece) {
  if constexpr (kBytes == 16) {
    *reinterpret_cast<uint4 *>(dst) = piece;
  } else {
    u32 *words = reinterpret_cast<u32 *>(dst);
    if constexpr (kBytes >= 4)
      words[0] = piece.x;
    if constexpr (kBytes == 8)
      words[1] = piece.y;
    if constexpr (kBytes == 2)
      *reinterpret_cast<u16 *>(dst) = static_cast<u16>(piece.x);
  }
}

/// Whether every segment (the gate and up with kGlu) has whole 16-row tiles,
/// so that no row of a tile lies past its segment.
template <class Cfg> __host__ __device__ constexpr bool quantAllRowsWhole() {
  for (int s = 0; s < Cfg::kSegments; ++s)
    if (Cfg::rows(s) % 16 != 0)
      return false;
  return true;
}

/// Levels per 16-byte piece.
template <int kBits> __host__ __device__ constexpr int quantPieceValues() {
  return kBits == 8 ? 16 : 32;
}

/// The input, counted from its chunk's first, of level `e` of piece `t`
/// (0..3) of a chunk of four pieces. In input order piece t holds inputs
/// V t .. V t + V - 1. Interleaved (sitsc's layout where rows are whole
/// chunks, backends/cuda/QuantLayout.h), its word w holds inputs
/// 4 t + 16 w' + j for the words' four-level runs w' (int8: w' = w; int4:
/// w' = 2 w and 2 w + 1), so that the four pieces' runs of one w' are 16
/// consecutive inputs, read by one load of each lane.
template <int kBits, bool kInterleaved>
__host__ __device__ constexpr int levelInput(int t, int e) {
  return kInterleaved ? 4 * t + 4 * (e & ~3) + (e & 3)
                      : quantPieceValues<kBits>() * t + e;
}

} // namespace qweights

//===----------------------------------------------------------------------===//
// CUDA-core GEMV
//===----------------------------------------------------------------------===//

/// Adds `sum_g s_g * (q . x)` over this lane's pieces of a quantized row for
/// each token of a tile.
template <class Cfg>
__device__ __forceinline__ void
gemvQuantAccumulate(const u8 *SITS_RESTRICT row,
                    const u16 *SITS_RESTRICT scales, const float *const *xRows,
                    int count, float *acc) {
  constexpr int V = qweights::quantPieceValues<Cfg::kBits>();
  constexpr int kPieces = Cfg::kRowBytes / 16;
  const int lane = threadIdx.x % kWarpSize;
  for (int p = lane; p < kPieces; p += kWarpSize) {
    const int k0 = p * V; // the piece's first input in input order
    // Where the piece's levels' inputs start (interleaved: runs of four
    // levels 4 inputs apart; whole chunks only).
    const int x0 =
        p / 4 * 4 * V +
        qweights::levelInput<Cfg::kBits, Cfg::kInterleaved>(p % 4, 0);
    constexpr int kRunStride = Cfg::kInterleaved ? 4 : 1;
    float w[V];
    qweights::levelsToFloat<Cfg::kBits>(load16If<true>(true, row + 16 * p), w);
    const float scale = halfToFloat(__ldg(scales + k0 / Cfg::kGroup));
    for (int tt = 0; tt < Cfg::kTokenTile; ++tt) {
      if (tt >= count)
        break;
      float sum = 0.0f;
      if (Cfg::kInterleaved || (Cfg::kK % 4 == 0 && k0 + V <= Cfg::kK)) {
        for (int e = 0; e < V; e += 4) {
          float x[4];
          loadFloats<4>(xRows[tt] + x0 + kRunStride * e, x);
          for (int i = 0; i < 4; ++i)
            sum += w[e + i] * x[i];
        }
      } else {
        for (int e = 0; e < V; ++e)
          if (k0 + e < Cfg::kK)
            sum += w[e] * xRows[tt][k0 + e];
      }
      acc[tt] += scale * sum;
    }
  }
}

/// Config: Weight (the engine's type; unused here), kBits, kGroup, kGroups,
/// kRowBytes, kInterleaved, kK, kSegments, rows(s), hasBias(s), kTotalRows,
/// kEpilogue, kActivation, kWarps, kTokenTile, kGatherLast. As gemv, with each
/// weight given as its data and scales. Launch: grid ceil(kTotalRows / kWarps),
/// block kWarps * 32.
template <class Cfg>
__device__ void gemvQuant(const float *SITS_RESTRICT x, const u8 *const *data,
                          const u16 *const *scales, const float *const *biases,
                          float *const *outs,
                          const float *SITS_RESTRICT residual, int tokens,
                          StepRows stepRows) {
  gemvWarpRows<Cfg>(x, biases, outs, residual, tokens, stepRows,
                    [&](int segment, int row, const float *const *xRows,
                        int count, float *acc) {
                      gemvQuantAccumulate<Cfg>(
                          select<Cfg::kSegments>(data, segment) +
                              static_cast<long>(row) * Cfg::kRowBytes,
                          select<Cfg::kSegments>(scales, segment) +
                              static_cast<long>(row) * Cfg::kGroups,
                          xRows, count, acc);
                    });
}

//===----------------------------------------------------------------------===//
// Tensor-core GEMV
//===----------------------------------------------------------------------===//
//
// The layout of gemvTensorCore (gemv.cuh) with 16-byte pieces of quantized
// rows: lane (g, t) copies 16 bytes of rows g and g + 8 of each tile at
// piece 4c + t of chunk c (V = 16 int8 or 32 int4 levels each), by cp.async
// into its own slots of the ring. One chunk (4V inputs) lies in one group.
// For each 32-bit word of a piece, levelPairs gives the A registers, and the
// lane packs token g's x at the same inputs into B (in the same order), so
// a piece is V / 4 mmas into a zeroed f32 tile that is then scaled by rows
// g's and g + 8's scales of the chunk's group and added to the accumulators.
// The scales of an item's rows are loaded into registers when the item
// before it starts and stored into the other of two tables in shared memory
// when it ends, so that no item waits for a load of its scales.
// Persistent, as gemvTensorCore.

/// Bytes of one table of an item's scales (f16), whole 16-byte pieces.
__host__ __device__ constexpr int
gemvQuantScaleTableBytes(int mats, int tilesPerBlock, int groups) {
  return (2 * mats * tilesPerBlock * 16 * groups + 15) / 16 * 16;
}

/// Dynamic shared memory of gemvQuantTensorCore (also in Launches): the
/// ring, the partial sums and two scale tables.
__host__ __device__ constexpr int
gemvQuantTensorCoreSharedBytes(int mats, int tilesPerBlock, int unroll,
                               int stages, int groups) {
  return gemvTensorCoreSharedBytes(mats, tilesPerBlock, unroll, stages) +
         2 * gemvQuantScaleTableBytes(mats, tilesPerBlock, groups);
}

/// Config: Weight (F16/BF16: the mma type), kBits, kGroup (a multiple of
/// 4 V), kGroups, kRowBytes, kInterleaved, kK (a multiple of 8), kSegments,
/// rows(s), hasBias(s), tiles(s), kTotalTiles, kEpilogue, kActivation,
/// kTilesPerBlock, kUnroll, kStages, kGatherLast, kHalfX, kOutOperandBits
/// (tcFinishItem). Arguments as gemvQuant, but with kHalfX (interleaved
/// rows only) `x` is rows of kK halves that already hold the B operands
/// (common.cuh's operandHalfIndex, written by rms_norm or a gate/up GEMV),
/// so a chunk's x is two or four 16-byte loads a lane and no conversion.
/// Launch: any grid (persistent: each block loops over its items of
/// kTilesPerBlock tiles; at most two blocks per SM are resident), block
/// 256, dynamic shared memory gemvQuantTensorCoreSharedBytes(...).
template <class Cfg>
__device__ void
gemvQuantTensorCore(const void *SITS_RESTRICT xInput, const u8 *const *data,
                    const u16 *const *scales, const float *const *biases,
                    float *const *outs, const float *SITS_RESTRICT residual,
                    int tokens, StepRows stepRows) {
  typedef typename Cfg::Weight W;
  constexpr bool kGated = Cfg::kEpilogue == kGlu;
  constexpr int kMats = kGated ? 2 : 1;
  constexpr int M = Cfg::kTilesPerBlock;
  constexpr int U = Cfg::kUnroll;
  constexpr int kStages = Cfg::kStages;
  constexpr int kPieces = tcPieces(kMats, M, U);
  constexpr int V = qweights::quantPieceValues<Cfg::kBits>();
  constexpr int kChunk = 4 * V; ///< inputs per chunk (4 lanes' pieces)
  constexpr int kChunks = (Cfg::kK + kChunk - 1) / kChunk;
  // Every chunk whole (K a multiple of 4 V, as at every 8B shape): no lane's
  // inputs run past K.
  constexpr bool kWholeChunks = Cfg::kK % kChunk == 0;
  static_assert(!Cfg::kInterleaved || kWholeChunks,
                "interleaved rows are whole chunks");
  static_assert(!Cfg::kHalfX || Cfg::kInterleaved,
                "operand-order x is defined for interleaved rows");
  constexpr int kMmas = V / 4; ///< per piece
  // Halves of a lane's B registers per chunk (kHalfX).
  constexpr int kLaneHalves = 4 * kMmas;
  static_assert(Cfg::kK % 8 == 0, "input rows must be 16-byte aligned");
  static_assert(W::kBytes == 2, "tensor cores take f16 or bf16 operands");
  static_assert(Cfg::kGroup % kChunk == 0, "a chunk lies in one group");
  static_assert(Cfg::kRowBytes % 16 == 0, "rows are whole 16-byte pieces");
  static_assert(kStages >= 2, "a ring of at least two steps");

  SITS_DYNAMIC_SHARED(uint4, shared);
  uint4 *ring = shared; // [kStages][kPieces][kTcThreads]
  float4 *partial =
      reinterpret_cast<float4 *>(shared + kStages * kPieces * kTcThreads);
  // Two tables [mat][m][16 rows][kGroups] of f16 scales: item i's in table
  // i % 2.
  constexpr int kTableBytes = gemvQuantScaleTableBytes(kMats, M, Cfg::kGroups);
  unsigned char *scaleTables = reinterpret_cast<unsigned char *>(
      partial + kTcWarps * kMats * M * kWarpSize);

  const int tid = threadIdx.x;
  const int lane = tid % kWarpSize, warp = tid / kWarpSize;
  const int g = lane / 4, t = lane % 4;
  const int steps =
      warp < kChunks ? (kChunks - warp + kTcWarps * U - 1) / (kTcWarps * U) : 0;

  // The block's items, as gemvTensorCore's.
  const int items = tcBlockItems<Cfg>();
  auto firstTile = [](int item) { return tcItemFirstTile<Cfg>(item); };

  // An item's scales, in pieces of 16, 8, 4 or 2 bytes (as a row's length
  // allows; kPieces per row): piece e's source row, or false outside the
  // rows (such rows are never written, so their scales are never read).
  constexpr int kRowBytes = 2 * Cfg::kGroups;
  constexpr int kScalePiece = kRowBytes % 16 == 0  ? 16
                              : kRowBytes % 8 == 0 ? 8
                              : kRowBytes % 4 == 0 ? 4
                                                   : 2;
  constexpr int kRowPieces = kRowBytes / kScalePiece;
  constexpr int kTablePieces = kMats * M * 16 * kRowPieces;
  constexpr int kScalesPerThread = (kTablePieces + kTcThreads - 1) / kTcThreads;
  auto scalePiece = [&](int item, int e, const u16 **src) {
    const int piece = e % kRowPieces, r = (e / kRowPieces) % 16;
    const int m = (e / (kRowPieces * 16)) % M, mat = e / (kRowPieces * 16 * M);
    const int tile = firstTile(item) + m;
    int segment = 0, firstRow = 0;
    tcTileRows<Cfg>(tile, &segment, &firstRow);
    const int s = kGated ? mat : segment;
    const int row = firstRow + r;
    *src = select<Cfg::kSegments>(scales, s) +
           static_cast<long>(row) * Cfg::kGroups + piece * (kScalePiece / 2);
    return e < kTablePieces && tile < Cfg::kTotalTiles && row < Cfg::rows(s);
  };
  // This thread's pieces of item `item`'s scales, into registers.
  auto fetchScales = [&](int item, uint4(&pieces)[kScalesPerThread]) {
    for (int j = 0; j < kScalesPerThread; ++j) {
      const u16 *src;
      if (scalePiece(item, tid + j * kTcThreads, &src))
        pieces[j] = qweights::loadPiece<kScalePiece>(src);
    }
  };
  // ... and from there into the item's table (visible after a barrier).
  auto storeScales = [&](int item, const uint4(&pieces)[kScalesPerThread]) {
    unsigned char *table = scaleTables + (item % 2) * kTableBytes;
    for (int j = 0; j < kScalesPerThread; ++j) {
      const int e = tid + j * kTcThreads;
      const u16 *src;
      if (scalePiece(item, e, &src))
        qweights::storePiece<kScalePiece>(table + e * kScalePiece, pieces[j]);
    }
  };

  // This lane's rows g and g + 8 of every tile of item `rowItem`, at its
  // piece t. Rows past a segment or the tile space copy row 0 of the first
  // matrix instead: their sums are never written (tcFinishItem), and every
  // copy is then its row plus the chunk's offset, with no test.
  constexpr bool kRowsAlwaysValid =
      Cfg::kTotalTiles % M == 0 && qweights::quantAllRowsWhole<Cfg>();
  const u8 *rowPtr[kMats][M][2];
  int rowItem = -1;
  // The block's next step to copy (its item, its step in the item, its
  // ring slot), counted rather than divided out of a step index: the
  // copies are issued in order, from step 0 for each tile of tokens.
  int issueItem = 0, issueStep = 0, issueSlot = 0;
  // Starts the copies of the next step into its ring slot (an empty group
  // past the last step).
  auto issue = [&]() {
    if (issueItem < items && steps > 0) {
      const int item = issueItem, step = issueStep;
      if (item != rowItem) {
        rowItem = item;
        tcRowPointers<Cfg>(firstTile(item), data, Cfg::kRowBytes, 16 * t,
                           rowPtr);
        if constexpr (!kRowsAlwaysValid)
          for (int mat = 0; mat < kMats; ++mat)
            for (int m = 0; m < M; ++m)
              for (int h = 0; h < 2; ++h)
                if (!rowPtr[mat][m][h])
                  rowPtr[mat][m][h] = data[0] + 16 * t;
      }
      const SharedAddress slot =
          sharedAddressOf(ring + issueSlot * kPieces * kTcThreads + tid);
      const int c0 = warp + step * kTcWarps * U;
      for (int u = 0; u < U; ++u) {
        const int c = c0 + u * kTcWarps;
        const bool inside =
            c < kChunks && (kWholeChunks || c * kChunk + V * t < Cfg::kK);
        // 4 pieces per chunk; chunks past the row (a warp's last step)
        // copy nothing from the row's first chunk.
        const unsigned offset = (inside ? c : 0) * 64u;
        for (int mat = 0; mat < kMats; ++mat)
          for (int m = 0; m < M; ++m) {
            const int piece = ((u * kMats + mat) * M + m) * 2;
            constexpr int kBytes = 16 * kTcThreads; // a piece of all lanes
            const u8 *row = rowPtr[mat][m][0] + offset;
            // Row g + 8 at a constant distance when every row is valid.
            const u8 *row8 = kRowsAlwaysValid ? row + 8 * Cfg::kRowBytes
                                              : rowPtr[mat][m][1] + offset;
            copyAsync16At(slot, piece * kBytes, row, inside);
            copyAsync16At(slot, (piece + 1) * kBytes, row8, inside);
          }
      }
      if (++issueStep == steps) {
        issueStep = 0;
        ++issueItem;
      }
      issueSlot = issueSlot + 1 == kStages ? 0 : issueSlot + 1;
    }
    copyAsyncCommit();
  };

  // Weights and scales are constants: the first item's scales and the
  // first steps' copies come before the wait for the kernels that produce x
  // (common.cuh).
  uint4 scalePieces[kScalesPerThread];
  if (items > 0) {
    fetchScales(0, scalePieces);
    storeScales(0, scalePieces);
  }
  for (int s = 0; s + 1 < kStages; ++s)
    issue();
  waitForPrecedingKernels();
  syncTile();

  for (int t0 = 0; t0 < tokens; t0 += 8) {
    // Token g's x. Lanes without a token load nothing (at batch 1, a load
    // then costs L1 one pass instead of four) and leave their B values
    // undefined: only their own mma column sees them, and tcFinishItem
    // never writes it. A finished sequence of the LM head (no new token)
    // reads its first row, whose column is not written either: testing its
    // length in the predicate made ptxas branch around every load.
    long source = 0;
    const bool live = t0 + g < tokens;
    if (live) {
      source = t0 + g;
      if constexpr (Cfg::kGatherLast) {
        const int length = stepRows.gatherLengths()[t0 + g];
        source = length > 0 ? stepRows.first(t0 + g) + length - 1 : 0;
      }
    }
    const float *xRow =
        static_cast<const float *>(xInput) + source * Cfg::kK +
        qweights::levelInput<Cfg::kBits, Cfg::kInterleaved>(t, 0);
    const u16 *xHalfRow =
        static_cast<const u16 *>(xInput) + source * Cfg::kK + t * kLaneHalves;

    int readSlot = 0; // the ring slot of the step read next
    if (t0 > 0) {
      issueItem = issueStep = issueSlot = 0;
      for (int s = 0; s + 1 < kStages; ++s)
        issue();
      if (items > 1) { // table 0 holds a later item's scales
        fetchScales(0, scalePieces);
        storeScales(0, scalePieces);
        syncTile();
      }
    }
    for (int item = 0; item < items; ++item) {
      float acc[kMats][M][4] = {}; // the item's f32 accumulators
      float residualValues[kTcItemElements<M>] = {};
      tcLoadResidual<Cfg, M>(firstTile(item), t0, residual, tokens,
                             residualValues);
      if (item + 1 < items)
        fetchScales(item + 1, scalePieces); // in flight during the item
      const u16 *table =
          reinterpret_cast<const u16 *>(scaleTables + (item % 2) * kTableBytes);

      for (int step = 0; step < steps; ++step) {
        issue();                      // step index + kStages - 1
        copyAsyncWait<kStages - 1>(); // this step's copies have landed
        const uint4 *slot = ring + readSlot * kPieces * kTcThreads + tid;
        readSlot = readSlot + 1 == kStages ? 0 : readSlot + 1;
        const int c0 = warp + step * kTcWarps * U;
        for (int u = 0; u < U; ++u) {
          const int c = c0 + u * kTcWarps;
          if (c >= kChunks)
            break; // the same for the whole warp
          // Token g's x at this lane's V inputs, as B pairs in the order of
          // levelPairs.
          u32 b[kMmas][2];
          if constexpr (Cfg::kHalfX) {
            // Lane t's registers of chunk c, in order (operandHalfIndex).
            const u16 *p = xHalfRow + static_cast<long>(c) * 4 * kLaneHalves;
            for (int q = 0; q < kMmas / 2; ++q) {
              const uint4 v = load16IfUsed(live, p + 8 * q);
              b[2 * q][0] = v.x;
              b[2 * q][1] = v.y;
              b[2 * q + 1][0] = v.z;
              b[2 * q + 1][1] = v.w;
            }
          }
          const int k0 = c * kChunk + V * t;
          const float *p = xRow + static_cast<long>(c) * kChunk;
          // Interleaved, the lane's runs of four levels are 4 runs apart.
          constexpr int kRunStride = Cfg::kInterleaved ? 4 : 1;
          for (int w = 0; w < (Cfg::kHalfX ? 0 : 4); ++w) {
            constexpr int kPerWord = V / 4; // levels per 32-bit word
            float xs[kPerWord];
            for (int q = 0; q < kPerWord; q += 4) {
              const int e = w * kPerWord + q; // the run's first level
              const float *run = p + kRunStride * e;
              // Past K (a short last chunk, input order), x must be zero:
              // the padded levels there are zeros, but x may be anything.
              const uint4 v =
                  kWholeChunks ? load16IfUsed(live, run)
                               : load16If<false>(live && k0 + e < Cfg::kK, run);
              xs[q] = __uint_as_float(v.x);
              xs[q + 1] = __uint_as_float(v.y);
              xs[q + 2] = __uint_as_float(v.z);
              xs[q + 3] = __uint_as_float(v.w);
            }
            if constexpr (Cfg::kBits == 8) {
              b[w][0] = packPairRn<W>(xs[0], xs[1]);
              b[w][1] = packPairRn<W>(xs[2], xs[3]);
            } else {
              b[2 * w][0] = packPairRn<W>(xs[0], xs[4]);
              b[2 * w][1] = packPairRn<W>(xs[1], xs[5]);
              b[2 * w + 1][0] = packPairRn<W>(xs[2], xs[6]);
              b[2 * w + 1][1] = packPairRn<W>(xs[3], xs[7]);
            }
          }
          const int group = c * kChunk / Cfg::kGroup;
          for (int mat = 0; mat < kMats; ++mat)
            for (int m = 0; m < M; ++m) {
              const int piece = ((u * kMats + mat) * M + m) * 2;
              const uint4 lo = slot[piece * kTcThreads];
              const uint4 hi = slot[(piece + 1) * kTcThreads];
              const u32 loWords[4] = {lo.x, lo.y, lo.z, lo.w};
              const u32 hiWords[4] = {hi.x, hi.y, hi.z, hi.w};
              float tile[4] = {0.0f, 0.0f, 0.0f, 0.0f};
              for (int w = 0; w < 4; ++w) {
                u32 a[4], a8[4]; // rows g and g + 8
                qweights::levelPairs<W, Cfg::kBits>(loWords[w], a);
                qweights::levelPairs<W, Cfg::kBits>(hiWords[w], a8);
                if constexpr (Cfg::kBits == 8) {
                  mma16816<W>(tile, a[0], a8[0], a[1], a8[1], b[w][0], b[w][1]);
                } else {
                  mma16816<W>(tile, a[0], a8[0], a[1], a8[1], b[2 * w][0],
                              b[2 * w][1]);
                  mma16816<W>(tile, a[2], a8[2], a[3], a8[3], b[2 * w + 1][0],
                              b[2 * w + 1][1]);
                }
              }
              const u16 *rowScales =
                  table + ((mat * M + m) * 16 + g) * Cfg::kGroups + group;
              const float s0 = halfToFloat(rowScales[0]);
              const float s8 = halfToFloat(rowScales[8 * Cfg::kGroups]);
              acc[mat][m][0] += s0 * tile[0];
              acc[mat][m][1] += s0 * tile[1];
              acc[mat][m][2] += s8 * tile[2];
              acc[mat][m][3] += s8 * tile[3];
            }
        }
      }

      // The next item's scales go to the other table (last read by the
      // item before this one, whose tcFinishItem ended with a barrier); the
      // barrier in this one's makes them visible. The next item's first
      // copies are in flight meanwhile.
      if (item + 1 < items)
        storeScales(item + 1, scalePieces);
      tcFinishItem<Cfg>(acc, partial, firstTile(item), t0, biases, outs,
                        residualValues, tokens, stepRows.gatherLengths());
    }
  }
  copyAsyncWait<0>(); // the prologue's copies, when there were no tokens
}

//===----------------------------------------------------------------------===//
// Dequantization for the prefill GEMM
//===----------------------------------------------------------------------===//

/// Config: Weight (the output type), kBits, kGroup, kGroups, kRowBytes,
/// kInterleaved, kK, kRows. Writes `out[n, k] = Weight(f32(s) * f32(q))` for
/// the whole weight
/// ([kRows, kK], the layout of a stored weight), one 16-byte piece per
/// thread. Launch: grid ceil(kRows * kRowBytes / 16 / 256), block 256.
template <class Cfg>
__device__ void
dequantizeWeights(const u8 *SITS_RESTRICT data, const u16 *SITS_RESTRICT scales,
                  typename Cfg::Weight::Storage *SITS_RESTRICT out) {
  typedef typename Cfg::Weight W;
  constexpr int V = qweights::quantPieceValues<Cfg::kBits>();
  constexpr int kPieces = Cfg::kRowBytes / 16;
  const long index =
      static_cast<long>(tileIndex().x) * tileDim().x + threadIdx.x;
  if (index >= static_cast<long>(Cfg::kRows) * kPieces)
    return;
  const long row = index / kPieces;
  const int piece = static_cast<int>(index % kPieces);
  const int k0 = piece * V; // in input order; the group is the same
  float levels[V];
  qweights::levelsToFloat<Cfg::kBits>(load16If<true>(true, data + 16 * index),
                                      levels);
  const float scale =
      halfToFloat(scales[row * Cfg::kGroups + k0 / Cfg::kGroup]);
  typename W::Storage *target = out + row * Cfg::kK + piece / 4 * 4 * V;
  for (int e = 0; e < V; ++e) {
    const int k =
        qweights::levelInput<Cfg::kBits, Cfg::kInterleaved>(piece % 4, e);
    if (piece / 4 * 4 * V + k < Cfg::kK)
      target[k] = W::store(scale * levels[e]);
  }
}

} // namespace sits

#endif // SITS_KERNELS_GEMV_QUANT_CUH
