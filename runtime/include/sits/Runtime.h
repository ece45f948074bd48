//===- Runtime.h - The sits decode runtime's C++ API -----------*- C++ -*-===//
//
// Load an engine once (`Engine::load`), create a `Session` (it owns the KV
// cache, the activation buffers and the CUDA graphs), and call `generate`.
//
//   auto engine = sits::Engine::load("model.sits");
//   sits::Session session(engine);
//   sits::GenerateParams params;
//   params.maxNewTokens = 32;
//   auto result = session.generate({1, 2, 3}, params,
//       [](uint32_t seq, int32_t token) { std::printf("%d ", token); return
//       true; });
//
// Every failure is a `sits::Error` with a code and one sentence naming the
// cause, except a sticky CUDA error (the GPU context is lost): that calls
// the fatal-error handler, which by default prints the error and ends the
// process with exit code 3.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_RUNTIME_RUNTIME_H
#define SITS_RUNTIME_RUNTIME_H

#include "sits/EngineFormat.h"
#include "sits/Error.h"
#include "sits/ModelTokenizer.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace sits {

/// Called with a message when a sticky CUDA error makes the GPU context
/// unusable. Must not return (the default prints and calls std::_Exit(3)).
using FatalErrorHandler = void (*)(const char *message);
void setFatalErrorHandler(FatalErrorHandler handler);

/// Number of usable CUDA GPUs; 0 (never an error) without a driver or GPU.
int countGpus();

struct LoadOptions {
  int device = 0;
  /// Verify the content hash before use (a few ms per GB on many cores).
  bool verifyContentHash = true;
};

/// A loaded, validated engine: kernels loaded on the device, weights
/// uploaded once. Shared by the sessions created from it.
class Engine {
public:
  /// Loads and validates `path`; throws Error (InvalidEngine, NoGpu,
  /// WrongGpu, Cuda) on failure.
  static std::shared_ptr<Engine> load(const std::string &path,
                                      const LoadOptions &options = {});
  ~Engine();
  Engine(const Engine &) = delete;
  Engine &operator=(const Engine &) = delete;

  const format::RuntimeConfig &config() const;
  const format::Header &header() const;
  const format::EngineContents &contents() const;
  int device() const;
  std::string deviceName() const;
  uint32_t deviceSm() const;
  /// True when the kernels were JIT-compiled from PTX (no matching cubin).
  bool usesPtx() const;
  uint64_t weightBytes() const;
  /// The engine's tokenizer (text in and out: the model's tokenizer files,
  /// or its byte vocabulary); null when the engine takes ids only.
  const std::shared_ptr<const ModelTokenizer> &tokenizer() const;

  struct Impl;
  Impl &impl() { return *state; }

private:
  Engine();
  std::unique_ptr<Impl> state;
};

struct SessionOptions {
  /// Capture each decode step in a CUDA graph, once per batch bucket, and
  /// replay it. Off: launch the same kernels one by one (for comparison).
  bool useCudaGraphs = true;
  /// Let each kernel start while the previous one finishes (programmatic
  /// dependent launch; sm_90 and newer, engines whose kernels support it).
  /// Off: every kernel starts after the previous one ended (for comparison).
  bool useProgrammaticLaunch = true;
  /// Decode batch buckets; empty: the engine's (by default 1, 2, 4, 8 and
  /// the multiples of 8 up to max_batch: format::getDefaultBatchBuckets).
  std::vector<uint32_t> batchBuckets;
  /// Run the decode step of each bucket the engine has a persistent decode
  /// kernel for (sitsc --decode-kernels=persistent) as that one kernel,
  /// all of its blocks resident. Off, or for other buckets: the decode
  /// program's launches, as for any engine.
  bool usePersistentDecode = true;
};

struct SamplingParams {
  /// 0: greedy (argmax). Otherwise logits are divided by it.
  float temperature = 0.0f;
  /// Keep the k most likely tokens (ties at the k-th value are kept); 0: all.
  uint32_t topK = 0;
  /// Keep the smallest set of most likely tokens whose probability reaches
  /// top_p; 1: all.
  float topP = 1.0f;
  /// With the same seed, prompt and engine, the tokens are the same: a
  /// draw is keyed by the seed and the index of the token drawn in its
  /// sequence (and, in a generate batch, the sequence's index), never by
  /// what else runs.
  uint64_t seed = 0;
};

struct GenerateParams {
  /// Tokens to generate per sequence (>= 1).
  uint32_t maxNewTokens = 16;
  SamplingParams sampling;
  /// Stop a sequence after it produces one of the engine's EOS tokens.
  bool stopAtEos = true;
};

/// One tile of a persistent decode kernel's step (sitsc
/// --persistent-trace): the GPU's clock (ns) when its block entered it, when
/// its dependencies were met, and when it was done.
struct PersistentTileTime {
  uint32_t task = 0; ///< decode launch `task` of the engine's program
  uint32_t tile = 0; ///< the block of that launch's grid it stands for
  uint32_t block = 0;
  uint64_t enterNs = 0, readyNs = 0, leaveNs = 0;
};

/// A persistent decode step's trace: its tiles in the order each block ran
/// them (block by block), and each task's kernel.
struct PersistentTrace {
  std::vector<std::string> taskKernels;
  std::vector<PersistentTileTime> tiles;
};

struct GenerateStats {
  uint32_t batch = 0;
  /// The decode graph bucket (batch rounded up to a bucket size).
  uint32_t bucket = 0;
  uint32_t promptTokens = 0; ///< summed over sequences
  uint32_t prefillChunks = 0;
  uint32_t decodeSteps = 0;
  uint32_t generatedTokens = 0; ///< summed over sequences
  bool cudaGraph = false;
  /// Whether the kernels were launched with programmatic dependent launch.
  bool programmaticLaunch = false;
  /// Whether each decode step ran as the bucket's one persistent kernel
  /// (an engine of sitsc --decode-kernels=persistent).
  bool persistentDecode = false;
  double prefillMs = 0;
  double decodeMs = 0;
  double decodeMsPerStep = 0;
  double tokensPerSecond = 0; ///< decode tokens of all sequences per second
  uint64_t weightBytes = 0;
  uint64_t sessionBytes = 0;
  uint64_t deviceUsedBytes = 0;
  uint64_t deviceTotalBytes = 0;
  /// Engines with a TVC LM head (sitsc --tvc=exact): rows of this call whose
  /// proof held, and rows that ran the full head (prefill's last tokens and
  /// every decode step of every live sequence).
  bool tvc = false;
  uint64_t tvcProvedRows = 0;
  uint64_t tvcFallbackRows = 0;
};

struct GenerateResult {
  std::vector<std::vector<int32_t>> tokens; ///< per sequence
  GenerateStats stats;
};

/// Called for each new token; return false to end that sequence (the
/// others go on).
using TokenCallback = std::function<bool(uint32_t sequence, int32_t token)>;

/// Why a sequence ended.
enum class FinishReason {
  Length,        ///< it reached maxNewTokens
  EndOfSequence, ///< it produced one of the engine's EOS tokens
  StopString,    ///< its text reached one of the stop strings
  Cancelled,     ///< the callback returned false
};
/// "length", "eos", "stop", "cancelled".
const char *finishReasonName(FinishReason reason);

struct TextGenerateParams {
  GenerateParams generate;
  /// Each sequence ends at the first of these in its text, which the text
  /// does not include (empty strings are refused).
  std::vector<std::string> stop;
  /// Leave special tokens (EOS, chat markers) out of the text.
  bool skipSpecialTokens = true;
};

struct TextResult {
  std::vector<std::string> text;            ///< per sequence
  std::vector<std::vector<int32_t>> tokens; ///< per sequence, as generated
  std::vector<FinishReason> finishReasons;  ///< per sequence
  GenerateStats stats;
};

/// Called with each sequence's text as it becomes final (never half a
/// UTF-8 character, never a piece of a stop string); return false to end
/// that sequence.
using TextCallback =
    std::function<bool(uint32_t sequence, const std::string &text)>;

/// One sequence's part of a Session::step. Each of a session's max_batch
/// slots holds one sequence; a step appends tokens to some of them.
struct StepInput {
  uint32_t slot = 0;
  /// The tokens to append: a chunk of a prompt (at most the engine's
  /// max_prefill_tokens), or the one token the slot's last step sampled.
  std::vector<int32_t> tokens;
  /// Start a new sequence in the slot: its cache is emptied first, and
  /// `sampling` becomes the slot's until the next reset.
  bool reset = false;
  SamplingParams sampling;
};

/// One generation context: its own KV cache (max_batch sequences), buffers
/// and decode graphs. Not thread-safe; use one session per thread.
class Session {
public:
  explicit Session(std::shared_ptr<Engine> engine,
                   const SessionOptions &options = {});
  ~Session();
  Session(const Session &) = delete;
  Session &operator=(const Session &) = delete;

  /// Generates for a batch of prompts (1 to max_batch of them, lengths may
  /// differ). The KV cache starts empty on every call. Tokens reach
  /// `callback` as they are sampled; a KVCacheFull error can come after some
  /// tokens were delivered.
  GenerateResult generate(const std::vector<std::vector<int32_t>> &prompts,
                          const GenerateParams &params,
                          const TokenCallback &callback = {});
  GenerateResult generate(const std::vector<int32_t> &prompt,
                          const GenerateParams &params,
                          const TokenCallback &callback = {}) {
    return generate(std::vector<std::vector<int32_t>>{prompt}, params,
                    callback);
  }

  /// `generate`, with the tokens decoded to text by the engine's tokenizer
  /// as they arrive (sits/TextStream.h), stop strings, and why each
  /// sequence ended. The prompts are ids: the engine's
  /// `tokenizer()->encode(text)` or `->encodeChat(messages)`. Throws
  /// NoTokenizer for an engine without a tokenizer.
  TextResult generateText(const std::vector<std::vector<int32_t>> &prompts,
                          const TextGenerateParams &params,
                          const TextCallback &callback = {});

  /// Continuous batching, one step at a time: appends each input's tokens
  /// to its slot's sequence and returns, per input in order, the token
  /// sampled after its last token (with the slot's sampling parameters).
  /// When every input is one token the step is a decode step, replayed from
  /// the CUDA graph of the bucket that holds the highest slot; otherwise
  /// one prefill chunk runs all inputs together. Slots not in `inputs` keep
  /// their sequences untouched. Seeded sampling draws from the slot's seed
  /// and the token's index in its sequence (as sequence 0 of generate
  /// does), so a sequence's tokens are the same in any slot and beside
  /// anything. generate and scoreTokens empty every slot. Throws
  /// InvalidArgument (a slot out of range or given twice, no tokens, a
  /// token outside the vocabulary, a chunk longer than max_prefill_tokens,
  /// a slot that holds no sequence and is not reset) and KVCacheFull (the
  /// capacity, or a paged cache's pool with no free block).
  std::vector<int32_t> step(const std::vector<StepInput> &inputs);
  /// Tokens the slot's sequence holds in the cache.
  uint32_t slotLength(uint32_t slot) const;

  /// Prefix caching (the server's, docs/serving.md): a pool of `blocks`
  /// blocks of `blockTokens` tokens' KV (every layer, K and V) on the GPU,
  /// beside the session's cache. Block i of a slot is its tokens
  /// [i * blockTokens, (i + 1) * blockTokens). Throws InvalidArgument for a
  /// contiguous quantized KV cache (its int8/int4 rows, scales and hot ring
  /// are not copied per block) or blocks larger than the context, and Cuda
  /// when the GPU lacks the memory. A second call replaces the pool. With a
  /// paged KV cache nothing is copied: the pool is `blocks` ids that name
  /// the cache's own blocks (blockTokens must be the engine's), which
  /// saveBlocks shares and loadBlocks points a slot at; a paged quantized
  /// cache also keeps FP16 copies of the newest saved blocks' rows
  /// (planPrefixLoad).
  void allocateBlockPool(uint32_t blockTokens, uint32_t blocks);
  /// Tokens per pool block and blocks in the pool (0 without a pool).
  uint32_t blockPoolTokens() const;
  uint32_t blockPoolBlocks() const;
  /// Copies blocks firstBlock, firstBlock + 1, ... of the slot's sequence
  /// into pool blocks poolIds[0], poolIds[1], ... on the GPU. The slot must
  /// hold those tokens; it is unchanged.
  void saveBlocks(uint32_t slot, uint32_t firstBlock,
                  const std::vector<uint32_t> &poolIds);
  /// Starts a new sequence in `slot` (as a step with `reset` would, with
  /// `sampling` its parameters) holding pool blocks poolIds in order: the
  /// next step extends it from poolIds.size() * blockPoolTokens() tokens.
  /// `poolIds` must load in full (planPrefixLoad).
  void loadBlocks(uint32_t slot, const std::vector<uint32_t> &poolIds,
                  const SamplingParams &sampling);
  /// How loadBlocks would take the saved prefix `poolIds`: the leading
  /// blocks it loads, and how many of those the slot shares (a paged
  /// cache; the others take new blocks of the pool). All of them, shared,
  /// for a plain paged cache (none shared for a contiguous one: copies). A
  /// paged quantized cache copies the blocks whose rows the sequence writes
  /// again, and loads only as far as the FP16 rows it must restore were
  /// kept (docs/serving.md, "Prefix caching").
  struct PrefixLoad {
    uint32_t blocks = 0, shared = 0;
  };
  PrefixLoad planPrefixLoad(const std::vector<uint32_t> &poolIds) const;

  /// A paged KV cache's pool (all 0 for a contiguous cache): tokens per
  /// block, blocks in the pool, and blocks a sequence can take now, which
  /// are the free ones and those only a prefix-cache pool id holds (taken
  /// back when the pool runs out), less those the pool ids in `keep` name
  /// (about to be loaded). A server admits requests by these.
  struct KVBlocks {
    uint32_t blockTokens = 0, blocks = 0, available = 0;
  };
  KVBlocks kvBlocks(const std::vector<uint32_t> &keep = {}) const;
  /// Ends the sequence in `slot`: a paged cache's blocks go back to the
  /// pool (those a pool id names stay with it). The slot holds no sequence
  /// until a step resets it.
  void releaseSlot(uint32_t slot);

  /// Teacher-forced logits, for checking an engine against a reference:
  /// prefills the first `prefillTokens` tokens of every sequence, then feeds
  /// each following token with one decode step (replaying the CUDA graph
  /// when the session uses graphs), so that both programs and the graphs
  /// are exercised. result[s][p] holds the `vocab` logits after token
  /// `prefillTokens - 1 + p` of sequence s (its prediction of the next
  /// token). Sequences may differ in length: a finished one idles with step
  /// length 0. The KV cache starts empty.
  std::vector<std::vector<std::vector<float>>>
  scoreTokens(const std::vector<std::vector<int32_t>> &sequences,
              uint32_t prefillTokens = 1);

  /// Engines with a TVC LM head: rows whose proof held and rows that fell
  /// back to the full head since the session was created.
  struct TvcCounts {
    uint64_t proved = 0, fallback = 0;
  };
  TvcCounts tvcCounts() const;
  /// Benchmark only: every TVC row counts as proved and the full head never
  /// runs, so the kernels' time with the proof succeeding can be measured on
  /// any weights. Tokens may then differ from the plain head's. No effect
  /// without a TVC head.
  void disableTvcFallbackForBenchmark(bool disabled);

  /// Benchmark: the mean GPU time in ms of the decode program's LM-head
  /// launches (the plain head's `lm_head` kernel, or the TVC head's `tvc_*`
  /// kernels) at `batch`'s bucket, replayed `repeats` times over what the
  /// last generate left in the buffers. 0 when the engine names no such
  /// kernel.
  double timeLMHead(uint32_t batch, uint32_t repeats);

  /// The engine this session runs.
  const std::shared_ptr<Engine> &engine() const;

  /// Bytes this session holds on the GPU (KV cache, activations, I/O).
  uint64_t deviceBytes() const;
  /// A quantized KV cache's calibration counters of the last request (see
  /// sits/KVCalibration.h); empty without one. Synchronizes the stream.
  std::vector<uint64_t> kvCalibrationWords();
  /// Decode graphs captured so far (one per bucket used).
  uint32_t capturedGraphs() const;
  /// Captures the decode graph of every batch bucket now (nothing runs on
  /// the GPU), which a bucket's first step does otherwise: a server calls
  /// it at startup so that no request's token waits for a capture. Without
  /// CUDA graphs it prepares the buckets' launches. Returns
  /// capturedGraphs().
  uint32_t captureDecodeGraphs();
  /// The buckets whose decode steps run as one persistent kernel
  /// (SessionOptions::usePersistentDecode); empty: none.
  std::vector<uint32_t> persistentBuckets() const;
  /// The times of the last decode step of `bucket`'s persistent kernel,
  /// from an engine of sitsc --persistent-trace (waits for the session's
  /// work first). Throws InvalidArgument for a bucket without a persistent
  /// kernel or an engine without the trace.
  PersistentTrace persistentTrace(uint32_t bucket);

  struct Impl;

private:
  std::unique_ptr<Impl> state;
};

} // namespace sits

#endif // SITS_RUNTIME_RUNTIME_H
