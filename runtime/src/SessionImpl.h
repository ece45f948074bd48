//===- SessionImpl.h - A session's state ------------------------*- C++ -*-===//
//
// What Session.cpp (requests, the executor, CUDA graphs) and SessionStep.cpp
// (continuous batching, one step at a time) share.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_RUNTIME_SRC_SESSIONIMPL_H
#define SITS_RUNTIME_SRC_SESSIONIMPL_H

#include "sits/Runtime.h"
#include "src/BlockAllocator.h"
#include "src/EngineImpl.h"
#include "src/Sampling.h"

#include <algorithm>
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace sits {

struct PreparedLaunch {
  CUfunction function = nullptr;
  /// The kernel's name, for error messages.
  const std::string *name = nullptr;
  unsigned grid[3] = {1, 1, 1};
  unsigned block[3] = {1, 1, 1};
  unsigned sharedBytes = 0;
  std::vector<uint64_t> values; ///< one 8-byte slot per argument
  std::vector<void *> params;   ///< pointers to the slots
  /// Launch with programmatic dependent launch where the session does: not
  /// a persistent decode kernel, which waits for nothing before it starts.
  bool programmatic = true;
};

using PreparedProgram = std::vector<PreparedLaunch>;

struct Session::Impl {
  std::shared_ptr<Engine> engine;
  Engine::Impl &e;
  const format::RuntimeConfig &config;
  SessionOptions options;
  std::vector<uint32_t> buckets;

  cudaStream_t stream = nullptr;
  void *arena = nullptr;
  uint64_t arenaBytes = 0;
  std::vector<CUdeviceptr> addresses; ///< per plan buffer

  int32_t *tokenIds = nullptr;
  int32_t *pastLengths = nullptr;
  int32_t *stepLengths = nullptr;
  float *logits = nullptr;
  int32_t *sampled = nullptr;
  runtime::DeviceSamplingParams *samplingParams = nullptr;
  int32_t *hostTokens = nullptr; ///< pinned, max_batch entries
  /// A quantized KV cache's calibration counters (null without one).
  uint64_t *kvStats = nullptr;
  uint64_t kvStatsBytes = 0;
  /// The TVC head's u64 [proved, fallback, mode] (null: no TVC head), and
  /// the largest top-k it serves exactly.
  uint64_t *tvcCounters = nullptr;
  uint32_t tvcExactTop = 0;

  int prefillProgram = -1;
  /// The engine's prefill_few, or -1 (RuntimeConfig::fewRowsMaxTokens).
  int fewRowPrefillProgram = -1;
  int decodeProgram = -1;
  std::map<uint32_t, PreparedProgram> decodeByBucket;
  std::map<uint32_t, cudaGraphExec_t> graphs;
  /// The persistent decode kernels (SessionPersistent.cpp): this session's
  /// copy of their module (their counters are this session's), and the
  /// buckets' argument tables on the device; their launches are in
  /// decodeByBucket.
  CUmodule persistentModule = nullptr;
  void *persistentTables = nullptr;
  std::vector<uint32_t> persistentBuckets;
  /// Whether `bucket`'s decode steps run its persistent kernel.
  bool isPersistentBucket(uint32_t bucket) const {
    return std::find(persistentBuckets.begin(), persistentBuckets.end(),
                     bucket) != persistentBuckets.end();
  }
  /// Launch the engine's kernels with programmatic dependent launch.
  bool programmaticLaunch = false;
  /// Tokens each slot's sequence holds in the cache (Session::step); all
  /// 0 after a request of generate or scoreTokens, which empty the cache.
  std::vector<uint32_t> slotLengths;
  /// Whether a slot holds a sequence Session::step may extend.
  std::vector<bool> slotLive;
  /// The prefix-caching block pool (SessionBlocks.cpp): K blocks then V
  /// blocks, each [layers, kv_heads, blockTokens, head_dim].
  void *blockPool = nullptr;
  uint32_t poolBlockTokens = 0;
  uint32_t poolBlockCount = 0;
  /// A paged KV cache's blocks (null with a contiguous one) and the
  /// engine's block table buffer, which the programs read.
  std::unique_ptr<runtime::BlockAllocator> pages;
  int32_t *deviceTable = nullptr;

  Impl(std::shared_ptr<Engine> engine, const SessionOptions &options);
  ~Impl();

  void allocate();
  PreparedProgram prepare(int program, uint32_t batch, uint32_t seq);
  /// A packed step's program: T tokens, at most S of each of B sequences.
  PreparedProgram prepare(int program, uint32_t batch, uint32_t seq,
                          uint64_t tokens);
  /// Loads the persistent decode kernels for the session's buckets that
  /// have one: checks that every block is resident, fills the argument
  /// tables, puts the kernel's launch in decodeByBucket.
  void loadPersistentDecode();
  void releasePersistentDecode();
  void run(const PreparedProgram &program);
  /// The program a prefill step of `rows` token rows runs.
  int prefillProgramFor(uint64_t rows) const {
    return config.isFewRowStep(rows) ? fewRowPrefillProgram : prefillProgram;
  }
  void stepTail(uint32_t batch, bool sample);
  /// An asynchronous copy to the device on the session's stream (from
  /// pageable memory: staged before the call returns).
  void upload(void *to, const void *from, uint64_t bytes, const char *what);
  void decodeStep(uint32_t bucket);
  /// The bucket's decode launches, prepared on first use.
  const PreparedProgram &preparedDecode(uint32_t bucket);
  /// The bucket's decode graph, captured on first use.
  cudaGraphExec_t decodeGraph(uint32_t bucket);
  uint32_t bucketFor(uint32_t batch) const;
  uint32_t prefill(const std::vector<std::vector<int32_t>> &prompts,
                   bool sampleLast);
  void resetSequences(uint32_t batch, const SamplingParams &sampling);
  /// Step's slot bookkeeping, sized on first use.
  void ensureSlots();
  /// The engine's buffer of `role` (a key or value cache) in this session;
  /// throws InvalidEngine when it has none.
  char *cacheBuffer(format::BufferRole role) const;
  /// Throws InvalidArgument for a slot outside 0..max_batch-1.
  void checkSlot(uint32_t slot) const;
  /// Empties `slot` with `sampling` as its parameters (a reset).
  void startSequence(uint32_t slot, const SamplingParams &sampling);
  /// A step of prefill chunks and decode tokens over a paged fp16 cache:
  /// the decoding slots replay the bucket's graph, the chunks run as one
  /// prefill of as many rows as chunks (each slot's length, sampling and
  /// block table row moved to its row, put back after). Returns the
  /// sampled tokens in `inputs`' order; slotLengths is the caller's.
  /// Session::step's prefill, packed when the engine takes packed steps
  /// (its rows are slots 0..batch-1); returns each input's next token.
  std::vector<int32_t> stepPrefill(const std::vector<StepInput> &inputs,
                                   uint32_t batch);

  // A paged KV cache (SessionPages.cpp; no-ops for a contiguous one).
  bool paged() const { return config.kvCache.paged(); }
  /// Every block free, no prefix shared (a new request of generate).
  void resetPages();
  /// Throws KVCacheFull naming the pool (`slot` wanted `rows` rows).
  [[noreturn]] void poolFull(uint32_t slot, uint64_t rows) const;
  /// Gives `slot`'s blocks back (a reset of the slot).
  void releaseSlot(uint32_t slot);
  /// Blocks for `rows` rows of `slot`'s sequence; throws KVCacheFull,
  /// naming the pool, when it has too few free.
  void reserveRows(uint32_t slot, uint64_t rows);
  /// Uploads the block table when it changed (before a launch).
  void uploadTable();
  /// Prefix caching by sharing: `ids` prefix ids (allocatePrefixIds), each
  /// naming a pool block.
  void allocatePrefixIds(uint32_t blockTokens, uint32_t ids);
  /// Prefix id ids[i] names `slot`'s block firstBlock + i (a full prompt
  /// block: no one writes it again), dropping what it named before.
  void sharePrefix(uint32_t slot, uint32_t firstBlock,
                   const std::vector<uint32_t> &ids);
  /// `slot`'s first blocks are those the prefix ids name, in order.
  void loadPrefix(uint32_t slot, const std::vector<uint32_t> &ids);

  // Prefix caching over a paged quantized cache (SessionQuantPages.cpp):
  // FP16 copies of saved blocks' rows in `blockPool`, entry e owned by
  // prefix id hotOwner[e] (-1: none), hotEntryOf[id] its entry.
  std::vector<int32_t> hotEntryOf, hotOwner;
  uint32_t hotCursor = 0;
  /// The store of FP16 copies for `ids` prefix ids.
  void allocateHotCopies(uint32_t ids);
  /// Keeps the FP16 rows of `slot`'s blocks firstBlock, ... (saved as
  /// prefix ids `ids`) that its ring still holds.
  void saveHotRows(uint32_t slot, uint32_t firstBlock,
                   const std::vector<uint32_t> &ids);
  Session::PrefixLoad planQuantPrefix(const std::vector<uint32_t> &ids) const;
  /// Points `slot` at the prefix (shared and copied blocks) and restores
  /// the FP16 rows it quantizes or reads again into its ring.
  void loadQuantPrefix(uint32_t slot, const std::vector<uint32_t> &ids);
};

/// A sequence's sampling parameters as the kernel reads them; `stream`
/// tells apart sequences sharing a seed (SamplingDraw.h).
inline runtime::DeviceSamplingParams
deviceSampling(const SamplingParams &sampling, uint32_t stream) {
  return {sampling.temperature, sampling.topK, sampling.topP, stream,
          sampling.seed};
}

/// Refuses sampling parameters the kernels cannot take (InvalidArgument),
/// and sampling a TVC head does not serve exactly.
void checkSamplingParams(const SamplingParams &sampling, uint32_t tvcExactTop);

} // namespace sits

#endif // SITS_RUNTIME_SRC_SESSIONIMPL_H
