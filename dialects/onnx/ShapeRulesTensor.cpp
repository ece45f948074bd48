//===- ShapeRulesTensor.cpp - Shape computations and data movement --------===//
//
// Shape rules of the ops exporters use to compute shapes at run time (Shape,
// Gather, Concat, Slice, Unsqueeze, Squeeze, Range, Reshape, Expand,
// ConstantOfShape) and to move data. They propagate the values of small
// integer tensors, so that a Reshape whose target comes out of such a
// subgraph gets the input's own symbols.
//
//===----------------------------------------------------------------------===//

#include "dialects/onnx/OnnxOps.h"
#include "dialects/onnx/ShapeRules.h"
#include "dialects/shapes/ShapeRuleOpInterface.h"
#include "dialects/shapes/SymbolicExpr.h"
#include "dialects/shapes/SymbolicShapes.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace sits::onnx;

namespace {

/// Keeps values of a result whose elements are those of an input, in the
/// same row-major order (reshapes).
void copyValues(TensorFacts &result, const TensorFacts &input) {
  if (input.values)
    setTrackedValues(result, *input.values);
}

LogicalResult constantRule(ShapeRuleContext &ctx) {
  auto op = cast<ConstantOp>(ctx.getOp());
  Builder b(ctx.getContext());
  ElementsAttr value;
  if (std::optional<ElementsAttr> attr = op.getValue())
    value = *attr;
  else if (std::optional<APFloat> f = op.getValueFloat())
    value = DenseElementsAttr::get(RankedTensorType::get({}, b.getF32Type()),
                                   f->convertToFloat());
  else if (std::optional<ArrayRef<float>> fs = op.getValueFloats())
    value = DenseElementsAttr::get(
        RankedTensorType::get({static_cast<int64_t>(fs->size())},
                              b.getF32Type()),
        *fs);
  else if (std::optional<uint64_t> i = op.getValueInt())
    value = DenseElementsAttr::get(RankedTensorType::get({}, b.getI64Type()),
                                   static_cast<int64_t>(*i));
  else if (std::optional<ArrayRef<int64_t>> is = op.getValueInts())
    value = DenseElementsAttr::get(
        RankedTensorType::get({static_cast<int64_t>(is->size())},
                              b.getI64Type()),
        *is);
  if (!value || !isa<RankedTensorType>(value.getType()))
    return ctx.fail() << "Constant needs one ranked value attribute";
  ctx.result() = ctx.getShapes().factsFromConstant(value);
  return success();
}

LogicalResult constantOfShapeRule(ShapeRuleContext &ctx) {
  auto op = cast<ConstantOfShapeOp>(ctx.getOp());
  FailureOr<SmallVector<AffineExpr, 4>> shape =
      getShapeOperand(ctx, 0, "input");
  if (failed(shape))
    return failure();
  TensorFacts &result = ctx.result();
  result.ranked = true;
  for (AffineExpr dim : *shape)
    result.dims.push_back(dim ? dim : ctx.unknown());
  result.elementType = Float32Type::get(ctx.getContext());
  if (std::optional<ElementsAttr> value = op.getValue()) {
    if (value->getNumElements() != 1)
      return ctx.fail() << "value must hold one element";
    result.elementType = value->getElementType();
    if (result.elementType.isInteger()) {
      APInt v = *value->getValues<APInt>().begin();
      int64_t fill =
          result.elementType.isInteger(1) ? v.getZExtValue() : v.getSExtValue();
      result.elementExpr = ctx.constant(fill);
      std::optional<int64_t> count = result.getStaticNumElements();
      if (count && *count <= SymbolicShapes::kMaxTrackedElements)
        result.values = SmallVector<AffineExpr, 4>(*count, ctx.constant(fill));
    }
  }
  return success();
}

LogicalResult rangeRule(ShapeRuleContext &ctx) {
  AffineExpr start = ctx.operand(0).getScalar();
  AffineExpr limit = ctx.operand(1).getScalar();
  AffineExpr delta = ctx.operand(2).getScalar();
  TensorFacts &result = ctx.result();
  result.ranked = true;
  result.elementType = ctx.operand(0).elementType;
  std::optional<int64_t> step = getConstantValue(delta);
  if (step && *step == 0)
    return ctx.fail() << "Range delta is 0";
  AffineExpr length;
  if (start && limit && step) {
    AffineExpr span =
        *step > 0 ? subExprs(limit, start) : subExprs(start, limit);
    std::optional<int64_t> constantSpan = getConstantValue(span);
    if (constantSpan && *constantSpan <= 0)
      length = ctx.constant(0);
    else
      length = ceilDivExpr(span, *step > 0 ? *step : -*step);
  }
  result.dims.push_back(length ? length : ctx.unknown());
  if (start && step && result.elementType.isInteger()) {
    AffineExpr index = getAffineDimExpr(0, ctx.getContext());
    result.elementExpr = addExprs(start, mulExprs(index, ctx.constant(*step)));
    if (std::optional<int64_t> count = getConstantValue(length);
        count && *count <= SymbolicShapes::kMaxTrackedElements) {
      SmallVector<AffineExpr, 4> values;
      for (int64_t i = 0; i < *count; ++i)
        values.push_back(addExprs(start, ctx.constant(i * *step)));
      result.values = std::move(values);
    }
  }
  return success();
}

LogicalResult shapeRule(ShapeRuleContext &ctx) {
  auto op = cast<ShapeOp>(ctx.getOp());
  if (failed(requireRanked(ctx, 0, "data")))
    return failure();
  const TensorFacts &data = ctx.operand(0);
  int64_t rank = data.getRank();
  auto clampIndex = [rank](int64_t index) {
    if (index < 0)
      index += rank;
    return std::clamp<int64_t>(index, 0, rank);
  };
  int64_t start = clampIndex(static_cast<int64_t>(op.getStart()));
  int64_t end =
      op.getEnd() ? clampIndex(static_cast<int64_t>(*op.getEnd())) : rank;
  end = std::max(start, end);
  TensorFacts &result = ctx.result();
  result.ranked = true;
  result.elementType = IntegerType::get(ctx.getContext(), 64);
  result.dims.push_back(ctx.constant(end - start));
  setTrackedValues(result, SmallVector<AffineExpr, 4>(data.dims.begin() + start,
                                                      data.dims.begin() + end));
  return success();
}

LogicalResult sizeRule(ShapeRuleContext &ctx) {
  if (failed(requireRanked(ctx, 0, "data")))
    return failure();
  TensorFacts &result = ctx.result();
  result.ranked = true;
  result.elementType = IntegerType::get(ctx.getContext(), 64);
  setTrackedValues(result, {productOf(ctx.operand(0).dims, ctx.getContext())});
  return success();
}

/// Maps element expressions through a reshape that only inserts or removes
/// dims of size 1; null for any other reshape.
AffineExpr reshapeElementExpr(const TensorFacts &input,
                              ArrayRef<AffineExpr> resultDims,
                              MLIRContext *context) {
  if (!input.elementExpr)
    return nullptr;
  // One repeated value stays that value in any shape.
  if (isa<AffineConstantExpr>(input.elementExpr))
    return input.elementExpr;
  auto isOne = [](AffineExpr dim) {
    std::optional<int64_t> size = getConstantValue(dim);
    return size && *size == 1;
  };
  SmallVector<unsigned> resultPositions;
  for (auto [i, dim] : llvm::enumerate(resultDims))
    if (!isOne(dim))
      resultPositions.push_back(i);
  SmallVector<AffineExpr> replacements;
  size_t next = 0;
  for (AffineExpr dim : input.dims) {
    if (isOne(dim)) {
      replacements.push_back(getAffineConstantExpr(0, context));
      continue;
    }
    if (next >= resultPositions.size() ||
        resultDims[resultPositions[next]] != dim)
      return nullptr;
    replacements.push_back(getAffineDimExpr(resultPositions[next++], context));
  }
  if (next != resultPositions.size())
    return nullptr;
  return remapDims(input.elementExpr, replacements);
}

LogicalResult reshapeRule(ShapeRuleContext &ctx) {
  auto op = cast<ReshapeOp>(ctx.getOp());
  if (failed(requireRanked(ctx, 0, "data")))
    return failure();
  FailureOr<SmallVector<AffineExpr, 4>> target =
      getShapeOperand(ctx, 1, "shape");
  if (failed(target))
    return failure();
  const TensorFacts &data = ctx.operand(0);
  bool allowZero = op.getAllowzero() != 0;
  SmallVector<AffineExpr, 4> dims;
  int64_t inferred = -1;
  for (auto [i, entry] : llvm::enumerate(*target)) {
    std::optional<int64_t> value = getConstantValue(entry);
    if (!entry) {
      dims.push_back(ctx.unknown());
    } else if (value && *value == 0 && !allowZero) {
      if (static_cast<int64_t>(i) >= data.getRank())
        return ctx.fail() << "shape entry " << i << " is 0 (copy the input "
                          << "dim), but the input has rank " << data.getRank();
      dims.push_back(data.dims[i]);
    } else if (value && *value == -1) {
      if (inferred >= 0)
        return ctx.fail() << "shape has more than one -1";
      inferred = i;
      dims.push_back(AffineExpr());
    } else if (value && *value < 0) {
      return ctx.fail() << "shape entry " << i << " is " << *value;
    } else {
      dims.push_back(entry);
    }
  }
  AffineExpr total = productOf(data.dims, ctx.getContext());
  if (inferred >= 0) {
    SmallVector<AffineExpr, 4> known;
    for (auto [i, dim] : llvm::enumerate(dims))
      if (static_cast<int64_t>(i) != inferred)
        known.push_back(dim);
    AffineExpr knownProduct = productOf(known, ctx.getContext());
    std::optional<int64_t> constantKnown = getConstantValue(knownProduct);
    if (constantKnown && *constantKnown == 0)
      return ctx.fail() << "cannot infer the -1 entry of shape "
                        << ctx.describe(dims) << " next to a 0";
    std::optional<AffineExpr> quotient = divideExactly(total, knownProduct);
    std::optional<int64_t> constantTotal = getConstantValue(total);
    if (!quotient && constantTotal && constantKnown)
      return ctx.fail() << "cannot reshape " << *constantTotal
                        << " elements into a multiple of " << *constantKnown;
    dims[inferred] = quotient ? *quotient : ctx.unknown();
  } else {
    std::optional<int64_t> from = getConstantValue(total);
    std::optional<int64_t> to =
        getConstantValue(productOf(dims, ctx.getContext()));
    if (from && to && *from != *to)
      return ctx.fail() << "cannot reshape " << ctx.describe(data.dims) << " ("
                        << *from << " elements) into " << ctx.describe(dims)
                        << " (" << *to << " elements)";
  }
  TensorFacts &result = ctx.result();
  result.ranked = true;
  result.elementType = data.elementType;
  result.dims = dims;
  copyValues(result, data);
  result.elementExpr = reshapeElementExpr(data, result.dims, ctx.getContext());
  return success();
}

LogicalResult flattenRule(ShapeRuleContext &ctx) {
  auto op = cast<FlattenOp>(ctx.getOp());
  if (failed(requireRanked(ctx, 0, "input")))
    return failure();
  const TensorFacts &input = ctx.operand(0);
  int64_t rank = input.getRank();
  int64_t axis = static_cast<int64_t>(op.getAxis());
  if (axis < 0)
    axis += rank;
  if (axis < 0 || axis > rank)
    return ctx.fail() << "axis is out of range for rank " << rank;
  ArrayRef<AffineExpr> dims = input.dims;
  TensorFacts &result = ctx.result();
  result.ranked = true;
  result.elementType = input.elementType;
  result.dims = {productOf(dims.take_front(axis), ctx.getContext()),
                 productOf(dims.drop_front(axis), ctx.getContext())};
  copyValues(result, input);
  if (input.elementExpr && isa<AffineConstantExpr>(input.elementExpr))
    result.elementExpr = input.elementExpr;
  return success();
}

LogicalResult unsqueezeRule(ShapeRuleContext &ctx) {
  if (failed(requireRanked(ctx, 0, "data")))
    return failure();
  FailureOr<SmallVector<int64_t, 4>> axes = requireConstantInts(ctx, 1, "axes");
  if (failed(axes))
    return failure();
  const TensorFacts &data = ctx.operand(0);
  int64_t rank = data.getRank() + static_cast<int64_t>(axes->size());
  SmallVector<bool> inserted(rank, false);
  for (int64_t axis : *axes) {
    FailureOr<int64_t> normalized = normalizeAxis(ctx, "axis", axis, rank);
    if (failed(normalized))
      return failure();
    if (inserted[*normalized])
      return ctx.fail() << "axes repeat " << *normalized;
    inserted[*normalized] = true;
  }
  TensorFacts &result = ctx.result();
  result.ranked = true;
  result.elementType = data.elementType;
  SmallVector<AffineExpr> replacements;
  size_t next = 0;
  for (int64_t i = 0; i < rank; ++i) {
    if (inserted[i]) {
      result.dims.push_back(ctx.constant(1));
      continue;
    }
    replacements.push_back(getAffineDimExpr(i, ctx.getContext()));
    result.dims.push_back(data.dims[next++]);
  }
  copyValues(result, data);
  result.elementExpr = remapDims(data.elementExpr, replacements);
  return success();
}

LogicalResult squeezeRule(ShapeRuleContext &ctx) {
  if (failed(requireRanked(ctx, 0, "data")))
    return failure();
  const TensorFacts &data = ctx.operand(0);
  int64_t rank = data.getRank();
  SmallVector<bool> removed(rank, false);
  if (ctx.getOp()->getNumOperands() > 1) {
    FailureOr<SmallVector<int64_t, 4>> axes =
        requireConstantInts(ctx, 1, "axes");
    if (failed(axes))
      return failure();
    for (int64_t axis : *axes) {
      FailureOr<int64_t> normalized = normalizeAxis(ctx, "axis", axis, rank);
      if (failed(normalized))
        return failure();
      std::optional<int64_t> size = getConstantValue(data.dims[*normalized]);
      if (size && *size != 1)
        return ctx.fail() << "cannot squeeze axis " << *normalized
                          << " of size " << *size;
      removed[*normalized] = true;
    }
  } else {
    for (int64_t i = 0; i < rank; ++i) {
      std::optional<int64_t> size = getConstantValue(data.dims[i]);
      if (!size)
        return ctx.fail() << "Squeeze without axes on dynamic dim " << i << " ("
                          << ctx.describe(data.dims[i])
                          << "): the result's rank is unknown";
      removed[i] = *size == 1;
    }
  }
  TensorFacts &result = ctx.result();
  result.ranked = true;
  result.elementType = data.elementType;
  SmallVector<AffineExpr> replacements;
  for (int64_t i = 0; i < rank; ++i) {
    if (removed[i]) {
      replacements.push_back(ctx.constant(0));
      continue;
    }
    replacements.push_back(
        getAffineDimExpr(result.dims.size(), ctx.getContext()));
    result.dims.push_back(data.dims[i]);
  }
  copyValues(result, data);
  result.elementExpr = remapDims(data.elementExpr, replacements);
  return success();
}

/// Values of `result` read from `input` by broadcasting.
void broadcastValues(TensorFacts &result, const TensorFacts &input,
                     MLIRContext *context) {
  std::optional<SmallVector<int64_t, 4>> dims = getConstantDims(result);
  std::optional<int64_t> count = result.getStaticNumElements();
  if (!dims || !count || *count > SymbolicShapes::kMaxTrackedElements ||
      !result.elementType.isInteger())
    return;
  SmallVector<AffineExpr, 4> values;
  bool anyKnown = false;
  forEachIndex(*dims, [&](ArrayRef<int64_t> index) {
    values.push_back(elementAt(input, index, context));
    anyKnown |= static_cast<bool>(values.back());
  });
  if (anyKnown)
    setTrackedValues(result, std::move(values));
}

LogicalResult expandRule(ShapeRuleContext &ctx) {
  if (failed(requireRanked(ctx, 0, "input")))
    return failure();
  FailureOr<SmallVector<AffineExpr, 4>> shape =
      getShapeOperand(ctx, 1, "shape");
  if (failed(shape))
    return failure();
  for (AffineExpr &dim : *shape)
    if (!dim)
      dim = ctx.unknown();
  const TensorFacts &input = ctx.operand(0);
  FailureOr<SmallVector<AffineExpr, 4>> dims = broadcastDims(
      ctx, {ArrayRef<AffineExpr>(input.dims), ArrayRef<AffineExpr>(*shape)});
  if (failed(dims))
    return failure();
  TensorFacts &result = ctx.result();
  result.ranked = true;
  result.elementType = input.elementType;
  result.dims = *dims;
  broadcastValues(result, input, ctx.getContext());
  result.elementExpr =
      broadcastElementExpr(input.elementExpr, input.dims, result.dims);
  return success();
}

LogicalResult padRule(ShapeRuleContext &ctx) {
  auto op = cast<PadOp>(ctx.getOp());
  if (failed(requireRanked(ctx, 0, "data")))
    return failure();
  const TensorFacts &data = ctx.operand(0);
  int64_t rank = data.getRank();
  SmallVector<int64_t, 4> axes;
  if (op.getAxes()) {
    unsigned index = op.getConstantValue() ? 3 : 2;
    FailureOr<SmallVector<int64_t, 4>> given =
        requireConstantInts(ctx, index, "axes");
    if (failed(given))
      return failure();
    for (int64_t axis : *given) {
      FailureOr<int64_t> normalized = normalizeAxis(ctx, "axes", axis, rank);
      if (failed(normalized))
        return failure();
      axes.push_back(*normalized);
    }
  } else {
    for (int64_t axis = 0; axis < rank; ++axis)
      axes.push_back(axis);
  }
  FailureOr<SmallVector<AffineExpr, 4>> pads = getShapeOperand(ctx, 1, "pads");
  if (failed(pads))
    return failure();
  if (pads->size() != 2 * axes.size())
    return ctx.fail() << "pads has " << pads->size() << " entries for "
                      << axes.size() << " axes (it needs two per axis)";
  TensorFacts &result = ctx.result();
  result.ranked = true;
  result.elementType = data.elementType;
  result.dims = data.dims;
  for (auto [i, axis] : llvm::enumerate(axes)) {
    AffineExpr before = (*pads)[i], after = (*pads)[i + axes.size()];
    result.dims[axis] = before && after
                            ? addExprs(addExprs(data.dims[axis], before), after)
                            : ctx.unknown();
  }
  return success();
}

LogicalResult tileRule(ShapeRuleContext &ctx) {
  if (failed(requireRanked(ctx, 0, "input")))
    return failure();
  FailureOr<SmallVector<AffineExpr, 4>> repeats =
      getShapeOperand(ctx, 1, "repeats");
  if (failed(repeats))
    return failure();
  const TensorFacts &input = ctx.operand(0);
  if (static_cast<int64_t>(repeats->size()) != input.getRank())
    return ctx.fail() << "repeats has " << repeats->size()
                      << " entries for rank " << input.getRank();
  TensorFacts &result = ctx.result();
  result.ranked = true;
  result.elementType = input.elementType;
  for (auto [dim, repeat] : llvm::zip(input.dims, *repeats))
    result.dims.push_back(repeat ? mulExprs(dim, repeat) : ctx.unknown());
  return success();
}

LogicalResult transposeRule(ShapeRuleContext &ctx) {
  auto op = cast<TransposeOp>(ctx.getOp());
  if (failed(requireRanked(ctx, 0, "data")))
    return failure();
  const TensorFacts &data = ctx.operand(0);
  SmallVector<int64_t> perm;
  if (std::optional<ArrayRef<int64_t>> attr = op.getPerm())
    perm.assign(attr->begin(), attr->end());
  else
    for (int64_t i = data.getRank() - 1; i >= 0; --i)
      perm.push_back(i);
  if (static_cast<int64_t>(perm.size()) != data.getRank())
    return ctx.fail() << "perm has " << perm.size() << " entries for rank "
                      << data.getRank();
  TensorFacts &result = ctx.result();
  result.ranked = true;
  result.elementType = data.elementType;
  SmallVector<AffineExpr> replacements(perm.size());
  for (auto [j, p] : llvm::enumerate(perm)) {
    if (p < 0 || p >= data.getRank())
      return ctx.fail() << "perm entry " << p << " is out of range";
    result.dims.push_back(data.dims[p]);
    replacements[p] = getAffineDimExpr(j, ctx.getContext());
  }
  result.elementExpr = remapDims(data.elementExpr, replacements);
  if (data.values) {
    // Rare on shape tensors; recompute through a permuted index.
    TensorFacts source = data;
    std::optional<SmallVector<int64_t, 4>> dims = getConstantDims(result);
    if (dims) {
      SmallVector<AffineExpr, 4> values;
      forEachIndex(*dims, [&](ArrayRef<int64_t> index) {
        SmallVector<int64_t, 4> sourceIndex(perm.size());
        for (auto [j, p] : llvm::enumerate(perm))
          sourceIndex[p] = index[j];
        values.push_back(elementAt(source, sourceIndex, ctx.getContext()));
      });
      setTrackedValues(result, std::move(values));
    }
  }
  return success();
}

} // namespace

void sits::onnx::attachTensorShapeRules(MLIRContext *context) {
  attachShapeRule<constantRule, ConstantOp>(context);
  attachShapeRule<constantOfShapeRule, ConstantOfShapeOp>(context);
  attachShapeRule<rangeRule, RangeOp>(context);
  attachShapeRule<shapeRule, ShapeOp>(context);
  attachShapeRule<sizeRule, SizeOp>(context);
  attachShapeRule<padRule, PadOp>(context);
  attachShapeRule<reshapeRule, ReshapeOp>(context);
  attachShapeRule<flattenRule, FlattenOp>(context);
  attachShapeRule<unsqueezeRule, UnsqueezeOp>(context);
  attachShapeRule<squeezeRule, SqueezeOp>(context);
  attachShapeRule<expandRule, ExpandOp>(context);
  attachShapeRule<tileRule, TileOp>(context);
  attachShapeRule<transposeRule, TransposeOp>(context);
}
