//===- EngineWriter.cpp - Parallel, atomic engine writing -----------------===//
//
// The file is cut into the content hash's chunks. Each worker takes the next
// chunk, fills it (the prefix's bytes, then the weights the callback
// produces), hashes it and writes it at its offset with pwrite; the chunk
// digests then give the content hash, written into the header last. The
// file is an AtomicFile: it appears at its path complete, or not at all.
//
//===----------------------------------------------------------------------===//

#include "format/EngineWriter.h"
#include "format/Codec.h"
#include "format/Hash.h"
#include "sits/AtomicFile.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <memory>
#include <mutex>
#include <sched.h>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

namespace sits {
namespace format {

namespace {

bool writeAllAt(int fd, const uint8_t *data, uint64_t size, uint64_t offset) {
  while (size) {
    ssize_t n = ::pwrite(fd, data, std::min<uint64_t>(size, 1u << 30),
                         static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return false;
    data += n;
    size -= static_cast<uint64_t>(n);
    offset += static_cast<uint64_t>(n);
  }
  return true;
}

} // namespace

unsigned defaultWriterThreads() {
  cpu_set_t set;
  if (::sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0)
    return static_cast<unsigned>(CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

bool validateStreamedEngine(StreamedEngine &engine, const RuntimeConfig &config,
                            std::string *error) {
  if (!engine.contents.weights.empty() || engine.contents.weightsData) {
    *error = "a streamed engine's contents hold weights";
    return false;
  }
  // validateContents reads only the section's size: point weightsData at a
  // byte for the call, never at the weights.
  static const uint8_t kNone = 0;
  engine.contents.weightsData = &kNone;
  engine.contents.weightsBytes = engine.weightBytes;
  bool ok = validateContents(engine.contents, config, error);
  engine.contents.weightsData = nullptr;
  engine.contents.weightsBytes = 0;
  return ok;
}

bool writeEngineWithFill(const EngineContents &contents, uint64_t weightBytes,
                         const WeightSectionFill &fill, const std::string &path,
                         const WriteOptions &options, unsigned threads,
                         std::string *error) {
  struct stat existing;
  if (!options.force && ::stat(path.c_str(), &existing) == 0) {
    *error = "'" + path + "' already exists (use --force to replace it)";
    return false;
  }
  std::vector<uint8_t> prefix;
  if (!encodePrefix(contents, weightBytes, &prefix, error))
    return false;
  uint64_t weightsOffset = prefix.size();
  uint64_t fileBytes;
  if (!checkedAdd(weightsOffset, weightBytes, &fileBytes)) {
    *error = "engine is too large to address";
    return false;
  }

  AtomicFile file;
  if (!file.create(path, error))
    return false;
#ifdef __linux__
  // Reserve the space first: a full disk fails here, not half-way. Only
  // where the file system supports it (no zero-filling emulation).
  if (fileBytes &&
      ::fallocate(file.fd(), 0, 0, static_cast<off_t>(fileBytes)) &&
      errno != EOPNOTSUPP && errno != ENOSYS) {
    *error = file.writeError();
    return false;
  }
#endif

  uint64_t chunks = std::max<uint64_t>(1, (fileBytes + kHashChunkBytes - 1) /
                                              kHashChunkBytes);
  std::vector<Hash> digests(chunks);
  std::atomic<uint64_t> next{0};
  std::atomic<bool> failed{false};
  std::mutex errorMutex;
  std::string firstError;
  auto fail = [&](const std::string &message) {
    std::lock_guard<std::mutex> lock(errorMutex);
    if (!failed.exchange(true))
      firstError = message;
  };
  auto work = [&] {
    // Not zeroed: every byte of a chunk is written before it is read.
    std::unique_ptr<uint8_t[]> buffer(new uint8_t[std::min<uint64_t>(
        std::max<uint64_t>(fileBytes, 1), kHashChunkBytes)]);
    for (uint64_t i = next++; i < chunks && !failed; i = next++) {
      uint64_t begin = i * kHashChunkBytes;
      uint64_t end = std::min(fileBytes, begin + kHashChunkBytes);
      uint64_t split = std::clamp(weightsOffset, begin, end);
      if (split > begin)
        std::memcpy(buffer.get(), prefix.data() + begin, split - begin);
      std::string fillError;
      if (end > split &&
          !fill(split - weightsOffset, buffer.get() + (split - begin),
                end - split, &fillError)) {
        fail(fillError.empty() ? "cannot produce the engine's weights"
                               : fillError);
        return;
      }
      digests[i] = contentChunkDigest(buffer.get(), end - begin, i);
      if (!writeAllAt(file.fd(), buffer.get(), end - begin, begin)) {
        fail(file.writeError());
        return;
      }
    }
  };
  if (threads == 0)
    threads = defaultWriterThreads();
  threads = static_cast<unsigned>(std::min<uint64_t>(threads, chunks));
  if (threads <= 1) {
    work();
  } else {
    std::vector<std::thread> workers;
    for (unsigned t = 0; t < threads; ++t)
      workers.emplace_back(work);
    for (std::thread &worker : workers)
      worker.join();
  }
  if (failed) {
    *error = firstError;
    return false;
  }

  Hash hash = combineContentDigests(fileBytes, digests);
  if (!writeAllAt(file.fd(), hash.data(), kHashBytes, kContentHashOffset)) {
    *error = file.writeError();
    return false;
  }
  return file.commit(options.force, error);
}

} // namespace format
} // namespace sits
