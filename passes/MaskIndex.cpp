//===- MaskIndex.cpp - Which element an op reads, symbolically ------------===//
//
// For data-movement ops (Unsqueeze, Slice, Transpose, Expand, ...) element
// `index` of the result is element `f(index)` of the input; Concat, Gather
// and GatherND read different inputs or coordinates in different parts of
// the index space. Indices are affine expressions of the prover's variables.
//
//===----------------------------------------------------------------------===//

#include "passes/MaskProver.h"

#include "dialects/onnx/OnnxOps.h"
#include "dialects/shapes/SymbolicExpr.h"

using namespace mlir;
using namespace sits;
namespace ox = sits::onnx;

namespace {

/// Normalizes `axis` against `rank`, or nullopt when out of range.
std::optional<int64_t> normalize(int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank)
    return std::nullopt;
  return axis < 0 ? axis + rank : axis;
}

} // namespace

//===----------------------------------------------------------------------===//
// Index mapping
//===----------------------------------------------------------------------===//

FailureOr<SmallVector<AffineExpr, 4>>
MaskProver::broadcastIndex(Value operand, Value result,
                           ArrayRef<AffineExpr> index) {
  std::optional<ArrayRef<AffineExpr>> operandDims = shapes.getDims(operand);
  std::optional<ArrayRef<AffineExpr>> resultDims = shapes.getDims(result);
  if (!operandDims || !resultDims || operandDims->size() > resultDims->size())
    return fail("an operand of unknown rank");
  SmallVector<AffineExpr, 4> operandIndex;
  size_t offset = resultDims->size() - operandDims->size();
  for (auto [k, dim] : llvm::enumerate(*operandDims)) {
    AffineExpr resultDim = (*resultDims)[k + offset];
    if (dim == resultDim)
      operandIndex.push_back(index[k + offset]);
    else if (ox::getConstantValue(dim) == 1)
      operandIndex.push_back(getAffineConstantExpr(0, context));
    else
      return fail("cannot tell how a dim of size " + shapes.print(dim) +
                  " broadcasts to " + shapes.print(resultDim));
  }
  return operandIndex;
}

FailureOr<SmallVector<AffineExpr, 4>>
MaskProver::sourceIndex(Operation *op, ArrayRef<AffineExpr> index) {
  Value result = op->getResult(0);
  AffineExpr zero = getAffineConstantExpr(0, context);
  if (isa<ox::IdentityOp>(op))
    return SmallVector<AffineExpr, 4>(index);
  if (auto expand = dyn_cast<ox::ExpandOp>(op))
    return broadcastIndex(expand.getInput(), result, index);
  if (auto unsqueeze = dyn_cast<ox::UnsqueezeOp>(op)) {
    auto axes = shapes.getConstantValues(unsqueeze.getAxes());
    if (!axes)
      return fail(op, "axes are not constant");
    SmallVector<bool> inserted(index.size(), false);
    for (int64_t axis : *axes) {
      std::optional<int64_t> a = normalize(axis, index.size());
      if (!a)
        return fail(op, "axis out of range");
      inserted[*a] = true;
    }
    SmallVector<AffineExpr, 4> source;
    for (auto [k, coordinate] : llvm::enumerate(index))
      if (!inserted[k])
        source.push_back(coordinate);
    return source;
  }
  if (auto squeeze = dyn_cast<ox::SqueezeOp>(op)) {
    std::optional<ArrayRef<AffineExpr>> dataDims =
        shapes.getDims(squeeze.getData());
    if (!dataDims)
      return fail(op, "input of unknown rank");
    SmallVector<bool> removed(dataDims->size(), false);
    if (Value axesValue = squeeze.getAxes()) {
      auto axes = shapes.getConstantValues(axesValue);
      if (!axes)
        return fail(op, "axes are not constant");
      for (int64_t axis : *axes) {
        std::optional<int64_t> a = normalize(axis, dataDims->size());
        if (!a)
          return fail(op, "axis out of range");
        removed[*a] = true;
      }
    } else {
      for (auto [k, dim] : llvm::enumerate(*dataDims))
        removed[k] = ox::getConstantValue(dim) == 1;
    }
    SmallVector<AffineExpr, 4> source;
    size_t next = 0;
    for (size_t k = 0; k < dataDims->size(); ++k)
      source.push_back(removed[k] ? zero : index[next++]);
    return source;
  }
  if (auto transpose = dyn_cast<ox::TransposeOp>(op)) {
    SmallVector<int64_t> perm;
    if (auto attr = transpose.getPermAttr())
      perm.assign(attr.asArrayRef().begin(), attr.asArrayRef().end());
    else
      for (int64_t k = index.size() - 1; k >= 0; --k)
        perm.push_back(k);
    SmallVector<AffineExpr, 4> source(index.size(), zero);
    for (auto [k, p] : llvm::enumerate(perm))
      source[p] = index[k];
    return source;
  }
  if (auto reshape = dyn_cast<ox::ReshapeOp>(op)) {
    // Only reshapes that add or drop dims of size 1 keep a simple index map.
    std::optional<ArrayRef<AffineExpr>> dataDims =
        shapes.getDims(reshape.getData());
    std::optional<ArrayRef<AffineExpr>> resultDims = shapes.getDims(result);
    if (!dataDims || !resultDims)
      return fail(op, "unknown rank");
    auto nonUnit = [](ArrayRef<AffineExpr> dims) {
      SmallVector<int64_t> positions;
      for (auto [k, dim] : llvm::enumerate(dims))
        if (ox::getConstantValue(dim) != 1)
          positions.push_back(k);
      return positions;
    };
    SmallVector<int64_t> from = nonUnit(*dataDims), to = nonUnit(*resultDims);
    if (from.size() != to.size())
      return fail(op, "reshape does more than add or drop dims of size 1");
    SmallVector<AffineExpr, 4> source(dataDims->size(), zero);
    for (auto [f, t] : llvm::zip(from, to)) {
      if ((*dataDims)[f] != (*resultDims)[t])
        return fail(op, "reshape does more than add or drop dims of size 1");
      source[f] = index[t];
    }
    return source;
  }
  if (auto slice = dyn_cast<ox::SliceOp>(op)) {
    std::optional<ArrayRef<AffineExpr>> dataDims =
        shapes.getDims(slice.getData());
    auto starts = shapes.getConstantValues(slice.getStarts());
    if (!dataDims || !starts)
      return fail(op, "starts are not constant");
    SmallVector<int64_t> axes, steps(starts->size(), 1);
    if (Value axesValue = slice.getAxes()) {
      auto values = shapes.getConstantValues(axesValue);
      if (!values)
        return fail(op, "axes are not constant");
      axes.assign(values->begin(), values->end());
    } else {
      for (size_t k = 0; k < starts->size(); ++k)
        axes.push_back(k);
    }
    if (Value stepsValue = slice.getSteps()) {
      auto values = shapes.getConstantValues(stepsValue);
      if (!values)
        return fail(op, "steps are not constant");
      steps.assign(values->begin(), values->end());
    }
    SmallVector<AffineExpr, 4> source(index);
    for (auto [axis, start, step] : llvm::zip(axes, *starts, steps)) {
      std::optional<int64_t> a = normalize(axis, dataDims->size());
      if (!a || step <= 0)
        return fail(op, "only positive steps on valid axes are understood");
      AffineExpr dim = (*dataDims)[*a];
      AffineExpr first = getAffineConstantExpr(start, context);
      if (start < 0) {
        // Counts from the end; proven not to clamp below 0.
        first = ox::addExprs(dim, first);
        FailureOr<bool> clamps = isEmpty(Formula::get(Atom{
            ox::subExprs(getAffineConstantExpr(-1, context), first), false}));
        if (failed(clamps) || !*clamps)
          return fail(op, "a negative start may clamp to 0");
      }
      source[*a] = ox::addExprs(
          first, ox::mulExprs(index[*a], getAffineConstantExpr(step, context)));
    }
    return source;
  }
  return fail(op, "is not a data-movement op the prover understands");
}

FailureOr<std::vector<MaskProver::Read>>
MaskProver::piecewiseReads(Operation *op, ArrayRef<AffineExpr> index) {
  std::vector<Read> reads;
  if (auto concat = dyn_cast<ox::ConcatOp>(op)) {
    std::optional<int64_t> axis = normalize(concat.getAxis(), index.size());
    if (!axis)
      return fail(op, "axis out of range");
    AffineExpr offset = getAffineConstantExpr(0, context);
    for (Value input : concat.getInputs()) {
      AffineExpr size = shapes.getDim(input, *axis);
      if (!size)
        return fail(op, "an input of unknown size");
      AffineExpr end = ox::addExprs(offset, size);
      Read read;
      read.condition = prune(Formula{
          {{greaterOrEqual(index[*axis], offset),
            greaterOrEqual(ox::subExprs(end, getAffineConstantExpr(1, context)),
                           index[*axis])}}});
      read.source = input;
      read.index.assign(index.begin(), index.end());
      read.index[*axis] = ox::subExprs(index[*axis], offset);
      if (!read.condition.isFalse())
        reads.push_back(std::move(read));
      offset = end;
    }
    return reads;
  }

  // Gather and GatherND read the data at positions computed by another
  // tensor; each piece of those positions is one read. Negative indices
  // (which ONNX counts from the end) must be impossible.
  auto checkNonNegative = [&](const Term::Piece &piece) -> LogicalResult {
    FailureOr<bool> empty = isEmpty(conjoin(
        piece.condition,
        Formula::get(
            Atom{ox::subExprs(getAffineConstantExpr(-1, context), piece.value),
                 false})));
    if (failed(empty) || !*empty)
      return fail(op, "an index may be negative");
    return success();
  };
  if (auto gather = dyn_cast<ox::GatherOp>(op)) {
    std::optional<ArrayRef<AffineExpr>> dataDims =
        shapes.getDims(gather.getData());
    std::optional<ArrayRef<AffineExpr>> indexDims =
        shapes.getDims(gather.getIndices());
    if (!dataDims || !indexDims)
      return fail(op, "unknown rank");
    std::optional<int64_t> axis = normalize(gather.getAxis(), dataDims->size());
    if (!axis)
      return fail(op, "axis out of range");
    size_t indexRank = indexDims->size();
    FailureOr<Term> positions =
        evalInt(gather.getIndices(), index.slice(*axis, indexRank));
    if (failed(positions))
      return failure();
    for (const Term::Piece &piece : positions->pieces) {
      if (failed(checkNonNegative(piece)))
        return failure();
      Read read{piece.condition, gather.getData(), {}};
      read.index.append(index.begin(), index.begin() + *axis);
      read.index.push_back(piece.value);
      read.index.append(index.begin() + *axis + indexRank, index.end());
      reads.push_back(std::move(read));
    }
    return reads;
  }
  if (auto gatherND = dyn_cast<ox::GatherNDOp>(op)) {
    std::optional<ArrayRef<AffineExpr>> indexDims =
        shapes.getDims(gatherND.getIndices());
    if (!indexDims || gatherND.getBatchDims() != 0)
      return fail(op, "only batch_dims = 0 is understood");
    std::optional<int64_t> depth = ox::getConstantValue(indexDims->back());
    if (!depth)
      return fail(op, "the index depth is not constant");
    size_t outer = indexDims->size() - 1;
    // Cartesian product of the pieces of every coordinate.
    reads.push_back(Read{Formula::getTrue(), gatherND.getData(), {}});
    for (int64_t k = 0; k < *depth; ++k) {
      SmallVector<AffineExpr, 4> at(index.begin(), index.begin() + outer);
      at.push_back(getAffineConstantExpr(k, context));
      FailureOr<Term> coordinate = evalInt(gatherND.getIndices(), at);
      if (failed(coordinate))
        return failure();
      std::vector<Read> next;
      for (const Read &read : reads)
        for (const Term::Piece &piece : coordinate->pieces) {
          if (failed(checkNonNegative(piece)))
            return failure();
          Read combined{conjoin(read.condition, piece.condition), read.source,
                        read.index};
          combined.index.push_back(piece.value);
          if (!combined.condition.isFalse())
            next.push_back(std::move(combined));
        }
      reads = std::move(next);
    }
    for (Read &read : reads)
      read.index.append(index.begin() + outer, index.end());
    return reads;
  }
  return fail(op, "is not understood by the mask prover");
}
