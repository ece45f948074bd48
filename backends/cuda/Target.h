//===- Target.h - Code generation options: GPU target, storage types ------===//
//
// The options `sitsc` passes to the code generator, declared once in
// CodegenOptions.td, parsed and checked here so that the driver, the fusion
// passes and the tests share one definition.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_BACKENDS_CUDA_TARGET_H
#define SITS_BACKENDS_CUDA_TARGET_H

#include "sits/EngineFormat.h"

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace sits::codegen {

/// A GPU architecture NVRTC compiles for: `sm_90a` is major 9, minor 0,
/// suffix "a" (architecture-specific features; the cubin runs on sm_90 only).
struct Target {
  unsigned major = 9;
  unsigned minor = 0;
  std::string suffix = "a";

  /// major * 10 + minor, as the engine header stores it (90).
  uint32_t getSm() const { return major * 10 + minor; }
  /// The name given on the command line and to NVRTC's -arch (sm_90a).
  std::string getName() const;
};

/// Parses `sm_<major><minor>[a|f]` (sm_80, sm_89, sm_90a, sm_100a, ...).
/// Architectures before sm_75 are refused: CUDA 13 no longer compiles for
/// them. On error, returns nullopt and sets `error`.
std::optional<Target> parseTarget(const std::string &text, std::string *error);

/// Parses --dtype: fp16 (f16), bf16 or fp32 (f32).
std::optional<format::DType> parseWeightType(const std::string &text,
                                             std::string *error);
/// The --dtype spelling of a weight type (fp16, bf16, fp32).
const char *weightTypeName(format::DType type);

/// Parses --batch-buckets: a comma-separated list of increasing positive
/// batch sizes ("1,2,4,8").
std::optional<std::vector<uint32_t>> parseBatchBuckets(const std::string &text,
                                                       std::string *error);

/// The most tokens --few-row-prefill-tokens may ask for: past 32 (four
/// groups of 8 per pass over the weights) a GEMV passes over its weights
/// again, and the GEMM's tiles fill up.
constexpr int64_t kMaxFewRowPrefillTokens = 256;

/// The code generator's options as given: one member per record of
/// CodegenOptions.td, of its type and default (sitsc's flags, as text where
/// CodegenOptions parses them).
struct CodegenOptionValues {
#define SITS_CODEGEN_OPTION(FIELD, TYPE, NAME, DEFAULT, VALUE_DESC, HELP)      \
  TYPE FIELD = DEFAULT;
#include "backends/cuda/CodegenOptions.inc"
};

/// What the code generator is asked to build. The defaults are those of
/// CodegenOptions.td (CodegenOptionValues()).
struct CodegenOptions {
  CodegenOptions() = default;

  Target target = getDefault().target;
  /// Storage type of the matrices (linear, embedding, LM head) and of the KV
  /// cache. Vectors (norm weights, biases) and RoPE tables stay f32.
  format::DType weightType = getDefault().weightType;
  /// Tokens per sequence in one prefill chunk; 0: min(512, max_seq_len).
  int64_t maxPrefillTokens = getDefault().maxPrefillTokens;
  /// Prefill steps of at most this many tokens run @prefill_few, whose
  /// linear layers are GEMVs (kernel-add-few-row-prefill); 0: none.
  int64_t fewRowPrefillTokens = getDefault().fewRowPrefillTokens;
  /// Decode CUDA-graph batch sizes; empty: the runtime's default.
  std::vector<uint32_t> batchBuckets = getDefault().batchBuckets;
  /// Fuse decode rms_norms into the GEMV that reads them (Planner.cpp).
  /// Off by default: the fused GEMVs ran at a third to a half of the plain
  /// ones' bandwidth on the H200 (docs/performance.md).
  bool fuseNorms = getDefault().fuseNorms;
  /// Producers write a tensor-core decode GEMV's input as its 16-bit
  /// operands (kernel-choose-operand-layout; sitsc --half-operands).
  bool halfOperands = getDefault().halfOperands;
  /// 16-row tiles per item of the quantized tensor-core decode GEMVs (1, 2
  /// or 4; the LM head picks its own): more tiles feed each load of x to
  /// more rows (x is read per 32 int4 levels), at the cost of shared
  /// memory (sitsc --gemv-quant-tiles, an experiment: 1 is what was
  /// measured).
  int64_t quantGemvTiles = getDefault().quantGemvTiles;
  /// Groups of 8 tokens per pass over the weights of the 16-bit
  /// tensor-core decode GEMV (1 to 4; 0: as many as max_batch needs;
  /// sitsc --gemv-token-groups).
  int64_t gemvTokenGroups = getDefault().gemvTokenGroups;
  /// The most ways the tensor-core prefill GEMM splits K (1 to
  /// KernelDialect::kMaxKSplits; 0: chosen per layer; sitsc --gemm-k-splits).
  int64_t gemmKSplits = getDefault().gemmKSplits;
  /// Keys per block of the split-K decode attention kernels (a multiple of
  /// 64; sitsc --decode-split-keys, an experiment); 0: 256, fewer for small
  /// caches (decodeSplitOf).
  int64_t decodeSplitKeys = getDefault().decodeSplitKeys;
  /// A paged KV cache (sitsc --kv-layout=paged): blocks of kvBlockTokens
  /// rows, kvPoolBlocks of them (0: max_batch full sequences). The pass
  /// kernel-choose-kv-layout records it as #kernel.kv_pages.
  bool pagedKV = getDefault().pagedKV;
  int64_t kvBlockTokens = getDefault().kvBlockTokens;
  int64_t kvPoolBlocks = getDefault().kvPoolBlocks;
  /// The decode step of each batch bucket as one persistent kernel's task
  /// graph (sitsc --decode-kernels=persistent), of persistentBlocks blocks:
  /// the pass kernel-schedule-decode-tasks records it as
  /// #kernel.decode_schedule and #kernel.task.
  bool persistentDecode = getDefault().persistentDecode;
  int64_t persistentBlocks = getDefault().persistentBlocks;
  /// The persistent kernels record each tile's times (--persistent-trace).
  bool persistentTrace = getDefault().persistentTrace;

private:
  /// CodegenOptionValues() parsed once.
  static const CodegenOptions &getDefault();
  struct FromValues {};
  /// Every member set here: their initializers above would ask getDefault.
  explicit CodegenOptions(FromValues)
      : target(), weightType(format::DType::F16), maxPrefillTokens(0),
        fewRowPrefillTokens(0), batchBuckets(), fuseNorms(false),
        halfOperands(false), quantGemvTiles(0), gemvTokenGroups(0),
        gemmKSplits(0), decodeSplitKeys(0), pagedKV(false), kvBlockTokens(0),
        kvPoolBlocks(0), persistentDecode(false), persistentBlocks(0),
        persistentTrace(false) {}
  friend std::optional<CodegenOptions>
  parseCodegenOptions(const CodegenOptionValues &values, std::string *error,
                      const std::set<std::string> &given);
};

/// Checks and parses the options as given: the one place their values are
/// checked. `given` names the options given explicitly (their flags without
/// dashes): a default may be a value that cannot be given, as
/// max-prefill-tokens' 0 (the planner chooses). On error, returns nullopt
/// and sets `error` to a message naming the option ("--gemv-quant-tiles
/// must be 1, 2 or 4, got 3").
std::optional<CodegenOptions>
parseCodegenOptions(const CodegenOptionValues &values, std::string *error,
                    const std::set<std::string> &given = {});

} // namespace sits::codegen

#endif // SITS_BACKENDS_CUDA_TARGET_H
