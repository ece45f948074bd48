//===- KVCache.h - KV-cache state of the reference executor -----*- C++ -*-===//
//
// The host-side value of a `!sits.kv_cache` type: per layer, a key and a
// value buffer `[batch, kv_heads, capacity, head_dim]`, and the number of
// tokens each sequence holds. The capacity is fixed: writing past it is an
// error, never a reallocation.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_COMPILER_REFERENCE_KVCACHE_H
#define SITS_COMPILER_REFERENCE_KVCACHE_H

#include "compiler/reference/Tensor.h"

#include "llvm/Support/Error.h"

#include <memory>
#include <vector>

namespace sits {
class KVCacheType;
} // namespace sits

namespace sits::reference {

/// The parameters of a `!sits.kv_cache` type.
struct KVCacheConfig {
  int64_t layers = 0;
  int64_t maxBatch = 0;
  int64_t kvHeads = 0;
  int64_t capacity = 0;
  int64_t headDim = 0;
  /// What the buffers store (values are rounded to it when written).
  ElementType elementType = ElementType::F32;
  /// A quantized cache (`#sits.kv_quant`): the buffers hold the hot part
  /// (every token at `elementType`); the program quantizes what it reads
  /// (see sits.kv_cache.read). 0 bits: not quantized.
  int64_t coldBits = 0;
  int64_t hotWindow = 0;
  int64_t groupSize = 0;
  bool perChannelKeys = false;
  int64_t channelBlock = 0;
  bool halfScales = false;

  static llvm::Expected<KVCacheConfig> fromType(KVCacheType type);
  bool operator==(const KVCacheConfig &other) const;
};

/// The state of a KV cache. The executor updates it in place: KV-cache values
/// are used linearly (each state is consumed once), so the state an op
/// consumes is never read again.
///
/// The buffers exist for the runtime batch only. The runtime batch is bound by
/// the first op that knows it (an append, an advance, or a length or read
/// whose result type has a static batch); until then it is unknown.
/// Rows that hold no token read as NaN, so a consumer that does not bound its
/// reads poisons its result instead of reading stale data silently.
class KVCacheState {
public:
  explicit KVCacheState(const KVCacheConfig &config);

  const KVCacheConfig &getConfig() const { return config; }
  /// The runtime batch, or -1 while unknown.
  int64_t getBatch() const { return batch; }
  /// Binds the runtime batch (allocating the buffers); an error when it is
  /// already bound to another size or exceeds max_batch.
  llvm::Error bindBatch(int64_t runtimeBatch);

  /// Tokens sequence `b` holds.
  int64_t getLength(int64_t b) const { return lengths[b]; }
  llvm::ArrayRef<int64_t> getLengths() const { return lengths; }

  /// Writes `key` and `value` (`[batch, kv_heads, seq, head_dim]`) into
  /// layer `layer` at rows `pastLen[b] ...` of each sequence.
  llvm::Error append(int64_t layer, const Tensor &key, const Tensor &value,
                     llvm::ArrayRef<int64_t> pastLen);
  /// Adds `count` tokens to the length of each of the first `rows`
  /// sequences.
  llvm::Error advance(int64_t rows, int64_t count);

  /// Copies of the `[batch, kv_heads, capacity, head_dim]` key and value
  /// buffers of layer `layer`, tagged with `type`.
  Tensor readKeys(int64_t layer, ElementType type) const;
  Tensor readValues(int64_t layer, ElementType type) const;

  /// Rows [first, first + count) of sequence `b`, every layer, keys then
  /// values: `[2, layers, kv_heads, count, head_dim]` (prefix caching copies
  /// blocks of a sequence out and into another).
  llvm::Expected<std::vector<float>> copyRows(int64_t b, int64_t first,
                                              int64_t count) const;
  /// Writes rows from copyRows into rows [first, first + count) of sequence
  /// `b`, exactly (the values were rounded when first written).
  llvm::Error writeRows(int64_t b, int64_t first, int64_t count,
                        llvm::ArrayRef<float> rows);
  /// Sets the tokens sequence `b` holds (at most the capacity).
  llvm::Error setLength(int64_t b, int64_t length);

  /// The whole buffers, `[layers, batch, kv_heads, capacity, head_dim]`.
  llvm::ArrayRef<float> getKeyBuffer() const { return keys; }
  llvm::ArrayRef<float> getValueBuffer() const { return values; }

private:
  int64_t layerStride() const;
  Tensor readLayer(const std::vector<float> &buffer, int64_t layer,
                   ElementType type) const;

  KVCacheConfig config;
  int64_t batch = -1;
  std::vector<int64_t> lengths;
  std::vector<float> keys;
  std::vector<float> values;
};

} // namespace sits::reference

#endif // SITS_COMPILER_REFERENCE_KVCACHE_H
