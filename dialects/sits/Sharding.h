//===- Sharding.h - Tensor-parallel programs and their ranks ----*- C++ -*-===//
//
// A tensor-parallel program is one program for every rank (SPMD): sits.shard
// says which part of a weight a rank holds, sits.embedding's vocab_shard
// which rows of the vocabulary. Specializing it for one rank makes those
// parts concrete, so that everything that reads weights (the reference
// executor, the engine writer) sees plain sits.weight ops of the rank's
// shapes.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_DIALECT_SITS_SHARDING_H
#define SITS_DIALECT_SITS_SHARDING_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>

namespace sits {

/// The module attribute that gives a tensor-parallel program its ranks
/// (`sits.tensor_parallel = N`).
constexpr llvm::StringLiteral kTensorParallelAttrName = "sits.tensor_parallel";

/// The most ranks a program is split over (--tensor-parallel).
constexpr int64_t kMaxTensorParallelRanks = 64;

/// The ranks `module` runs on: its sits.tensor_parallel, or 1.
int64_t getTensorParallelRanks(mlir::ModuleOp module);

/// Makes `module` the program of rank `rank`, in place: each
/// `sits.shard(sits.weight)` becomes a sits.weight valued by the rank's
/// slice of the weight (a #sits.weight_view: no copy), each embedding's
/// vocab_shard the rank's row_offset. The collectives stay (they join the
/// ranks' programs). The weight keeps its name unless it is read another
/// way too (`NAME.dim0.parts2`, the same on every rank), so that names stay
/// unique. Fails with an error at the op when `rank` is not one of the
/// module's ranks or a shard describes other ranks than the module's.
mlir::LogicalResult specializeForRankInPlace(mlir::ModuleOp module,
                                             int64_t rank);

/// A copy of `module` specialized for `rank` (as above); `module` is left
/// as it was.
mlir::FailureOr<mlir::OwningOpRef<mlir::ModuleOp>>
specializeForRank(mlir::ModuleOp module, int64_t rank);

} // namespace sits

#endif // SITS_DIALECT_SITS_SHARDING_H
