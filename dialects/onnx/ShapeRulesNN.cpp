//===- ShapeRulesNN.cpp - Norms, rotary embedding, attention --------------===//

#include "dialects/onnx/OnnxOps.h"
#include "dialects/onnx/ShapeRules.h"
#include "dialects/shapes/ShapeRuleOpInterface.h"
#include "dialects/shapes/SymbolicExpr.h"
#include "dialects/shapes/SymbolicShapes.h"

using namespace mlir;
using namespace sits::onnx;

namespace {

LogicalResult layerNormalizationRule(ShapeRuleContext &ctx) {
  auto op = cast<LayerNormalizationOp>(ctx.getOp());
  if (failed(requireRanked(ctx, 0, "X")))
    return failure();
  const TensorFacts &x = ctx.operand(0);
  FailureOr<int64_t> axis = normalizeAxis(
      ctx, "axis", static_cast<int64_t>(op.getAxis()), x.getRank());
  if (failed(axis))
    return failure();
  TensorFacts &y = ctx.result(0);
  y.ranked = true;
  y.dims = x.dims;
  y.elementType = x.elementType;
  for (unsigned i = 1; i < ctx.getNumResults(); ++i) {
    // Mean and InvStdDev keep the leading dims and reduce the rest to 1,
    // in the stash type (float).
    TensorFacts &stat = ctx.result(i);
    stat.ranked = true;
    stat.elementType = Float32Type::get(ctx.getContext());
    for (int64_t d = 0; d < x.getRank(); ++d)
      stat.dims.push_back(d < *axis ? x.dims[d] : ctx.constant(1));
  }
  return success();
}

LogicalResult sameAsXRule(ShapeRuleContext &ctx) {
  if (failed(requireRanked(ctx, 0, "X")))
    return failure();
  const TensorFacts &x = ctx.operand(0);
  ctx.result().ranked = true;
  ctx.result().dims = x.dims;
  ctx.result().elementType = x.elementType;
  return success();
}

LogicalResult rmsNormalizationRule(ShapeRuleContext &ctx) {
  auto op = cast<RMSNormalizationOp>(ctx.getOp());
  if (failed(requireRanked(ctx, 0, "X")))
    return failure();
  if (failed(normalizeAxis(ctx, "axis", static_cast<int64_t>(op.getAxis()),
                           ctx.operand(0).getRank())))
    return failure();
  return sameAsXRule(ctx);
}

LogicalResult attentionRule(ShapeRuleContext &ctx) {
  auto op = cast<AttentionOp>(ctx.getOp());
  static const char *const names[] = {"Q", "K", "V"};
  for (unsigned index = 0; index < 3; ++index)
    if (failed(requireRanked(ctx, index, names[index])))
      return failure();
  const TensorFacts &q = ctx.operand(0), &k = ctx.operand(1),
                    &v = ctx.operand(2);
  int64_t rank = q.getRank();
  if ((rank != 3 && rank != 4) || k.getRank() != rank || v.getRank() != rank)
    return ctx.fail() << "Q, K and V must all be 3-D or all 4-D";
  AffineExpr batch = q.dims[0], headsQ, seqQ, headsKV, seqKV, headDim, valueDim;
  if (rank == 4) {
    headsQ = q.dims[1];
    seqQ = q.dims[2];
    headsKV = k.dims[1];
    seqKV = k.dims[2];
    headDim = q.dims[3];
    valueDim = v.dims[3];
  } else {
    if (!op.getQNumHeads() || !op.getKvNumHeads())
      return ctx.fail() << "3-D Attention needs q_num_heads and kv_num_heads";
    headsQ = ctx.constant(static_cast<int64_t>(*op.getQNumHeads()));
    headsKV = ctx.constant(static_cast<int64_t>(*op.getKvNumHeads()));
    seqQ = q.dims[1];
    seqKV = k.dims[1];
    std::optional<AffineExpr> qHead = divideExactly(q.dims[2], headsQ);
    std::optional<AffineExpr> vHead = divideExactly(v.dims[2], headsKV);
    if (!qHead || !vHead)
      return ctx.fail() << "the hidden sizes of Q and V are not multiples of "
                        << "q_num_heads and kv_num_heads";
    headDim = *qHead;
    valueDim = *vHead;
  }
  AffineExpr totalKV = seqKV;
  unsigned pastIndex = 3 + (op.getAttnMask() ? 1 : 0);
  if (op.getPastKey()) {
    if (failed(requireRanked(ctx, pastIndex, "past_key")))
      return failure();
    const TensorFacts &past = ctx.operand(pastIndex);
    if (past.getRank() != 4)
      return ctx.fail() << "past_key must be 4-D";
    totalKV = addExprs(past.dims[2], seqKV);
  }
  Type elementType = q.elementType;
  auto set = [&](unsigned index, SmallVector<AffineExpr, 4> dims) {
    TensorFacts &result = ctx.result(index);
    result.ranked = true;
    result.dims = std::move(dims);
    result.elementType = elementType;
  };
  if (rank == 4)
    set(0, {batch, headsQ, seqQ, valueDim});
  else
    set(0, {batch, seqQ, mulExprs(headsQ, valueDim)});
  if (ctx.getNumResults() > 1)
    set(1, {batch, headsKV, totalKV, headDim});
  if (ctx.getNumResults() > 2)
    set(2, {batch, headsKV, totalKV, valueDim});
  if (ctx.getNumResults() > 3)
    set(3, {batch, headsQ, seqQ, totalKV});
  return success();
}

} // namespace

void sits::onnx::attachNNShapeRules(MLIRContext *context) {
  attachShapeRule<layerNormalizationRule, LayerNormalizationOp>(context);
  attachShapeRule<rmsNormalizationRule, RMSNormalizationOp>(context);
  attachShapeRule<sameAsXRule, RotaryEmbeddingOp>(context);
  attachShapeRule<attentionRule, AttentionOp>(context);
}
