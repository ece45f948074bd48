//===- Executor.h - CPU reference executor ----------------------*- C++ -*-===//
//
// Runs a `func.func` of a module holding `sits`, `onnx`, `arith`, `func` and
// `tensor` ops on the CPU, naively but exactly as each op's description says:
// the oracle the compiler's GPU code is measured against. Numerics:
// docs/reference-executor.md.
//
//   sits::reference::Executor executor(module);
//   auto results = executor.run("forward", {Tensor::fromInts(...)});
//   if (!results) ... llvm::toString(results.takeError()) ...
//
// Errors (an unsupported op, a shape that does not fit at run time, a token id
// outside the vocabulary, a position outside a RoPE table, a full KV cache)
// come back as llvm::Error naming the op and its location (the ONNX node
// names), never as an assert.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_COMPILER_REFERENCE_EXECUTOR_H
#define SITS_COMPILER_REFERENCE_EXECUTOR_H

#include "compiler/reference/KVCache.h"
#include "compiler/reference/Tensor.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/OperationSupport.h"
#include "llvm/Support/Error.h"

#include <chrono>
#include <functional>
#include <memory>
#include <vector>

namespace sits::reference {

class RankGroup;
class TensorParallelRanks;

/// A value of the program: a tensor, or a KV-cache state. Copies are cheap and
/// share the underlying tensor or state.
class RuntimeValue {
public:
  RuntimeValue() = default;
  /*implicit*/ RuntimeValue(Tensor tensor)
      : tensor(std::make_shared<const Tensor>(std::move(tensor))) {}
  /*implicit*/ RuntimeValue(std::shared_ptr<const Tensor> tensor)
      : tensor(std::move(tensor)) {}
  /*implicit*/ RuntimeValue(std::shared_ptr<KVCacheState> cache)
      : cache(std::move(cache)) {}

  bool isTensor() const { return tensor != nullptr; }
  bool isKVCache() const { return cache != nullptr; }
  /// The tensor (requires isTensor()).
  const Tensor &getTensor() const { return *tensor; }
  const std::shared_ptr<const Tensor> &getTensorPtr() const { return tensor; }
  /// The KV-cache state (requires isKVCache()).
  const std::shared_ptr<KVCacheState> &getKVCache() const { return cache; }

private:
  std::shared_ptr<const Tensor> tensor;
  std::shared_ptr<KVCacheState> cache;
};

/// What the executor counted while running programs.
struct ExecutorStatistics {
  /// Rows (positions) that a sits.tvc_lm_head scored, and how many of them
  /// it proved (the others fell back to the full LM head).
  int64_t tvcRows = 0;
  int64_t tvcProved = 0;
};

struct ExecutorOptions {
  /// Threads for large matrix products; 0 picks min(2, hardware threads).
  unsigned numThreads = 0;
  /// A tensor-parallel program's ranks wait this long for each other at a
  /// collective before the run fails naming the ranks that did not come
  /// (a rank that fails stops the others at once).
  std::chrono::milliseconds collectiveTimeout = std::chrono::minutes(5);
  /// Runs a tensor-parallel program's module as one rank, whose
  /// collectives meet the other ranks' executors through setRank(), instead
  /// of running all its ranks.
  bool oneRank = false;
};

/// Called after each op with its results (for tracing and per-op
/// comparisons).
using OpObserver =
    std::function<void(mlir::Operation *op, llvm::ArrayRef<RuntimeValue>)>;

/// Runs functions of one module. The module must outlive the executor.
/// Constants and weights are converted once and kept for later runs.
///
/// A tensor-parallel program (`sits.tensor_parallel = N`, N > 1) runs as
/// its N ranks, one thread each, as the GPUs would run it
/// (TensorParallel.h); the caller sees one executor returning rank 0's
/// results.
class Executor {
public:
  explicit Executor(mlir::ModuleOp module, ExecutorOptions options = {});
  ~Executor();
  Executor(const Executor &) = delete;
  Executor &operator=(const Executor &) = delete;

  /// Runs `function` on `args` (one per function argument, of matching
  /// shape, element type or KV-cache type) and returns its results.
  llvm::Expected<std::vector<RuntimeValue>> run(llvm::StringRef function,
                                                std::vector<RuntimeValue> args);

  void setObserver(OpObserver observer);

  /// Counts since the executor was made (or since the last reset).
  const ExecutorStatistics &getStatistics() const;
  void resetStatistics();

  /// Whether the executor runs ops of kind `name`: a kernel attached
  /// (ReferenceKernelOpInterface), or one of the upstream ops it runs
  /// itself (arith.constant, func.call, tensor.dim, ...).
  static bool supports(mlir::OperationName name);

  /// For the runner of a tensor-parallel program's ranks: this executor
  /// (made with ExecutorOptions::oneRank) is rank `rank` of `group` for the
  /// runs that follow.
  void setRank(RankGroup *group, int rank);

  class Impl;

private:
  std::unique_ptr<Impl> impl;
  std::unique_ptr<TensorParallelRanks> parallel;
};

/// Attaches the reference kernels to the sits and onnx ops (their
/// ReferenceKernelOpInterface, an external model: the dialects do not
/// depend on the executor) as each dialect loads, like the upstream
/// registerXExternalModels functions.
void registerReferenceKernels(mlir::DialectRegistry &registry);

/// Adds registerReferenceKernels to `context` (to its dialects already
/// loaded too). The executor does this for its module's context, so callers
/// need not.
void attachKernels(mlir::MLIRContext *context);

/// "loc(\"/model/layers.0/MatMul\")" -> "/model/layers.0/MatMul": the ONNX
/// node names in a location (every NameLoc, for fused locations), else
/// file:line:col, else "unknown location".
std::string describeLocation(mlir::Location location);

} // namespace sits::reference

#endif // SITS_COMPILER_REFERENCE_EXECUTOR_H
