//===- Describe.cpp - Human-readable engine summary -----------------------===//

#include "sits/EngineFormat.h"

#include <cstdio>
#include <map>

namespace sits {
namespace format {

static std::string humanBytes(uint64_t bytes) {
  char buf[32];
  if (bytes >= (1ull << 30))
    std::snprintf(buf, sizeof(buf), "%.2f GiB", bytes / double(1ull << 30));
  else if (bytes >= (1ull << 20))
    std::snprintf(buf, sizeof(buf), "%.2f MiB", bytes / double(1ull << 20));
  else if (bytes >= 1024)
    std::snprintf(buf, sizeof(buf), "%.1f KiB", bytes / 1024.0);
  else
    std::snprintf(buf, sizeof(buf), "%llu B", (unsigned long long)bytes);
  return buf;
}

std::string describeEngine(const Header &header, const EngineContents &contents,
                           const RuntimeConfig &config, bool verbose) {
  std::string out;
  auto line = [&](const std::string &text) { out += text + "\n"; };
  line("engine format " + std::to_string(header.formatMajor) + "." +
       std::to_string(header.formatMinor) + ", target sm_" +
       std::to_string(header.targetSm) + ", CUDA " +
       std::to_string(header.cudaVersion / 1000) + "." +
       std::to_string(header.cudaVersion % 1000 / 10) + ", " +
       humanBytes(header.fileBytes));
  line("source model sha256 " + hashToHex(header.sourceModelHash));
  line("content hash        " + hashToHex(header.contentHash));
  line("model: " + (config.modelName.empty() ? "(unnamed)" : config.modelName) +
       ", vocab " + std::to_string(config.vocabSize) +
       (config.tokenizer == TokenizerKind::Bytes ? " (bytes)" : ""));
  if (!contents.tokenizerFiles.empty()) {
    std::string files;
    for (const TextFile &file : contents.tokenizerFiles)
      files += (files.empty() ? "" : ", ") + file.name + " (" +
               humanBytes(file.content.size()) + ")";
    line("tokenizer files: " + files);
  }
  std::string buckets;
  for (uint32_t b : config.batchBuckets)
    buckets += (buckets.empty() ? "" : ",") + std::to_string(b);
  line("limits: max batch " + std::to_string(config.maxBatch) +
       ", max sequence " + std::to_string(config.maxSeqLen) +
       ", max prefill chunk " + std::to_string(config.maxPrefillTokens) +
       ", graph buckets " + buckets +
       (config.packedSteps ? ", packed steps" : "") +
       (config.fewRowsMaxTokens
            ? ", prefill_few up to " + std::to_string(config.fewRowsMaxTokens) +
                  " tokens"
            : ""));
  const KVCacheConfig &kv = config.kvCache;
  line("kv cache: " + std::to_string(kv.layers) + " layers x " +
       std::to_string(kv.maxBatch) + " seqs x " + std::to_string(kv.kvHeads) +
       " kv heads x " + std::to_string(kv.capacity) + " tokens x " +
       std::to_string(kv.headDim) + " dims, " + dtypeName(kv.dtype) + ", " +
       kv.layout + ", " +
       humanBytes(kv.bufferBytes(true) + kv.bufferBytes(false)));
  {
    double perToken = kv.bytesPerToken();
    char buf[256];
    std::snprintf(buf, sizeof(buf),
                  "kv cache: %.1f bytes per token, %u tokens x %u sequences",
                  perToken, kv.capacity, kv.maxBatch);
    line(buf);
    if (kv.paged())
      line("kv cache: paged, " + std::to_string(kv.blocks) + " blocks of " +
           std::to_string(kv.blockTokens) + " tokens (" +
           std::to_string(kv.maxBlocksPerSeq()) +
           " a full sequence), block table \"" + kv.blockTable + "\"");
    if (kv.coldBits)
      line("kv cache: int" + std::to_string(kv.coldBits) + " cold part, " +
           (kv.perChannelKeys ? "per-channel keys in blocks of " +
                                    std::to_string(kv.channelBlock) + " tokens"
                              : std::string("per-token keys")) +
           ", groups of " + std::to_string(kv.groupSize) +
           " channels, hot window " + std::to_string(kv.hotWindow) + " (" +
           std::to_string(kv.hotRows) + " ring rows, " +
           humanBytes(kv.layers * (kv.quantLayout(true).hotBytes +
                                   kv.quantLayout(false).hotBytes)) +
           ")");
  }

  line("sections:");
  for (const SectionEntry &s : header.sections) {
    char buf[128];
    std::snprintf(buf, sizeof(buf), "  %-9s offset %12llu  %s",
                  sectionKindName(s.kind), (unsigned long long)s.offset,
                  humanBytes(s.bytes).c_str());
    line(buf);
  }

  std::map<uint32_t, uint64_t> roleBytes, roleCount;
  for (const BufferDesc &b : contents.buffers) {
    roleBytes[uint32_t(b.role)] += b.bytes;
    ++roleCount[uint32_t(b.role)];
  }
  // Quantized weights (i8/i4x2 levels), part of the weight bytes.
  std::map<uint32_t, uint64_t> levelBytes, levelCount;
  for (const BufferDesc &b : contents.buffers)
    if (b.dtype == DType::I8 || b.dtype == DType::I4X2) {
      levelBytes[uint32_t(b.dtype)] += b.bytes;
      ++levelCount[uint32_t(b.dtype)];
    }
  line("buffers: " + std::to_string(contents.buffers.size()));
  for (const auto &entry : roleBytes) {
    line(std::string("  ") + bufferRoleName(entry.first) + ": " +
         std::to_string(roleCount[entry.first]) + ", " +
         humanBytes(entry.second));
    if (entry.first == uint32_t(BufferRole::Weight))
      for (const auto &level : levelBytes)
        line("    of which quantized levels: " +
             std::to_string(levelCount[level.first]) + " " +
             dtypeName(DType(level.first)) + ", " + humanBytes(level.second));
  }
  uint64_t images = 0;
  bool anyPtx = false;
  for (const ModuleImage &m : contents.modules) {
    images += m.cubin.size() + m.ptx.size();
    anyPtx |= !m.ptx.empty();
  }
  line("kernels: " + std::to_string(contents.kernels.size()) + " in " +
       std::to_string(contents.modules.size()) + " modules (" +
       humanBytes(images) + (anyPtx ? ", with PTX" : ", cubin only") + ")");
  for (const Program &p : contents.programs)
    line("program " + p.name + ": " + std::to_string(p.launches.size()) +
         " launches");
  const PersistentDecode &pd = contents.persistentDecode;
  if (!pd.empty()) {
    std::string batches;
    for (const PersistentBucket &bucket : pd.buckets)
      batches += (batches.empty() ? "" : ", ") + std::to_string(bucket.batch);
    line("persistent decode: " + std::to_string(pd.buckets.size()) +
         " kernels of " + std::to_string(pd.blocks) + " blocks, buckets " +
         batches);
    for (const PersistentBucket &bucket : pd.buckets)
      line("  batch " + std::to_string(bucket.batch) + ": " +
           (bucket.kernel < contents.kernels.size()
                ? contents.kernels[bucket.kernel].function
                : std::string("?")) +
           " block(" + std::to_string(bucket.threads) + ") smem " +
           std::to_string(bucket.sharedBytes) + ", " +
           std::to_string(bucket.argOffsets.size()) + " tasks, arguments " +
           std::to_string(bucket.argBytes) + " B");
  }

  if (!verbose)
    return out;
  line("buffer list:");
  for (size_t i = 0; i < contents.buffers.size(); ++i) {
    const BufferDesc &b = contents.buffers[i];
    std::string shape;
    for (uint64_t d : b.shape)
      shape += (shape.empty() ? "" : "x") + std::to_string(d);
    line("  #" + std::to_string(i) + " " + b.name + " " +
         bufferRoleName(uint32_t(b.role)) + " " + dtypeName(b.dtype) + "[" +
         shape + "] " + std::to_string(b.bytes) + " B" +
         (b.role == BufferRole::Weight ? " @" + std::to_string(b.offset) : ""));
  }
  for (const Program &p : contents.programs) {
    line("program " + p.name + ":");
    for (size_t i = 0; i < p.launches.size(); ++i) {
      const Launch &l = p.launches[i];
      std::string args;
      for (const LaunchArg &a : l.args) {
        args += args.empty() ? "" : ", ";
        switch (a.kind) {
        case ArgKind::BufferAddress:
          args += "&" +
                  (a.buffer < contents.buffers.size()
                       ? contents.buffers[a.buffer].name
                       : std::string("?")) +
                  (a.offset ? "+" + std::to_string(a.offset) : "");
          break;
        case ArgKind::Int32:
          args += "i32 " + a.expr.toString();
          break;
        case ArgKind::Int64:
          args += "i64 " + a.expr.toString();
          break;
        case ArgKind::Float32:
          args += "f32 " + std::to_string(a.f32);
          break;
        }
      }
      std::string kernel = l.kernel < contents.kernels.size()
                               ? contents.kernels[l.kernel].function
                               : "?";
      line("  " + std::to_string(i) + ": " + kernel + " grid(" +
           l.grid[0].toString() + ", " + l.grid[1].toString() + ", " +
           l.grid[2].toString() + ") block(" + l.block[0].toString() + ", " +
           l.block[1].toString() + ", " + l.block[2].toString() + ") smem " +
           l.sharedBytes.toString() + " (" + args + ")");
    }
  }
  line("metadata:");
  out += contents.metadataJson;
  out += "\n";
  return out;
}

} // namespace format
} // namespace sits
