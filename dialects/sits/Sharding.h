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

/// The ranks `module` runs on: its sits.tensor_parallel, or 1.
int64_t getTensorParallelRanks(mlir::ModuleOp module);

} // namespace sits

#endif // SITS_DIALECT_SITS_SHARDING_H
