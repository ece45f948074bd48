//===- Validate.cpp - Semantic checks of an engine's contents -------------===//
//
// Everything about an engine that can be checked without a GPU, so that
// `sits-run --check` catches a bad engine before it reaches a device, and
// the runtime can trust indices and sizes when it executes the plan.
//
//===----------------------------------------------------------------------===//

#include "format/Bytes.h"
#include "format/Codec.h"
#include "sits/EngineFormat.h"
#include "sits/Json.h"

#include <algorithm>
#include <limits>

namespace sits {
namespace format {

//===----------------------------------------------------------------------===//
// Contents
//===----------------------------------------------------------------------===//

namespace {

/// Limits of a launch that hold on every CUDA GPU of compute capability 7+.
constexpr int64_t kMaxGridX = 0x7fffffff;
constexpr int64_t kMaxGridYZ = 65535;
constexpr int64_t kMaxBlockThreads = 1024;
constexpr int64_t kMaxBlockZ = 64;
constexpr int64_t kMaxSharedBytes = 227 * 1024;

std::string launchName(const Program &program, size_t index) {
  return "launch " + std::to_string(index) + " of program \"" + program.name +
         "\"";
}

bool checkLaunchAt(const EngineContents &contents, const Program &program,
                   size_t index, const SymbolValues &symbols,
                   std::string *error) {
  const Launch &launch = program.launches[index];
  std::string where = launchName(program, index) + " (kernel \"" +
                      contents.kernels[launch.kernel].function +
                      "\", B=" + std::to_string(symbols[0]) +
                      ", S=" + std::to_string(symbols[1]) + ")";
  int64_t grid[3], block[3], shared;
  std::string why;
  for (int d = 0; d < 3; ++d) {
    if (!evalExpr(launch.grid[d], symbols, &grid[d], &why) ||
        !evalExpr(launch.block[d], symbols, &block[d], &why)) {
      *error = where + ": " + why;
      return false;
    }
  }
  if (!evalExpr(launch.sharedBytes, symbols, &shared, &why)) {
    *error = where + ": " + why;
    return false;
  }
  static const char *kAxis = "xyz";
  for (int d = 0; d < 3; ++d) {
    int64_t maxGrid = d == 0 ? kMaxGridX : kMaxGridYZ;
    if (grid[d] < 1 || grid[d] > maxGrid) {
      *error = where + ": grid." + kAxis[d] + " = " + std::to_string(grid[d]) +
               " is outside 1.." + std::to_string(maxGrid);
      return false;
    }
    int64_t maxBlock = d == 2 ? kMaxBlockZ : kMaxBlockThreads;
    if (block[d] < 1 || block[d] > maxBlock) {
      *error = where + ": block." + kAxis[d] + " = " +
               std::to_string(block[d]) + " is outside 1.." +
               std::to_string(maxBlock);
      return false;
    }
  }
  if (block[0] * block[1] * block[2] > kMaxBlockThreads) {
    *error = where + ": a block of " +
             std::to_string(block[0] * block[1] * block[2]) +
             " threads exceeds 1024";
    return false;
  }
  if (shared < 0 || shared > kMaxSharedBytes) {
    *error = where + ": " + std::to_string(shared) +
             " bytes of shared memory is outside 0.." +
             std::to_string(kMaxSharedBytes);
    return false;
  }
  for (size_t a = 0; a < launch.args.size(); ++a) {
    const LaunchArg &arg = launch.args[a];
    if (arg.kind != ArgKind::Int32 && arg.kind != ArgKind::Int64)
      continue;
    int64_t value;
    if (!evalExpr(arg.expr, symbols, &value, &why)) {
      *error = where + ", argument " + std::to_string(a) + ": " + why;
      return false;
    }
    if (arg.kind == ArgKind::Int32 &&
        (value < std::numeric_limits<int32_t>::min() ||
         value > std::numeric_limits<int32_t>::max())) {
      *error = where + ", argument " + std::to_string(a) + ": " +
               std::to_string(value) + " does not fit an int32";
      return false;
    }
  }
  return true;
}

/// The most bytes one device buffer, or all of them together, may have:
/// GPUs address 49 bits of virtual memory, so anything larger can never be
/// allocated, and the bound keeps the runtime's size arithmetic (offsets,
/// sums, batch x bytes) far from overflowing.
constexpr uint64_t kMaxDeviceBytes = uint64_t(1) << 48;

std::string shapeString(const std::vector<uint64_t> &shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

/// The shape is informative (allocation uses `bytes`), but --inspect prints
/// it and one that disagrees with the bytes means a corrupt plan: its
/// element count must be computable, and its bytes equal the buffer's for
/// weights and KV caches (the writer stores them unpadded) and fit in them
/// for the rest (the workspace and scratch are rounded up).
bool checkBufferShape(const BufferDesc &buffer, const std::string &where,
                      const RuntimeConfig &config, std::string *error) {
  uint64_t elements = 1;
  for (uint64_t dim : buffer.shape) {
    if (dim == 0) {
      *error = where + " has shape " + shapeString(buffer.shape) +
               " with a zero dimension, but holds " +
               std::to_string(buffer.bytes) + " bytes";
      return false;
    }
    if (!checkedMul(elements, dim, &elements)) {
      *error = where + " has shape " + shapeString(buffer.shape) +
               ", whose element count overflows 64 bits";
      return false;
    }
  }
  bool isCache = buffer.role == BufferRole::KeyCache ||
                 buffer.role == BufferRole::ValueCache;
  // A quantized cache's shape is [layers, layer bytes].
  uint64_t unit = isCache && config.kvCache.coldBits
                      ? 1
                      : std::max<uint64_t>(dtypeBytes(buffer.dtype), 1);
  uint64_t shapeBytes;
  bool exact = buffer.role == BufferRole::Weight || isCache;
  if (!checkedMul(elements, unit, &shapeBytes) ||
      (exact ? shapeBytes != buffer.bytes : shapeBytes > buffer.bytes)) {
    *error = where + " has shape " + shapeString(buffer.shape) + " of " +
             dtypeName(buffer.dtype) + ", which does not " +
             (exact ? "match" : "fit in") + " its " +
             std::to_string(buffer.bytes) + " bytes";
    return false;
  }
  return true;
}

bool checkBuffers(const EngineContents &contents, const RuntimeConfig &config,
                  std::string *error) {
  uint32_t roleCount[kNumBufferRoles] = {};
  uint64_t deviceBytes = 0; // of the buffers other than weights
  for (size_t i = 0; i < contents.buffers.size(); ++i) {
    const BufferDesc &buffer = contents.buffers[i];
    std::string where =
        "buffer " + std::to_string(i) + " (\"" + buffer.name + "\")";
    uint32_t role = static_cast<uint32_t>(buffer.role);
    if (role >= kNumBufferRoles) {
      *error = where + " has unknown role " + std::to_string(role);
      return false;
    }
    if (dtypeBytes(buffer.dtype) == 0) {
      *error = where + " has unknown element type " +
               std::to_string(static_cast<uint32_t>(buffer.dtype));
      return false;
    }
    if (buffer.bytes == 0) {
      *error = where + " is empty";
      return false;
    }
    if (size_t bad = findInvalidUtf8(buffer.name); bad != std::string::npos) {
      *error = "the name of buffer " + std::to_string(i) +
               " is not valid UTF-8 (byte " + std::to_string(bad) + ")";
      return false;
    }
    ++roleCount[role];
    if (buffer.role != BufferRole::Weight) {
      if (buffer.bytes > kMaxDeviceBytes) {
        *error = where + " has " + std::to_string(buffer.bytes) +
                 " bytes, more than the 2^48 a GPU can address";
        return false;
      }
      deviceBytes += buffer.bytes; // < 2^49: no overflow
      if (deviceBytes > kMaxDeviceBytes) {
        *error = where + " brings the device buffers to " +
                 std::to_string(deviceBytes) +
                 " bytes, more than the 2^48 a GPU can address";
        return false;
      }
    }
    if (buffer.role == BufferRole::Weight) {
      uint64_t end;
      if (buffer.offset % kWeightAlignment != 0) {
        *error = where + " starts at weights offset " +
                 std::to_string(buffer.offset) + ", not a multiple of " +
                 std::to_string(kWeightAlignment);
        return false;
      }
      if (!checkedAdd(buffer.offset, buffer.bytes, &end) ||
          end > contents.weightSize()) {
        *error = where + " lies outside the weights section (offset " +
                 std::to_string(buffer.offset) + ", " +
                 std::to_string(buffer.bytes) + " bytes, section " +
                 std::to_string(contents.weightSize()) + " bytes)";
        return false;
      }
      // Quantized levels: [rows, row bytes], rows padded to 16 bytes (the
      // kernels read them with 16-byte loads).
      if (buffer.dtype == DType::I8 || buffer.dtype == DType::I4X2) {
        if (buffer.shape.size() != 2 || buffer.shape[1] == 0 ||
            buffer.shape[1] % 16 != 0 || buffer.shape[0] == 0 ||
            buffer.shape[0] > buffer.bytes / buffer.shape[1] ||
            buffer.shape[0] * buffer.shape[1] != buffer.bytes) {
          *error = where + " (" + dtypeName(buffer.dtype) +
                   " levels) must be [rows, row bytes] with row bytes a "
                   "multiple of 16 and rows x row bytes = its " +
                   std::to_string(buffer.bytes) + " bytes";
          return false;
        }
      }
    } else if (buffer.dtype == DType::I8 || buffer.dtype == DType::I4X2) {
      *error = where + " holds quantized levels but is not a weight";
      return false;
    } else if (buffer.offset != 0) {
      *error = where + " is not a weight but has an offset";
      return false;
    }
  }
  // The runtime binds these by role: exactly one of each.
  const BufferRole singletons[] = {
      BufferRole::KeyCache,    BufferRole::ValueCache,  BufferRole::TokenIds,
      BufferRole::PastLengths, BufferRole::StepLengths, BufferRole::Logits};
  for (BufferRole role : singletons) {
    uint32_t n = roleCount[static_cast<uint32_t>(role)];
    if (n != 1) {
      *error = std::string("the plan must have exactly one \"") +
               bufferRoleName(static_cast<uint32_t>(role)) +
               "\" buffer, it has " + std::to_string(n);
      return false;
    }
  }
  uint64_t keyBytes = config.kvCache.bufferBytes(true);
  uint64_t valueBytes = config.kvCache.bufferBytes(false);
  uint64_t tokenBytes = uint64_t(config.maxBatch) * config.maxPrefillTokens * 4;
  uint64_t logitBytes = uint64_t(config.maxBatch) * config.vocabSize * 4;
  for (const BufferDesc &buffer : contents.buffers) {
    std::string where = "buffer \"" + buffer.name + "\"";
    auto needType = [&](DType type) {
      if (buffer.dtype == type)
        return true;
      *error = where + " (" + bufferRoleName(uint32_t(buffer.role)) +
               ") must have element type " + dtypeName(type);
      return false;
    };
    auto needBytes = [&](uint64_t bytes, bool exact) {
      if (exact ? buffer.bytes == bytes : buffer.bytes >= bytes)
        return true;
      *error = where + " (" + bufferRoleName(uint32_t(buffer.role)) + ") has " +
               std::to_string(buffer.bytes) + " bytes, " +
               (exact ? "the metadata needs exactly " : "needs at least ") +
               std::to_string(bytes);
      return false;
    };
    switch (buffer.role) {
    case BufferRole::KeyCache:
    case BufferRole::ValueCache:
      if (!needType(config.kvCache.dtype) ||
          !needBytes(buffer.role == BufferRole::KeyCache ? keyBytes
                                                         : valueBytes,
                     true))
        return false;
      break;
    case BufferRole::TokenIds:
      if (!needType(DType::I32) || !needBytes(tokenBytes, false))
        return false;
      break;
    case BufferRole::PastLengths:
    case BufferRole::StepLengths:
      if (!needType(DType::I32) ||
          !needBytes(uint64_t(config.maxBatch) * 4, false))
        return false;
      break;
    case BufferRole::Logits:
      if (!needType(DType::F32) || !needBytes(logitBytes, false))
        return false;
      break;
    default:
      break;
    }
  }
  if (config.kvCache.paged()) {
    const KVCacheConfig &kv = config.kvCache;
    const BufferDesc *table = nullptr;
    for (const BufferDesc &buffer : contents.buffers)
      if (buffer.name == kv.blockTable)
        table = table ? nullptr : &buffer;
    const uint64_t bytes = uint64_t(kv.maxBatch) * kv.maxBlocksPerSeq() * 4;
    if (!table || table->role != BufferRole::Activation ||
        table->dtype != DType::I32 || table->bytes != bytes) {
      *error = "the paged KV cache's block table \"" + kv.blockTable +
               "\" must be one i32 activation buffer of " +
               std::to_string(bytes) + " bytes ([max_batch, " +
               std::to_string(kv.maxBlocksPerSeq()) + "])";
      return false;
    }
  }
  // After the role's checks, whose messages say more.
  for (size_t i = 0; i < contents.buffers.size(); ++i) {
    const BufferDesc &buffer = contents.buffers[i];
    if (!checkBufferShape(buffer,
                          "buffer " + std::to_string(i) + " (\"" + buffer.name +
                              "\")",
                          config, error))
      return false;
  }
  return true;
}

} // namespace

bool validateContents(const EngineContents &contents,
                      const RuntimeConfig &config, std::string *error) {
  for (size_t i = 0; i < contents.modules.size(); ++i) {
    const ModuleImage &module = contents.modules[i];
    if (findInvalidUtf8(module.name) != std::string::npos) {
      *error =
          "the name of module " + std::to_string(i) + " is not valid UTF-8";
      return false;
    }
    if (module.cubin.empty() && module.ptx.empty()) {
      *error = "module " + std::to_string(i) + " (\"" + module.name +
               "\") has neither a cubin nor PTX";
      return false;
    }
    if (!module.cubin.empty() && module.sm != contents.targetSm) {
      *error = "module \"" + module.name + "\" holds a cubin for sm_" +
               std::to_string(module.sm) + " in an engine for sm_" +
               std::to_string(contents.targetSm);
      return false;
    }
  }
  for (size_t i = 0; i < contents.kernels.size(); ++i) {
    const KernelRef &kernel = contents.kernels[i];
    if (kernel.module >= contents.modules.size()) {
      *error = "kernel " + std::to_string(i) + " (\"" + kernel.function +
               "\") refers to module " + std::to_string(kernel.module) +
               " of " + std::to_string(contents.modules.size());
      return false;
    }
    if (kernel.function.empty()) {
      *error = "kernel " + std::to_string(i) + " has no function name";
      return false;
    }
    if (findInvalidUtf8(kernel.function) != std::string::npos) {
      *error = "the function name of kernel " + std::to_string(i) +
               " is not valid UTF-8";
      return false;
    }
  }
  if (!checkBuffers(contents, config, error))
    return false;

  for (size_t p = 0; p < contents.programs.size(); ++p) {
    if (findInvalidUtf8(contents.programs[p].name) != std::string::npos) {
      *error =
          "the name of program " + std::to_string(p) + " is not valid UTF-8";
      return false;
    }
    for (size_t q = 0; q < p; ++q) {
      if (contents.programs[p].name == contents.programs[q].name) {
        *error = "program \"" + contents.programs[p].name + "\" appears twice";
        return false;
      }
    }
  }
  for (const char *required : {kPrefillProgram, kDecodeProgram}) {
    if (contents.findProgram(required) < 0) {
      *error = std::string("the plan has no \"") + required + "\" program";
      return false;
    }
  }
  if ((contents.findProgram(kFewRowPrefillProgram) >= 0) !=
      (config.fewRowsMaxTokens != 0)) {
    *error = config.fewRowsMaxTokens
                 ? std::string("metadata \"launch.few_rows_max_tokens\" "
                               "names a program the plan lacks, \"") +
                       kFewRowPrefillProgram + "\""
                 : std::string("the plan has a \"") + kFewRowPrefillProgram +
                       "\" program, but the metadata no "
                       "\"launch.few_rows_max_tokens\"";
    return false;
  }

  for (const Program &program : contents.programs) {
    for (size_t i = 0; i < program.launches.size(); ++i) {
      const Launch &launch = program.launches[i];
      std::string where = launchName(program, i);
      if (launch.kernel >= contents.kernels.size()) {
        *error = where + " refers to kernel " + std::to_string(launch.kernel) +
                 " of " + std::to_string(contents.kernels.size());
        return false;
      }
      std::string why;
      for (int d = 0; d < 3; ++d) {
        if (!checkExpr(launch.grid[d], &why) ||
            !checkExpr(launch.block[d], &why)) {
          *error = where + ": " + why;
          return false;
        }
      }
      if (!checkExpr(launch.sharedBytes, &why)) {
        *error = where + ", shared memory: " + why;
        return false;
      }
      for (size_t a = 0; a < launch.args.size(); ++a) {
        const LaunchArg &arg = launch.args[a];
        std::string argWhere = where + ", argument " + std::to_string(a);
        switch (arg.kind) {
        case ArgKind::BufferAddress:
          if (arg.buffer >= contents.buffers.size()) {
            *error = argWhere + " refers to buffer " +
                     std::to_string(arg.buffer) + " of " +
                     std::to_string(contents.buffers.size());
            return false;
          }
          if (arg.offset >= contents.buffers[arg.buffer].bytes) {
            *error = argWhere + " points " + std::to_string(arg.offset) +
                     " bytes into buffer \"" +
                     contents.buffers[arg.buffer].name + "\" of " +
                     std::to_string(contents.buffers[arg.buffer].bytes) +
                     " bytes";
            return false;
          }
          break;
        case ArgKind::Int32:
        case ArgKind::Int64:
          if (!checkExpr(arg.expr, &why)) {
            *error = argWhere + ": " + why;
            return false;
          }
          break;
        case ArgKind::Float32:
          break;
        default:
          *error = argWhere + " has unknown kind " +
                   std::to_string(static_cast<uint32_t>(arg.kind));
          return false;
        }
      }
      // Evaluate at the smallest and largest step the program runs with.
      bool isPrefill = program.name == kPrefillProgram;
      bool isFewRows = program.name == kFewRowPrefillProgram;
      bool isInit = program.name == kInitProgram;
      int64_t maxSeq = isPrefill ? config.maxPrefillTokens : 1;
      int64_t minBatch = isInit ? config.maxBatch : 1;
      std::vector<SymbolValues> steps = {makeSymbols(minBatch, 1, 1)};
      if (isFewRows) {
        // Packed steps of at most few_rows_max_tokens rows.
        const int64_t rows = config.fewRowsMaxTokens;
        const int64_t seq = std::min<int64_t>(rows, config.maxPrefillTokens);
        steps.push_back(
            makePackedSymbols(config.maxBatch, seq, rows, kMaxMultiprocessors));
        steps.push_back(
            makePackedSymbols(config.maxBatch, seq, 1, kMaxMultiprocessors));
      } else {
        steps.push_back(
            makeSymbols(config.maxBatch, maxSeq, kMaxMultiprocessors));
      }
      // A packed prefill may hold a single token among all the sequences.
      if (isPrefill && config.packedSteps)
        steps.push_back(
            makePackedSymbols(config.maxBatch, maxSeq, 1, kMaxMultiprocessors));
      for (const SymbolValues &symbols : steps)
        if (!checkLaunchAt(contents, program, i, symbols, error))
          return false;
    }
  }
  if (!contents.persistentDecode.empty() &&
      !validatePersistent(contents, config, error))
    return false;
  return true;
}

} // namespace format
} // namespace sits
