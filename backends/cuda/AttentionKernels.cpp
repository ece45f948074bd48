//===- AttentionKernels.cpp - Which kernel runs attention -----------------===//
//
// The kernel selection of attention over the KV cache: split over the keys
// at decode, the tensor-core kernels where they take the shape, the tiled
// kernels otherwise, for a plain or a quantized cache. The pass
// kernel-select-attention-kernels records the choice in the IR; the
// planner checks the IR's choice here and launches it, so the two cannot
// disagree.
//
//===----------------------------------------------------------------------===//

#include "backends/cuda/KVQuantLaunches.h"

namespace sits::codegen {

using format::DType;
using kernel::KernelKind;

namespace {

std::string str(int64_t value) { return std::to_string(value); }

/// Why the split decode kernels cannot take `desc` (as decodeSplitOf
/// decides; empty when they can).
std::string whyNoSplit(const AttentionLaunch &desc) {
  const int64_t group = desc.heads / desc.kvHeads, d = desc.headDim;
  if (!desc.decode)
    return "prefill";
  if (!desc.tensorCores)
    return "the target has no cp.async (before sm_80)";
  if (desc.cacheType == DType::F32)
    return "an fp32 cache";
  if (d < 8 || d > 256 || (d & (d - 1)) != 0)
    return "head_dim " + str(d) + " is not a power of two from 8 to 256";
  if (group > 8)
    return str(group) + " query heads per KV head, more than 8";
  return "";
}

std::string whyNoFlash(const AttentionLaunch &desc) {
  if (!desc.tensorCores)
    return "the target has no mma.sync (before sm_80)";
  if (desc.cacheType == DType::F32)
    return "an fp32 cache";
  return "head_dim " + str(desc.headDim) + " is not a multiple of 16 up to 128";
}

bool isSplit(KernelKind kernel) {
  return kernel == KernelKind::AttentionSplit ||
         kernel == KernelKind::AttentionKVQSplit ||
         kernel == KernelKind::AttentionKVQMma;
}

bool isQuantized(KernelKind kernel) {
  return kernel == KernelKind::AttentionKVQ ||
         kernel == KernelKind::AttentionKVQSplit ||
         kernel == KernelKind::AttentionKVQMma;
}

} // namespace

AttentionKernelChoice selectAttentionKernel(const AttentionLaunch &desc,
                                            const format::KVCacheConfig &kv) {
  AttentionKernelChoice choice;
  const bool quantized = kv.coldBits != 0;
  std::string what =
      std::string(desc.decode ? "decode" : "prefill") + ", " +
      str(desc.heads / desc.kvHeads) + " query heads per KV head, head_dim " +
      str(desc.headDim) +
      (quantized ? ", an int" + str(kv.coldBits) + " cache" : "");
  std::optional<DecodeSplit> split = decodeSplitOf(desc);
  if (split) {
    choice.splitKeys = split->splitKeys;
    std::string splits = ": split over the keys, " + str(split->splitKeys) +
                         " a block (" + str(split->splits) + " splits)";
    if (!quantized) {
      choice.kernel = KernelKind::AttentionSplit;
      choice.reason = what + splits;
    } else if (mmaDecodeFits(desc, kv)) {
      choice.kernel = KernelKind::AttentionKVQMma;
      choice.reason = what + splits + ", on tensor cores";
    } else {
      choice.kernel = KernelKind::AttentionKVQSplit;
      choice.reason = what + splits +
                      "; not on tensor cores (they need an fp16 engine, at "
                      "most 8 query heads per KV head, head_dim at most 128 "
                      "in scale groups of a multiple of 32 channels)";
    }
    return choice;
  }
  if (!quantized && flashPrefillFits(desc)) {
    choice.kernel = KernelKind::AttentionFlash;
    choice.reason = what + ": tensor cores";
    return choice;
  }
  choice.kernel = quantized ? KernelKind::AttentionKVQ : KernelKind::Attention;
  choice.reason = what + ": the tiled kernel (" +
                  (desc.decode ? whyNoSplit(desc)
                   : quantized ? std::string("no tensor-core prefill over a "
                                             "quantized cache")
                               : whyNoFlash(desc)) +
                  ")";
  return choice;
}

std::string checkAttentionKernel(const AttentionLaunch &desc,
                                 const format::KVCacheConfig &kv,
                                 KernelKind kernel, int64_t splitKeys) {
  const std::string name = kernel::stringifyKernelKind(kernel).str();
  if (isQuantized(kernel) != (kv.coldBits != 0))
    return name + (kv.coldBits ? " reads a plain cache, and this one is "
                                 "quantized"
                               : " reads a quantized cache, and this one is "
                                 "not");
  if (isSplit(kernel)) {
    if (std::string why = whyNoSplit(desc); !why.empty())
      return name + " cannot take it: " + why;
    if (splitKeys < 16 || splitKeys % 16 != 0 || splitKeys > 4096)
      return name + " needs split_keys a multiple of 16 from 16 to 4096";
    if (kernel == KernelKind::AttentionKVQMma && !mmaDecodeFits(desc, kv))
      return name + " cannot take it: it needs an fp16 engine, at most 8 "
                    "query heads per KV head and head_dim at most 128 in "
                    "scale groups of a multiple of 32 channels";
  } else if (splitKeys != 0) {
    return name + " does not split the keys";
  }
  if (kernel == KernelKind::AttentionFlash &&
      (desc.decode || !flashPrefillFits(desc)))
    return name + " cannot take it: " +
           (desc.decode ? std::string("it runs prefill") : whyNoFlash(desc));
  return "";
}

} // namespace sits::codegen
