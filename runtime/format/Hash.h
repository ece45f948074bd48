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
  void compress(const uint8_t *blocks, uint64_t count);
  void compressPortable(const uint8_t *block);
  uint32_t state[8];
  uint8_t buffer[64];
  uint64_t pending = 0;
  uint64_t totalBytes = 0;
};

/// Whether the CPU has SHA extensions (x86 SHA-NI); SHA-256 uses them by
/// default. `setSha256Hardware(false)` forces the portable code (tests
/// compare the two).
bool sha256HardwareAvailable();
void setSha256Hardware(bool enabled);

/// The digest of chunk `index` (kHashChunkBytes bytes; the last may be
/// shorter) of an engine file; chunk 0 reads the hash field as zeros.
Hash contentChunkDigest(const uint8_t *chunk, uint64_t size, uint64_t index);
/// The content hash of a `fileBytes`-byte file from its chunk digests in
/// order. Writers that hash chunks in parallel finish with this.
Hash combineContentDigests(uint64_t fileBytes,
                           const std::vector<Hash> &digests);

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
