//===- MaskPositions.cpp - Positions computed from the padding mask -------===//
//
// Some exports compute the positions of a step's tokens inside the graph
// from the padding mask, with Hugging Face's left-padding rule:
//
//   positions = cumsum(mask, -1) - 1           (rank among real tokens)
//   positions[mask == 0] = k                   (Where or Mul: padding only)
//   positions = positions[:, -seq:]            (the step's tokens)
//
// For a real token that is its index in its sequence without the padding,
// which is what the runtime gives each sequence (it runs every sequence
// unpadded: past + i), so the pattern is sits.position_ids of the token
// ids. Only this exact rule is raised (matched by structure, checked with
// the symbolic dims); any other CumSum of the mask is an error naming the
// op, since the runtime's positions need not be its values.
//
//===----------------------------------------------------------------------===//

#include "frontends/onnx/raising/RaisingSupport.h"

#include "dialects/shapes/SymbolicExpr.h"

#include <climits>

using namespace mlir;
using namespace sits;
using namespace sits::onnx;
using namespace sits::onnx::raising;

namespace {

/// `value` is the mask, through Casts.
bool isMask(Value value, Value mask) {
  while (auto cast = definedBy<CastOp>(value))
    value = cast.getInput();
  return value == mask;
}

bool hasElementType(Value value, function_ref<bool(Type)> predicate) {
  auto type = dyn_cast<ShapedType>(value.getType());
  return type && predicate(type.getElementType());
}

bool isBool(Value value) {
  return hasElementType(value, [](Type t) { return t.isInteger(1); });
}

bool isInteger(Value value) {
  return hasElementType(
      value, [](Type t) { return isa<IntegerType>(t) && !t.isInteger(1); });
}

/// Whether `cond` is true exactly where the mask is 0 (`zero`) or exactly
/// where it is not (`!zero`).
bool isMaskTest(Value cond, Value mask, bool zero) {
  if (auto notOp = definedBy<NotOp>(cond))
    return isMaskTest(notOp.getInput(), mask, !zero);
  if (auto equal = definedBy<EqualOp>(cond))
    return zero && ((isMask(equal.getA(), mask) &&
                     isScalarConstant(equal.getB(), 0.0)) ||
                    (isMask(equal.getB(), mask) &&
                     isScalarConstant(equal.getA(), 0.0)));
  if (auto greater = definedBy<GreaterOp>(cond))
    return !zero && isMask(greater.getA(), mask) &&
           isScalarConstant(greater.getB(), 0.0);
  // A Cast of the mask to bool: true where it is not 0.
  return !zero && isBool(cond) && definedBy<CastOp>(cond) && isMask(cond, mask);
}

/// `value` - 1 as Sub(value, 1) or Add(value, -1): the op, or null.
Operation *matchMinusOne(Operation *op, Value value) {
  if (auto sub = dyn_cast_or_null<SubOp>(op))
    return sub.getA() == value && isScalarConstant(sub.getB(), 1.0) ? op
                                                                    : nullptr;
  if (auto add = dyn_cast_or_null<onnx::AddOp>(op)) {
    Value other = otherOperand(op, value);
    return other && isScalarConstant(other, -1.0) ? op : nullptr;
  }
  return nullptr;
}

/// `positions` with the padding positions set (a constant where the mask
/// is 0, or times the mask): the op, or null.
Operation *matchPaddingSet(Operation *op, Value positions, Value mask) {
  if (auto where = dyn_cast_or_null<WhereOp>(op)) {
    if (where.getY() == positions && getScalarConstant(where.getX()) &&
        isMaskTest(where.getCondition(), mask, /*zero=*/true))
      return op;
    if (where.getX() == positions && getScalarConstant(where.getY()) &&
        isMaskTest(where.getCondition(), mask, /*zero=*/false))
      return op;
    return nullptr;
  }
  if (auto mul = dyn_cast_or_null<MulOp>(op)) {
    Value other = otherOperand(op, positions);
    return other && isInteger(other) && isMask(other, mask) ? op : nullptr;
  }
  return nullptr;
}

bool sameDims(SymbolicShapes &shapes, Value a, Value b) {
  std::optional<ArrayRef<AffineExpr>> x = shapes.getDims(a);
  std::optional<ArrayRef<AffineExpr>> y = shapes.getDims(b);
  return x && y && *x == *y;
}

/// Whether `slice` takes the last `seq` columns of its [batch, total]
/// input along axis 1: starts -seq or total - seq, ends at or past total,
/// step 1. (Its inferred dims need not show it: nothing says seq <= total.)
bool isTailSlice(SymbolicShapes &shapes, SliceOp slice, AffineExpr seq) {
  auto axes = slice.getAxes() ? shapes.getConstantValues(slice.getAxes())
                              : std::optional<SmallVector<int64_t, 4>>();
  if (!axes || axes->size() != 1 || ((*axes)[0] != 1 && (*axes)[0] != -1))
    return false;
  if (slice.getSteps()) {
    auto steps = shapes.getConstantValues(slice.getSteps());
    if (!steps || steps->size() != 1 || (*steps)[0] != 1)
      return false;
  }
  AffineExpr total = shapes.getDim(slice.getData(), 1);
  auto starts = shapes.getValues(slice.getStarts());
  auto ends = shapes.getValues(slice.getEnds());
  if (!seq || !total || !starts || starts->size() != 1 || !ends ||
      ends->size() != 1)
    return false;
  AffineExpr start = canonicalize((*starts)[0]);
  if (start != canonicalize(-seq) && start != subExprs(total, seq))
    return false;
  std::optional<int64_t> end = getConstantValue((*ends)[0]);
  return (end && *end >= INT32_MAX) || canonicalize((*ends)[0]) == total;
}

/// The value HF's rule computes from `cumsum` and the ops of the rule, or a
/// reason why it is not that rule.
FailureOr<Value> matchRule(SymbolicShapes &shapes, CumSumOp cumsum, Value mask,
                           Value ids, SmallVectorImpl<Operation *> &ops,
                           std::string &reason) {
  auto axis = shapes.getConstantValues(cumsum.getAxis());
  if (!axis || axis->size() != 1 || ((*axis)[0] != -1 && (*axis)[0] != 1) ||
      cumsum.getExclusive() != 0 || cumsum.getReverse() != 0 ||
      !isInteger(cumsum.getX())) {
    reason = "it is not an inclusive, forward integer sum along the last "
             "axis";
    return failure();
  }
  ops.push_back(cumsum);
  Operation *minusOne =
      matchMinusOne(getSingleUser(cumsum.getY()), cumsum.getY());
  if (!minusOne) {
    reason = "its only use is not the sum minus 1";
    return failure();
  }
  ops.push_back(minusOne);
  Value positions = minusOne->getResult(0);
  if (Operation *padding =
          matchPaddingSet(getSingleUser(positions), positions, mask)) {
    ops.push_back(padding);
    positions = padding->getResult(0);
  }
  // The step's tokens: the last seq columns, or all of them when the mask
  // is as long as the step.
  bool tail = false;
  if (auto slice = dyn_cast_or_null<SliceOp>(getSingleUser(positions))) {
    if (slice.getData() == positions &&
        isTailSlice(shapes, slice, shapes.getDim(ids, 1))) {
      ops.push_back(slice);
      positions = slice.getOutput();
      tail = shapes.getDim(mask, 0) == shapes.getDim(ids, 0);
    }
  }
  if (!tail && !sameDims(shapes, positions, ids)) {
    reason = "the positions it gives are not the step's [batch, seq] (the "
             "last seq columns of the sum)";
    return failure();
  }
  return positions;
}

/// The ops after `replacement` were typed at import with the graph's own
/// positions, whose length the analysis could not tie to the step's (the
/// Slice of a longer mask); with the runtime's it can, so their types are
/// refined where the rules now prove a dim (static dims never change).
/// The codegen needs, e.g., the static features of merged heads.
void refineTypes(RaiseContext &rc, Operation *replacement) {
  SymbolicShapes &shapes = rc.getShapes();
  shapes.clear();
  func::FuncOp function = rc.getFunction();
  llvm::DenseSet<Operation *> affected{replacement};
  Operation *ret = function.getBody().front().getTerminator();
  for (Operation &op : function.getBody().front()) {
    if (&op == ret || llvm::none_of(op.getOperands(), [&](Value operand) {
          return affected.contains(operand.getDefiningOp());
        }))
      continue;
    affected.insert(&op);
    for (Value result : op.getResults()) {
      auto oldType = dyn_cast<RankedTensorType>(result.getType());
      auto newType =
          dyn_cast<RankedTensorType>(shapes.getType(shapes.getFacts(result)));
      if (!oldType || !newType || newType.getRank() != oldType.getRank() ||
          newType.getElementType() != oldType.getElementType())
        continue;
      SmallVector<int64_t> dims(oldType.getShape());
      bool consistent = true;
      for (auto [i, dim] : llvm::enumerate(dims)) {
        if (ShapedType::isDynamic(dim))
          dim = newType.getDimSize(i);
        else if (!newType.isDynamicDim(i) && newType.getDimSize(i) != dim)
          consistent = false;
      }
      if (consistent)
        result.setType(oldType.clone(dims));
    }
  }
  // The function returns what it returned, maybe with static dims now.
  function.setType(FunctionType::get(function.getContext(),
                                     function.getArgumentTypes(),
                                     ret->getOperandTypes()));
  shapes.clear();
}

} // namespace

LogicalResult sits::onnx::raising::raiseMaskPositions(RaiseContext &rc,
                                                      BlockArgument mask,
                                                      BlockArgument ids,
                                                      StringRef maskName) {
  // The CumSums of the mask (through Casts).
  SmallVector<CumSumOp> sums;
  SmallVector<Value> work{mask};
  while (!work.empty()) {
    Value value = work.pop_back_val();
    for (Operation *user : value.getUsers()) {
      if (auto cast = dyn_cast<CastOp>(user))
        work.push_back(cast.getOutput());
      else if (auto cumsum = dyn_cast<CumSumOp>(user))
        if (cumsum.getX() == value && !llvm::is_contained(sums, cumsum))
          sums.push_back(cumsum);
    }
  }
  OpBuilder &b = rc.getBuilder();
  for (CumSumOp cumsum : sums) {
    SmallVector<Operation *> ops;
    std::string reason;
    FailureOr<Value> positions =
        matchRule(rc.getShapes(), cumsum, mask, ids, ops, reason);
    if (failed(positions)) {
      std::vector<std::string> names = getSourceNames(cumsum->getLoc());
      emitError(cumsum.getLoc())
          << "input '" << maskName << "': CumSum"
          << (names.empty() ? "" : " (" + names.front() + ")")
          << " of the padding mask is not Hugging Face's left-padding "
             "position rule (cumsum(mask, -1) - 1, padding positions set "
             "by Where or Mul, the last seq columns): "
          << reason << "; the runtime's positions need not be its values";
      rc.markFailed();
      return failure();
    }
    auto replacement = PositionIdsOp::create(
        b, mask.getLoc(), positions->getType(), ids, Value());
    positions->replaceAllUsesWith(replacement.getResult());
    refineTypes(rc, replacement);
    rc.noteReplacedInput(maskName, replacement);
    rc.recordRaise(
        "position_inputs_replaced", ops,
        "positions computed from input '" + maskName.str() +
            "' replaced by the runtime's positions",
        "Hugging Face's left-padding rule: cumsum(mask, -1) - 1 is each "
        "real token's index among its sequence's real tokens, which is "
        "its position in the unpadded sequence the runtime runs (past + "
        "i); padding positions are never fed");
  }
  return success();
}
