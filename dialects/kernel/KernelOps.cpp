//===- KernelOps.cpp - The kernel dialect's ops ---------------------------===//
//
// kernel.launch's verifier holds the contract between the fusion passes and
// the code generator: each fusion kind has one region shape, which the
// planner can then rely on.
//
//===----------------------------------------------------------------------===//

#include "dialects/kernel/KernelOps.h"
#include "dialects/sits/SitsOps.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace sits::kernel;

#define GET_OP_CLASSES
#include "dialects/kernel/KernelOps.cpp.inc"

LaunchOp sits::kernel::getEnclosingLaunch(Operation *op) {
  return op ? dyn_cast_or_null<LaunchOp>(op->getParentOp()) : nullptr;
}

Value sits::kernel::getOuterValue(Value value) {
  Operation *def = value.getDefiningOp();
  if (LaunchOp launch = getEnclosingLaunch(def))
    if (Value outer = launch.getResultFor(value))
      return outer;
  return value;
}

Value sits::kernel::getInnerValue(Value value) {
  auto result = dyn_cast<OpResult>(value);
  if (auto launch = dyn_cast_or_null<LaunchOp>(value.getDefiningOp()))
    return launch.getInnerValue(result);
  return value;
}

YieldOp LaunchOp::getYield() {
  return cast<YieldOp>(getBody().front().getTerminator());
}

Value LaunchOp::getResultFor(Value inner) {
  for (auto [index, value] : llvm::enumerate(getYield().getValues()))
    if (value == inner)
      return getResult(index);
  return nullptr;
}

Value LaunchOp::getInnerValue(OpResult outer) {
  return getYield().getValues()[outer.getResultNumber()];
}

namespace {

/// Checks the region of one launch against its fusion kind.
class RegionShape {
public:
  explicit RegionShape(LaunchOp launch) : launch(launch) {
    for (Operation &op : launch.getBody().front().without_terminator())
      ops.push_back(&op);
  }

  LogicalResult verify() {
    if (ops.empty())
      return launch.emitOpError("holds no ops");
    for (Operation *op : ops)
      if (!op->getDialect() || op->getDialect()->getNamespace() != "sits")
        return launch.emitOpError("may hold only sits ops, found '")
               << op->getName() << "'";
    switch (launch.getFusion()) {
    case FusionKind::LinearGroup:
      return verifyLinears(/*minLinears=*/1, /*maxLinears=*/4, "linear_group");
    case FusionKind::GatedLinear:
      return verifyGated();
    case FusionKind::ResidualLinear:
      return verifyResidual();
    case FusionKind::RopeKVAppend:
      return verifyRopeAppend();
    case FusionKind::LMHead:
      return verifyLMHead();
    case FusionKind::Norm:
      if (ops.size() != 1 || !isa<sits::RMSNormOp>(ops.front()))
        return launch.emitOpError("<norm> holds exactly one sits.rms_norm");
      return success();
    }
    return success();
  }

private:
  /// A leading rms_norm whose result only the region's linears read as
  /// their input; advances past it.
  LogicalResult takeNorm(size_t &next, Value &input) {
    auto norm = dyn_cast<sits::RMSNormOp>(ops.front());
    if (!norm)
      return success();
    for (OpOperand &use : norm.getResult().getUses()) {
      Operation *user = use.getOwner();
      bool isInput = false;
      if (auto linear = dyn_cast<sits::LinearOp>(user))
        isInput = &use == &linear.getInputMutable();
      else if (auto head = dyn_cast<sits::LMHeadOp>(user))
        isInput = &use == &head.getInputMutable();
      if (!isInput || user->getParentOp() != launch)
        return launch.emitOpError("fuses a sits.rms_norm whose result is "
                                  "read by something other than the "
                                  "launch's linear layers");
    }
    input = norm.getResult();
    next = 1;
    return success();
  }

  /// The linears from `next` on (between `minLinears` and `maxLinears`),
  /// all reading `input` (any one value when null).
  LogicalResult takeLinears(size_t &next, Value input, size_t minLinears,
                            size_t maxLinears, StringRef kind) {
    size_t first = next;
    while (next < ops.size() && isa<sits::LinearOp>(ops[next])) {
      auto linear = cast<sits::LinearOp>(ops[next]);
      if (!input)
        input = linear.getInput();
      if (linear.getInput() != input)
        return launch.emitOpError("<")
               << kind << "> fuses linear layers of different inputs";
      linears.push_back(linear);
      ++next;
    }
    size_t count = next - first;
    if (count < minLinears || count > maxLinears)
      return launch.emitOpError("<")
             << kind << "> fuses " << minLinears
             << (minLinears == maxLinears ? ""
                                          : " to " + std::to_string(maxLinears))
             << " sits.linear, found " << count;
    return success();
  }

  LogicalResult verifyLinears(size_t minLinears, size_t maxLinears,
                              StringRef kind) {
    size_t next = 0;
    Value input;
    if (failed(takeNorm(next, input)) ||
        failed(takeLinears(next, input, minLinears, maxLinears, kind)))
      return failure();
    if (next != ops.size())
      return launch.emitOpError("<") << kind << "> holds an unexpected '"
                                     << ops[next]->getName() << "'";
    return success();
  }

  LogicalResult verifyGated() {
    size_t next = 0;
    Value input;
    if (failed(takeNorm(next, input)) ||
        failed(takeLinears(next, input, 2, 2, "gated_linear")))
      return failure();
    auto glu = next + 1 == ops.size() ? dyn_cast<sits::GLUOp>(ops[next])
                                      : sits::GLUOp();
    if (!glu)
      return launch.emitOpError("<gated_linear> ends with the sits.glu of "
                                "its two linear layers");
    if (glu.getGate() != linears[0].getResult() ||
        glu.getUp() != linears[1].getResult())
      return launch.emitOpError("<gated_linear>'s sits.glu must read the "
                                "gate and then the up linear layer");
    return success();
  }

  LogicalResult verifyResidual() {
    size_t next = 0;
    Value input;
    if (failed(takeNorm(next, input)) ||
        failed(takeLinears(next, input, 1, 1, "residual_linear")))
      return failure();
    auto add = next + 1 == ops.size() ? dyn_cast<sits::AddOp>(ops[next])
                                      : sits::AddOp();
    if (!add || (add.getLhs() != linears[0].getResult()) ==
                    (add.getRhs() != linears[0].getResult()))
      return launch.emitOpError("<residual_linear> ends with the sits.add of "
                                "its linear layer's result and a residual");
    return success();
  }

  LogicalResult verifyRopeAppend() {
    auto append = dyn_cast<sits::KVAppendOp>(ops.back());
    if (!append || ops.size() > 3 ||
        !llvm::all_of(ArrayRef<Operation *>(ops).drop_back(),
                      [](Operation *op) { return isa<sits::RopeOp>(op); }))
      return launch.emitOpError("<rope_kv_append> holds at most two "
                                "sits.rope and then one sits.kv_cache.append");
    for (Operation *op : ArrayRef<Operation *>(ops).drop_back()) {
      auto rope = cast<sits::RopeOp>(op);
      if (rope.getResult() == append.getValue())
        return launch.emitOpError("<rope_kv_append> cannot rotate the values");
    }
    return success();
  }

  LogicalResult verifyLMHead() {
    auto norm =
        ops.size() == 2 ? dyn_cast<sits::RMSNormOp>(ops[0]) : sits::RMSNormOp();
    auto head =
        ops.size() == 2 ? dyn_cast<sits::LMHeadOp>(ops[1]) : sits::LMHeadOp();
    if (!norm || !head || head.getInput() != norm.getResult())
      return launch.emitOpError("<lm_head> holds a sits.rms_norm and the "
                                "sits.lm_head that reads it");
    size_t next = 0;
    Value input;
    return takeNorm(next, input);
  }

  LaunchOp launch;
  SmallVector<Operation *> ops;
  SmallVector<sits::LinearOp> linears;
};

} // namespace

LogicalResult LaunchOp::verify() {
  YieldOp yield = getYield();
  if (yield.getValues().getTypes() != getResultTypes())
    return emitOpError("yields ")
           << yield.getValues().getTypes().size()
           << " values whose types differ from its results";
  if (std::optional<uint64_t> bits = getOutputOperandBits()) {
    if (getFusion() != FusionKind::GatedLinear &&
        getFusion() != FusionKind::Norm)
      return emitOpError("output_operand_bits is for <gated_linear> and "
                         "<norm> launches only");
    if (*bits != KernelDialect::kInputOrderOperandBits && *bits != 8 &&
        *bits != 4)
      return emitOpError("output_operand_bits must be 16, 8 or 4, got ")
             << *bits;
  }
  // What the region computes for the rest of the program leaves only
  // through the yield.
  for (Operation &op : getBody().front().without_terminator())
    for (Value result : op.getResults())
      for (Operation *user : result.getUsers())
        if (user->getParentOp() != getOperation())
          return emitOpError("a value of its region is used outside it "
                             "without being yielded");
  return RegionShape(*this).verify();
}
