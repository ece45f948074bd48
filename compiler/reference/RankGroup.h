//===- RankGroup.h - Collectives between the threads of N ranks -*- C++ -*-===//
//
// The reference executor runs a tensor-parallel program as N ranks, one
// thread each, that meet at every sits.all_reduce and sits.all_gather. A
// RankGroup is where they meet: each collective is a rendezvous of all N
// ranks, and the last to arrive computes the result for all of them, in
// rank order, so that every rank gets the same bits on every run.
//
// It never hangs: a rank that fails aborts the group, and one that waits
// longer than the timeout for the others aborts it too, naming the ranks
// that did not come; every rank waiting or arriving later then gets the
// error. Plain C++ (no MLIR), so that the kernel emulator can use it too.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_COMPILER_REFERENCE_RANKGROUP_H
#define SITS_COMPILER_REFERENCE_RANKGROUP_H

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace sits::reference {

class RankGroup {
public:
  /// N ranks; a rank waits at most `timeout` for the others at a collective.
  RankGroup(int size, std::chrono::milliseconds timeout);

  int getSize() const { return static_cast<int>(arrivedData.size()); }

  /// Rank `rank`'s part of the group's next collective, an element-wise sum
  /// of every rank's `data` in rank order (in f32); `data` becomes the sum.
  /// Returns an empty string, or the error that stopped the group.
  std::string allReduce(int rank, std::vector<float> &data);

  /// Rank `rank`'s part of the group's next collective: `data` holds `rows`
  /// rows of equal width on every rank and becomes the rows of all ranks'
  /// parts side by side, rank 0's first (a concatenation along the last
  /// dimension). Returns an empty string, or the error that stopped the
  /// group.
  std::string allGather(int rank, int64_t rows, std::vector<float> &data);

  /// Stops the group: every rank waiting at a collective, and every one that
  /// arrives later, gets "rank R failed: WHY". The first abort wins.
  void abort(int rank, const std::string &why);

  /// The error that stopped the group, or an empty string.
  std::string getFailure() const;

  /// Collectives every rank has completed.
  uint64_t getCompleted() const;

private:
  enum class Kind { AllReduce, AllGather };
  static const char *nameOf(Kind kind);

  std::string meet(int rank, Kind kind, int64_t rows, std::vector<float> &data);
  void combine();

  const std::chrono::milliseconds timeout;
  mutable std::mutex mutex;
  std::condition_variable changed;
  std::string failure;
  uint64_t completed = 0;
  // The collective being gathered: what the first rank to arrive brought,
  // which the others must match.
  int arrived = 0;
  Kind kind = Kind::AllReduce;
  int64_t rows = 0;
  size_t elements = 0;
  int firstRank = 0;
  std::vector<std::vector<float> *> arrivedData;
  std::vector<float> result;
};

} // namespace sits::reference

#endif // SITS_COMPILER_REFERENCE_RANKGROUP_H
