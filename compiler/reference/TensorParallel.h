//===- TensorParallel.h - Running a program's ranks as threads --*- C++ -*-===//
//
// Internal to the reference executor. An Executor given a tensor-parallel
// program (`sits.tensor_parallel = N`, N > 1) runs it as the N ranks the
// GPUs would: the program specialized for each rank (sits/Sharding.h), one
// executor and one thread per rank, meeting at the collectives through a
// RankGroup. The caller sees one executor: it passes rank 0's arguments and
// gets rank 0's results, which every rank must have computed bit for bit
// (the sharded program's outputs are replicated), and each KV cache it
// passes has the other ranks' caches kept beside it here.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_COMPILER_REFERENCE_TENSORPARALLEL_H
#define SITS_COMPILER_REFERENCE_TENSORPARALLEL_H

#include "compiler/reference/Executor.h"

#include "mlir/IR/OwningOpRef.h"

#include <map>

namespace sits::reference {

class TensorParallelRanks {
public:
  TensorParallelRanks(mlir::ModuleOp module, int64_t ranks,
                      ExecutorOptions options);
  ~TensorParallelRanks();

  llvm::Expected<std::vector<RuntimeValue>> run(llvm::StringRef function,
                                                std::vector<RuntimeValue> args);

  /// Rank 0's executor (statistics, observer), or null when the program
  /// could not be specialized (run() says why).
  Executor *getFirstRank() {
    return executors.empty() ? nullptr : executors.front().get();
  }

private:
  llvm::Expected<std::vector<std::vector<RuntimeValue>>>
  argumentsOfEveryRank(std::vector<RuntimeValue> args);
  void rememberPeers(const std::vector<std::vector<RuntimeValue>> &results);

  int64_t ranks;
  std::chrono::milliseconds timeout;
  std::string setupError;
  std::vector<mlir::OwningOpRef<mlir::ModuleOp>> modules;
  std::vector<std::unique_ptr<Executor>> executors;

  /// The other ranks' parts of a KV cache whose rank-0 part the caller
  /// holds, by that part's address.
  struct Peers {
    std::weak_ptr<KVCacheState> first;
    std::vector<std::shared_ptr<KVCacheState>> others;
  };
  std::map<const KVCacheState *, Peers> peers;
};

} // namespace sits::reference

#endif // SITS_COMPILER_REFERENCE_TENSORPARALLEL_H
