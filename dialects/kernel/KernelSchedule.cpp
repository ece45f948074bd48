//===- KernelSchedule.cpp - The persistent decode kernel's task graph -----===//
//
// #kernel.decode_schedule and #kernel.task: their checks (their syntax is
// in KernelDialect.cpp, with their storage), and the check that a step
// function's tasks form the schedule it names (ids in order, a tile count per
// bucket, tiles dealt round-robin, dependencies on earlier tasks).
//
//===----------------------------------------------------------------------===//

#include "dialects/kernel/KernelOps.h"

#include "mlir/Interfaces/FunctionInterfaces.h"

using namespace mlir;
using namespace sits::kernel;

/// The most sequences of a bucket a persistent decode kernel takes.
static constexpr int64_t kMaxScheduleBucket = 8;
/// The most blocks of a persistent decode kernel (the range of M a launch
/// plan is validated at).
static constexpr int64_t kMaxScheduleBlocks = 1024;

LogicalResult
DecodeScheduleAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                           int64_t blocks, ArrayRef<int64_t> buckets) {
  if (blocks < 1 || blocks > kMaxScheduleBlocks)
    return emitError() << "blocks = " << blocks
                       << ": a persistent decode kernel has 1 to "
                       << kMaxScheduleBlocks << " blocks";
  if (buckets.empty())
    return emitError() << "a decode schedule needs at least one bucket";
  for (size_t i = 0; i < buckets.size(); ++i)
    if (buckets[i] < 1 || buckets[i] > kMaxScheduleBucket ||
        (i && buckets[i] <= buckets[i - 1]))
      return emitError() << "buckets must increase, from 1 to "
                         << kMaxScheduleBucket << " sequences";
  return success();
}

LogicalResult TaskAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                               int64_t id, ArrayRef<int64_t> tiles,
                               ArrayRef<int64_t> firstBlock,
                               ArrayRef<int64_t> deps, bool) {
  if (id < 0)
    return emitError() << "id = " << id << ": task ids count from 0";
  if (tiles.empty() || tiles.size() != firstBlock.size())
    return emitError() << "a task has one tile count and one first block per "
                          "bucket";
  for (int64_t count : tiles)
    if (count < 1)
      return emitError() << "a task has at least one tile per bucket";
  for (int64_t block : firstBlock)
    if (block < 0)
      return emitError() << "first_block = " << block
                         << ": blocks count from 0";
  for (size_t i = 0; i < deps.size(); ++i)
    if (deps[i] < 0 || deps[i] >= id || (i && deps[i] <= deps[i - 1]))
      return emitError() << "task " << id
                         << " may depend only on earlier tasks, in "
                            "increasing order";
  return success();
}

LogicalResult sits::kernel::verifyDecodeSchedule(Operation *func,
                                                 DecodeScheduleAttr schedule) {
  auto function = dyn_cast<FunctionOpInterface>(func);
  if (!function)
    return func->emitError() << "'" << KernelDialect::kDecodeScheduleAttrName
                             << "' belongs on the decode step function";
  if (function.isExternal() || !function.getFunctionBody().hasOneBlock())
    return success();
  ArrayRef<int64_t> buckets = schedule.getBuckets();
  SmallVector<int64_t> dealt(buckets.size(), 0);
  int64_t next = 0;
  for (Operation &op : function.getFunctionBody().front()) {
    auto task = op.getAttrOfType<TaskAttr>(KernelDialect::kTaskAttrName);
    if (!task)
      continue;
    if (task.getId() != next)
      return op.emitError() << "task " << task.getId()
                            << " out of order: the tasks of a decode "
                               "schedule are numbered 0, 1, ... in program "
                               "order, expected "
                            << next;
    ++next;
    if (task.getTiles().size() != buckets.size())
      return op.emitError() << "task " << task.getId() << " gives tiles for "
                            << task.getTiles().size()
                            << " buckets, the schedule has " << buckets.size();
    for (size_t b = 0; b < buckets.size(); ++b) {
      if (task.getFirstBlock()[b] != dealt[b] % schedule.getBlocks())
        return op.emitError()
               << "task " << task.getId() << " starts at block "
               << task.getFirstBlock()[b] << " at batch " << buckets[b]
               << ", but the tiles before it end at block "
               << dealt[b] % schedule.getBlocks()
               << " (tiles are dealt round-robin in task order)";
      dealt[b] += task.getTiles()[b];
    }
  }
  return success();
}
