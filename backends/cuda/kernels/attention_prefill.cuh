//===- attention_prefill.cuh - Causal prefill attention on tensor cores ---===//
//
// Flash-attention style: a block takes 64 query tokens of one sequence and
// one query head (4 warps of 16 rows) and visits the visible keys in tiles
// of 64. Per tile, S = Q K^T and O += P V are mma.m16n8k16 with f32
// accumulators; the scores never leave registers: the row maximum and sum
// are kept per row (online softmax) and the probabilities, rounded to the
// cache's type, are the A operand of P V straight from the S accumulators
// (their layouts match). K and V tiles come by cp.async, double-buffered,
// rows padded by 16 bytes so that ldmatrix (transposed for V) is free of
// bank conflicts. The queries are rounded to the cache's type too.
//
// Visibility and padding are those of attention.cuh: token i of sequence b
// at p = past_lengths[b] + i sees keys j <= p (and j > p - window); rows of
// padding tokens (i >= step_lengths[b]) are zeros. Token i of b is row
// StepRows::first(b) + i of the query and output.
//
// Launch: grid (ceil(S / 64), heads, B), block 128, dynamic shared memory
// attentionPrefillSharedBytes(head_dim).
//
//===----------------------------------------------------------------------===//

#ifndef SITS_KERNELS_ATTENTION_PREFILL_CUH
#define SITS_KERNELS_ATTENTION_PREFILL_CUH

#include "sits/common.cuh"

namespace sits {

constexpr int kFlashRows = 64; ///< query tokens per block
constexpr int kFlashKeys = 64; ///< keys per tile
constexpr int kFlashThreads = 128;

/// Halves per shared row of head_dim elements (padded by 16 bytes).
__host__ __device__ constexpr int flashStride(int headDim) {
  return headDim + 8;
}

/// Q, and two buffers each of K and V.
__host__ __device__ constexpr int attentionPrefillSharedBytes(int headDim) {
  return 2 * flashStride(headDim) * (kFlashRows + 4 * kFlashKeys);
}

/// Config: Cache (F16/BF16), kHeads, kKvHeads, kHeadDim (16..128, a multiple
/// of 16), kCapacity, kScale, kSoftcap (0: none), kWindow (0: none); a paged
/// cache adds kBlockTokens and kMaxBlocks, and `blockTable`.
template <class Cfg>
__device__ void
attentionPrefill(const float *SITS_RESTRICT query,
                 const typename Cfg::Cache::Storage *SITS_RESTRICT keyCache,
                 const typename Cfg::Cache::Storage *SITS_RESTRICT valueCache,
                 float *SITS_RESTRICT out, const int *SITS_RESTRICT pastLengths,
                 StepRows steps,
                 const int *SITS_RESTRICT blockTable = nullptr) {
  typedef typename Cfg::Cache C;
  typedef typename C::Storage Storage;
  constexpr int D = Cfg::kHeadDim;
  constexpr int G = Cfg::kHeads / Cfg::kKvHeads;
  constexpr int kStride = flashStride(D);
  constexpr int kDSteps = D / 16; // k steps of S = Q K^T
  constexpr int kDTiles = D / 8;  // n tiles of O
  constexpr long kWidth = static_cast<long>(Cfg::kHeads) * D;
  static_assert(C::kBytes == 2 && D % 16 == 0 && D <= 128,
                "2-byte cache, head_dim a multiple of 16 up to 128");

  SITS_DYNAMIC_SHARED(Storage, shared);
  Storage *qs = shared;                        // [64][kStride]
  Storage *ks = qs + kFlashRows * kStride;     // [2][64][kStride]
  Storage *vs = ks + 2 * kFlashKeys * kStride; // [2][64][kStride]

  const float kNegInf = __int_as_float(0xff800000u);
  const int b = tileIndex().z, head = tileIndex().y,
            i0 = tileIndex().x * kFlashRows;
  const int kvHead = head / G;
  const int tid = threadIdx.x, lane = tid % kWarpSize, warp = tid / kWarpSize;
  const int g = lane / 4, t = lane % 4;
  const int past = pastLengths[b];
  const int iEnd = steps.real(b); // tokens [0, iEnd) are real
  const long firstRow = steps.first(b);
  const int ownedRows = steps.owned(b);
  const KVRows<Cfg> rows(blockTable, b, kvHead);

  // Queries, rounded to the cache's type (zeros for padding rows).
  for (int idx = tid; idx < kFlashRows * D / 4; idx += kFlashThreads) {
    const int r = idx / (D / 4), d = (idx % (D / 4)) * 4, i = i0 + r;
    float v[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    if (i < iEnd)
      loadFloats<4>(query + (firstRow + i) * kWidth + head * D + d, v);
    u32 *target = reinterpret_cast<u32 *>(qs + r * kStride + d);
    target[0] = packPair<C>(v[0], v[1]);
    target[1] = packPair<C>(v[2], v[3]);
  }

  // Keys any real row of the block sees: [keyBegin, keyEnd).
  const int lastRow = min(i0 + kFlashRows, iEnd);
  const int keyEnd = lastRow > i0 ? min(past + lastRow, Cfg::kCapacity) : 0;
  const int keyBegin =
      Cfg::kWindow > 0 ? max(0, past + i0 - Cfg::kWindow + 1) : 0;
  const int tiles =
      keyEnd > keyBegin ? (keyEnd - keyBegin + kFlashKeys - 1) / kFlashKeys : 0;
  auto copyTile = [&](int tile, int buffer) {
    const int j0 = keyBegin + tile * kFlashKeys;
    for (int c = tid; c < kFlashKeys * D / 8; c += kFlashThreads) {
      const int j = c / (D / 8), d = (c % (D / 8)) * 8;
      const bool valid = j0 + j < keyEnd;
      const long at = rows.at(valid ? j0 + j : 0) + d;
      const int slot = (buffer * kFlashKeys + j) * kStride + d;
      copyAsync16<false>(ks + slot, keyCache + at, valid);
      copyAsync16<false>(vs + slot, valueCache + at, valid);
    }
    copyAsyncCommit();
  };
  if (tiles > 0)
    copyTile(0, 0);
  syncTile(); // the queries are stored

  // This warp's 16 query rows as A fragments, for every k step.
  u32 qf[kDSteps][4];
#pragma unroll
  for (int s = 0; s < kDSteps; ++s) {
    const int row = warp * 16 + lane % 8 + 8 * ((lane / 8) % 2);
    loadMatrix4(qs + row * kStride + s * 16 + 8 * (lane / 16), qf[s]);
  }
  // Rows g and g + 8 of the warp: running max, this lane's share of the
  // sum, and the output accumulators.
  const int rowI[2] = {i0 + warp * 16 + g, i0 + warp * 16 + g + 8};
  float rowMax[2] = {kNegInf, kNegInf}, rowSum[2] = {0.0f, 0.0f};
  float o[kDTiles][4];
#pragma unroll
  for (int n = 0; n < kDTiles; ++n)
    for (int i = 0; i < 4; ++i)
      o[n][i] = 0.0f;

  for (int tile = 0; tile < tiles; ++tile) {
    const int buffer = tile % 2;
    copyAsyncWait<0>();
    syncTile(); // tile is in place; the other buffer is free
    if (tile + 1 < tiles)
      copyTile(tile + 1, 1 - buffer);
    const Storage *kt = ks + buffer * kFlashKeys * kStride;
    const Storage *vt = vs + buffer * kFlashKeys * kStride;
    const int j0 = keyBegin + tile * kFlashKeys;

    float s[8][4];
#pragma unroll
    for (int n = 0; n < 8; ++n)
      for (int i = 0; i < 4; ++i)
        s[n][i] = 0.0f;
#pragma unroll
    for (int step = 0; step < kDSteps; ++step)
#pragma unroll
      for (int nj = 0; nj < 4; ++nj) {
        u32 kf[4];
        const int row = nj * 16 + lane % 8 + 8 * (lane / 16);
        loadMatrix4(kt + row * kStride + step * 16 + 8 * ((lane / 8) % 2), kf);
        mma16816<C>(s[2 * nj], qf[step][0], qf[step][1], qf[step][2],
                    qf[step][3], kf[0], kf[1]);
        mma16816<C>(s[2 * nj + 1], qf[step][0], qf[step][1], qf[step][2],
                    qf[step][3], kf[2], kf[3]);
      }

    // Scores, visibility, and the online softmax of rows g and g + 8.
    float tileMax[2] = {kNegInf, kNegInf};
#pragma unroll
    for (int n = 0; n < 8; ++n)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int r = i / 2, key = j0 + n * 8 + 2 * t + (i % 2);
        const int position = past + rowI[r];
        const bool visible =
            rowI[r] < iEnd && key < keyEnd && keyIsVisible<Cfg>(key, position);
        s[n][i] = visible ? attentionScore<Cfg>(s[n][i]) : kNegInf;
        tileMax[r] = fmaxf(tileMax[r], s[n][i]);
      }
    float rescale[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      // The four lanes of a row hold its 64 keys between them.
      tileMax[r] = fmaxf(tileMax[r], __shfl_xor_sync(kFullMask, tileMax[r], 1));
      tileMax[r] = fmaxf(tileMax[r], __shfl_xor_sync(kFullMask, tileMax[r], 2));
      const float newMax = fmaxf(rowMax[r], tileMax[r]);
      rescale[r] = rowMax[r] == kNegInf || newMax == kNegInf
                       ? (newMax == kNegInf ? 1.0f : 0.0f)
                       : expf(rowMax[r] - newMax);
      rowMax[r] = newMax;
      rowSum[r] *= rescale[r];
    }
#pragma unroll
    for (int n = 0; n < 8; ++n)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int r = i / 2;
        const float p = s[n][i] == kNegInf ? 0.0f : expf(s[n][i] - rowMax[r]);
        s[n][i] = p;
        rowSum[r] += p;
      }
#pragma unroll
    for (int n = 0; n < kDTiles; ++n)
      for (int i = 0; i < 4; ++i)
        o[n][i] *= rescale[i / 2];

        // O += P V: the S accumulators of key tiles 2kk and 2kk + 1 are the A
        // fragment of keys 16kk..16kk+15.
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      const u32 a0 = packPair<C>(s[2 * kk][0], s[2 * kk][1]);
      const u32 a1 = packPair<C>(s[2 * kk][2], s[2 * kk][3]);
      const u32 a2 = packPair<C>(s[2 * kk + 1][0], s[2 * kk + 1][1]);
      const u32 a3 = packPair<C>(s[2 * kk + 1][2], s[2 * kk + 1][3]);
#pragma unroll
      for (int dj = 0; dj < kDTiles / 2; ++dj) {
        u32 vf[4];
        const int row = kk * 16 + lane % 8 + 8 * ((lane / 8) % 2);
        loadMatrix4Transposed(vt + row * kStride + dj * 16 + 8 * (lane / 16),
                              vf);
        mma16816<C>(o[2 * dj], a0, a1, a2, a3, vf[0], vf[1]);
        mma16816<C>(o[2 * dj + 1], a0, a1, a2, a3, vf[2], vf[3]);
      }
    }
  }
  copyAsyncWait<0>();

#pragma unroll
  for (int r = 0; r < 2; ++r) {
    rowSum[r] += __shfl_xor_sync(kFullMask, rowSum[r], 1);
    rowSum[r] += __shfl_xor_sync(kFullMask, rowSum[r], 2);
  }
#pragma unroll
  for (int n = 0; n < kDTiles; ++n)
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int r = i / 2, row = rowI[r];
      if (row >= ownedRows)
        continue; // past the chunk's padding, or another sequence's rows
      const float sum = rowSum[r];
      out[(firstRow + row) * kWidth + head * D + n * 8 + 2 * t + (i % 2)] =
          row < iEnd && sum > 0.0f ? o[n][i] / sum : 0.0f;
    }
}

} // namespace sits

#endif // SITS_KERNELS_ATTENTION_PREFILL_CUH
