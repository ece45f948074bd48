//===- GroupLinears.cpp - Linear layers of one input in one launch --------===//
//
// Q, K and V (and any other projections of one input) become one GEMV/GEMM
// with a segment per weight: the input is read once, and a decode step has
// two launches fewer per layer.
//
//===----------------------------------------------------------------------===//

#include "backends/cuda/transforms/FusionUtils.h"
#include "backends/cuda/transforms/Passes.h"
#include "passes/Audit.h"

#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/MapVector.h"

namespace sits::kernel {
#define GEN_PASS_DEF_GROUPLINEARS
#include "backends/cuda/transforms/Passes.h.inc"
} // namespace sits::kernel

using namespace mlir;
using namespace sits;
using namespace sits::kernel;

namespace {

/// The segments one launch of the linear kernels writes at most
/// (LinearLaunch's segment arguments).
constexpr size_t kMaxSegments = 4;

/// Moves the side-effect-free ops that define `value` (and their operands)
/// before `point` when they are after it in its block.
bool hoistBefore(Value value, Operation *point) {
  Operation *def = value.getDefiningOp();
  if (!def || def->getBlock() != point->getBlock() ||
      def->isBeforeInBlock(point))
    return true;
  if (def == point || !isMemoryEffectFree(def) || def->getNumRegions())
    return false;
  for (Value operand : def->getOperands())
    if (!hoistBefore(operand, point))
      return false;
  def->moveBefore(point);
  return true;
}

struct GroupLinearsPass
    : public sits::kernel::impl::GroupLinearsBase<GroupLinearsPass> {
  void runOnOperation() override {
    PassAudit audit(&getContext(), getArgument(), {"launches", "linears"});
    getOperation().walk([&](func::FuncOp func) { group(func, audit); });
  }

  void group(func::FuncOp func, PassAudit &audit) {
    llvm::MapVector<std::pair<Value, std::pair<int64_t, int64_t>>,
                    SmallVector<Operation *>>
        byInput;
    func.walk([&](LinearOp linear) {
      if (!getEnclosingLaunch(linear) && isTokenMajor(linear.getInput()))
        byInput[{linear.getInput(), getQuantKey(linear.getWeight())}].push_back(
            linear);
    });
    for (auto &entry : byInput) {
      ArrayRef<Operation *> linears = entry.second;
      for (size_t start = 0; start < linears.size(); start += kMaxSegments) {
        ArrayRef<Operation *> ops = linears.slice(
            start, std::min(kMaxSegments, linears.size() - start));
        if (ops.size() < 2)
          continue;
        Operation *first = ops.front();
        bool hoisted = true;
        for (Operation *op : ops.drop_front())
          hoisted &= hoistBefore(cast<LinearOp>(op).getWeight(), first) &&
                     (!cast<LinearOp>(op).getBias() ||
                      hoistBefore(cast<LinearOp>(op).getBias(), first));
        std::string reason;
        if (!hoisted || !canFormLaunchAt(ops, first, &reason)) {
          audit.change(getLocations(ops),
                       "sits.linear x" + std::to_string(ops.size()), "kept",
                       "not grouped: " + (hoisted ? reason
                                                  : std::string("a weight "
                                                                "cannot move "
                                                                "before the "
                                                                "first")));
          continue;
        }
        formLaunch(FusionKind::LinearGroup, ops, first);
        audit.add("launches");
        audit.add("linears", static_cast<int64_t>(ops.size()));
        audit.change(getLocations(ops),
                     "sits.linear x" + std::to_string(ops.size()),
                     "kernel.launch <linear_group>",
                     "they read one input, with weights of one "
                     "quantization; one launch reads it once");
      }
    }
  }
};

} // namespace
