//===- EngineWriter.h - Writing engines whose weights are produced -*- C++ -*-//
//
// A compiler's weights section can be many gigabytes: read from the model's
// files, transposed and converted. Rather than building it in memory and
// then writing it, the writer here asks for it chunk by chunk while it
// writes: threads fill, hash and write one kHashChunkBytes chunk of the file
// each, so the section is produced, hashed and written once, in parallel,
// with threads x 16 MiB of memory. The file is the one writeEngine writes
// (same bytes, same atomic temporary-file-then-rename).
//
//===----------------------------------------------------------------------===//

#ifndef SITS_RUNTIME_FORMAT_ENGINEWRITER_H
#define SITS_RUNTIME_FORMAT_ENGINEWRITER_H

#include "sits/EngineFormat.h"

#include <functional>

namespace sits {
namespace format {

/// Produces bytes [offset, offset + size) of the weights section into
/// `out`. Called from several threads at once, for disjoint ranges; returns
/// false with `*error` set on failure.
using WeightSectionFill = std::function<bool(
    uint64_t offset, uint8_t *out, uint64_t size, std::string *error)>;

/// An engine whose weights section is produced while it is written.
struct StreamedEngine {
  /// Everything but the weights: `weights` empty, `weightsData` null.
  EngineContents contents;
  uint64_t weightBytes = 0;
  WeightSectionFill fill;
};

/// validateContents for a streamed engine (weights checked against
/// `weightBytes`).
bool validateStreamedEngine(StreamedEngine &engine, const RuntimeConfig &config,
                            std::string *error);

/// The threads writers use by default: the CPUs this process may run on.
unsigned defaultWriterThreads();

/// Writes `contents` with a weights section of `weightBytes` bytes that
/// `fill` produces (the contents' own weights are ignored), atomically as
/// writeEngine does, with `threads` threads (0: defaultWriterThreads()).
bool writeEngineWithFill(const EngineContents &contents, uint64_t weightBytes,
                         const WeightSectionFill &fill, const std::string &path,
                         const WriteOptions &options, unsigned threads,
                         std::string *error);

inline bool writeStreamedEngine(const StreamedEngine &engine,
                                const std::string &path,
                                const WriteOptions &options, unsigned threads,
                                std::string *error) {
  return writeEngineWithFill(engine.contents, engine.weightBytes, engine.fill,
                             path, options, threads, error);
}

} // namespace format
} // namespace sits

#endif // SITS_RUNTIME_FORMAT_ENGINEWRITER_H
