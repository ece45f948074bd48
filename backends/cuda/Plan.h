//===- Plan.h - What the code generator decided -----------------*- C++ -*-===//
//
// The planner (Planner.cpp) turns the kernel-level program (@prefill and
// @decode) into an EnginePlan: the weights to store, the specialized kernels
// to generate, and for each program the ordered launches with their grid,
// block, shared memory and argument bindings, every value at the workspace
// offset its #kernel.slice gives (placed by --kernel-plan-memory through
// placeWorkspace and MemoryPlan.cpp). The emitter (CudaEmitter.cpp) writes
// the CUDA source, and the engine builder (EngineBuilder.cpp) turns the plan
// into an engine file.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_BACKENDS_CUDA_PLAN_H
#define SITS_BACKENDS_CUDA_PLAN_H

#include "backends/cuda/Target.h"
#include "sits/EngineFormat.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributeInterfaces.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LogicalResult.h"

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace sits::codegen {

/// The buffers a kernel argument can point at (the engine's buffer roles,
/// with weights and workspace values named by index).
enum class BufferKind {
  Weight,     ///< index: EnginePlan::weights
  Workspace,  ///< index: ProgramPlan::values (an activation)
  KeyCache,   ///< offset: the layer's slice
  ValueCache, ///< offset: the layer's slice
  TokenIds,
  PastLengths,
  StepLengths,
  Logits,
  Counters,    ///< int32 counters that kernels leave at zero (split attention)
  KVStats,     ///< u64 calibration counters of a quantized KV cache
  TvcScratch,  ///< the TVC head's per-sequence scratch (kernels/tvc.cuh)
  TvcCounters, ///< the TVC head's proved/fallback counts and mode (u64 x 3)
  BlockTable,  ///< a paged KV cache's int32 [max_batch, max blocks a sequence]
};

/// How one kernel parameter is bound at launch.
struct ArgBinding {
  enum class Kind { Buffer, Int32 } kind = Kind::Buffer;
  BufferKind buffer = BufferKind::Workspace;
  unsigned index = 0;
  uint64_t byteOffset = 0;
  format::Expr expr;

  static ArgBinding bufferArg(BufferKind buffer, unsigned index = 0,
                              uint64_t byteOffset = 0);
  static ArgBinding int32(format::Expr expr);
};

/// A parameter of a generated entry point, and its binding in one launch.
struct KernelParam {
  std::string type; ///< C type, e.g. "const float *"
  std::string name;
};

/// One generated `extern "C"` entry point: a kernel-library template
/// instantiated with a config struct of compile-time constants.
struct KernelSpec {
  std::string family;              ///< e.g. "gemv"; names the entry
  std::string header;              ///< e.g. "sits/gemv.cuh"
  std::vector<std::string> config; ///< members of the config struct
  std::vector<KernelParam> params;
  std::vector<std::string> body; ///< statements before the call
  std::string call;              ///< the call, config struct as `Cfg`
  int threads = 128;             ///< __launch_bounds__
  int minBlocks = 0; ///< __launch_bounds__'s blocks per SM (0: not given)
  /// The call waits for the preceding kernels itself (after starting to
  /// read its weights); otherwise the entry waits first (common.cuh).
  bool callWaitsForPredecessors = false;
  std::string name;              ///< set when the kernel is deduplicated
  std::vector<std::string> uses; ///< what runs it, for the comments

  /// Specs with the same key are the same kernel.
  std::string getKey() const;
};

/// One kernel launch of a program.
struct LaunchPlan {
  unsigned kernel = 0; ///< index into EnginePlan::kernels
  std::array<format::Expr, 3> grid;
  std::array<format::Expr, 3> block;
  format::Expr sharedBytes;
  std::vector<ArgBinding> args; ///< one per kernel parameter
  std::string description;      ///< ops it runs and where they came from
  /// The op of the step function that becomes this launch (a
  /// kernel.launch, or a sits op that launches alone).
  mlir::Operation *owner = nullptr;
};

/// An activation: f32, token-major [T, width], T at most the program's
/// maximum tokens.
struct WorkspaceValue {
  std::string name;
  uint64_t width = 0;
  uint64_t bytes = 0;       ///< at the program's maximum token count
  unsigned firstLaunch = 0; ///< the launch that writes it
  unsigned lastLaunch = 0;  ///< the last launch that reads it
  uint64_t offset = 0;      ///< in the workspace (its #kernel.slice)
  /// Where the IR records its slice: the op that becomes its launch, and
  /// which of its results it is (kernel.buffers), or -1 for the op's
  /// scratch (kernel.scratch, in the order the launch takes it).
  mlir::Operation *owner = nullptr;
  int result = -1;
};

struct ProgramPlan {
  std::string name; ///< "prefill", "prefill_few" or "decode"
  bool isDecode = false;
  /// The linear layers run GEMVs: @decode's, and @prefill_few's (whose
  /// attention is the prefill's).
  bool gemvLinears = false;
  int64_t maxTokens = 0;
  std::vector<LaunchPlan> launches;
  std::vector<WorkspaceValue> values;
  /// Bytes the values of this program need at once (after reuse).
  uint64_t peakBytes = 0;
};

/// A weight of the engine, stored once (by name and storage type).
struct WeightPlan {
  std::string name;
  format::DType type = format::DType::F32;
  std::vector<int64_t> shape;
  mlir::ElementsAttr values;
  uint64_t bytes = 0;
  /// Quantized levels (i8, i4x2) stored with each 64-byte chunk of a row
  /// interleaved for the tensor-core GEMV (QuantLayout.h): their bits (8 or
  /// 4), or 0 for input order.
  int interleavedBits = 0;
};

/// --decode-kernels=persistent: the decode step of each batch bucket as one
/// persistent kernel (PersistentPlan.cpp), from @decode's
/// #kernel.decode_schedule and each launch's #kernel.task, evaluated per
/// bucket. Task t is decode launch t.
struct PersistentDecodePlan {
  struct Task {
    unsigned kernel = 0; ///< index into EnginePlan::kernels
    uint64_t tiles = 0, firstBlock = 0;
    std::array<uint64_t, 3> grid = {1, 1, 1};
    uint64_t threads = 0;     ///< the launch's block (one dimension)
    uint64_t sharedBytes = 0; ///< the launch's dynamic shared memory
    uint64_t argOffset = 0;   ///< its argument block, in the bucket's table
    std::vector<unsigned> deps;
  };
  struct Bucket {
    uint32_t batch = 0;
    std::vector<Task> tasks;
    uint64_t threads = 0;     ///< the most of a task
    uint64_t sharedBytes = 0; ///< the most of a task
    uint64_t argBytes = 0;    ///< the table of argument blocks
  };
  uint32_t blocks = 0;
  /// Each tile's times recorded (--persistent-trace).
  bool trace = false;
  std::vector<Bucket> buckets;
};

/// A kernel's argument block in the persistent kernel's table: its
/// parameters in order, each at its natural alignment (pointers 8 bytes,
/// int 4), as the struct the emitter declares for it lays them out.
struct ArgumentBlock {
  std::vector<uint64_t> offsets;
  uint64_t bytes = 0;
};
/// Arguments blocks start at multiples of this in the table.
constexpr uint64_t kArgumentBlockAlignment = 16;
/// The layout of `spec`'s parameters, or nullopt for a type it does not
/// know.
std::optional<ArgumentBlock> getArgumentBlock(const KernelSpec &spec);

/// Why the persistent decode kernel cannot run the op of @decode `op` yet
/// ("the TVC LM head"), or "" (the pass kernel-schedule-decode-tasks and
/// code generation ask alike).
std::string getPersistentUnsupportedReason(mlir::Operation *op);

/// The model's configuration, as the metadata records it.
struct ModelConfig {
  int64_t vocab = 0;
  int64_t hidden = 0;
  int64_t layers = 0;
  int64_t heads = 0;
  int64_t kvHeads = 0;
  int64_t headDim = 0;
  int64_t intermediate = 0;
  int64_t rotaryDim = 0;
  std::string ropeStyle;
  std::string norm;
  std::string activation;
  bool tiedLMHead = false;
  bool hasLinearBias = false;
  int64_t window = 0;
  float softcap = 0.0f;
  // Limits and the KV cache.
  int64_t maxSeqLen = 0;
  int64_t maxBatch = 0;
  int64_t maxPrefillTokens = 0;
  format::DType cacheType = format::DType::F16;
};

/// The name of a paged KV cache's block table buffer.
constexpr const char *kBlockTableBuffer = "kv_block_table";

struct EnginePlan {
  CodegenOptions options;
  ModelConfig model;
  std::vector<WeightPlan> weights;
  std::vector<KernelSpec> kernels;
  ProgramPlan prefill;
  ProgramPlan decode;
  /// @prefill_few, when the program has one.
  std::optional<ProgramPlan> prefillFew;
  /// Every program, in the engine's order.
  std::vector<ProgramPlan *> programs() {
    std::vector<ProgramPlan *> all = {&prefill, &decode};
    if (prefillFew)
      all.push_back(&*prefillFew);
    return all;
  }
  std::vector<const ProgramPlan *> programs() const {
    std::vector<const ProgramPlan *> all = {&prefill, &decode};
    if (prefillFew)
      all.push_back(&*prefillFew);
    return all;
  }
  /// The workspace the programs share (they never run at once).
  uint64_t workspaceBytes = 0;
  /// Bytes of the activations if none shared memory.
  uint64_t unsharedBytes = 0;
  /// Bytes of one of the two KV-cache buffers.
  uint64_t cacheBufferBytes = 0;
  /// Int32 counters the kernels need (0: no counters buffer).
  uint64_t counterInts = 0;
  /// The KV cache as the metadata describes it (quantization included).
  format::KVCacheConfig kvCache;
  /// The TVC LM head (TvcPlan.cpp), when the program has one.
  struct Tvc {
    int64_t rank = 0, candidates = 0, exactTop = 0;
    uint64_t scratchBytes = 0; ///< the tvc_scratch buffer
    uint64_t previewBytes = 0; ///< P, T and the bounds as stored
  };
  std::optional<Tvc> tvc;
  /// --decode-kernels=persistent: @decode's persistent kernels.
  std::optional<PersistentDecodePlan> persistentDecode;
};

/// The tokens of a sequence one prefill step takes: --max-prefill-tokens,
/// or its default for a KV cache of `capacity` rows.
int64_t getMaxPrefillTokens(const CodegenOptions &options, int64_t capacity);

/// "prefill 19 launches, decode 14 launches[, prefill_few 19 launches]
/// per step", for summaries.
std::string describeLaunches(const EnginePlan &plan);

/// Plans the engine for the optimized program in `module`. Errors are
/// reported through the MLIR diagnostics at the op that cannot be compiled.
mlir::FailureOr<EnginePlan> planEngine(mlir::ModuleOp module,
                                       const CodegenOptions &options);

/// Places the workspace values of the step function `func` (@prefill or
/// @decode of the kernel-level program) and records the placement in the IR:
/// kernel.buffers and kernel.scratch on the ops that become launches,
/// kernel.workspace_bytes on `func`. Plans the function's launches as code
/// generation will, to learn each value's size and lifetime. Returns the
/// values as placed.
mlir::FailureOr<ProgramPlan> placeWorkspace(mlir::func::FuncOp func,
                                            const CodegenOptions &options);

/// Plans the launches of the step function `func` as code generation does,
/// with the workspace offsets its memory plan (--kernel-plan-memory) gives,
/// without changing the IR. The launches' specs go to `kernels` (indexed
/// by LaunchPlan::kernel). Errors are reported at the op.
mlir::FailureOr<ProgramPlan> planStepLaunches(mlir::func::FuncOp func,
                                              const CodegenOptions &options,
                                              std::vector<KernelSpec> &kernels);

/// Gives every workspace value of `program` an offset so that values live at
/// the same time never overlap; sets the offsets and `peakBytes`.
void planMemory(ProgramPlan &program);

/// Checks that no two values live at the same time share bytes and that
/// every value is aligned and inside the peak (what code generation checks
/// of the plan the IR gives).
std::optional<std::string> checkMemoryPlan(const ProgramPlan &program);

/// Plans the persistent decode kernels of `decode` (which has a
/// #kernel.decode_schedule) from its planned launches; errors are reported
/// at the op that cannot be run.
mlir::FailureOr<PersistentDecodePlan>
planPersistentDecode(mlir::func::FuncOp decode, const EnginePlan &plan);

/// The CUDA C++ source of the plan's kernels (one translation unit that
/// includes the kernel library headers). With a persistent decode plan it
/// is two: the graph-mode entries as they are, the persistent decode
/// kernels with SITS_PERSISTENT_DECODE defined.
std::string emitCudaSource(const EnginePlan &plan,
                           const std::string &modelName);

} // namespace sits::codegen

#endif // SITS_BACKENDS_CUDA_PLAN_H
