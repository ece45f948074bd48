//===- embedding.cuh - Token embedding lookup -----------------------------===//
//
// `out[t, :] = table[ids[t], :] * scale`, one block per token. The ids come
// from the runtime's token_ids buffer (int32 [B, S], token t = b * S + i).
// An id outside the vocabulary (never given by the runtime, which checks
// prompts and samples inside it) yields a zero row instead of a wild read.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_KERNELS_EMBEDDING_CUH
#define SITS_KERNELS_EMBEDDING_CUH

#include "sits/common.cuh"

namespace sits {

/// Config: Weight (F32/F16/BF16), kVocab, kHidden, kScale, kThreads, kVec
/// (elements per 16-byte load, or 1 when rows are not 16-byte aligned).
template <class Cfg>
__device__ void
embedding(const int *SITS_RESTRICT tokenIds,
          const typename Cfg::Weight::Storage *SITS_RESTRICT table,
          float *SITS_RESTRICT out) {
  typedef typename Cfg::Weight W;
  const int t = tileIndex().x;
  const int id = tokenIds[t];
  float *row = out + static_cast<long>(t) * Cfg::kHidden;
  if (id < 0 || id >= Cfg::kVocab) {
    for (int d = threadIdx.x; d < Cfg::kHidden; d += Cfg::kThreads)
      row[d] = 0.0f;
    return;
  }
  const typename W::Storage *src = table + static_cast<long>(id) * Cfg::kHidden;
  if constexpr (Cfg::kVec > 1) {
    for (int c = threadIdx.x; c < Cfg::kHidden / Cfg::kVec;
         c += Cfg::kThreads) {
      float values[Cfg::kVec];
      load16<W>(src + c * Cfg::kVec, values);
      for (int e = 0; e < Cfg::kVec; ++e)
        row[c * Cfg::kVec + e] = values[e] * Cfg::kScale;
    }
  } else {
    for (int d = threadIdx.x; d < Cfg::kHidden; d += Cfg::kThreads)
      row[d] = W::load(src[d]) * Cfg::kScale;
  }
}

} // namespace sits

#endif // SITS_KERNELS_EMBEDDING_CUH
