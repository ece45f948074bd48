//===- MemoryPlan.cpp - One workspace for every activation of a program ---===//
//
// Every value a step writes gets an offset in one workspace buffer, fixed
// at compile time (the launch plan stores addresses as buffer + offset):
// --kernel-plan-memory places them here and records the offsets in the IR,
// and code generation checks the IR's plan with checkMemoryPlan. A value is
// live from the launch that writes it to the last launch that reads it;
// values whose lifetimes overlap get disjoint bytes, the others share.
// Placement is greedy by size (largest first, each at the lowest offset
// that is free for its whole lifetime), the usual heuristic for offline
// tensor-arena planning: near the lower bound (the largest sum of the sizes
// live at one launch) on transformer programs.
//
//===----------------------------------------------------------------------===//

#include "backends/cuda/Plan.h"
#include "dialects/kernel/KernelDialect.h"

#include <algorithm>
#include <numeric>

namespace sits::codegen {

constexpr uint64_t kWorkspaceAlignment =
    kernel::KernelDialect::kWorkspaceAlignment;

static uint64_t alignUp(uint64_t value) {
  return (value + kWorkspaceAlignment - 1) / kWorkspaceAlignment *
         kWorkspaceAlignment;
}

void planMemory(ProgramPlan &program) {
  std::vector<WorkspaceValue> &values = program.values;
  std::vector<size_t> order(values.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return values[a].bytes > values[b].bytes;
  });

  std::vector<size_t> placed;
  program.peakBytes = 0;
  for (size_t index : order) {
    WorkspaceValue &value = values[index];
    // The placed values alive at the same time, by offset.
    std::vector<size_t> conflicts;
    for (size_t other : placed)
      if (values[other].firstLaunch <= value.lastLaunch &&
          value.firstLaunch <= values[other].lastLaunch)
        conflicts.push_back(other);
    std::sort(conflicts.begin(), conflicts.end(), [&](size_t a, size_t b) {
      return values[a].offset < values[b].offset;
    });
    uint64_t offset = 0;
    for (size_t other : conflicts) {
      if (offset + value.bytes <= values[other].offset)
        break; // fits in the gap before `other`
      offset =
          std::max(offset, alignUp(values[other].offset + values[other].bytes));
    }
    value.offset = offset;
    placed.push_back(index);
    program.peakBytes = std::max(program.peakBytes, offset + value.bytes);
  }
}

std::optional<std::string> checkMemoryPlan(const ProgramPlan &program) {
  const std::vector<WorkspaceValue> &values = program.values;
  for (size_t a = 0; a < values.size(); ++a) {
    const WorkspaceValue &x = values[a];
    if (x.offset % kWorkspaceAlignment ||
        x.offset + x.bytes > program.peakBytes)
      return "value '" + x.name + "' is misplaced in the workspace";
    for (size_t b = a + 1; b < values.size(); ++b) {
      const WorkspaceValue &y = values[b];
      bool together =
          x.firstLaunch <= y.lastLaunch && y.firstLaunch <= x.lastLaunch;
      bool overlap =
          x.offset < y.offset + y.bytes && y.offset < x.offset + x.bytes;
      if (together && overlap)
        return "values '" + x.name + "' and '" + y.name +
               "' are live together but share workspace bytes";
    }
  }
  return std::nullopt;
}

} // namespace sits::codegen
