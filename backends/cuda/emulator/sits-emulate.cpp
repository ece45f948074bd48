//===- sits-emulate.cpp - Run an engine's kernels on the CPU --------------===//
//
//   sits-emulate ENGINE --cuda KERNELS.cu score --tokens 1,2,3[;4,5,6]
//                [--prefill N] --out LOGITS.npy
//   sits-emulate ENGINE --cuda KERNELS.cu generate --tokens 1,2,3[;...]
//                --max-new-tokens N
//
// Runs an engine's launch plan on the CPU: the generated CUDA source (from
// `sitsc --emit=cuda` with the same options) is compiled as host C++ with
// the emulation header (every GPU thread a fiber), and the programs run as
// the runtime runs them (prefill chunks, advancing lengths, decode steps
// padded to a batch bucket, greedy sampling). It is how the kernels and the
// launch plan are tested without a GPU; test/gpu/sits-score on a GPU takes
// the same arguments and prints the same output.
//
// Beyond the GPU's behaviour it checks: writes past a buffer's end (guard
// bytes around every buffer), writes to the weights (mapped read-only), and
// with --poison, reads of activations or cache rows nothing wrote (they
// start as NaN instead of zeros). --reverse-schedule runs the threads of a
// block last to first between barriers: a missing barrier before a read of
// shared memory shows in one order or the other.
//
// generate --stagger N starts sequence b after b x N steps and feeds each
// prompt in chunks of --chunk tokens (default the engine's prefill chunk)
// beside the other sequences' decode tokens, as Session::step does: such a
// step runs the prefill program over every sequence, packed when the engine
// takes packed steps (--padded pads it anyway). A prefill step of at most
// the engine's few_rows_max_tokens rows runs prefill_few, as the runtime
// does (--gemm-prefill: prefill always). A sequence's tokens are those it
// gets alone.
//
// --persistent-decode runs each decode step as its bucket's persistent
// decode kernel (a source from sitsc --decode-kernels=persistent, compiled
// once more with SITS_PERSISTENT_DECODE; PersistentDecode.h): the engine,
// compiled with --decode-kernels=graph, gives the tasks' arguments.
//
// An engine with a paged KV cache gets its blocks as the runtime's session
// hands them out: as each sequence grows, from a free list in shuffled order
// (--block-order=shuffled, the default: a sequence's blocks are scattered
// and out of order) or in pool order (sequential); entries of no block hold
// -1.
//
//===----------------------------------------------------------------------===//

#include "backends/cuda/emulator/EmulateOptions.h"
#include "backends/cuda/emulator/PersistentDecode.h"
#include "backends/cuda/emulator/QuantPrefix.h"
#include "sits/AtomicFile.h"
#include "sits/EngineFormat.h"
#include "sits/KVCalibration.h"
#include "src/BlockAllocator.h"
#include "src/PrefillPlan.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace {

using namespace sits;
using emulate::die;
using emulate::Options;

//===----------------------------------------------------------------------===//
// The engine on the CPU
//===----------------------------------------------------------------------===//

using LaunchFn = int (*)(void (*)(void **), const unsigned *, const unsigned *,
                         unsigned, void **, char *, unsigned);

constexpr size_t kGuardBytes = 4096;
constexpr unsigned char kGuardByte = 0xa5;

class Emulator {
public:
  /// `persistentObject`: the persistent decode kernels (or "").
  Emulator(const Options &options, const std::string &object,
           const std::string &persistentObject);
  const format::RuntimeConfig &config() const { return cfg; }
  /// The u64 words of the buffer named `name` (empty when there is none).
  std::vector<uint64_t> words(const std::string &name) const {
    for (size_t i = 0; i < contents.buffers.size(); ++i)
      if (contents.buffers[i].name == name &&
          contents.buffers[i].role != format::BufferRole::Weight) {
        std::vector<uint64_t> out(contents.buffers[i].bytes / 8);
        std::memcpy(out.data(), addresses[i], out.size() * 8);
        return out;
      }
    return {};
  }

  /// Prefills `prompts`; returns each sequence's logits for its last token.
  std::vector<std::vector<float>>
  prefill(const std::vector<std::vector<int32_t>> &prompts);
  /// One decode step: `tokens[b]` for active sequences (`active[b]`).
  std::vector<std::vector<float>> decode(const std::vector<int32_t> &tokens,
                                         const std::vector<bool> &active);
  /// One step of Session::step: `inputs[b]` new tokens for sequence b (none:
  /// it waits), as a decode step when each has one, else as a prefill,
  /// packed unless `padded` or the engine takes no packed steps.
  std::vector<std::vector<float>>
  step(const std::vector<std::vector<int32_t>> &inputs, bool padded);
  /// A paged quantized cache's prefix caching as the runtime does it
  /// (SessionQuantPages.cpp): `a` prefilled in sequence 0, its first `hit`
  /// blocks loaded into sequence 1 (shared below QuantPrefixRule's first
  /// rewritten token, copied above, the FP16 rows from it restored), the
  /// rest of `b` prefilled there; `count` greedy tokens of `b`.
  std::vector<int32_t> resumeFromPrefix(const std::vector<int32_t> &a,
                                        const std::vector<int32_t> &b,
                                        uint32_t hit, int64_t count);
  /// Prints the TVC head's counters (engines with one), as sits-score does.
  void printTvcCounters() const;
  /// Prints "programs: NAME STEPS ..." in name order.
  void printProgramRuns() const {
    std::printf("programs:");
    for (const auto &[name, steps] : programRuns)
      std::printf(" %s %llu", name.c_str(), (unsigned long long)steps);
    std::printf("\n");
  }

private:
  void run(const std::string &program, uint32_t batch, uint32_t seq,
           uint64_t tokens = 0);
  /// The program a prefill step of `rows` token rows runs.
  std::string prefillProgramFor(uint64_t rows) const {
    return gemmPrefill ? format::kPrefillProgram : cfg.prefillProgramFor(rows);
  }
  void advance(uint32_t batch);
  std::vector<std::vector<float>> readLogits(uint32_t batch);
  void checkGuards(const std::string &what);
  /// Paged cache: blocks for every fed sequence's rows, or all back.
  void allocateBlocks(uint32_t batch);
  void releaseBlocks();

  std::unique_ptr<format::EngineFile> file;
  format::Header header;
  format::EngineContents contents;
  format::RuntimeConfig cfg;
  LaunchFn launchFn = nullptr;
  std::vector<void (*)(void **)> kernels;
  std::vector<std::vector<unsigned char>> storage; ///< non-weight buffers
  std::vector<char *> addresses;
  int32_t *tokenIds = nullptr, *pastLengths = nullptr, *stepLengths = nullptr;
  float *logits = nullptr;
  int64_t multiprocessors = 2;
  uint32_t bucketFor(uint32_t batch) const;
  int32_t *blockTable = nullptr;   ///< paged cache: [max_batch, max blocks]
  std::vector<int32_t> freeBlocks; ///< taken from the back
  std::vector<uint32_t> blocksHeld;
  bool shuffleBlocks = true;
  bool gemmPrefill = false;
  std::map<std::string, uint64_t> programRuns; ///< steps by program
  /// --persistent-decode: runs the decode steps.
  std::unique_ptr<emulate::PersistentDecode> persistent;
};

Emulator::Emulator(const Options &options, const std::string &object,
                   const std::string &persistentObject) {
  std::string error;
  file = format::EngineFile::open(options.engine, &error);
  if (!file || !format::readEngine(*file, format::ReadOptions(), &header,
                                   &contents, &cfg, &error))
    die(options.engine + ": " + error);
  void *library = dlopen(object.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!library)
    die(std::string("cannot load the compiled kernels: ") + dlerror());
  launchFn = reinterpret_cast<LaunchFn>(dlsym(library, "sits_emu_launch"));
  auto setReverse = reinterpret_cast<void (*)(int)>(
      dlsym(library, "sits_emu_set_reverse_schedule"));
  if (!launchFn || !setReverse)
    die("the compiled kernels lack the emulation entry points");
  setReverse(options.reverse ? 1 : 0);
  multiprocessors = options.multiprocessors;
  shuffleBlocks = options.shuffleBlocks;
  gemmPrefill = options.gemmPrefill;
  if (!persistentObject.empty())
    persistent = std::make_unique<emulate::PersistentDecode>(persistentObject);
  for (const format::KernelRef &kernel : contents.kernels) {
    auto fn = reinterpret_cast<void (*)(void **)>(
        dlsym(library, (kernel.function + "__emulate").c_str()));
    if (!fn)
      die("kernel " + kernel.function +
          " is not in the CUDA source (was it generated with the engine's "
          "options?)");
    kernels.push_back(fn);
  }
  for (const format::BufferDesc &buffer : contents.buffers) {
    if (buffer.role == format::BufferRole::Weight) {
      // Weights point into the read-only file mapping: a write faults.
      addresses.push_back(const_cast<char *>(reinterpret_cast<const char *>(
          contents.weightBytes() + buffer.offset)));
      continue;
    }
    storage.emplace_back(buffer.bytes + 2 * kGuardBytes + 256, kGuardByte);
    std::vector<unsigned char> &bytes = storage.back();
    // 256-aligned start, as the runtime's arena gives.
    uintptr_t base = reinterpret_cast<uintptr_t>(bytes.data()) + kGuardBytes;
    base = (base + 255) & ~uintptr_t(255);
    char *data = reinterpret_cast<char *>(base);
    // Float buffers only: NaN marks a read of what nothing wrote. Integer
    // activations (the split attention's counters) start at zero, as the
    // runtime's allocation leaves them.
    bool isFloat = buffer.dtype == format::DType::F32 ||
                   buffer.dtype == format::DType::F16 ||
                   buffer.dtype == format::DType::BF16;
    bool poisoned = options.poison && isFloat &&
                    (buffer.role == format::BufferRole::Activation ||
                     buffer.role == format::BufferRole::KeyCache ||
                     buffer.role == format::BufferRole::ValueCache);
    std::memset(data, poisoned ? 0xff : 0, buffer.bytes);
    addresses.push_back(data);
    if (cfg.kvCache.paged() && buffer.name == cfg.kvCache.blockTable)
      blockTable = reinterpret_cast<int32_t *>(data);
    switch (buffer.role) {
    case format::BufferRole::TokenIds:
      tokenIds = reinterpret_cast<int32_t *>(data);
      break;
    case format::BufferRole::PastLengths:
      pastLengths = reinterpret_cast<int32_t *>(data);
      break;
    case format::BufferRole::StepLengths:
      stepLengths = reinterpret_cast<int32_t *>(data);
      break;
    case format::BufferRole::Logits:
      logits = reinterpret_cast<float *>(data);
      break;
    default:
      break;
    }
  }
  releaseBlocks(); // every block free, for step() as for prefill()
}

void Emulator::printTvcCounters() const {
  for (size_t i = 0; i < contents.buffers.size(); ++i) {
    if (contents.buffers[i].name != "tvc_counters")
      continue;
    uint64_t counts[2];
    std::memcpy(counts, addresses[i], sizeof(counts));
    uint64_t rows = counts[0] + counts[1];
    std::printf("tvc: %llu proved, %llu fallback rows (fallback rate "
                "%.2f%%)\n",
                static_cast<unsigned long long>(counts[0]),
                static_cast<unsigned long long>(counts[1]),
                rows ? 100.0 * double(counts[1]) / double(rows) : 0.0);
  }
}

void Emulator::checkGuards(const std::string &what) {
  size_t index = 0;
  for (size_t i = 0; i < contents.buffers.size(); ++i) {
    if (contents.buffers[i].role == format::BufferRole::Weight)
      continue;
    std::vector<unsigned char> &bytes = storage[index++];
    const unsigned char *data =
        reinterpret_cast<const unsigned char *>(addresses[i]);
    const unsigned char *end = data + contents.buffers[i].bytes;
    bool ok = true;
    for (const unsigned char *p = bytes.data(); p < data; ++p)
      ok &= *p == kGuardByte;
    for (const unsigned char *p = end; p < bytes.data() + bytes.size(); ++p)
      ok &= *p == kGuardByte;
    if (!ok)
      die(what + " wrote outside buffer '" + contents.buffers[i].name + "'");
  }
}

void Emulator::run(const std::string &name, uint32_t batch, uint32_t seq,
                   uint64_t tokens) {
  int index = contents.findProgram(name);
  ++programRuns[name];
  format::SymbolValues symbols = format::makePackedSymbols(
      batch, seq, tokens ? tokens : uint64_t(batch) * seq, multiprocessors);
  const format::Program &program = contents.programs[index];
  // The persistent decode kernel runs the launches as its tasks.
  const bool asTasks = persistent && name == format::kDecodeProgram;
  std::vector<emulate::PersistentDecode::Task> tasks;
  for (size_t i = 0; i < program.launches.size(); ++i) {
    const format::Launch &launch = program.launches[i];
    std::string what = name + " launch " + std::to_string(i) + " (" +
                       contents.kernels[launch.kernel].function +
                       ") at B=" + std::to_string(batch) +
                       " S=" + std::to_string(seq);
    unsigned grid[3], block[3];
    int64_t value = 0;
    std::string error;
    for (int d = 0; d < 3; ++d) {
      if (!format::evalExpr(launch.grid[d], symbols, &value, &error))
        die(what + ": " + error);
      grid[d] = static_cast<unsigned>(value);
      if (!format::evalExpr(launch.block[d], symbols, &value, &error))
        die(what + ": " + error);
      block[d] = static_cast<unsigned>(value);
    }
    if (!format::evalExpr(launch.sharedBytes, symbols, &value, &error))
      die(what + ": " + error);
    unsigned shared = static_cast<unsigned>(value);
    std::vector<uint64_t> slots(launch.args.size());
    std::vector<void *> args;
    for (size_t a = 0; a < launch.args.size(); ++a) {
      const format::LaunchArg &arg = launch.args[a];
      if (arg.kind == format::ArgKind::BufferAddress) {
        char *pointer = addresses[arg.buffer] + arg.offset;
        std::memcpy(&slots[a], &pointer, sizeof(pointer));
      } else if (arg.kind == format::ArgKind::Float32) {
        std::memcpy(&slots[a], &arg.f32, 4);
      } else {
        if (!format::evalExpr(arg.expr, symbols, &value, &error))
          die(what + ": " + error);
        if (arg.kind == format::ArgKind::Int32) {
          int32_t narrow = static_cast<int32_t>(value);
          std::memcpy(&slots[a], &narrow, 4);
        } else {
          std::memcpy(&slots[a], &value, 8);
        }
      }
      args.push_back(&slots[a]);
    }
    if (asTasks) { // the vectors' storage moves with them
      tasks.push_back({contents.kernels[launch.kernel].function,
                       std::move(slots), std::move(args)});
      continue;
    }
    char message[512] = {0};
    if (launchFn(kernels[launch.kernel], grid, block, shared, args.data(),
                 message, sizeof(message)))
      die(what + ": " + message);
    checkGuards(what);
  }
  if (asTasks) {
    const std::string what =
        name + " persistent kernel at B=" + std::to_string(batch);
    persistent->run(batch, tasks, multiprocessors, what);
    checkGuards(what);
  }
}

void Emulator::releaseBlocks() {
  const format::KVCacheConfig &kv = cfg.kvCache;
  if (!kv.paged())
    return;
  std::fill_n(blockTable, uint64_t(kv.maxBatch) * kv.maxBlocksPerSeq(), -1);
  blocksHeld.assign(kv.maxBatch, 0);
  freeBlocks.resize(kv.blocks);
  for (uint32_t i = 0; i < kv.blocks; ++i)
    freeBlocks[i] = static_cast<int32_t>(kv.blocks - 1 - i); // 0 first
  // A fixed Fisher-Yates shuffle (its own generator: the same order on
  // every platform).
  uint64_t state = 0x9e3779b97f4a7c15ull;
  for (uint32_t i = kv.blocks; shuffleBlocks && i > 1; --i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    std::swap(freeBlocks[i - 1], freeBlocks[(state >> 33) % i]);
  }
}

void Emulator::allocateBlocks(uint32_t batch) {
  const format::KVCacheConfig &kv = cfg.kvCache;
  if (!kv.paged())
    return;
  for (uint32_t b = 0; b < batch; ++b) {
    if (stepLengths[b] <= 0)
      continue;
    const uint32_t rows = uint32_t(pastLengths[b] + stepLengths[b]);
    const uint32_t needed = (rows + kv.blockTokens - 1) / kv.blockTokens;
    for (; blocksHeld[b] < needed; ++blocksHeld[b]) {
      if (freeBlocks.empty())
        die("the paged KV cache's pool of " + std::to_string(kv.blocks) +
            " blocks is full");
      blockTable[uint64_t(b) * kv.maxBlocksPerSeq() + blocksHeld[b]] =
          freeBlocks.back();
      freeBlocks.pop_back();
    }
  }
}

void Emulator::advance(uint32_t batch) {
  for (uint32_t b = 0; b < batch; ++b)
    pastLengths[b] += stepLengths[b];
}

std::vector<std::vector<float>> Emulator::readLogits(uint32_t batch) {
  std::vector<std::vector<float>> rows(batch);
  for (uint32_t b = 0; b < batch; ++b)
    rows[b].assign(logits + uint64_t(b) * cfg.vocabSize,
                   logits + uint64_t(b + 1) * cfg.vocabSize);
  return rows;
}

uint32_t Emulator::bucketFor(uint32_t batch) const {
  std::vector<uint32_t> buckets = cfg.batchBuckets;
  buckets.push_back(cfg.maxBatch);
  std::sort(buckets.begin(), buckets.end());
  for (uint32_t b : buckets)
    if (b >= batch)
      return b;
  return cfg.maxBatch;
}

std::vector<std::vector<float>>
Emulator::prefill(const std::vector<std::vector<int32_t>> &prompts) {
  uint32_t batch = static_cast<uint32_t>(prompts.size());
  if (batch == 0 || batch > cfg.maxBatch)
    die("the engine takes 1 to " + std::to_string(cfg.maxBatch) + " sequences");
  std::memset(pastLengths, 0, cfg.maxBatch * 4);
  releaseBlocks();
  std::vector<uint32_t> lengths;
  for (const auto &p : prompts) {
    if (p.empty() || p.size() > cfg.maxSeqLen)
      die("a prompt is empty or longer than the KV cache");
    for (int32_t t : p)
      if (t < 0 || uint32_t(t) >= cfg.vocabSize)
        die("token " + std::to_string(t) + " is outside the vocabulary");
    lengths.push_back(static_cast<uint32_t>(p.size()));
  }
  std::vector<std::vector<uint32_t>> chunks =
      runtime::planPrefillChunks(lengths, cfg.maxPrefillTokens);
  std::vector<uint32_t> done(batch, 0);
  for (const std::vector<uint32_t> &counts : chunks) {
    uint32_t seq = *std::max_element(counts.begin(), counts.end());
    std::memset(stepLengths, 0, cfg.maxBatch * 4);
    std::memset(tokenIds, 0, uint64_t(batch) * seq * 4);
    for (uint32_t b = 0; b < batch; ++b) {
      std::copy_n(prompts[b].begin() + done[b], counts[b],
                  tokenIds + uint64_t(b) * seq);
      done[b] += counts[b];
      stepLengths[b] = static_cast<int32_t>(counts[b]);
    }
    allocateBlocks(batch);
    run(prefillProgramFor(uint64_t(batch) * seq), batch, seq);
    advance(batch);
  }
  return readLogits(batch);
}

std::vector<std::vector<float>>
Emulator::decode(const std::vector<int32_t> &tokens,
                 const std::vector<bool> &active) {
  uint32_t batch = static_cast<uint32_t>(tokens.size());
  uint32_t bucket = bucketFor(batch);
  std::memset(stepLengths, 0, cfg.maxBatch * 4);
  std::memset(tokenIds, 0, uint64_t(bucket) * 4);
  for (uint32_t b = 0; b < batch; ++b) {
    if (pastLengths[b] + (active[b] ? 1 : 0) > int32_t(cfg.maxSeqLen))
      die("KV cache full");
    tokenIds[b] = tokens[b];
    stepLengths[b] = active[b] ? 1 : 0;
  }
  allocateBlocks(batch);
  run(format::kDecodeProgram, bucket, 1);
  advance(bucket);
  return readLogits(batch);
}

std::vector<std::vector<float>>
Emulator::step(const std::vector<std::vector<int32_t>> &inputs, bool padded) {
  const uint32_t batch = static_cast<uint32_t>(inputs.size());
  uint32_t seq = 0;
  uint64_t tokens = 0;
  for (const auto &input : inputs) {
    seq = std::max<uint32_t>(seq, uint32_t(input.size()));
    tokens += input.size();
  }
  if (seq == 1) {
    std::vector<int32_t> ids;
    std::vector<bool> active;
    for (const auto &input : inputs) {
      ids.push_back(input.empty() ? 0 : input[0]);
      active.push_back(!input.empty());
    }
    return decode(ids, active);
  }
  const bool packed = cfg.packedSteps && !padded;
  if (!packed)
    tokens = uint64_t(batch) * seq;
  if (seq > cfg.maxPrefillTokens || tokens == 0)
    die("a step takes 1 to " + std::to_string(cfg.maxPrefillTokens) +
        " tokens of a sequence");
  std::memset(stepLengths, 0, cfg.maxBatch * 4);
  std::memset(tokenIds, 0, tokens * 4);
  uint64_t row = 0;
  for (uint32_t b = 0; b < batch; ++b) {
    if (pastLengths[b] + inputs[b].size() > cfg.maxSeqLen)
      die("KV cache full");
    if (!packed)
      row = uint64_t(b) * seq;
    std::copy(inputs[b].begin(), inputs[b].end(), tokenIds + row);
    stepLengths[b] = static_cast<int32_t>(inputs[b].size());
    if (packed)
      row += inputs[b].size();
  }
  allocateBlocks(batch);
  run(prefillProgramFor(tokens), batch, seq, tokens);
  advance(batch);
  return readLogits(batch);
}

int32_t argmax(const std::vector<float> &row);

std::vector<int32_t> Emulator::resumeFromPrefix(const std::vector<int32_t> &a,
                                                const std::vector<int32_t> &b,
                                                uint32_t hit, int64_t count) {
  const format::KVCacheConfig &kv = cfg.kvCache;
  if (!kv.paged() || !kv.coldBits || cfg.maxBatch < 2)
    die("prefix needs a paged quantized KV cache of 2 sequences or more");
  const uint64_t position = uint64_t(hit) * kv.blockTokens;
  if (hit == 0 || position >= b.size() || position > a.size() ||
      !std::equal(b.begin(), b.begin() + position, a.begin()))
    die("--hit blocks must be a prefix of both prompts, shorter than the "
        "second");
  prefill({a});
  const runtime::QuantPrefixRule rule{kv.blockTokens, kv.hotWindow,
                                      kv.channelBlock};
  const uint64_t first = rule.firstRewritten(position);
  const uint32_t shared = rule.sharedBlocks(hit);
  if (first + kv.hotRows < a.size())
    die("the first prompt's ring no longer holds token " +
        std::to_string(first) + ": this prefix would not load");
  char *caches[2] = {nullptr, nullptr};
  for (size_t i = 0; i < contents.buffers.size(); ++i)
    if (contents.buffers[i].role == format::BufferRole::KeyCache ||
        contents.buffers[i].role == format::BufferRole::ValueCache)
      caches[contents.buffers[i].role == format::BufferRole::ValueCache] =
          addresses[i];
  const uint32_t maxBlocks = kv.maxBlocksPerSeq();
  for (uint32_t i = 0; i < hit; ++i) {
    int32_t block = blockTable[i];
    if (i >= shared) { // a block sequence 1 writes again: its own copy
      if (freeBlocks.empty())
        die("the paged KV cache's pool is full");
      const int32_t copy = freeBlocks.back();
      freeBlocks.pop_back();
      emulator::copyColdBlock(caches, kv, block, copy);
      block = copy;
    }
    blockTable[maxBlocks + i] = block;
  }
  blocksHeld[1] = hit;
  emulator::copyRingRows(caches, kv, 0, 1, first, position);
  pastLengths[1] = static_cast<int32_t>(position);
  for (uint64_t at = position; at < b.size();) {
    const uint32_t n =
        uint32_t(std::min<uint64_t>(cfg.maxPrefillTokens, b.size() - at));
    std::memset(tokenIds, 0, 2 * n * 4);
    std::copy_n(b.begin() + at, n, tokenIds + n);
    stepLengths[0] = 0;
    stepLengths[1] = static_cast<int32_t>(n);
    allocateBlocks(2);
    run(prefillProgramFor(2 * n), 2, n);
    advance(2);
    at += n;
  }
  std::vector<int32_t> out = {argmax(readLogits(2)[1])};
  while (int64_t(out.size()) < count)
    out.push_back(argmax(decode({0, out.back()}, {false, true})[1]));
  return out;
}

int32_t argmax(const std::vector<float> &row) {
  int32_t best = 0;
  for (size_t v = 1; v < row.size(); ++v)
    if (row[v] > row[best] || std::isnan(row[best]))
      best = static_cast<int32_t>(v);
  return best;
}

void writeNpy(const std::string &path, const std::vector<float> &data,
              const std::vector<size_t> &shape) {
  std::string dims;
  for (size_t d : shape)
    dims += std::to_string(d) + ", ";
  std::string header =
      "{'descr': '<f4', 'fortran_order': False, 'shape': (" + dims + "), }";
  while ((10 + header.size() + 1) % 64 != 0)
    header += ' ';
  header += '\n';
  uint16_t length = static_cast<uint16_t>(header.size());
  std::string bytes("\x93NUMPY\x01\x00", 8);
  bytes.append(reinterpret_cast<const char *>(&length), 2);
  bytes += header;
  bytes.append(reinterpret_cast<const char *>(data.data()), data.size() * 4);
  std::string error;
  if (!writeFileAtomic(path, bytes, &error))
    die("cannot write " + path + ": " + error);
}

} // namespace

/// --calibration-log: the quantized cache's statistics of the whole run.
void writeCalibrationLog(const Options &options, const Emulator &emulator) {
  if (options.calibrationLog.empty())
    return;
  const format::KVCacheConfig &kv = emulator.config().kvCache;
  std::vector<uint64_t> words = emulator.words(format::kKVCalibrationBuffer);
  if (!kv.coldBits || words.empty())
    die("--calibration-log needs an engine with a quantized KV cache");
  std::string error;
  if (!format::writeTextFileAtomic(
          options.calibrationLog, format::kvCalibrationJson(kv, words), &error))
    die(error);
  std::fputs(format::kvCalibrationSummary(kv, words).c_str(), stderr);
}

int main(int argc, char **argv) {
  Options options = emulate::parseArgs(argc, argv);
  char dirTemplate[] = "/tmp/sits-emulate-XXXXXX";
  if (!mkdtemp(dirTemplate))
    die("cannot create a temporary folder");
  std::string dir = dirTemplate;
  std::string object = emulate::compileKernels(options.cuda, dir, false);
  std::string persistentObject =
      options.persistentDecode
          ? emulate::compileKernels(options.cuda, dir, true)
          : "";
  Emulator emulator(options, object, persistentObject);
  std::system(("rm -rf '" + dir + "'").c_str()); // the object stays mapped

  const auto &prompts = options.tokens;
  uint32_t batch = static_cast<uint32_t>(prompts.size());
  if (options.mode == "score") {
    size_t length = prompts[0].size();
    for (const auto &p : prompts)
      if (p.size() != length)
        die("score needs sequences of one length");
    if (options.prefill < 1 || size_t(options.prefill) > length)
      die("--prefill must be between 1 and the sequence length");
    size_t positions = length - options.prefill + 1;
    uint32_t vocab = emulator.config().vocabSize;
    std::vector<float> out(batch * positions * vocab);
    auto store = [&](size_t position,
                     const std::vector<std::vector<float>> &rows) {
      for (uint32_t b = 0; b < batch; ++b)
        std::copy(rows[b].begin(), rows[b].end(),
                  out.begin() + (b * positions + position) * vocab);
    };
    std::vector<std::vector<int32_t>> prefix;
    for (const auto &p : prompts)
      prefix.emplace_back(p.begin(), p.begin() + options.prefill);
    store(0, emulator.prefill(prefix));
    for (size_t i = options.prefill; i < length; ++i) {
      std::vector<int32_t> step;
      for (const auto &p : prompts)
        step.push_back(p[i]);
      store(i - options.prefill + 1,
            emulator.decode(step, std::vector<bool>(batch, true)));
    }
    writeNpy(options.out, out, {batch, positions, vocab});
    writeCalibrationLog(options, emulator);
    emulator.printTvcCounters();
    return 0;
  }

  if (options.mode == "prefix") {
    if (batch != 2)
      die("prefix needs two prompts (--tokens A;B)");
    std::printf("tokens[0]:");
    for (int32_t t :
         emulator.resumeFromPrefix(prompts[0], prompts[1],
                                   uint32_t(options.hit), options.maxNewTokens))
      std::printf(" %d", t);
    std::printf("\n");
    return 0;
  }

  std::vector<std::vector<int32_t>> generated(batch);
  if (options.stagger >= 0) {
    // Sequence b joins at step b x stagger; its prompt goes in chunks.
    const size_t chunk = options.chunk > 0 ? size_t(options.chunk)
                                           : emulator.config().maxPrefillTokens;
    std::vector<size_t> fed(batch, 0);
    for (int64_t stepIndex = 0;; ++stepIndex) {
      std::vector<std::vector<int32_t>> inputs(batch);
      bool any = false;
      for (uint32_t b = 0; b < batch; ++b) {
        if (stepIndex < int64_t(b) * options.stagger ||
            generated[b].size() >= size_t(options.maxNewTokens))
          continue;
        const size_t rest = prompts[b].size() - fed[b];
        if (rest > 0) {
          const size_t take = std::min(chunk, rest);
          inputs[b].assign(prompts[b].begin() + fed[b],
                           prompts[b].begin() + fed[b] + take);
          fed[b] += take;
        } else {
          inputs[b] = {generated[b].back()};
        }
        any = true;
      }
      if (!any)
        break;
      std::vector<std::vector<float>> rows =
          emulator.step(inputs, options.padded);
      for (uint32_t b = 0; b < batch; ++b)
        if (!inputs[b].empty() && fed[b] == prompts[b].size())
          generated[b].push_back(argmax(rows[b]));
    }
  }
  std::vector<std::vector<float>> rows;
  if (options.stagger < 0)
    rows = emulator.prefill(prompts);
  std::vector<int32_t> next(batch);
  for (int64_t step = 0; options.stagger < 0 && step < options.maxNewTokens;
       ++step) {
    for (uint32_t b = 0; b < batch; ++b) {
      next[b] = argmax(rows[b]);
      generated[b].push_back(next[b]);
    }
    if (step + 1 < options.maxNewTokens)
      rows = emulator.decode(next, std::vector<bool>(batch, true));
  }
  for (uint32_t b = 0; b < batch; ++b) {
    std::printf("tokens[%u]:", b);
    for (int32_t t : generated[b])
      std::printf(" %d", t);
    std::printf("\n");
  }
  writeCalibrationLog(options, emulator);
  emulator.printTvcCounters();
  if (options.countPrograms)
    emulator.printProgramRuns();
  return 0;
}
