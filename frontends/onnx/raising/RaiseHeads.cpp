//===- RaiseHeads.cpp - Splitting and merging attention heads -------------===//
//
// `Transpose(Reshape(x [b, s, H*d], [b, s, H, d]), [0, 2, 1, 3])` is
// sits.split_heads, and `Reshape(Transpose(y [b, H, s, d], [0, 2, 1, 3]),
// [b, s, H*d])` is sits.merge_heads. The reshape targets are compared
// symbolically (the exporter computes them from Shape ops at run time), so
// `[batch, seq, -1, 32]` of a `[batch, seq, 128]` input is `H = 4`. A norm
// over the head dim between the reshape and the transpose (q/k norms) moves
// after the split: it works on the last dim, which the transpose keeps.
//
//===----------------------------------------------------------------------===//

#include "frontends/onnx/raising/RaisingSupport.h"

#include "dialects/shapes/SymbolicExpr.h"

using namespace mlir;
using namespace sits;
using namespace sits::onnx;
using namespace sits::onnx::raising;

namespace {

bool isHeadSwap(TransposeOp transpose) {
  return transpose.getPermutation() == SmallVector<int64_t>{0, 2, 1, 3};
}

void raiseSplitHeads(RaiseContext &rc, TransposeOp transpose) {
  if (!isHeadSwap(transpose) || !getFloatElementType(transpose.getData()))
    return;
  SmallVector<Operation *> ops;
  Value data = transpose.getData();
  // A norm over the head dim before the transpose (q/k norms).
  auto norm = definedBy<RMSNormOp>(data);
  if (norm && norm->hasOneUse())
    data = norm.getInput();
  else
    norm = nullptr;
  auto reshape = definedBy<ReshapeOp>(data);
  if (!reshape)
    return;
  SymbolicShapes &shapes = rc.getShapes();
  Value input = reshape.getData();
  std::optional<ArrayRef<AffineExpr>> inDims = shapes.getDims(input);
  if (!inDims || inDims->size() != 3)
    return;
  SmallVector<AffineExpr, 4> in(*inDims);
  std::optional<ArrayRef<AffineExpr>> outDims =
      shapes.getDims(reshape.getReshaped());
  if (!outDims || outDims->size() != 4)
    return;
  SmallVector<AffineExpr, 4> out(*outDims);
  std::optional<int64_t> heads = getConstantValue(out[2]);
  if (out[0] != in[0] || out[1] != in[1] || !heads ||
      mulExprs(out[2], out[3]) != in[2]) {
    rc.noteNotRaised(transpose, "the reshape before this transpose does not "
                                "split the last dim into heads");
    return;
  }
  ops.push_back(reshape);
  if (norm)
    ops.push_back(norm);
  ops.push_back(transpose);
  OpBuilder &b = rc.getBuilder();
  b.setInsertionPoint(transpose);
  auto inType = cast<RankedTensorType>(input.getType());
  auto splitType = RankedTensorType::get(
      {inType.getDimSize(0), *heads, inType.getDimSize(1), staticSize(out[3])},
      inType.getElementType());
  Location loc = rc.getFusedLoc(ops);
  Value result = SplitHeadsOp::create(b, loc, splitType, input,
                                      b.getI64IntegerAttr(*heads));
  if (norm)
    result =
        RMSNormOp::create(b, norm.getLoc(), splitType, result, norm.getWeight(),
                          norm.getEpsilonAttr(), norm.getWeightOffsetAttr());
  if (result.getType() != transpose.getTransposed().getType()) {
    rc.noteNotRaised(transpose, "split heads type mismatch");
    return;
  }
  transpose.getTransposed().replaceAllUsesWith(result);
  rc.recordRaise("split_heads_raised", ops,
                 "sits.split_heads num_heads = " + std::to_string(*heads) +
                     (norm ? " (then the per-head norm)" : ""),
                 "Reshape [b, s, H*d] -> [b, s, H, d] then Transpose "
                 "(0, 2, 1, 3), with the batch and sequence dims proven equal "
                 "and H*d equal to the width" +
                     std::string(norm ? "; a norm over the last dim commutes "
                                        "with a transpose that keeps it last"
                                      : ""));
}

void raiseMergeHeads(RaiseContext &rc, ReshapeOp reshape) {
  auto transpose = definedBy<TransposeOp>(reshape.getData());
  if (!transpose || !isHeadSwap(transpose) ||
      !getFloatElementType(transpose.getData()))
    return;
  SymbolicShapes &shapes = rc.getShapes();
  Value input = transpose.getData();
  std::optional<ArrayRef<AffineExpr>> inDims = shapes.getDims(input);
  if (!inDims || inDims->size() != 4)
    return;
  SmallVector<AffineExpr, 4> in(*inDims);
  std::optional<ArrayRef<AffineExpr>> outDims =
      shapes.getDims(reshape.getReshaped());
  if (!outDims || outDims->size() != 3)
    return;
  SmallVector<AffineExpr, 4> out(*outDims);
  if (out[0] != in[0] || out[1] != in[2] || out[2] != mulExprs(in[1], in[3])) {
    rc.noteNotRaised(reshape, "this reshape after a head transpose does not "
                              "merge the heads into the last dim");
    return;
  }
  OpBuilder &b = rc.getBuilder();
  b.setInsertionPoint(reshape);
  SmallVector<Operation *> ops{transpose, reshape};
  auto merged = MergeHeadsOp::create(b, rc.getFusedLoc(ops),
                                     reshape.getReshaped().getType(), input);
  reshape.getReshaped().replaceAllUsesWith(merged.getResult());
  rc.recordRaise("merge_heads_raised", ops, "sits.merge_heads",
                 "Transpose (0, 2, 1, 3) of [b, H, s, d] then Reshape to "
                 "[b, s, H*d], with the dims proven equal");
}

} // namespace

void sits::onnx::raising::raiseHeads(RaiseContext &rc) {
  for (TransposeOp op : collectOps<TransposeOp>(rc.getFunction()))
    raiseSplitHeads(rc, op);
  for (ReshapeOp op : collectOps<ReshapeOp>(rc.getFunction()))
    raiseMergeHeads(rc, op);
}
