//===- Kernels.h - Op kernels of the reference executor ---------*- C++ -*-===//
//
// Internal to the reference executor: the context a kernel runs in, the op
// interface through which the executor runs an op's kernel, and the
// functions that attach each op family's kernels to its ops.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_COMPILER_REFERENCE_KERNELS_H
#define SITS_COMPILER_REFERENCE_KERNELS_H

#include "compiler/reference/Executor.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/Operation.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/Twine.h"

#include <optional>

namespace sits::reference {

/// What one op's kernel sees: its operands' values, its result types, and
/// where to put its results.
class KernelContext {
public:
  KernelContext(mlir::Operation *op,
                const llvm::DenseMap<mlir::Value, RuntimeValue> &values,
                std::optional<int64_t> stepBatch, unsigned numThreads,
                ExecutorStatistics *statistics = nullptr,
                RankGroup *group = nullptr, int rank = 0)
      : op(op), values(values), stepBatch(stepBatch), numThreads(numThreads),
        statistics(statistics), group(group), rank(rank),
        results(op->getNumResults()) {}

  mlir::Operation *getOp() const { return op; }

  /// The runtime value of an operand (or of any value the op can see).
  const RuntimeValue &value(mlir::Value v) const {
    return values.find(v)->second;
  }
  const Tensor &tensor(mlir::Value v) const { return value(v).getTensor(); }
  const Tensor &operand(unsigned index) const {
    return tensor(op->getOperand(index));
  }
  unsigned getNumOperands() const { return op->getNumOperands(); }

  /// The element type result `index` declares (checked before the kernel
  /// runs).
  ElementType resultType(unsigned index) const;
  /// A zero-filled tensor of result `index`'s element type.
  Tensor makeResult(unsigned index, llvm::ArrayRef<int64_t> shape) const {
    return Tensor(resultType(index), shape);
  }
  /// A freshly computed result: rounded (or wrapped) to its element type
  /// here, since kernels compute in f32 / i64.
  void setResult(unsigned index, Tensor tensor) {
    tensor.setElementTypeAndRound(tensor.getElementType());
    results[index] = RuntimeValue(std::move(tensor));
  }
  /// A result that already holds values of its type (a constant, an operand
  /// passed through, a KV-cache state).
  void setResult(unsigned index, RuntimeValue value) {
    results[index] = std::move(value);
  }
  std::vector<RuntimeValue> &getResults() { return results; }

  /// An error that names the op and its location.
  llvm::Error error(const llvm::Twine &message) const;

  /// Batch of the step being run: dim 0 of the function's first rank-2
  /// integer argument (the token ids), when there is one. The KV-cache ops
  /// use it when nothing else tells them the runtime batch.
  std::optional<int64_t> getStepBatch() const { return stepBatch; }
  unsigned getNumThreads() const { return numThreads; }

  /// Counts one row of a sits.tvc_lm_head: proved, or a fallback.
  void noteTvcRow(bool proved) {
    if (!statistics)
      return;
    ++statistics->tvcRows;
    statistics->tvcProved += proved;
  }

  /// The group of ranks this executor is one of (null: it runs all of its
  /// program's ranks, which then must be one), and its rank there.
  RankGroup *getRankGroup() const { return group; }
  int getRank() const { return rank; }

private:
  mlir::Operation *op;
  const llvm::DenseMap<mlir::Value, RuntimeValue> &values;
  std::optional<int64_t> stepBatch;
  unsigned numThreads;
  ExecutorStatistics *statistics;
  RankGroup *group;
  int rank;
  std::vector<RuntimeValue> results;
};

using Kernel = llvm::Error (*)(KernelContext &context);

} // namespace sits::reference

#include "compiler/reference/ReferenceKernelOpInterface.h.inc"

namespace sits::reference {

/// The model of `OpT` that runs kernel `K`: kernels are plain functions,
/// some shared by several ops, so the model is generated rather than
/// written per op.
template <Kernel K, typename OpT>
struct KernelModel
    : ReferenceKernelOpInterface::ExternalModel<KernelModel<K, OpT>, OpT> {
  llvm::Error runReferenceKernel(mlir::Operation *,
                                 KernelContext &context) const {
    return K(context);
  }
};

/// Attaches kernel `K` to each op of `OpTs` (ops of a loaded dialect).
template <Kernel K, typename... OpTs>
void attachKernel(mlir::MLIRContext *context) {
  (OpTs::template attachInterface<KernelModel<K, OpTs>>(*context), ...);
}

/// Each op family attaches its kernels to its ops; registerReferenceKernels
/// (Executor.h) calls them as the sits and onnx dialects load.
void attachSitsKernels(mlir::MLIRContext *context);
void attachAttentionKernels(mlir::MLIRContext *context);
void attachQuantKernels(mlir::MLIRContext *context);
void attachOnnxKernels(mlir::MLIRContext *context);
void attachCollectiveKernels(mlir::MLIRContext *context);

/// Broadcasting: the strides that read a tensor of shape `source` as a tensor
/// of shape `target`, aligned from the right (stride 0 on broadcast
/// dimensions). Fails when a dimension is neither 1 nor the target's.
std::optional<llvm::SmallVector<int64_t, 6>>
broadcastStrides(llvm::ArrayRef<int64_t> source,
                 llvm::ArrayRef<int64_t> target);

/// Row-major strides of a shape.
llvm::SmallVector<int64_t, 6> stridesOf(llvm::ArrayRef<int64_t> shape);

} // namespace sits::reference

#endif // SITS_COMPILER_REFERENCE_KERNELS_H
