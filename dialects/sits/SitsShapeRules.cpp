//===- SitsShapeRules.cpp - Symbolic shape rules of the sits ops ----------===//
//
// So that the analysis keeps its symbols through raised IR: the result dims
// of sits ops follow from their operands (`sits.linear` keeps the input's
// leading dims, `sits.split_heads` divides the width by num_heads, ...), and
// `sits.position_ids` holds the token index at each element.
//
//===----------------------------------------------------------------------===//

#include "dialects/sits/SitsShapeRules.h"
#include "dialects/shapes/ShapeRuleOpInterface.h"
#include "dialects/shapes/SymbolicExpr.h"
#include "dialects/shapes/SymbolicShapes.h"
#include "dialects/sits/SitsOps.h"

using namespace mlir;
using namespace sits::onnx;

namespace {

/// Fills result `index` with `dims` and the element type of its IR type.
void setResult(ShapeRuleContext &ctx, unsigned index,
               SmallVector<AffineExpr, 4> dims) {
  TensorFacts &result = ctx.result(index);
  result.ranked = true;
  result.dims = std::move(dims);
  result.elementType =
      getElementTypeOrSelf(ctx.getOp()->getResult(index).getType());
}

LogicalResult sameAsFirstOperand(ShapeRuleContext &ctx) {
  if (failed(requireRanked(ctx, 0, "the input")))
    return failure();
  setResult(ctx, 0, ctx.operand(0).dims);
  return success();
}

LogicalResult embeddingRule(ShapeRuleContext &ctx) {
  if (failed(requireRanked(ctx, 0, "table")) ||
      failed(requireRanked(ctx, 1, "ids")) || ctx.operand(0).getRank() != 2)
    return ctx.fail() << "sits.embedding needs a 2-D table and ranked ids";
  SmallVector<AffineExpr, 4> dims(ctx.operand(1).dims);
  dims.push_back(ctx.operand(0).dims[1]);
  setResult(ctx, 0, dims);
  return success();
}

LogicalResult projectionRule(ShapeRuleContext &ctx) {
  if (failed(requireRanked(ctx, 0, "input")) ||
      failed(requireRanked(ctx, 1, "weight")) ||
      ctx.operand(1).getRank() != 2 || ctx.operand(0).getRank() < 1)
    return ctx.fail() << "projection needs a ranked input and a 2-D weight";
  SmallVector<AffineExpr, 4> dims(ctx.operand(0).dims);
  dims.back() = ctx.operand(1).dims[0];
  setResult(ctx, 0, dims);
  return success();
}

LogicalResult splitHeadsRule(ShapeRuleContext &ctx) {
  auto op = cast<sits::SplitHeadsOp>(ctx.getOp());
  if (failed(requireRanked(ctx, 0, "input")) || ctx.operand(0).getRank() != 3)
    return ctx.fail() << "split_heads needs a 3-D input";
  ArrayRef<AffineExpr> in = ctx.operand(0).dims;
  AffineExpr heads = ctx.constant(op.getNumHeads());
  std::optional<AffineExpr> headDim = divideExactly(in[2], heads);
  setResult(ctx, 0, {in[0], heads, in[1], headDim ? *headDim : ctx.unknown()});
  return success();
}

LogicalResult mergeHeadsRule(ShapeRuleContext &ctx) {
  if (failed(requireRanked(ctx, 0, "input")) || ctx.operand(0).getRank() != 4)
    return ctx.fail() << "merge_heads needs a 4-D input";
  ArrayRef<AffineExpr> in = ctx.operand(0).dims;
  setResult(ctx, 0, {in[0], in[2], mulExprs(in[1], in[3])});
  return success();
}

LogicalResult positionIdsRule(ShapeRuleContext &ctx) {
  auto op = cast<sits::PositionIdsOp>(ctx.getOp());
  if (failed(requireRanked(ctx, 0, "ids")) || ctx.operand(0).getRank() != 2)
    return ctx.fail() << "position_ids needs 2-D ids";
  setResult(ctx, 0, ctx.operand(0).dims);
  // Without a past length, element (b, i) holds i.
  if (!op.getPastLen())
    ctx.result().elementExpr = getAffineDimExpr(1, ctx.getContext());
  return success();
}

LogicalResult ropeCosSinRule(ShapeRuleContext &ctx) {
  auto op = cast<sits::RopeCosSinOp>(ctx.getOp());
  if (failed(requireRanked(ctx, 0, "positions")) ||
      ctx.operand(0).getRank() != 2)
    return ctx.fail() << "rope_cos_sin needs 2-D positions";
  SmallVector<AffineExpr, 4> dims(ctx.operand(0).dims);
  auto freq = dyn_cast<ShapedType>(op.getInvFreq().getType());
  if (!freq || !freq.hasRank() || freq.getRank() != 1)
    return ctx.fail() << "inv_freq must be 1-D";
  dims.push_back(ctx.constant(freq.getDimSize(0)));
  setResult(ctx, 0, dims);
  setResult(ctx, 1, dims);
  return success();
}

LogicalResult ropeGatherRule(ShapeRuleContext &ctx) {
  if (failed(requireRanked(ctx, 0, "table")) ||
      failed(requireRanked(ctx, 1, "positions")) ||
      ctx.operand(0).getRank() != 2 || ctx.operand(1).getRank() != 2)
    return ctx.fail() << "rope_gather needs a 2-D table and 2-D positions";
  SmallVector<AffineExpr, 4> dims(ctx.operand(1).dims);
  std::optional<AffineExpr> half =
      divideExactly(ctx.operand(0).dims[1], ctx.constant(2));
  dims.push_back(half ? *half : ctx.unknown());
  setResult(ctx, 0, dims);
  setResult(ctx, 1, dims);
  return success();
}

LogicalResult attentionRule(ShapeRuleContext &ctx) {
  for (unsigned i = 0; i < 3; ++i)
    if (failed(requireRanked(ctx, i, "query, key and value")) ||
        ctx.operand(i).getRank() != 4)
      return ctx.fail() << "attention needs 4-D query, key and value";
  ArrayRef<AffineExpr> q = ctx.operand(0).dims;
  setResult(ctx, 0, {q[0], q[1], q[2], ctx.operand(2).dims[3]});
  return success();
}

LogicalResult shardRule(ShapeRuleContext &ctx) {
  if (failed(requireRanked(ctx, 0, "the weight")))
    return failure();
  sits::ShardAttr shard = cast<sits::ShardOp>(ctx.getOp()).getShard();
  SmallVector<AffineExpr, 4> dims(ctx.operand(0).dims);
  if (shard.getDim() >= static_cast<int64_t>(dims.size()))
    return ctx.fail() << "the shard dimension is not a dimension of the weight";
  dims[shard.getDim()] = dims[shard.getDim()].floorDiv(shard.getParts());
  setResult(ctx, 0, std::move(dims));
  return success();
}

LogicalResult allGatherRule(ShapeRuleContext &ctx) {
  if (failed(requireRanked(ctx, 0, "the input")) ||
      ctx.operand(0).getRank() == 0)
    return ctx.fail() << "all_gather needs an input of rank >= 1";
  SmallVector<AffineExpr, 4> dims(ctx.operand(0).dims);
  dims.back() = dims.back() * cast<sits::AllGatherOp>(ctx.getOp()).getRanks();
  setResult(ctx, 0, std::move(dims));
  return success();
}

} // namespace

void sits::attachSitsShapeRules(MLIRContext *context) {
  attachShapeRule<sameAsFirstOperand, RMSNormOp, LayerNormOp, AddOp,
                  ActivationOp, GLUOp, RopeOp, AllReduceOp>(context);
  attachShapeRule<shardRule, ShardOp>(context);
  attachShapeRule<allGatherRule, AllGatherOp>(context);
  attachShapeRule<embeddingRule, EmbeddingOp>(context);
  attachShapeRule<projectionRule, LinearOp, LMHeadOp>(context);
  attachShapeRule<splitHeadsRule, SplitHeadsOp>(context);
  attachShapeRule<mergeHeadsRule, MergeHeadsOp>(context);
  attachShapeRule<positionIdsRule, PositionIdsOp>(context);
  attachShapeRule<ropeCosSinRule, RopeCosSinOp>(context);
  attachShapeRule<ropeGatherRule, RopeGatherOp>(context);
  attachShapeRule<attentionRule, AttentionOp>(context);
}
