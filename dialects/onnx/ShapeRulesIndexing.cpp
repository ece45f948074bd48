//===- ShapeRulesIndexing.cpp - Slicing, joining, indexing ---------------===//
//
// Shape rules of Concat, Split, Slice, Gather and GatherND. On small integer
// tensors they also move the values (`Shape(x)[1:3]`, `Concat(Shape(x)[0],
// [-1])`), so that shapes computed at run time stay symbolic.
//
//===----------------------------------------------------------------------===//

#include "dialects/onnx/OnnxOps.h"
#include "dialects/onnx/ShapeRules.h"
#include "dialects/shapes/ShapeRuleOpInterface.h"
#include "dialects/shapes/SymbolicExpr.h"
#include "dialects/shapes/SymbolicShapes.h"

#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace sits::onnx;

namespace {

LogicalResult concatRule(ShapeRuleContext &ctx) {
  auto op = cast<ConcatOp>(ctx.getOp());
  unsigned count = op->getNumOperands();
  if (count == 0)
    return ctx.fail() << "Concat needs at least one input";
  for (unsigned i = 0; i < count; ++i)
    if (failed(requireRanked(ctx, i, "input " + std::to_string(i))))
      return failure();
  int64_t rank = ctx.operand(0).getRank();
  FailureOr<int64_t> axis =
      normalizeAxis(ctx, "axis", static_cast<int64_t>(op.getAxis()), rank);
  if (failed(axis))
    return failure();
  TensorFacts &result = ctx.result();
  result.ranked = true;
  result.elementType = ctx.operand(0).elementType;
  result.dims = ctx.operand(0).dims;
  AffineExpr sum = ctx.constant(0);
  for (unsigned i = 0; i < count; ++i) {
    const TensorFacts &input = ctx.operand(i);
    if (input.getRank() != rank)
      return ctx.fail() << "input " << i << " has rank " << input.getRank()
                        << ", input 0 has rank " << rank;
    for (int64_t d = 0; d < rank; ++d) {
      if (d == *axis)
        continue;
      std::optional<int64_t> have = getConstantValue(result.dims[d]);
      std::optional<int64_t> next = getConstantValue(input.dims[d]);
      if (have && next && *have != *next)
        return ctx.fail() << "input " << i << " has " << *next
                          << " at dimension " << d << ", input 0 has " << *have;
      if (next && !have)
        result.dims[d] = input.dims[d];
    }
    sum = addExprs(sum, input.dims[*axis]);
  }
  result.dims[*axis] = sum;

  std::optional<SmallVector<int64_t, 4>> dims = getConstantDims(result);
  std::optional<int64_t> total = result.getStaticNumElements();
  if (!dims || !total || *total > SymbolicShapes::kMaxTrackedElements ||
      !result.elementType.isInteger())
    return success();
  SmallVector<int64_t> offsets;
  int64_t offset = 0;
  for (unsigned i = 0; i < count; ++i) {
    offsets.push_back(offset);
    std::optional<int64_t> size = getConstantValue(ctx.operand(i).dims[*axis]);
    if (!size)
      return success(); // Constant in sum only: no per-element values.
    offset += *size;
  }
  SmallVector<AffineExpr, 4> values;
  bool anyKnown = false;
  forEachIndex(*dims, [&](ArrayRef<int64_t> index) {
    unsigned input =
        llvm::upper_bound(offsets, index[*axis]) - offsets.begin() - 1;
    SmallVector<int64_t, 4> inner(index);
    inner[*axis] -= offsets[input];
    values.push_back(elementAt(ctx.operand(input), inner, ctx.getContext()));
    anyKnown |= static_cast<bool>(values.back());
  });
  if (anyKnown)
    setTrackedValues(result, std::move(values));
  return success();
}

LogicalResult splitRule(ShapeRuleContext &ctx) {
  auto op = cast<SplitOp>(ctx.getOp());
  if (failed(requireRanked(ctx, 0, "input")))
    return failure();
  const TensorFacts &input = ctx.operand(0);
  FailureOr<int64_t> axis = normalizeAxis(
      ctx, "axis", static_cast<int64_t>(op.getAxis()), input.getRank());
  if (failed(axis))
    return failure();
  unsigned parts = ctx.getNumResults();
  AffineExpr dim = input.dims[*axis];
  SmallVector<AffineExpr, 4> sizes;
  if (op.getSplit()) {
    FailureOr<SmallVector<AffineExpr, 4>> split =
        getShapeOperand(ctx, 1, "split");
    if (failed(split))
      return failure();
    if (split->size() != parts)
      return ctx.fail() << "split has " << split->size() << " sizes for "
                        << parts << " outputs";
    AffineExpr sum = ctx.constant(0);
    for (AffineExpr size : *split) {
      sizes.push_back(size ? size : ctx.unknown());
      sum = addExprs(sum, sizes.back());
    }
    std::optional<int64_t> difference = getConstantValue(subExprs(sum, dim));
    if (difference && *difference != 0)
      return ctx.fail() << "split sizes add up to " << ctx.describe(sum)
                        << ", but the axis has " << ctx.describe(dim);
  } else {
    AffineExpr chunk = ceilDivExpr(dim, parts);
    AffineExpr last = subExprs(dim, mulExprs(chunk, ctx.constant(parts - 1)));
    std::optional<int64_t> lastSize = getConstantValue(last);
    if (lastSize && *lastSize < 0)
      return ctx.fail() << "cannot split " << ctx.describe(dim) << " into "
                        << parts << " parts";
    sizes.assign(parts - 1, chunk);
    sizes.push_back(last);
  }
  AffineExpr offset = ctx.constant(0);
  for (unsigned i = 0; i < parts; ++i) {
    TensorFacts &result = ctx.result(i);
    result.ranked = true;
    result.elementType = input.elementType;
    result.dims = input.dims;
    result.dims[*axis] = sizes[i];
    if (input.elementExpr) {
      SmallVector<AffineExpr> replacements;
      for (int64_t d = 0; d < input.getRank(); ++d) {
        AffineExpr index = getAffineDimExpr(d, ctx.getContext());
        replacements.push_back(d == *axis ? addExprs(index, offset) : index);
      }
      result.elementExpr = remapDims(input.elementExpr, replacements);
    }
    offset = addExprs(offset, sizes[i]);
  }
  return success();
}

/// A Slice bound after ONNX's rules for a positive step: negative values
/// count from the end, then clamp to [0, dim]. Constants beyond +-2^62 mean
/// "to the end" / "from the start" (exporters write INT64_MAX/MIN).
AffineExpr normalizeSliceBound(AffineExpr bound, AffineExpr dim,
                               MLIRContext *context) {
  constexpr int64_t huge = int64_t(1) << 62;
  std::optional<int64_t> value = getConstantValue(bound);
  std::optional<int64_t> size = getConstantValue(dim);
  if (value) {
    if (*value >= huge)
      return dim;
    if (*value <= -huge)
      return getAffineConstantExpr(0, context);
    if (*value < 0)
      bound = addExprs(dim, bound);
  }
  std::optional<int64_t> normalized = getConstantValue(bound);
  if (normalized && size)
    return getAffineConstantExpr(std::clamp<int64_t>(*normalized, 0, *size),
                                 context);
  if (normalized && *normalized < 0)
    return getAffineConstantExpr(0, context);
  // A symbolic bound at or past the end of the dim is the end.
  std::optional<int64_t> pastEnd = getConstantValue(subExprs(bound, dim));
  if (pastEnd && *pastEnd >= 0)
    return dim;
  return bound;
}

LogicalResult sliceRule(ShapeRuleContext &ctx) {
  auto op = cast<SliceOp>(ctx.getOp());
  if (failed(requireRanked(ctx, 0, "data")))
    return failure();
  const TensorFacts &data = ctx.operand(0);
  int64_t rank = data.getRank();
  FailureOr<SmallVector<AffineExpr, 4>> starts =
      getShapeOperand(ctx, 1, "starts");
  FailureOr<SmallVector<AffineExpr, 4>> ends = getShapeOperand(ctx, 2, "ends");
  if (failed(starts) || failed(ends))
    return failure();
  size_t count = starts->size();
  if (ends->size() != count)
    return ctx.fail() << "starts and ends have different lengths";
  SmallVector<int64_t, 4> axes, steps(count, 1);
  unsigned next = 3;
  if (op.getAxes()) {
    FailureOr<SmallVector<int64_t, 4>> values =
        requireConstantInts(ctx, next++, "axes");
    if (failed(values))
      return failure();
    axes = *values;
  } else {
    for (size_t i = 0; i < count; ++i)
      axes.push_back(i);
  }
  if (op.getSteps()) {
    FailureOr<SmallVector<int64_t, 4>> values =
        requireConstantInts(ctx, next, "steps");
    if (failed(values))
      return failure();
    steps = *values;
  }
  if (axes.size() != count || steps.size() != count)
    return ctx.fail() << "starts, ends, axes and steps differ in length";

  TensorFacts &result = ctx.result();
  result.ranked = true;
  result.elementType = data.elementType;
  result.dims = data.dims;
  MLIRContext *context = ctx.getContext();
  SmallVector<AffineExpr> replacements;
  for (int64_t d = 0; d < rank; ++d)
    replacements.push_back(getAffineDimExpr(d, context));
  SmallVector<bool> seen(rank, false);
  bool exactStarts = true;
  for (size_t i = 0; i < count; ++i) {
    FailureOr<int64_t> axis = normalizeAxis(ctx, "axis", axes[i], rank);
    if (failed(axis))
      return failure();
    if (seen[*axis])
      return ctx.fail() << "axes repeat " << *axis;
    seen[*axis] = true;
    int64_t step = steps[i];
    if (step == 0)
      return ctx.fail() << "step is 0";
    AffineExpr dim = data.dims[*axis];
    AffineExpr start = (*starts)[i], end = (*ends)[i];
    if (!start || !end) {
      result.dims[*axis] = ctx.unknown();
      exactStarts = false;
      continue;
    }
    if (step < 0) {
      // Reverse slices: only with constants everywhere (and a step whose
      // negation cannot overflow).
      std::optional<int64_t> s = getConstantValue(start),
                             e = getConstantValue(end),
                             n = getConstantValue(dim);
      if (!s || !e || !n || step < -(int64_t(1) << 62)) {
        result.dims[*axis] = ctx.unknown();
        exactStarts = false;
        continue;
      }
      int64_t from = *s < 0 ? *s + *n : *s, to = *e < 0 ? *e + *n : *e;
      if (*e <= -(int64_t(1) << 62))
        to = -1;
      from = std::clamp<int64_t>(from, 0, *n - 1);
      to = std::clamp<int64_t>(to, -1, *n - 1);
      int64_t length = from > to ? (from - to + (-step) - 1) / (-step) : 0;
      result.dims[*axis] = ctx.constant(length);
      replacements[*axis] = addExprs(
          ctx.constant(from),
          mulExprs(getAffineDimExpr(*axis, context), ctx.constant(step)));
      continue;
    }
    AffineExpr from = normalizeSliceBound(start, dim, context);
    AffineExpr to = normalizeSliceBound(end, dim, context);
    AffineExpr span = subExprs(to, from);
    std::optional<int64_t> constantSpan = getConstantValue(span);
    result.dims[*axis] = constantSpan && *constantSpan <= 0
                             ? ctx.constant(0)
                             : ceilDivExpr(span, step);
    replacements[*axis] = addExprs(
        from, mulExprs(getAffineDimExpr(*axis, context), ctx.constant(step)));
  }
  if (exactStarts) {
    result.elementExpr = remapDims(data.elementExpr, replacements);
    std::optional<SmallVector<int64_t, 4>> dims = getConstantDims(result);
    std::optional<int64_t> total = result.getStaticNumElements();
    if (dims && total && data.values &&
        *total <= SymbolicShapes::kMaxTrackedElements) {
      SmallVector<AffineExpr, 4> values;
      bool ok = true;
      forEachIndex(*dims, [&](ArrayRef<int64_t> index) {
        SmallVector<int64_t, 4> source;
        for (int64_t d = 0; d < rank; ++d) {
          SmallVector<AffineExpr> at;
          for (int64_t k : index)
            at.push_back(ctx.constant(k));
          std::optional<int64_t> position =
              getConstantValue(remapDims(replacements[d], at));
          ok &= position.has_value();
          source.push_back(position ? *position : 0);
        }
        values.push_back(ok ? elementAt(data, source, context) : AffineExpr());
      });
      if (ok)
        setTrackedValues(result, std::move(values));
    }
  }
  return success();
}

LogicalResult gatherRule(ShapeRuleContext &ctx) {
  auto op = cast<GatherOp>(ctx.getOp());
  if (failed(requireRanked(ctx, 0, "data")) ||
      failed(requireRanked(ctx, 1, "indices")))
    return failure();
  const TensorFacts &data = ctx.operand(0);
  const TensorFacts &indices = ctx.operand(1);
  FailureOr<int64_t> axis = normalizeAxis(
      ctx, "axis", static_cast<int64_t>(op.getAxis()), data.getRank());
  if (failed(axis))
    return failure();
  TensorFacts &result = ctx.result();
  result.ranked = true;
  result.elementType = data.elementType;
  ArrayRef<AffineExpr> dataDims = data.dims;
  llvm::append_range(result.dims, dataDims.take_front(*axis));
  llvm::append_range(result.dims, indices.dims);
  llvm::append_range(result.dims, dataDims.drop_front(*axis + 1));
  // Gathering from a tensor of one repeated value gives that value.
  if (data.elementExpr && isa<AffineConstantExpr>(data.elementExpr))
    result.elementExpr = data.elementExpr;

  // Values: gathering from a small known tensor at known indices
  // (`Shape(x)[1]`).
  std::optional<SmallVector<int64_t, 4>> dims = getConstantDims(result);
  std::optional<int64_t> total = result.getStaticNumElements();
  std::optional<int64_t> axisSize = getConstantValue(data.dims[*axis]);
  if (!dims || !total || !axisSize || !data.values ||
      *total > SymbolicShapes::kMaxTrackedElements)
    return success();
  int64_t indexRank = indices.getRank();
  SmallVector<AffineExpr, 4> values;
  bool anyKnown = false;
  forEachIndex(*dims, [&](ArrayRef<int64_t> index) {
    SmallVector<int64_t, 4> at(index.slice(*axis, indexRank));
    std::optional<int64_t> position =
        getConstantValue(elementAt(indices, at, ctx.getContext()));
    if (position && *position < 0)
      *position += *axisSize;
    if (!position || *position < 0 || *position >= *axisSize) {
      values.push_back(nullptr);
      return;
    }
    SmallVector<int64_t, 4> source(index.take_front(*axis));
    source.push_back(*position);
    llvm::append_range(source, index.drop_front(*axis + indexRank));
    values.push_back(elementAt(data, source, ctx.getContext()));
    anyKnown |= static_cast<bool>(values.back());
  });
  if (anyKnown)
    setTrackedValues(result, std::move(values));
  return success();
}

LogicalResult gatherNDRule(ShapeRuleContext &ctx) {
  auto op = cast<GatherNDOp>(ctx.getOp());
  if (failed(requireRanked(ctx, 0, "data")) ||
      failed(requireRanked(ctx, 1, "indices")))
    return failure();
  const TensorFacts &data = ctx.operand(0);
  const TensorFacts &indices = ctx.operand(1);
  int64_t batchDims = static_cast<int64_t>(op.getBatchDims());
  if (indices.getRank() < 1)
    return ctx.fail() << "indices must have rank >= 1";
  std::optional<int64_t> tuple = getConstantValue(indices.dims.back());
  if (!tuple)
    return ctx.fail() << "the last dim of indices must be a constant";
  if (batchDims + *tuple > data.getRank())
    return ctx.fail() << "index tuples of " << *tuple << " after " << batchDims
                      << " batch dims exceed the data's rank "
                      << data.getRank();
  TensorFacts &result = ctx.result();
  result.ranked = true;
  result.elementType = data.elementType;
  ArrayRef<AffineExpr> indexDims = indices.dims;
  llvm::append_range(result.dims, indexDims.drop_back());
  llvm::append_range(result.dims, ArrayRef<AffineExpr>(data.dims).drop_front(
                                      batchDims + *tuple));
  return success();
}

} // namespace

void sits::onnx::attachIndexingShapeRules(MLIRContext *context) {
  attachShapeRule<concatRule, ConcatOp>(context);
  attachShapeRule<splitRule, SplitOp>(context);
  attachShapeRule<sliceRule, SliceOp>(context);
  attachShapeRule<gatherRule, GatherOp>(context);
  attachShapeRule<gatherNDRule, GatherNDOp>(context);
}
