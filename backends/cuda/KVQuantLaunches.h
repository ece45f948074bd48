//===- KVQuantLaunches.h - Launches of a quantized KV cache -----*- C++ -*-===//
//
// A #sits.kv_quant cache on the GPU (kernels/kv_quant.cuh): its layout in
// the engine's key and value buffers, the quantization launch that follows
// each append, and attention that reads the hot ring and the cold rows.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_BACKENDS_CUDA_KVQUANTLAUNCHES_H
#define SITS_BACKENDS_CUDA_KVQUANTLAUNCHES_H

#include "backends/cuda/Launches.h"
#include "dialects/sits/SitsDialect.h"

#include <optional>
#include <string>

namespace sits::codegen {

/// The engine's KV-cache config for `type`: a plain cache in `weightType`,
/// or a quantized one (hot ring in `weightType`, f16 for f32, of
/// hot_window + channel_block - 1 + maxPrefillTokens rows, at most the
/// capacity).
format::KVCacheConfig kvCacheConfigOf(KVCacheType type,
                                      format::DType weightType,
                                      int64_t maxPrefillTokens);
/// The same, stored in the pool's blocks when `paging` says (layout
/// "paged": the quantized parts' offsets are then the paged layout's).
format::KVCacheConfig kvCacheConfigOf(KVCacheType type,
                                      format::DType weightType,
                                      int64_t maxPrefillTokens,
                                      const KVPaging &paging);

/// Checks what the kernels need (head_dim a multiple of 8, groups even and
/// at most 64); the reason otherwise.
std::optional<std::string> checkKVQuant(const format::KVCacheConfig &kv);

/// The quantization of tokens leaving the hot window in layer `layer`
/// (after the layer's append in the same step). `stats` is the calibration
/// buffer. With `paging`, the cold rows and scales are in the pool's blocks
/// (the hot ring stays per sequence).
PlannedLaunch planQuantizeKV(const format::KVCacheConfig &kv, int64_t layer,
                             const KVPaging &paging);

/// Attention over the quantized cache, by the kernel `desc.kernel` names
/// (attention_kvq, attention_kvq_split or attention_kvq_mma), reading the
/// cold rows through the block table when `desc.paging` says.
std::optional<PlannedLaunch> planAttentionKVQ(const AttentionLaunch &desc,
                                              const format::KVCacheConfig &kv,
                                              std::string *error);

/// Whether the tensor-core decode kernel over a quantized cache takes
/// `desc`: an engine computing in f16 (it rounds queries and probabilities
/// to f16), at most 8 query heads per KV head, head_dim at most 128 in
/// whole scale groups of a multiple of 32 channels, its shared memory
/// within a block's. Others run attention_decode_kvq.cuh.
bool mmaDecodeFits(const AttentionLaunch &desc,
                   const format::KVCacheConfig &kv);

/// u64 counters of the calibration buffer (8 per layer, kv head, K/V).
uint64_t kvStatsWords(const format::KVCacheConfig &kv);

} // namespace sits::codegen

#endif // SITS_BACKENDS_CUDA_KVQUANTLAUNCHES_H
