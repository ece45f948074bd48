//===- TensorParallel.cpp - Running a program's ranks as threads ----------===//

#include "compiler/reference/TensorParallel.h"
#include "compiler/reference/RankGroup.h"

#include "dialects/sits/Sharding.h"

#include "mlir/IR/Diagnostics.h"

#include <algorithm>
#include <cstring>
#include <thread>

using namespace mlir;
using namespace sits::reference;

TensorParallelRanks::TensorParallelRanks(ModuleOp module, int64_t ranks,
                                         ExecutorOptions options)
    : ranks(ranks), timeout(options.collectiveTimeout) {
  // Specializing reports through the context's diagnostics: keep the first
  // for run() instead of printing it.
  std::string firstError;
  ScopedDiagnosticHandler handler(module.getContext(), [&](Diagnostic &diag) {
    if (firstError.empty() && diag.getSeverity() == DiagnosticSeverity::Error)
      firstError = diag.str();
    return success();
  });
  options.oneRank = true;
  for (int64_t rank = 0; rank < ranks; ++rank) {
    FailureOr<OwningOpRef<ModuleOp>> specialized =
        sits::specializeForRank(module, rank);
    if (failed(specialized)) {
      setupError = "the program's rank " + std::to_string(rank) +
                   " cannot be made: " + firstError;
      executors.clear();
      modules.clear();
      return;
    }
    modules.push_back(std::move(*specialized));
    executors.push_back(std::make_unique<Executor>(*modules.back(), options));
  }
}

TensorParallelRanks::~TensorParallelRanks() = default;

/// Each rank's arguments: the caller's tensors on every rank, and for each
/// KV cache the caller's (rank 0's part) and the other ranks' parts kept
/// beside it, or new empty parts for a cache this runner has not seen.
llvm::Expected<std::vector<std::vector<RuntimeValue>>>
TensorParallelRanks::argumentsOfEveryRank(std::vector<RuntimeValue> args) {
  // Forget the parts of caches the caller has dropped.
  for (auto it = peers.begin(); it != peers.end();)
    it = it->second.first.expired() ? peers.erase(it) : std::next(it);

  std::vector<std::vector<RuntimeValue>> byRank(ranks, args);
  for (size_t i = 0; i < args.size(); ++i) {
    if (!args[i].isKVCache())
      continue;
    const std::shared_ptr<KVCacheState> &first = args[i].getKVCache();
    auto known = peers.find(first.get());
    if (known == peers.end() || known->second.first.lock() != first) {
      // A cache the program has not written yet: every rank starts empty.
      const auto lengths = first->getLengths();
      if (std::any_of(lengths.begin(), lengths.end(),
                      [](int64_t length) { return length != 0; }))
        return llvm::createStringError(
            "argument " + std::to_string(i) +
            " is a KV cache that holds tokens but was not filled by this "
            "tensor-parallel program: the other ranks' parts of it are "
            "unknown");
      Peers fresh;
      fresh.first = first;
      for (int64_t rank = 1; rank < ranks; ++rank)
        fresh.others.push_back(
            std::make_shared<KVCacheState>(first->getConfig()));
      known = peers.insert_or_assign(first.get(), std::move(fresh)).first;
    }
    for (int64_t rank = 1; rank < ranks; ++rank)
      byRank[rank][i] = known->second.others[rank - 1];
  }
  return byRank;
}

void TensorParallelRanks::rememberPeers(
    const std::vector<std::vector<RuntimeValue>> &results) {
  for (size_t i = 0; i < results[0].size(); ++i) {
    if (!results[0][i].isKVCache())
      continue;
    Peers known;
    known.first = results[0][i].getKVCache();
    for (int64_t rank = 1; rank < ranks; ++rank)
      known.others.push_back(results[rank][i].getKVCache());
    peers.insert_or_assign(results[0][i].getKVCache().get(), std::move(known));
  }
}

static bool sameBits(const Tensor &a, const Tensor &b) {
  if (a.getShape() != b.getShape() || a.getElementType() != b.getElementType())
    return false;
  if (a.isFloat())
    return std::memcmp(a.floats().data(), b.floats().data(),
                       a.floats().size() * sizeof(float)) == 0;
  return a.ints() == b.ints();
}

llvm::Expected<std::vector<RuntimeValue>>
TensorParallelRanks::run(llvm::StringRef function,
                         std::vector<RuntimeValue> args) {
  if (!setupError.empty())
    return llvm::createStringError(setupError);
  auto byRank = argumentsOfEveryRank(std::move(args));
  if (!byRank)
    return byRank.takeError();

  // A group per run: one that failed stays failed, and the next run starts
  // afresh (a request's bad token id must not stop the next request).
  RankGroup group(static_cast<int>(ranks), timeout);
  std::vector<std::vector<RuntimeValue>> results(ranks);
  auto runRank = [&](int64_t rank) {
    Executor &executor = *executors[rank];
    executor.setRank(&group, static_cast<int>(rank));
    auto ranResults = executor.run(function, std::move((*byRank)[rank]));
    executor.setRank(nullptr, 0);
    if (!ranResults) {
      group.abort(static_cast<int>(rank),
                  llvm::toString(ranResults.takeError()));
      return;
    }
    results[rank] = std::move(*ranResults);
  };
  std::vector<std::thread> threads;
  for (int64_t rank = 1; rank < ranks; ++rank)
    threads.emplace_back(runRank, rank);
  runRank(0);
  for (std::thread &thread : threads)
    thread.join();

  // Every failed rank aborted the group; its failure names the rank that
  // failed first (the others' errors only say that they were stopped).
  if (std::string failure = group.getFailure(); !failure.empty())
    return llvm::createStringError(failure);

  for (int64_t rank = 1; rank < ranks; ++rank)
    for (size_t i = 0; i < results[0].size(); ++i)
      if (results[0][i].isTensor() &&
          !sameBits(results[0][i].getTensor(), results[rank][i].getTensor()))
        return llvm::createStringError(
            "result " + std::to_string(i) + " of '" + function.str() +
            "' differs between rank 0 and rank " + std::to_string(rank) +
            ": a tensor-parallel program's results must be replicated on "
            "every rank (a collective is missing before the return)");
  rememberPeers(results);
  return std::move(results[0]);
}
