//===- ContribOps.cpp - ONNX Runtime contrib ops: verifiers, shapes -------===//
//
// The ops the GenAI model builder emits (OnnxContribOps.td): their
// verifiers and symbolic shape rules.
//
//===----------------------------------------------------------------------===//

#include "dialects/onnx/OnnxOps.h"
#include "dialects/onnx/ShapeRules.h"
#include "dialects/shapes/ShapeRuleOpInterface.h"
#include "dialects/shapes/SymbolicExpr.h"
#include "dialects/shapes/SymbolicShapes.h"

using namespace mlir;
using namespace sits::onnx;

namespace {

std::optional<int64_t> rankOfValue(Value value) {
  auto type = value ? dyn_cast<RankedTensorType>(value.getType()) : nullptr;
  return type ? std::optional<int64_t>(type.getRank()) : std::nullopt;
}

/// Index of `value` among `op`'s operands (optional operands shift it).
unsigned operandIndex(Operation *op, Value value) {
  for (OpOperand &operand : op->getOpOperands())
    if (operand.get() == value)
      return operand.getOperandNumber();
  return 0;
}

LogicalResult simplifiedNormRule(ShapeRuleContext &ctx) {
  auto op = cast<SimplifiedLayerNormalizationOp>(ctx.getOp());
  if (failed(requireRanked(ctx, 0, "X")))
    return failure();
  const TensorFacts &x = ctx.operand(0);
  FailureOr<int64_t> axis = normalizeAxis(
      ctx, "axis", static_cast<int64_t>(op.getAxis()), x.getRank());
  if (failed(axis))
    return failure();
  ctx.result(0).ranked = true;
  ctx.result(0).dims = x.dims;
  ctx.result(0).elementType = x.elementType;
  if (ctx.getNumResults() > 1) {
    TensorFacts &stat = ctx.result(1);
    stat.ranked = true;
    stat.elementType = Float32Type::get(ctx.getContext());
    for (int64_t d = 0; d < x.getRank(); ++d)
      stat.dims.push_back(d < *axis ? x.dims[d] : ctx.constant(1));
  }
  return success();
}

LogicalResult skipNormRule(ShapeRuleContext &ctx) {
  if (failed(requireRanked(ctx, 0, "input")))
    return failure();
  const TensorFacts &x = ctx.operand(0);
  for (unsigned i = 0; i < ctx.getNumResults(); ++i) {
    TensorFacts &result = ctx.result(i);
    result.ranked = true;
    result.elementType = x.elementType;
    // mean and inv_std_var: one per row.
    bool statistic = i == 1 || i == 2;
    for (int64_t d = 0; d < x.getRank(); ++d)
      result.dims.push_back(statistic && d == x.getRank() - 1 ? ctx.constant(1)
                                                              : x.dims[d]);
    if (statistic)
      result.elementType = Float32Type::get(ctx.getContext());
  }
  return success();
}

LogicalResult matMulNBitsRule(ShapeRuleContext &ctx) {
  auto op = cast<MsMatMulNBitsOp>(ctx.getOp());
  if (failed(requireRanked(ctx, 0, "A")))
    return failure();
  const TensorFacts &a = ctx.operand(0);
  if (a.getRank() < 1)
    return ctx.fail() << "A must have rank >= 1";
  std::optional<int64_t> k = getConstantValue(a.dims.back());
  if (k && *k != static_cast<int64_t>(op.getK()))
    return ctx.fail() << "A's last dim " << *k << " is not K = " << op.getK();
  TensorFacts &y = ctx.result();
  y.ranked = true;
  y.elementType = a.elementType;
  y.dims = a.dims;
  y.dims.back() = ctx.constant(static_cast<int64_t>(op.getN()));
  return success();
}

LogicalResult gatherBlockQuantizedRule(ShapeRuleContext &ctx) {
  auto op = cast<MsGatherBlockQuantizedOp>(ctx.getOp());
  if (failed(requireRanked(ctx, 0, "data")) ||
      failed(requireRanked(ctx, 1, "indices")) ||
      failed(requireRanked(ctx, 2, "scales")))
    return failure();
  const TensorFacts &data = ctx.operand(0);
  if (data.getRank() != 2)
    return ctx.fail() << "data must be [rows, cols]";
  TensorFacts &y = ctx.result();
  y.ranked = true;
  y.elementType = ctx.operand(2).elementType;
  y.dims = ctx.operand(1).dims;
  // Each byte holds 8 / bits values.
  y.dims.push_back(mulExprs(
      data.dims[1], ctx.constant(8 / static_cast<int64_t>(op.getBits()))));
  return success();
}

LogicalResult msRotaryRule(ShapeRuleContext &ctx) {
  if (failed(requireRanked(ctx, 0, "input")))
    return failure();
  ctx.result().ranked = true;
  ctx.result().dims = ctx.operand(0).dims;
  ctx.result().elementType = ctx.operand(0).elementType;
  return success();
}

LogicalResult groupQueryAttentionRule(ShapeRuleContext &ctx) {
  auto op = cast<MsGroupQueryAttentionOp>(ctx.getOp());
  if (failed(requireRanked(ctx, 0, "query")))
    return failure();
  const TensorFacts &q = ctx.operand(0);
  if (q.getRank() != 3)
    return ctx.fail() << "query must be [batch, seq, hidden]";
  int64_t heads = static_cast<int64_t>(op.getNumHeads());
  int64_t kvHeads = static_cast<int64_t>(op.getKvNumHeads());
  AffineExpr width = q.dims[2];
  bool packed = !op.getKey();
  AffineExpr allHeads = ctx.constant(packed ? heads + 2 * kvHeads : heads);
  std::optional<AffineExpr> headDim = divideExactly(width, allHeads);
  if (!headDim)
    return ctx.fail() << "the query width " << ctx.describe(width)
                      << " is not a multiple of "
                      << (packed ? "num_heads + 2 * kv_num_heads"
                                 : "num_heads");
  AffineExpr cacheLength = ctx.unknown();
  if (Value past = op.getPastKey()) {
    unsigned index = operandIndex(op, past);
    if (failed(requireRanked(ctx, index, "past_key")))
      return failure();
    if (ctx.operand(index).getRank() != 4)
      return ctx.fail() << "past_key must be 4-D";
  }
  Type elementType = q.elementType;
  auto set = [&](unsigned index, SmallVector<AffineExpr, 4> dims) {
    TensorFacts &result = ctx.result(index);
    result.ranked = true;
    result.dims = std::move(dims);
    result.elementType = elementType;
  };
  set(0, {q.dims[0], q.dims[1], mulExprs(ctx.constant(heads), *headDim)});
  // max(past buffer, total_sequence_length): a run-time value.
  set(1, {q.dims[0], ctx.constant(kvHeads), cacheLength, *headDim});
  set(2, {q.dims[0], ctx.constant(kvHeads), cacheLength, *headDim});
  for (unsigned i = 3; i < ctx.getNumResults(); ++i) {
    ctx.result(i).ranked = false;
    ctx.result(i).elementType = elementType;
  }
  return success();
}

} // namespace

LogicalResult SimplifiedLayerNormalizationOp::verify() {
  std::optional<int64_t> rank = rankOfValue(getX());
  int64_t axis = static_cast<int64_t>(getAxis());
  if (rank && (axis < -*rank || axis >= *rank))
    return emitOpError() << "axis " << axis << " is out of range for rank "
                         << *rank;
  return success();
}

LogicalResult MsMatMulNBitsOp::verify() {
  int64_t bits = static_cast<int64_t>(getBits());
  int64_t block = static_cast<int64_t>(getBlockSize());
  if (bits != 4 && bits != 8 && bits != 2)
    return emitOpError() << "bits must be 2, 4 or 8, got " << bits;
  if (block < 16 || (block & (block - 1)) != 0)
    return emitOpError() << "block_size must be a power of 2 >= 16, got "
                         << block;
  if (static_cast<int64_t>(getK()) <= 0 || static_cast<int64_t>(getN()) <= 0)
    return emitOpError() << "K and N must be > 0";
  if (getGIdx())
    return emitOpError() << "g_idx (act-order groups) is not supported";
  return success();
}

LogicalResult MsGatherBlockQuantizedOp::verify() {
  int64_t bits = static_cast<int64_t>(getBits());
  int64_t block = static_cast<int64_t>(getBlockSize());
  if (bits != 4 && bits != 8)
    return emitOpError() << "bits must be 4 or 8, got " << bits;
  if (block < 16 || (block & (block - 1)) != 0)
    return emitOpError() << "block_size must be a power of 2 >= 16, got "
                         << block;
  std::optional<int64_t> rank = rankOfValue(getData());
  if (rank && *rank != 2)
    return emitOpError() << "data must be 2-D [rows, cols], got rank " << *rank;
  if (getGatherAxis() != 0)
    return emitOpError() << "gather_axis " << getGatherAxis()
                         << " is not supported (only 0: rows)";
  if (getQuantizeAxis() != 1 && getQuantizeAxis() != -1)
    return emitOpError() << "quantize_axis " << getQuantizeAxis()
                         << " is not supported (only the last axis)";
  Type element = cast<ShapedType>(getData().getType()).getElementType();
  if (!element.isUnsignedInteger(8))
    return emitOpError() << "data must be uint8 (packed values), got "
                         << element;
  return success();
}

LogicalResult MsRotaryEmbeddingOp::verify() {
  std::optional<int64_t> rank = rankOfValue(getInput());
  if (rank && *rank != 3 && *rank != 4)
    return emitOpError() << "input must have rank 3 or 4, got " << *rank;
  if (getIsPackedBatching() != 0)
    return emitOpError() << "is_packed_batching is not supported";
  if (getScale().convertToDouble() != 1.0)
    return emitOpError() << "scale must be 1";
  return success();
}

LogicalResult MsGroupQueryAttentionOp::verify() {
  int64_t heads = static_cast<int64_t>(getNumHeads());
  int64_t kvHeads = static_cast<int64_t>(getKvNumHeads());
  if (heads <= 0 || kvHeads <= 0 || heads % kvHeads != 0)
    return emitOpError() << "num_heads (" << heads
                         << ") must be a positive multiple of kv_num_heads ("
                         << kvHeads << ")";
  if (static_cast<bool>(getKey()) != static_cast<bool>(getValue()))
    return emitOpError() << "key and value must both be given or both absent";
  if (static_cast<bool>(getPastKey()) != static_cast<bool>(getPastValue()))
    return emitOpError() << "past_key and past_value must both be given or "
                            "both absent";
  if (getDoRotary() && (!getCosCache() || !getSinCache()))
    return emitOpError() << "do_rotary needs cos_cache and sin_cache";
  if (std::optional<int64_t> rank = rankOfValue(getAttentionBias());
      rank && *rank != 4)
    return emitOpError() << "attention_bias must be 4-D [batch or 1, "
                            "num_heads or 1, seq, total_seq], got rank "
                         << *rank;
  if (Value sink = getHeadSink())
    if (auto type = dyn_cast<RankedTensorType>(sink.getType());
        type && (type.getRank() != 1 ||
                 (!type.isDynamicDim(0) && type.getDimSize(0) != heads)))
      return emitOpError() << "head_sink must be [num_heads] = [" << heads
                           << "], got " << type;
  return success();
}

void sits::onnx::attachContribShapeRules(MLIRContext *context) {
  attachShapeRule<simplifiedNormRule, SimplifiedLayerNormalizationOp>(context);
  attachShapeRule<skipNormRule, MsSkipSimplifiedLayerNormalizationOp>(context);
  attachShapeRule<matMulNBitsRule, MsMatMulNBitsOp>(context);
  attachShapeRule<gatherBlockQuantizedRule, MsGatherBlockQuantizedOp>(context);
  attachShapeRule<msRotaryRule, MsRotaryEmbeddingOp>(context);
  attachShapeRule<groupQueryAttentionRule, MsGroupQueryAttentionOp>(context);
}
