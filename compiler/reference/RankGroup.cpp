//===- RankGroup.cpp - Collectives between the threads of N ranks ---------===//

#include "compiler/reference/RankGroup.h"

#include <algorithm>
#include <cassert>

using namespace sits::reference;

RankGroup::RankGroup(int size, std::chrono::milliseconds timeout)
    : timeout(timeout), arrivedData(size > 0 ? size : 1, nullptr) {
  assert(size > 0 && "a group has ranks");
}

const char *RankGroup::nameOf(Kind kind) {
  return kind == Kind::AllReduce ? "an all_reduce" : "an all_gather";
}

std::string RankGroup::allReduce(int rank, std::vector<float> &data) {
  return meet(rank, Kind::AllReduce, 1, data);
}

std::string RankGroup::allGather(int rank, int64_t rows,
                                 std::vector<float> &data) {
  return meet(rank, Kind::AllGather, rows, data);
}

void RankGroup::abort(int rank, const std::string &why) {
  std::lock_guard<std::mutex> lock(mutex);
  if (failure.empty())
    failure = "rank " + std::to_string(rank) + " failed: " + why;
  changed.notify_all();
}

std::string RankGroup::getFailure() const {
  std::lock_guard<std::mutex> lock(mutex);
  return failure;
}

uint64_t RankGroup::getCompleted() const {
  std::lock_guard<std::mutex> lock(mutex);
  return completed;
}

std::string RankGroup::meet(int rank, Kind what, int64_t whatRows,
                            std::vector<float> &data) {
  std::unique_lock<std::mutex> lock(mutex);
  if (!failure.empty())
    return failure;
  const uint64_t number = completed + 1;
  const std::string collective = "collective #" + std::to_string(number);
  if (rank < 0 || rank >= getSize() || arrivedData[rank]) {
    failure = collective + ": rank " + std::to_string(rank) +
              (rank < 0 || rank >= getSize()
                   ? " is not in the group of " + std::to_string(getSize())
                   : " arrived twice");
    changed.notify_all();
    return failure;
  }
  if (arrived == 0) {
    kind = what;
    rows = whatRows;
    elements = data.size();
    firstRank = rank;
  } else if (what != kind || whatRows != rows || data.size() != elements) {
    // The ranks run one program: a disagreement means they diverged.
    failure = collective + ": rank " + std::to_string(rank) + " brought " +
              nameOf(what) + " of " + std::to_string(data.size()) +
              " elements in " + std::to_string(whatRows) + " rows, rank " +
              std::to_string(firstRank) + " " + nameOf(kind) + " of " +
              std::to_string(elements) + " in " + std::to_string(rows);
    changed.notify_all();
    return failure;
  }
  if (what == Kind::AllGather &&
      (whatRows <= 0 || data.size() % static_cast<size_t>(whatRows) != 0)) {
    failure = collective + ": rank " + std::to_string(rank) + "'s " +
              std::to_string(data.size()) + " elements are not " +
              std::to_string(whatRows) + " rows";
    changed.notify_all();
    return failure;
  }
  arrivedData[rank] = &data;
  if (++arrived == getSize()) {
    combine();
    return "";
  }

  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (completed < number && failure.empty()) {
    if (changed.wait_until(lock, deadline) != std::cv_status::timeout)
      continue;
    if (completed >= number || !failure.empty())
      break;
    std::string missing;
    for (int r = 0; r < getSize(); ++r)
      if (!arrivedData[r])
        missing += (missing.empty() ? "" : ", ") + std::to_string(r);
    failure = collective + " (" + nameOf(kind) + " of " +
              std::to_string(elements) + " elements): rank " + missing +
              " did not come within " + std::to_string(timeout.count()) + " ms";
    changed.notify_all();
  }
  return completed >= number ? "" : failure;
}

// Called with the lock held by the last rank to arrive; the others wait
// with their data untouched, so their vectors can be written here.
void RankGroup::combine() {
  const int n = getSize();
  if (kind == Kind::AllReduce) {
    std::vector<float> sum(elements, 0.0f);
    for (int r = 0; r < n; ++r)
      for (size_t i = 0; i < elements; ++i)
        sum[i] += (*arrivedData[r])[i];
    for (int r = 0; r < n; ++r)
      *arrivedData[r] = sum;
  } else {
    const size_t width = elements / static_cast<size_t>(rows);
    std::vector<float> gathered(elements * n);
    for (int64_t row = 0; row < rows; ++row)
      for (int r = 0; r < n; ++r)
        std::copy_n(arrivedData[r]->begin() + row * width, width,
                    gathered.begin() + (row * n + r) * width);
    for (int r = 0; r < n; ++r)
      *arrivedData[r] = gathered;
  }
  for (auto &pointer : arrivedData)
    pointer = nullptr;
  arrived = 0;
  ++completed;
  changed.notify_all();
}
