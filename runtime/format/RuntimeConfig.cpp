//===- RuntimeConfig.cpp - Reading the metadata the runtime uses ----------===//
//
// parseRuntimeConfig: the metadata JSON's fields the runtime reads (limits,
// the KV cache, the tokenizer kind, the graph buckets, how launches may
// overlap and what steps the programs take), each checked against the
// others, so that nothing past it trusts an unchecked value.
//
//===----------------------------------------------------------------------===//

#include "format/Bytes.h"
#include "sits/EngineFormat.h"
#include "sits/Json.h"

#include <algorithm>
#include <limits>

namespace sits {
namespace format {

std::vector<uint32_t> getDefaultBatchBuckets(uint32_t maxBatch) {
  std::vector<uint32_t> buckets;
  for (uint32_t b : {1u, 2u, 4u})
    if (b < maxBatch)
      buckets.push_back(b);
  for (uint32_t b = 8; b < maxBatch; b += 8)
    buckets.push_back(b);
  buckets.push_back(maxBatch);
  return buckets;
}

namespace {

/// Reads an integer member in [minValue, maxValue].
bool readUInt(const json::Value &object, const char *path, const char *key,
              uint32_t minValue, uint32_t maxValue, uint32_t *out,
              std::string *error, bool optional = false) {
  const json::Value *v = object.find(key);
  if (!v) {
    if (optional)
      return true;
    *error = std::string("metadata lacks \"") + path + "." + key + "\"";
    return false;
  }
  if (!v->isInteger() || v->getInteger() < minValue ||
      v->getInteger() > maxValue) {
    *error = std::string("metadata \"") + path + "." + key +
             "\" must be an integer from " + std::to_string(minValue) + " to " +
             std::to_string(maxValue);
    return false;
  }
  *out = static_cast<uint32_t>(v->getInteger());
  return true;
}

const json::Value *requireObject(const json::Value &root, const char *key,
                                 std::string *error) {
  const json::Value *v = root.find(key);
  if (!v || !v->isObject()) {
    *error = std::string("metadata lacks the object \"") + key + "\"";
    return nullptr;
  }
  return v;
}

constexpr uint32_t kMaxDim = 1u << 30;

/// The paged layout's members (kv_cache.block_tokens, blocks, block_table),
/// required with layout "paged" and refused without it.
bool readPagedLayout(const json::Value &kv, KVCacheConfig *cache,
                     std::string *error) {
  const bool paged = cache->layout == "paged";
  for (const char *key : {"block_tokens", "blocks", "block_table"})
    if (!paged && kv.find(key)) {
      *error = std::string("metadata \"kv_cache.") + key +
               "\" belongs to a paged cache, and the layout is \"" +
               cache->layout + "\"";
      return false;
    }
  if (!paged)
    return true;
  if (!readUInt(kv, "kv_cache", "block_tokens", 16, 1024, &cache->blockTokens,
                error) ||
      !readUInt(kv, "kv_cache", "blocks", 1, kMaxDim, &cache->blocks, error))
    return false;
  if (!KVCacheConfig::validBlockTokens(cache->blockTokens)) {
    *error = "metadata \"kv_cache.block_tokens\" must be a power of two "
             "from 16 to 1024, got " +
             std::to_string(cache->blockTokens);
    return false;
  }
  if (cache->blocks < cache->maxBlocksPerSeq()) {
    *error = "metadata \"kv_cache.blocks\" (" + std::to_string(cache->blocks) +
             ") cannot hold one sequence of the capacity (" +
             std::to_string(cache->maxBlocksPerSeq()) + " blocks)";
    return false;
  }
  const json::Value *table = kv.find("block_table");
  if (!table || !table->isString() || table->getString().empty()) {
    *error = "metadata \"kv_cache.block_table\" must name the block table's "
             "buffer";
    return false;
  }
  cache->blockTable = table->getString();
  return true;
}

} // namespace

bool parseRuntimeConfig(const std::string &text, RuntimeConfig *config,
                        std::string *error) {
  if (size_t bad = findInvalidUtf8(text); bad != std::string::npos) {
    *error = "metadata is not valid UTF-8 (byte " + std::to_string(bad) + ")";
    return false;
  }
  json::Value root;
  std::string why;
  if (!json::parse(text, &root, &why)) {
    *error = "metadata is not valid JSON: " + why;
    return false;
  }
  if (!root.isObject()) {
    *error = "metadata is not a JSON object";
    return false;
  }
  RuntimeConfig c;
  const json::Value *model = requireObject(root, "model", error);
  const json::Value *limits =
      model ? requireObject(root, "limits", error) : nullptr;
  const json::Value *kv =
      limits ? requireObject(root, "kv_cache", error) : nullptr;
  if (!kv)
    return false;
  if (const json::Value *name = model->find("name"); name && name->isString())
    c.modelName = name->getString();
  // A \u escape can still encode a lone surrogate.
  if (findInvalidUtf8(c.modelName) != std::string::npos) {
    *error = "metadata \"model.name\" is not valid UTF-8";
    return false;
  }
  uint32_t kvBatch = 0;
  if (!readUInt(*model, "model", "vocab_size", 1, 0x7fffffff, &c.vocabSize,
                error) ||
      !readUInt(*limits, "limits", "max_batch", 1, 4096, &c.maxBatch, error) ||
      !readUInt(*limits, "limits", "max_prefill_tokens", 1, kMaxDim,
                &c.maxPrefillTokens, error) ||
      !readUInt(*limits, "limits", "max_seq_len", 1, kMaxDim, &c.maxSeqLen,
                error) ||
      !readUInt(*kv, "kv_cache", "layers", 1, 4096, &c.kvCache.layers, error) ||
      !readUInt(*kv, "kv_cache", "max_batch", 1, 4096, &kvBatch, error) ||
      !readUInt(*kv, "kv_cache", "kv_heads", 1, 4096, &c.kvCache.kvHeads,
                error) ||
      !readUInt(*kv, "kv_cache", "capacity", 1, kMaxDim, &c.kvCache.capacity,
                error) ||
      !readUInt(*kv, "kv_cache", "head_dim", 1, 65536, &c.kvCache.headDim,
                error))
    return false;
  c.kvCache.maxBatch = kvBatch;
  const json::Value *dtype = kv->find("dtype");
  if (!dtype || !dtype->isString() ||
      !parseDType(dtype->getString(), &c.kvCache.dtype) ||
      (c.kvCache.dtype != DType::F16 && c.kvCache.dtype != DType::BF16 &&
       c.kvCache.dtype != DType::F32)) {
    *error = "metadata \"kv_cache.dtype\" must be \"f16\", \"bf16\" or \"f32\"";
    return false;
  }
  if (const json::Value *layout = kv->find("layout")) {
    if (!layout->isString() || (layout->getString() != "contiguous" &&
                                layout->getString() != "paged")) {
      *error = "metadata \"kv_cache.layout\" must be \"contiguous\" or "
               "\"paged\"";
      return false;
    }
    c.kvCache.layout = layout->getString();
  }
  if (!readPagedLayout(*kv, &c.kvCache, error))
    return false;
  if (kvBatch != c.maxBatch) {
    *error = "metadata \"kv_cache.max_batch\" (" + std::to_string(kvBatch) +
             ") differs from \"limits.max_batch\" (" +
             std::to_string(c.maxBatch) + ")";
    return false;
  }
  if (c.kvCache.capacity != c.maxSeqLen) {
    *error = "metadata \"kv_cache.capacity\" (" +
             std::to_string(c.kvCache.capacity) +
             ") differs from \"limits.max_seq_len\" (" +
             std::to_string(c.maxSeqLen) + ")";
    return false;
  }
  if (c.maxPrefillTokens > c.maxSeqLen) {
    *error = "metadata \"limits.max_prefill_tokens\" exceeds "
             "\"limits.max_seq_len\"";
    return false;
  }
  if (const json::Value *quant = kv->find("quant")) {
    KVCacheConfig &k = c.kvCache;
    const json::Value *keys = quant->isObject() ? quant->find("keys") : nullptr;
    if (!keys || !keys->isString() ||
        (keys->getString() != "per_token" &&
         keys->getString() != "per_channel")) {
      *error = "metadata \"kv_cache.quant.keys\" must be \"per_token\" or "
               "\"per_channel\"";
      return false;
    }
    k.perChannelKeys = keys->getString() == "per_channel";
    if (!readUInt(*quant, "kv_cache.quant", "bits", 4, 8, &k.coldBits, error) ||
        !readUInt(*quant, "kv_cache.quant", "hot_window", 1, kMaxDim,
                  &k.hotWindow, error) ||
        !readUInt(*quant, "kv_cache.quant", "hot_rows", 1, kMaxDim, &k.hotRows,
                  error) ||
        !readUInt(*quant, "kv_cache.quant", "group_size", 2, 64, &k.groupSize,
                  error) ||
        !readUInt(*quant, "kv_cache.quant", "channel_block", 1, 4096,
                  &k.channelBlock, error))
      return false;
    if ((k.coldBits != 4 && k.coldBits != 8) || k.dtype == DType::F32 ||
        k.headDim % 8 != 0 || k.groupSize % 2 != 0 ||
        (!k.perChannelKeys && k.channelBlock != 1) ||
        k.hotRows < std::min<uint64_t>(k.capacity, uint64_t(k.hotWindow) +
                                                       k.channelBlock - 1 +
                                                       c.maxPrefillTokens)) {
      *error = "metadata \"kv_cache.quant\" is inconsistent (bits 4 or 8, a "
               "16-bit hot part, head_dim a multiple of 8, even groups, "
               "hot_rows >= hot_window + channel_block - 1 + "
               "max_prefill_tokens, or the capacity)";
      return false;
    }
  }
  // A paged quantized cache keeps its cold rows and scales in the pool's
  // blocks: a block of per-channel keys (one scale per channel) must lie in
  // one pool block.
  if (c.kvCache.paged() && c.kvCache.coldBits &&
      c.kvCache.blockTokens % c.kvCache.channelBlock != 0) {
    *error = "metadata \"kv_cache\" is paged with blocks of " +
             std::to_string(c.kvCache.blockTokens) +
             " tokens, not a multiple of \"quant.channel_block\" (" +
             std::to_string(c.kvCache.channelBlock) +
             "): a block of per-channel keys must lie in one pool block";
    return false;
  }
  if (c.kvCache.bufferBytes(true) == 0 || c.kvCache.bufferBytes(false) == 0) {
    *error = "metadata \"kv_cache\" describes a cache too large to address";
    return false;
  }

  if (const json::Value *tok = root.find("tokenizer")) {
    const json::Value *kind = tok->find("kind");
    if (kind && kind->isString() && kind->getString() == "bytes") {
      c.tokenizer = TokenizerKind::Bytes;
      if (c.vocabSize < 256) {
        *error = "metadata declares a byte tokenizer but vocab_size is " +
                 std::to_string(c.vocabSize) + " (< 256)";
        return false;
      }
    } else if (kind && kind->isString() && kind->getString() == "huggingface") {
      c.tokenizer = TokenizerKind::HuggingFace;
    } else if (kind && !(kind->isString() && kind->getString() == "none")) {
      *error = "metadata \"tokenizer.kind\" must be \"bytes\", "
               "\"huggingface\" or \"none\"";
      return false;
    }
    if (const json::Value *eos = tok->find("eos_token_ids")) {
      if (!eos->isArray()) {
        *error = "metadata \"tokenizer.eos_token_ids\" must be an array";
        return false;
      }
      for (const json::Value &id : eos->elements()) {
        if (!id.isInteger() || id.getInteger() < 0 ||
            id.getInteger() >= c.vocabSize) {
          *error = "metadata \"tokenizer.eos_token_ids\" holds an id outside "
                   "the vocabulary";
          return false;
        }
        c.eosTokenIds.push_back(static_cast<int32_t>(id.getInteger()));
      }
    }
  }

  // Graph buckets: from the metadata, else the default; always ending with
  // max_batch so that every batch size has a bucket.
  std::vector<uint32_t> buckets = getDefaultBatchBuckets(c.maxBatch);
  if (const json::Value *decode = root.find("decode")) {
    if (const json::Value *list = decode->find("batch_buckets")) {
      if (!list->isArray() || list->elements().empty() ||
          list->elements().size() > 64) {
        *error = "metadata \"decode.batch_buckets\" must be a non-empty array";
        return false;
      }
      buckets.clear();
      for (const json::Value &b : list->elements()) {
        if (!b.isInteger() || b.getInteger() < 1 ||
            b.getInteger() > c.maxBatch) {
          *error =
              "metadata \"decode.batch_buckets\" holds a size outside 1.." +
              std::to_string(c.maxBatch);
          return false;
        }
        buckets.push_back(static_cast<uint32_t>(b.getInteger()));
      }
    }
  }
  std::sort(buckets.begin(), buckets.end());
  buckets.erase(std::unique(buckets.begin(), buckets.end()), buckets.end());
  buckets.erase(std::remove_if(buckets.begin(), buckets.end(),
                               [&](uint32_t b) { return b > c.maxBatch; }),
                buckets.end());
  if (buckets.empty() || buckets.back() != c.maxBatch)
    buckets.push_back(c.maxBatch);
  c.batchBuckets = buckets;

  if (const json::Value *launch = root.find("launch")) {
    const json::Value *pdl =
        launch->isObject() ? launch->find("programmatic_dependent") : nullptr;
    const json::Value *packed =
        launch->isObject() ? launch->find("packed_steps") : nullptr;
    if ((pdl && !pdl->isBool()) || (packed && !packed->isBool())) {
      *error =
          std::string("metadata \"launch.") +
          (pdl && !pdl->isBool() ? "programmatic_dependent" : "packed_steps") +
          "\" must be a boolean";
      return false;
    }
    c.programmaticLaunch = pdl && pdl->getBool();
    c.packedSteps = packed && packed->getBool();
    // At most every row a prefill step may take; the rows of a few-row
    // step are packed, so that its workspace holds just them.
    const uint32_t maxRows = static_cast<uint32_t>(
        std::min<uint64_t>(uint64_t(c.maxBatch) * c.maxPrefillTokens,
                           uint64_t{std::numeric_limits<uint32_t>::max()}));
    if (launch->isObject() &&
        !readUInt(*launch, "launch", "few_rows_max_tokens", 1, maxRows,
                  &c.fewRowsMaxTokens, error, /*optional=*/true))
      return false;
    if (c.fewRowsMaxTokens && !c.packedSteps) {
      *error = "metadata \"launch.few_rows_max_tokens\" needs "
               "\"launch.packed_steps\"";
      return false;
    }
  }
  *config = std::move(c);
  return true;
}

} // namespace format
} // namespace sits
