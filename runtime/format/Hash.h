//===- Hash.h - SHA-256 and the engine's content hash ----------*- C++ -*-===//

#ifndef SITS_RUNTIME_FORMAT_HASH_H
#define SITS_RUNTIME_FORMAT_HASH_H

#include "sits/EngineFormat.h"

#include <cstdint>
#include <vector>

namespace sits {
namespace format {

/// Incremental SHA-256 (FIPS 180-4).
class Sha256 {
public:
  Sha256();
  void update(const void *data, uint64_t size);
  /// The digest; the object must not be updated afterwards.
  Hash finish();

private:
  void compress(const uint8_t *block);
  uint32_t state[8];
  uint8_t buffer[64];
  uint64_t pending = 0;
  uint64_t totalBytes = 0;
};

/// The content hash computed over a stream of file bytes in order (the
/// writer uses it; readers use the parallel computeContentHash). Equal to
/// computeContentHash of the concatenated bytes.
class ContentHasher {
public:
  ContentHasher();
  void update(const void *data, uint64_t size);
  Hash finish();
  /// Digest of the first chunk alone (after at most one chunk of input).
  Hash firstChunkDigest();

private:
  Sha256 chunk;
  uint64_t inChunk = 0;
  uint64_t position = 0;
  std::vector<Hash> digests;
};

} // namespace format
} // namespace sits

#endif // SITS_RUNTIME_FORMAT_HASH_H
