//===- KVQuantLaunches.cpp - Launches of a quantized KV cache -------------===//

#include "backends/cuda/KVQuantLaunches.h"
#include "backends/cuda/LaunchBuilder.h"
#include "backends/cuda/Plan.h"

#include <algorithm>
#include <cstdio>

namespace sits::codegen {

using format::DType;
using format::Expr;

namespace {

const char *hotStruct(DType type) {
  return type == DType::BF16 ? "sits::BF16" : "sits::F16";
}

/// The quantization constants kv_quant.cuh's kernels share; kScaleBlocks
/// counts a sequence's per-channel key blocks (a paged block holds
/// kBlockTokens / kChannelBlock of them, ColdRows).
void addQuantConstants(LaunchBuilder &b, const format::KVCacheConfig &kv) {
  b.intConstant("kBits", kv.coldBits);
  b.intConstant("kGroup", kv.groupSize);
  b.intConstant("kGroups", (kv.headDim + kv.groupSize - 1) / kv.groupSize);
  b.intConstant("kRowBytes", kv.headDim * kv.coldBits / 8);
  b.intConstant("kHotWindow", kv.hotWindow);
  b.intConstant("kHotRows", kv.hotRows);
  b.boolConstant("kPerChannelKeys", kv.perChannelKeys);
  b.intConstant("kChannelBlock", kv.channelBlock);
  b.intConstant("kScaleBlocks",
                (kv.capacity + kv.channelBlock - 1) / kv.channelBlock);
}

/// The hot ring, cold rows and scales of `layer` in both buffers.
void addCacheParams(LaunchBuilder &b, const format::KVCacheConfig &kv,
                    int64_t layer, bool isConst) {
  format::KVCacheConfig::QuantLayout q = kv.quantLayout(true);
  uint64_t base = static_cast<uint64_t>(layer) * q.layerBytes;
  std::string c = isConst ? "const " : "";
  b.param("const unsigned short *", "key_hot",
          ArgBinding::bufferArg(BufferKind::KeyCache, 0, base));
  b.param("const unsigned short *", "value_hot",
          ArgBinding::bufferArg(BufferKind::ValueCache, 0, base));
  b.param(c + "signed char *", "key_cold",
          ArgBinding::bufferArg(BufferKind::KeyCache, 0, base + q.coldOffset));
  b.param(c + "unsigned short *", "key_scales",
          ArgBinding::bufferArg(BufferKind::KeyCache, 0, base + q.scaleOffset));
  b.param(
      c + "signed char *", "value_cold",
      ArgBinding::bufferArg(BufferKind::ValueCache, 0, base + q.coldOffset));
  b.param(
      c + "unsigned short *", "value_scales",
      ArgBinding::bufferArg(BufferKind::ValueCache, 0, base + q.scaleOffset));
}

} // namespace

format::KVCacheConfig kvCacheConfigOf(KVCacheType type, DType weightType,
                                      int64_t maxPrefillTokens) {
  format::KVCacheConfig kv;
  kv.layers = type.getLayers();
  kv.maxBatch = type.getMaxBatch();
  kv.kvHeads = type.getKvHeads();
  kv.capacity = type.getCapacity();
  kv.headDim = type.getHeadDim();
  kv.dtype = weightType;
  KVQuantAttr quant = type.getQuant();
  if (!quant)
    return kv;
  if (kv.dtype == DType::F32)
    kv.dtype = DType::F16;
  kv.coldBits = quant.getBits();
  kv.hotWindow = quant.getHotWindow();
  kv.groupSize = quant.getGroupSize();
  kv.perChannelKeys = quant.hasPerChannelKeys();
  kv.channelBlock = kv.perChannelKeys ? quant.getChannelBlock() : 1;
  // A ring of the capacity never wraps: every token keeps its row.
  kv.hotRows = static_cast<uint32_t>(
      std::min<int64_t>(kv.capacity, int64_t(kv.hotWindow) + kv.channelBlock -
                                         1 + maxPrefillTokens));
  return kv;
}

format::KVCacheConfig kvCacheConfigOf(KVCacheType type, DType weightType,
                                      int64_t maxPrefillTokens,
                                      const KVPaging &paging) {
  format::KVCacheConfig kv =
      kvCacheConfigOf(type, weightType, maxPrefillTokens);
  if (paging.blockTokens) {
    kv.layout = "paged";
    kv.blockTokens = static_cast<uint32_t>(paging.blockTokens);
    kv.blocks = static_cast<uint32_t>(paging.blocks);
    kv.blockTable = kBlockTableBuffer;
  }
  return kv;
}

std::optional<std::string> checkKVQuant(const format::KVCacheConfig &kv) {
  if (kv.headDim % 8 != 0)
    return "a quantized KV cache needs head_dim a multiple of 8, got " +
           std::to_string(kv.headDim);
  if (kv.groupSize % 2 != 0 || kv.groupSize > 64)
    return "a quantized KV cache needs even groups of at most 64 channels, "
           "got " +
           std::to_string(kv.groupSize);
  if (kv.headDim / 2 > 128)
    return "a quantized KV cache needs head_dim at most 256, got " +
           std::to_string(kv.headDim);
  return std::nullopt;
}

uint64_t kvStatsWords(const format::KVCacheConfig &kv) {
  return static_cast<uint64_t>(kv.layers) * kv.kvHeads * 2 * 8;
}

PlannedLaunch planQuantizeKV(const format::KVCacheConfig &kv, int64_t layer,
                             const KVPaging &paging) {
  constexpr int kThreads = 128;
  LaunchBuilder b("quantize_kv", "sits/kv_quant.cuh", kThreads);
  b.typeConstant("Hot", hotStruct(kv.dtype));
  b.intConstant("kKvHeads", kv.kvHeads);
  b.intConstant("kHeadDim", kv.headDim);
  b.intConstant("kCapacity", kv.capacity);
  b.intConstant("kThreads", kThreads);
  addQuantConstants(b, kv);
  addCacheParams(b, kv, layer, /*isConst=*/false);
  b.param("unsigned long long *", "stats",
          ArgBinding::bufferArg(BufferKind::KVStats, 0,
                                static_cast<uint64_t>(layer) * kv.kvHeads * 2 *
                                    8 * 8));
  b.param("const int *", "past_lengths", pastArg());
  b.param("const int *", "step_lengths", stepArg());
  b.param("int", "seq_len", ArgBinding::int32(Expr::seq()));
  b.call(withPaging("sits::quantizeKV<Cfg>(key_hot, value_hot, key_cold, "
                    "key_scales, value_cold, value_scales, stats, "
                    "past_lengths, step_lengths, seq_len)",
                    addPaging(b, paging)));
  b.setGrid(Expr::seq(), Expr::constant(kv.kvHeads), Expr::batch());
  return b.take();
}

/// attention_decode_kvq_mma.cuh's attentionDecodeKVQMmaSharedBytes: the
/// merge of 8 warps' states ([warp][head] values, max, sum and weight),
/// reused for the combine of the splits, then a ring of two tiles' value
/// copies per lane (mmaDecodeValueCopyBytes: 4 keys' pieces of every scale
/// group and 2 key slots' scales, when cp.async can copy them).
static int64_t mmaDecodeSharedBytes(const format::KVCacheConfig &kv,
                                    int64_t group) {
  constexpr int64_t kWarps = 8;
  const int64_t merge = 4 * kWarps * group * (kv.headDim + 3);
  const int64_t valueBytes = int64_t(kv.groupSize) * kv.coldBits / 64;
  const int64_t scaleBytes = 2 * (kv.headDim / kv.groupSize);
  auto copyable = [](int64_t bytes) {
    return bytes == 4 || bytes == 8 || bytes == 16;
  };
  const int64_t copyBytes =
      copyable(valueBytes) && copyable(scaleBytes)
          ? 4 * (kv.headDim / kv.groupSize) * valueBytes + 2 * scaleBytes
          : 0;
  return std::max(merge,
                  decodeCombineSharedBytes(kWarps * 32, group, kv.headDim)) +
         2 * kWarps * 32 * copyBytes;
}

// Each lane's share of a scale group must be whole words.
bool mmaDecodeFits(const AttentionLaunch &desc,
                   const format::KVCacheConfig &kv) {
  const int64_t group = desc.heads / desc.kvHeads;
  return desc.sixteenBitMath && kv.dtype == DType::F16 && group <= 8 &&
         kv.headDim <= 128 && kv.groupSize % 32 == 0 &&
         kv.headDim % kv.groupSize == 0 &&
         mmaDecodeSharedBytes(kv, group) <= kMaxSharedBytes;
}

/// What both split decode kernels over a quantized cache share: family
/// `family` (header sits/<family>.cuh, function `function`), constants,
/// parameters and grid. The caller adds its own constants and shared
/// memory.
static LaunchBuilder splitDecodeKVQ(const AttentionLaunch &desc,
                                    const format::KVCacheConfig &kv,
                                    const DecodeSplit &split,
                                    const std::string &family, int threads,
                                    const std::string &function) {
  LaunchBuilder b(family, "sits/" + family + ".cuh", threads);
  addSplitDecodeConfig(b, desc, split, hotStruct(kv.dtype));
  addQuantConstants(b, kv);
  b.param("const float *", "query", desc.query);
  addCacheParams(b, kv, desc.layer, /*isConst=*/true);
  b.param("float *", "out", desc.out);
  b.param("float *", "partial", *desc.partial);
  b.param("int *", "counters", desc.counters);
  b.param("const int *", "past_lengths", pastArg());
  b.param("const int *", "step_lengths", stepArg());
  b.call(withPaging("sits::" + function +
                        "<Cfg>(query, key_hot, value_hot, key_cold, "
                        "key_scales, value_cold, value_scales, out, partial, "
                        "counters, past_lengths, step_lengths)",
                    addPaging(b, desc.paging)));
  b.setGrid(Expr::constant(split.splits), Expr::constant(desc.kvHeads),
            Expr::batch());
  return b;
}

std::optional<PlannedLaunch> planAttentionKVQ(const AttentionLaunch &desc,
                                              const format::KVCacheConfig &kv,
                                              std::string *error) {
  constexpr int64_t kThreads = 128;
  const int64_t group = desc.heads / desc.kvHeads;
  // The kernel the selection pass chose and the planner checked
  // (checkAttentionKernel).
  std::optional<DecodeSplit> split =
      desc.kernel == kernel::KernelKind::AttentionKVQSplit ||
              desc.kernel == kernel::KernelKind::AttentionKVQMma
          ? decodeSplitOf(desc)
          : std::nullopt;
  if (split) {
    if (desc.kernel == kernel::KernelKind::AttentionKVQMma) {
      LaunchBuilder b = splitDecodeKVQ(
          desc, kv, *split, "attention_decode_kvq_mma",
          /*threads=kMmaDecodeThreads*/ 256, "attentionDecodeKVQMma");
      const int64_t shared = mmaDecodeSharedBytes(kv, group);
      b.setShared(shared);
      // Two blocks (16 warps) per SM when their shared memory fits:
      // registers capped at 128 a thread.
      if (2 * shared <= kMaxSharedBytes)
        b.setMinBlocks(2);
      return b.take();
    }
    constexpr int64_t kUnroll = 4, kStages = 3;
    LaunchBuilder b =
        splitDecodeKVQ(desc, kv, *split, "attention_decode_kvq",
                       static_cast<int>(kThreads), "attentionDecodeKVQ");
    b.intConstant("kUnroll", kUnroll);
    b.intConstant("kStages", kStages);
    b.setShared(
        attentionDecodeSharedBytes(desc.headDim, group, kUnroll, kStages));
    return b.take();
  }

  // The tiled kernel: rows per block as attention.cuh's (one token in
  // decode), with twice the key and value tiles (hot and cold).
  int64_t queryTokens = 1;
  if (!desc.decode) {
    int64_t maxRows =
        std::max<int64_t>(group, std::min<int64_t>(64, 8192 / desc.headDim));
    queryTokens = std::max<int64_t>(1, maxRows / group);
  }
  int64_t keyTile = 64;
  auto bytes = [&]() {
    int64_t rows = queryTokens * group, d = desc.headDim;
    return 4 * (rows * d + 2 * keyTile * (d + 1) + 2 * keyTile * d +
                rows * keyTile + 3 * rows);
  };
  while (bytes() > kMaxSharedBytes && keyTile > 16)
    keyTile /= 2;
  while (bytes() > kMaxSharedBytes && queryTokens > 1)
    queryTokens /= 2;
  if (bytes() > kMaxSharedBytes) {
    *error = "attention over a quantized KV cache with " +
             std::to_string(group) + " query heads per KV head and head_dim " +
             std::to_string(desc.headDim) + " needs " +
             std::to_string(bytes()) + " bytes of shared memory per block";
    return std::nullopt;
  }
  LaunchBuilder b(desc.decode ? "attention_decode_kvq"
                              : "attention_prefill_kvq",
                  "sits/attention_kvq.cuh", static_cast<int>(kThreads));
  b.typeConstant("Cache", hotStruct(kv.dtype));
  b.intConstant("kHeads", desc.heads);
  b.intConstant("kKvHeads", desc.kvHeads);
  b.intConstant("kHeadDim", desc.headDim);
  b.intConstant("kQueryTokens", queryTokens);
  b.intConstant("kKeyTile", keyTile);
  b.intConstant("kThreads", kThreads);
  b.intConstant("kCapacity", desc.capacity);
  b.intConstant("kWindow", desc.window);
  b.intConstant("kSharedBytes", bytes());
  b.floatConstant("kScale", desc.scale);
  b.floatConstant("kSoftcap", desc.softcap);
  addQuantConstants(b, kv);
  b.param("const float *", "query", desc.query);
  addCacheParams(b, kv, desc.layer, /*isConst=*/true);
  b.param("float *", "out", desc.out);
  b.param("const int *", "past_lengths", pastArg());
  const std::string steps = addStepRows(b);
  b.call(withPaging("sits::attentionKVQ<Cfg>(query, key_hot, value_hot, "
                    "key_cold, key_scales, value_cold, value_scales, out, "
                    "past_lengths, " +
                        steps + ")",
                    addPaging(b, desc.paging)));
  b.setGrid(format::ceilDiv(Expr::seq(), Expr::constant(queryTokens)),
            Expr::constant(desc.kvHeads), Expr::batch());
  b.setShared(bytes());
  return b.take();
}

} // namespace sits::codegen
