//===- rows.cuh - Where a step's tokens and the cache's rows lie ---------===//
//
// Included by common.cuh: a token's sequence and position in a step's
// matrices (padded or packed steps, StepRows), and the rows of a sequence's
// keys and values in a contiguous or paged cache (PagedRows, KVRows).
//
//===----------------------------------------------------------------------===//

#ifndef SITS_KERNELS_ROWS_CUH
#define SITS_KERNELS_ROWS_CUH

namespace sits {

//===----------------------------------------------------------------------===//
// Tokens
//===----------------------------------------------------------------------===//

/// Position of token `i` of sequence `b`: the tokens it already holds plus i.
__device__ __forceinline__ int positionOf(const int *pastLengths, int b,
                                          int i) {
  return pastLengths[b] + i;
}

/// Where the rows of a step's tokens lie in its [tokens, width] matrices.
/// Padded (packed == 0): sequence b owns rows [b * seqLen, (b + 1) *
/// seqLen), the first lengths[b] of them real. Packed: b owns exactly
/// lengths[b] rows, right after those of b - 1, so that a step mixing
/// prompt chunks with single decode tokens has no padding rows and runs as
/// one pass over the weights (T = the sum of the lengths). Lookups walk
/// `lengths`: a step has at most max_batch sequences.
struct StepRows {
  const int *lengths; ///< step_lengths (null: one row per sequence)
  int seqLen;         ///< S: the longest chunk of the step
  int packed;
  /// A gather's lengths where they differ from `lengths` (the TVC head
  /// gives 0 to the sequences it proved): 0 skips a sequence, and only
  /// rows of real lengths are ever taken.
  const int *gather = nullptr;

  __device__ __forceinline__ const int *gatherLengths() const {
    return gather ? gather : lengths;
  }

  __device__ __forceinline__ long first(int b) const {
    if (!packed)
      return static_cast<long>(b) * seqLen;
    long row = 0;
    for (int j = 0; j < b; ++j)
      row += lengths[j];
    return row;
  }
  /// Rows sequence b owns (the real ones and, padded, its padding).
  __device__ __forceinline__ int owned(int b) const {
    return packed ? lengths[b] : seqLen;
  }
  /// Real tokens of sequence b in this step.
  __device__ __forceinline__ int real(int b) const {
    return lengths ? min(lengths[b], seqLen) : seqLen;
  }
  /// The sequence that owns row t (< T) and the token's index in it.
  __device__ __forceinline__ int locate(long t, int *i) const {
    if (!packed) {
      *i = static_cast<int>(t % seqLen);
      return static_cast<int>(t / seqLen);
    }
    int b = 0;
    while (t >= lengths[b])
      t -= lengths[b++];
    *i = static_cast<int>(t);
    return b;
  }
};

//===----------------------------------------------------------------------===//
// KV cache rows
//===----------------------------------------------------------------------===//

/// Cfg::kBlockTokens of a paged cache; 0 (contiguous) where the config has
/// none, so that contiguous configs need not name it. (Functions, not static
/// members: those would become globals of the module.)
template <class Cfg>
__host__ __device__ constexpr auto kvBlockTokensOf(int)
    -> decltype(int(Cfg::kBlockTokens)) {
  return Cfg::kBlockTokens;
}
template <class Cfg> __host__ __device__ constexpr int kvBlockTokensOf(long) {
  return 0;
}

/// Cfg::kMaxBlocks of a paged cache (blocks a sequence spans); 0 otherwise.
template <class Cfg>
__host__ __device__ constexpr auto kvMaxBlocksOf(int)
    -> decltype(int(Cfg::kMaxBlocks)) {
  return Cfg::kMaxBlocks;
}
template <class Cfg> __host__ __device__ constexpr int kvMaxBlocksOf(long) {
  return 0;
}

/// Rows of kStride elements of one (sequence b, KV head) in one layer's
/// slice of a cache part: the one place both layouts are addressed.
/// Contiguous (kBlockRows 0): `[max_batch, kv_heads, kSeqRows, kStride]`.
/// Paged: a pool `[blocks, kv_heads, kBlockRows, kStride]`, row r in block
/// `blockTable[b * kMaxBlocks + r / kBlockRows]` at row r % kBlockRows.
/// Rows are looked up one at a time, so a tile of rows may span blocks.
template <int kKvHeads, int kStride, int kSeqRows, int kBlockRows,
          int kMaxBlocks>
struct PagedRows {
  const int *table;
  long base;
  int b;
  __device__ __forceinline__ PagedRows(const int *blockTable, int b,
                                       int kvHead)
      : table(blockTable), b(b) {
    if constexpr (kBlockRows > 0)
      base = static_cast<long>(kvHead) * kBlockRows * kStride;
    else
      base = (static_cast<long>(b) * kKvHeads + kvHead) * kSeqRows * kStride;
  }
  /// The element offset of row `row`'s first element.
  __device__ __forceinline__ long at(int row) const {
    if constexpr (kBlockRows > 0) {
      static_assert((kBlockRows & (kBlockRows - 1)) == 0,
                    "a block's rows are a power of two");
      const long block = table[b * kMaxBlocks + row / kBlockRows];
      return block * (static_cast<long>(kKvHeads) * kBlockRows * kStride) +
             base + static_cast<long>(row % kBlockRows) * kStride;
    } else {
      return base + static_cast<long>(row) * kStride;
    }
  }
};

/// The head_dim-wide rows of a plain cache (kRows: the capacity), paged
/// when the config has kBlockTokens and kMaxBlocks (and a `block_table`).
/// The append and every attention kernel over a plain cache read and write
/// through it.
template <class Cfg, int kRows = Cfg::kCapacity>
using KVRows = PagedRows<Cfg::kKvHeads, Cfg::kHeadDim, kRows,
                         kvBlockTokensOf<Cfg>(0), kvMaxBlocksOf<Cfg>(0)>;

/// A quantized cache's FP16 hot ring of kHotRows rows: per sequence in
/// every layout (its rows are reused as tokens go cold, so it is not paged).
template <class Cfg>
using HotRing = PagedRows<Cfg::kKvHeads, Cfg::kHeadDim, Cfg::kHotRows, 0, 0>;

} // namespace sits

#endif // SITS_KERNELS_ROWS_CUH
