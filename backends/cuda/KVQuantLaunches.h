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

/// Checks what the kernels need (head_dim a multiple of 8, groups even and
/// at most 64); the reason otherwise.
std::optional<std::string> checkKVQuant(const format::KVCacheConfig &kv);

/// The quantization of tokens leaving the hot window in layer `layer`
/// (after the layer's append in the same step). `stats` is the calibration
/// buffer.
PlannedLaunch planQuantizeKV(const format::KVCacheConfig &kv, int64_t layer);

/// Attention over the quantized cache (split-K decode when `desc.partial`
/// is set, else the tiled kernel).
std::optional<PlannedLaunch> planAttentionKVQ(const AttentionLaunch &desc,
                                              const format::KVCacheConfig &kv,
                                              std::string *error);

/// u64 counters of the calibration buffer (8 per layer, kv head, K/V).
uint64_t kvStatsWords(const format::KVCacheConfig &kv);

} // namespace sits::codegen

#endif // SITS_BACKENDS_CUDA_KVQUANTLAUNCHES_H
