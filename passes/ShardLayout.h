//===- ShardLayout.h - How values are spread over the ranks -----*- C++ -*-===//
//
// The safety check of a tensor-parallel program: every value is either the
// same on every rank (replicated), cut along one dimension (split: each
// rank holds its part), or a partial sum (each rank holds a term; the sum
// over the ranks is the value). Each op reads only the layouts its
// semantics allow (a matmul of split columns gives a partial sum, an
// elementwise op keeps a split, only sits.all_reduce reads a partial sum,
// a function returns replicated values), so that the program every rank
// runs computes what the unsplit program computed.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_PASSES_SHARDLAYOUT_H
#define SITS_PASSES_SHARDLAYOUT_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>

namespace sits {

/// Checks the layouts of every value of `func`, a program for `ranks` ranks,
/// and fails with an error (prefixed `prefix: `) at the first op that reads
/// a layout it cannot.
mlir::LogicalResult checkShardLayouts(mlir::func::FuncOp func, int64_t ranks,
                                      llvm::StringRef prefix);

} // namespace sits

#endif // SITS_PASSES_SHARDLAYOUT_H
