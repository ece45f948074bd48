//===- Persistent.cpp - The persistent decode section ---------------------===//
//
// Layout (format 1.3, optional; integers little-endian):
//
//   u32 blocks, u32 bucketCount,
//   { u32 batch, u32 kernel, u32 threads, u32 sharedBytes, u32 argBytes,
//     u32 taskCount, u32 argOffset[taskCount] }*
//
// and the rules validateContents enforces on it: each bucket's kernel is in
// a module of its own (the runtime loads that module once per session, for
// its counters), its tasks are the decode program's launches, and each
// launch's argument block fits the table where the kernel reads it.
//
//===----------------------------------------------------------------------===//

#include "format/Codec.h"

#include <climits>
#include <cstring>

namespace sits {
namespace format {

const PersistentBucket *PersistentDecode::find(uint32_t batch) const {
  for (const PersistentBucket &bucket : buckets)
    if (bucket.batch == batch)
      return &bucket;
  return nullptr;
}

uint64_t getArgumentBlockLayout(const Launch &launch,
                                std::vector<uint32_t> *offsets) {
  uint64_t bytes = 0, alignment = 1;
  offsets->clear();
  for (const LaunchArg &arg : launch.args) {
    const uint64_t size =
        arg.kind == ArgKind::Int32 || arg.kind == ArgKind::Float32 ? 4 : 8;
    bytes = (bytes + size - 1) / size * size;
    offsets->push_back(static_cast<uint32_t>(bytes));
    bytes += size;
    alignment = std::max(alignment, size);
  }
  return (bytes + alignment - 1) / alignment * alignment;
}

bool fillPersistentArguments(const EngineContents &contents,
                             const PersistentBucket &bucket,
                             const std::vector<uint64_t> &addresses,
                             std::vector<uint8_t> *table, std::string *error) {
  const Program &decode =
      contents.programs[contents.findProgram(kDecodeProgram)];
  const SymbolValues symbols =
      makeSymbols(bucket.batch, 1, contents.persistentDecode.blocks);
  table->assign(bucket.argBytes, 0);
  std::vector<uint32_t> offsets;
  for (size_t t = 0; t < decode.launches.size(); ++t) {
    const Launch &launch = decode.launches[t];
    getArgumentBlockLayout(launch, &offsets);
    uint8_t *block = table->data() + bucket.argOffsets[t];
    for (size_t a = 0; a < launch.args.size(); ++a) {
      const LaunchArg &arg = launch.args[a];
      const std::string where =
          "persistent decode bucket " + std::to_string(bucket.batch) +
          ", task " + std::to_string(t) + ", argument " + std::to_string(a);
      uint8_t *slot = block + offsets[a];
      int64_t value = 0;
      std::string why;
      switch (arg.kind) {
      case ArgKind::BufferAddress: {
        if (arg.buffer >= addresses.size()) {
          *error =
              where + ": no address for buffer " + std::to_string(arg.buffer);
          return false;
        }
        const uint64_t address = addresses[arg.buffer] + arg.offset;
        std::memcpy(slot, &address, 8);
        break;
      }
      case ArgKind::Int32:
      case ArgKind::Int64:
        if (!evalExpr(arg.expr, symbols, &value, &why)) {
          *error = where + ": " + why;
          return false;
        }
        if (arg.kind == ArgKind::Int64) {
          std::memcpy(slot, &value, 8);
          break;
        }
        if (value < INT32_MIN || value > INT32_MAX) {
          *error =
              where + ": " + std::to_string(value) + " does not fit an int32";
          return false;
        }
        {
          const int32_t narrow = static_cast<int32_t>(value);
          std::memcpy(slot, &narrow, 4);
        }
        break;
      case ArgKind::Float32:
        std::memcpy(slot, &arg.f32, 4);
        break;
      }
    }
  }
  return true;
}

std::vector<uint8_t> encodePersistent(const EngineContents &contents) {
  const PersistentDecode &persistent = contents.persistentDecode;
  ByteWriter w;
  w.u32(persistent.blocks);
  w.u32(static_cast<uint32_t>(persistent.buckets.size()));
  for (const PersistentBucket &bucket : persistent.buckets) {
    for (uint32_t value : {bucket.batch, bucket.kernel, bucket.threads,
                           bucket.sharedBytes, bucket.argBytes})
      w.u32(value);
    w.u32(static_cast<uint32_t>(bucket.argOffsets.size()));
    for (uint32_t offset : bucket.argOffsets)
      w.u32(offset);
  }
  return std::move(w.bytes());
}

bool decodePersistent(const uint8_t *data, uint64_t size,
                      EngineContents *contents, std::string *error) {
  ByteReader r(data, size);
  PersistentDecode &persistent = contents->persistentDecode;
  persistent.blocks = r.u32();
  uint32_t buckets = r.u32();
  if (r.ok() && buckets > kMaxPersistentBuckets)
    r.fail("the number of buckets (" + std::to_string(buckets) +
           ") exceeds the limit of " + std::to_string(kMaxPersistentBuckets));
  for (uint32_t b = 0; b < buckets && r.ok(); ++b) {
    PersistentBucket bucket;
    bucket.batch = r.u32();
    bucket.kernel = r.u32();
    bucket.threads = r.u32();
    bucket.sharedBytes = r.u32();
    bucket.argBytes = r.u32();
    uint32_t tasks = r.u32();
    if (r.ok() && (tasks > kMaxLaunchesPerProgram || tasks > r.remaining() / 4))
      r.fail("bucket " + std::to_string(b) + " has " + std::to_string(tasks) +
             " tasks, more than the section holds");
    for (uint32_t t = 0; t < tasks && r.ok(); ++t)
      bucket.argOffsets.push_back(r.u32());
    persistent.buckets.push_back(std::move(bucket));
  }
  if (r.ok() && !r.atEnd())
    r.fail("unexpected bytes after the buckets");
  if (!r.ok()) {
    *error = "persistent decode section: " + r.error();
    return false;
  }
  return true;
}

namespace {

std::string bucketName(const PersistentBucket &bucket) {
  return "persistent decode bucket " + std::to_string(bucket.batch);
}

/// Task t is launch t of the decode program, evaluated for the bucket:
/// blocks of one dimension within the kernel's, its shared memory within
/// the kernel's, its argument block inside its slot of the table.
bool checkTasks(const EngineContents &contents, const PersistentDecode &pd,
                const PersistentBucket &bucket, const Program &decode,
                std::string *error) {
  const std::string where = bucketName(bucket);
  if (bucket.argOffsets.size() != decode.launches.size()) {
    *error = where + " has " + std::to_string(bucket.argOffsets.size()) +
             " tasks, but the decode program has " +
             std::to_string(decode.launches.size()) +
             " launches (one task per launch)";
    return false;
  }
  SymbolValues symbols = makeSymbols(bucket.batch, 1, pd.blocks);
  std::vector<uint32_t> offsets;
  for (size_t t = 0; t < decode.launches.size(); ++t) {
    const Launch &launch = decode.launches[t];
    const std::string task = where + ", task " + std::to_string(t) +
                             " (kernel \"" +
                             contents.kernels[launch.kernel].function + "\")";
    int64_t block[3], shared;
    std::string why;
    for (int d = 0; d < 3; ++d)
      if (!evalExpr(launch.block[d], symbols, &block[d], &why)) {
        *error = task + ": " + why;
        return false;
      }
    if (!evalExpr(launch.sharedBytes, symbols, &shared, &why)) {
      *error = task + ": " + why;
      return false;
    }
    if (block[1] != 1 || block[2] != 1 || block[0] % 32 != 0 ||
        block[0] > bucket.threads) {
      *error = task + " has blocks of " + std::to_string(block[0]) + " x " +
               std::to_string(block[1]) + " x " + std::to_string(block[2]) +
               " threads; the persistent kernel runs one dimension of whole "
               "warps, at most its " +
               std::to_string(bucket.threads);
      return false;
    }
    if (shared > bucket.sharedBytes) {
      *error = task + " needs " + std::to_string(shared) +
               " bytes of shared memory, more than the persistent kernel's " +
               std::to_string(bucket.sharedBytes);
      return false;
    }
    const uint64_t begin = bucket.argOffsets[t];
    const uint64_t end = t + 1 < bucket.argOffsets.size()
                             ? bucket.argOffsets[t + 1]
                             : bucket.argBytes;
    const uint64_t bytes = getArgumentBlockLayout(launch, &offsets);
    if (begin % kPersistentArgAlignment != 0 || end < begin ||
        end - begin < bytes) {
      *error = task + ": its argument block of " + std::to_string(bytes) +
               " bytes at offset " + std::to_string(begin) +
               " does not fit its slot (offsets are increasing multiples of " +
               std::to_string(kPersistentArgAlignment) + " below argBytes " +
               std::to_string(bucket.argBytes) + ")";
      return false;
    }
  }
  return true;
}

} // namespace

bool validatePersistent(const EngineContents &contents,
                        const RuntimeConfig &config, std::string *error) {
  const PersistentDecode &pd = contents.persistentDecode;
  if (contents.formatMinor < kPersistentDecodeMinor) {
    *error = "a persistent decode section needs format 1." +
             std::to_string(kPersistentDecodeMinor) +
             ", and the header says 1." + std::to_string(contents.formatMinor);
    return false;
  }
  if (pd.blocks == 0 || pd.blocks > kMaxMultiprocessors) {
    *error = "persistent decode section: blocks " + std::to_string(pd.blocks) +
             " is outside 1.." + std::to_string(kMaxMultiprocessors);
    return false;
  }
  if (pd.buckets.empty()) {
    *error = "persistent decode section: no buckets";
    return false;
  }
  int decodeIndex = contents.findProgram(kDecodeProgram);
  if (decodeIndex < 0) {
    *error = "persistent decode section without a decode program";
    return false;
  }
  const Program &decode = contents.programs[decodeIndex];
  // The module of the persistent kernels holds nothing a program launches.
  int64_t module = -1;
  uint32_t previous = 0;
  for (const PersistentBucket &bucket : pd.buckets) {
    const std::string where = bucketName(bucket);
    if (bucket.batch <= previous || bucket.batch > config.maxBatch) {
      *error = where + ": batches must increase, within 1.." +
               std::to_string(config.maxBatch);
      return false;
    }
    previous = bucket.batch;
    if (bucket.kernel >= contents.kernels.size()) {
      *error = where + " refers to kernel " + std::to_string(bucket.kernel) +
               " of " + std::to_string(contents.kernels.size());
      return false;
    }
    const uint32_t kernelModule = contents.kernels[bucket.kernel].module;
    if (module >= 0 && kernelModule != module) {
      *error = where + ": the persistent kernels are in more than one module";
      return false;
    }
    module = kernelModule;
    if (bucket.threads < 32 || bucket.threads > 1024 ||
        bucket.threads % 32 != 0) {
      *error = where + ": threads " + std::to_string(bucket.threads) +
               " is not a multiple of 32 from 32 to 1024";
      return false;
    }
    if (bucket.sharedBytes > 227 * 1024) {
      *error = where + ": " + std::to_string(bucket.sharedBytes) +
               " bytes of shared memory exceed 227 KiB";
      return false;
    }
    if (bucket.argBytes == 0 || bucket.argBytes > kMaxPersistentArgBytes ||
        bucket.argBytes % kPersistentArgAlignment != 0) {
      *error = where + ": an argument table of " +
               std::to_string(bucket.argBytes) +
               " bytes (a multiple of 16 up to " +
               std::to_string(kMaxPersistentArgBytes) + ")";
      return false;
    }
    if (!checkTasks(contents, pd, bucket, decode, error))
      return false;
  }
  for (const Program &program : contents.programs)
    for (const Launch &launch : program.launches)
      if (contents.kernels[launch.kernel].module == module) {
        *error = "program \"" + program.name + "\" launches kernel \"" +
                 contents.kernels[launch.kernel].function +
                 "\" of the persistent kernels' module \"" +
                 contents.modules[module].name + "\"";
        return false;
      }
  return true;
}

} // namespace format
} // namespace sits
