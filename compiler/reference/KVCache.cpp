//===- KVCache.cpp - KV-cache state of the reference executor -------------===//

#include "compiler/reference/KVCache.h"

#include "dialects/sits/SitsDialect.h"

#include <limits>

using namespace sits::reference;

llvm::Expected<KVCacheConfig> KVCacheConfig::fromType(KVCacheType type) {
  KVCacheConfig config;
  config.layers = type.getLayers();
  config.maxBatch = type.getMaxBatch();
  config.kvHeads = type.getKvHeads();
  config.capacity = type.getCapacity();
  config.headDim = type.getHeadDim();
  llvm::Expected<ElementType> element = elementTypeOf(type.getElementType());
  if (!element)
    return element.takeError();
  if (!isFloat(*element))
    return llvm::createStringError("a KV cache must hold floats");
  config.elementType = *element;
  if (KVQuantAttr quant = type.getQuant()) {
    config.coldBits = quant.getBits();
    config.hotWindow = quant.getHotWindow();
    config.groupSize = quant.getGroupSize();
    config.perChannelKeys = quant.hasPerChannelKeys();
    config.channelBlock = quant.getChannelBlock();
    config.halfScales = quant.getScaleType().isF16();
  }
  return config;
}

bool KVCacheConfig::operator==(const KVCacheConfig &other) const {
  return layers == other.layers && maxBatch == other.maxBatch &&
         kvHeads == other.kvHeads && capacity == other.capacity &&
         headDim == other.headDim && elementType == other.elementType &&
         coldBits == other.coldBits && hotWindow == other.hotWindow &&
         groupSize == other.groupSize &&
         perChannelKeys == other.perChannelKeys &&
         channelBlock == other.channelBlock && halfScales == other.halfScales;
}

KVCacheState::KVCacheState(const KVCacheConfig &config) : config(config) {}

int64_t KVCacheState::layerStride() const {
  return batch * config.kvHeads * config.capacity * config.headDim;
}

llvm::Error KVCacheState::bindBatch(int64_t runtimeBatch) {
  if (batch == runtimeBatch)
    return llvm::Error::success();
  if (batch >= 0)
    return llvm::createStringError(
        "batch " + std::to_string(runtimeBatch) +
        " does not match the cache's runtime batch (" + std::to_string(batch) +
        ")");
  if (runtimeBatch <= 0 || runtimeBatch > config.maxBatch)
    return llvm::createStringError(
        "batch " + std::to_string(runtimeBatch) + " is outside [1, " +
        std::to_string(config.maxBatch) + "] (the cache's max_batch)");
  batch = runtimeBatch;
  lengths.assign(batch, 0);
  size_t total = static_cast<size_t>(config.layers * layerStride());
  keys.assign(total, std::numeric_limits<float>::quiet_NaN());
  values.assign(total, std::numeric_limits<float>::quiet_NaN());
  return llvm::Error::success();
}

/// Checks that `tensor` is `[batch, kv_heads, seq, head_dim]` for the cache.
static llvm::Error checkLayerTensor(const KVCacheConfig &config,
                                    llvm::StringRef what,
                                    const Tensor &tensor) {
  if (tensor.getRank() != 4 || tensor.getDim(1) != config.kvHeads ||
      tensor.getDim(3) != config.headDim)
    return llvm::createStringError(
        what.str() + " has shape " + formatShape(tensor.getShape()) +
        ", expected [batch, " + std::to_string(config.kvHeads) + ", seq, " +
        std::to_string(config.headDim) + "]");
  return llvm::Error::success();
}

llvm::Error KVCacheState::append(int64_t layer, const Tensor &key,
                                 const Tensor &value,
                                 llvm::ArrayRef<int64_t> pastLen) {
  if (layer < 0 || layer >= config.layers)
    return llvm::createStringError("layer " + std::to_string(layer) +
                                   " is outside the cache");
  if (llvm::Error error = checkLayerTensor(config, "key", key))
    return error;
  if (llvm::Error error = checkLayerTensor(config, "value", value))
    return error;
  if (key.getShape() != value.getShape())
    return llvm::createStringError("key shape " + formatShape(key.getShape()) +
                                   " differs from value shape " +
                                   formatShape(value.getShape()));
  int64_t rows = key.getDim(0), seq = key.getDim(2);
  if (static_cast<int64_t>(pastLen.size()) != rows)
    return llvm::createStringError(
        "past_len has " + std::to_string(pastLen.size()) +
        " entries, the key's batch is " + std::to_string(rows));
  if (llvm::Error error = bindBatch(rows))
    return error;
  for (int64_t b = 0; b < rows; ++b) {
    if (pastLen[b] < 0)
      return llvm::createStringError("past_len " + std::to_string(pastLen[b]) +
                                     " of sequence " + std::to_string(b) +
                                     " is negative");
    if (pastLen[b] + seq > config.capacity)
      return llvm::createStringError(
          "KV cache full: sequence " + std::to_string(b) + " writes rows " +
          std::to_string(pastLen[b]) + ".." +
          std::to_string(pastLen[b] + seq - 1) + ", capacity is " +
          std::to_string(config.capacity));
  }
  int64_t headDim = config.headDim;
  for (int64_t b = 0; b < rows; ++b)
    for (int64_t h = 0; h < config.kvHeads; ++h) {
      int64_t base =
          layer * layerStride() +
          ((b * config.kvHeads + h) * config.capacity + pastLen[b]) * headDim;
      int64_t source = ((b * config.kvHeads + h) * seq) * headDim;
      for (int64_t i = 0; i < seq * headDim; ++i) {
        keys[base + i] =
            roundToFloatType(key.floats()[source + i], config.elementType);
        values[base + i] =
            roundToFloatType(value.floats()[source + i], config.elementType);
      }
    }
  return llvm::Error::success();
}

llvm::Error KVCacheState::advance(int64_t rows, int64_t count) {
  if (llvm::Error error = bindBatch(rows))
    return error;
  for (int64_t b = 0; b < rows; ++b)
    if (lengths[b] + count > config.capacity)
      return llvm::createStringError(
          "KV cache full: sequence " + std::to_string(b) + " would hold " +
          std::to_string(lengths[b] + count) + " tokens, capacity is " +
          std::to_string(config.capacity));
  for (int64_t b = 0; b < rows; ++b)
    lengths[b] += count;
  return llvm::Error::success();
}

Tensor KVCacheState::readLayer(const std::vector<float> &buffer, int64_t layer,
                               ElementType type) const {
  Shape shape = {batch, config.kvHeads, config.capacity, config.headDim};
  auto begin = buffer.begin() + layer * layerStride();
  return Tensor::fromFloats(type, shape,
                            std::vector<float>(begin, begin + layerStride()));
}

/// Checks that rows [first, first + count) of sequence `b` exist.
static llvm::Error checkRows(const KVCacheConfig &config, int64_t batch,
                             int64_t b, int64_t first, int64_t count) {
  if (b < 0 || b >= batch || first < 0 || count < 0 ||
      first + count > config.capacity)
    return llvm::createStringError("rows " + std::to_string(first) + ".." +
                                   std::to_string(first + count - 1) +
                                   " of sequence " + std::to_string(b) +
                                   " are outside the cache (batch " +
                                   std::to_string(batch) + ", capacity " +
                                   std::to_string(config.capacity) + ")");
  return llvm::Error::success();
}

llvm::Expected<std::vector<float>>
KVCacheState::copyRows(int64_t b, int64_t first, int64_t count) const {
  if (llvm::Error error = checkRows(config, batch, b, first, count))
    return std::move(error);
  int64_t span = count * config.headDim;
  std::vector<float> rows;
  rows.reserve(2 * config.layers * config.kvHeads * span);
  for (const std::vector<float> *buffer : {&keys, &values})
    for (int64_t layer = 0; layer < config.layers; ++layer)
      for (int64_t h = 0; h < config.kvHeads; ++h) {
        auto begin = buffer->begin() + layer * layerStride() +
                     ((b * config.kvHeads + h) * config.capacity + first) *
                         config.headDim;
        rows.insert(rows.end(), begin, begin + span);
      }
  return rows;
}

llvm::Error KVCacheState::writeRows(int64_t b, int64_t first, int64_t count,
                                    llvm::ArrayRef<float> rows) {
  if (llvm::Error error = checkRows(config, batch, b, first, count))
    return error;
  int64_t span = count * config.headDim;
  if (int64_t(rows.size()) != 2 * config.layers * config.kvHeads * span)
    return llvm::createStringError(std::to_string(rows.size()) +
                                   " values are not " + std::to_string(count) +
                                   " rows of every layer's keys and values");
  const float *source = rows.data();
  for (std::vector<float> *buffer : {&keys, &values})
    for (int64_t layer = 0; layer < config.layers; ++layer)
      for (int64_t h = 0; h < config.kvHeads; ++h) {
        std::copy(source, source + span,
                  buffer->begin() + layer * layerStride() +
                      ((b * config.kvHeads + h) * config.capacity + first) *
                          config.headDim);
        source += span;
      }
  return llvm::Error::success();
}

llvm::Error KVCacheState::setLength(int64_t b, int64_t length) {
  if (llvm::Error error = checkRows(config, batch, b, 0, length))
    return error;
  lengths[b] = length;
  return llvm::Error::success();
}

Tensor KVCacheState::readKeys(int64_t layer, ElementType type) const {
  return readLayer(keys, layer, type);
}

Tensor KVCacheState::readValues(int64_t layer, ElementType type) const {
  return readLayer(values, layer, type);
}
