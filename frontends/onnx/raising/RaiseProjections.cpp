//===- RaiseProjections.cpp - Embeddings, linears and the LM head ---------===//
//
// `Gather(table, ids, axis 0)` on a 2-D float table is an embedding (with a
// constant scale multiplied right after it, as Gemma does); a table that is
// `Transpose(W)` of a constant reads W's `[vocab, hidden]` form, shared with
// the LM head that multiplies by W. `MatMul(x, W)`
// and `Gemm` with a constant 2-D weight are linear layers: the weight is
// stored `[out, in]`, so exporters' `[in, out]` weights are transposed at
// compile time, and `Transpose(W0)` weights use `W0` itself (a tied LM head
// reads the embedding table). A per-channel `Add` right after is the bias.
// The projection whose result the function returns is the LM head; it is
// tied when its weight is an embedding table.
//
//===----------------------------------------------------------------------===//

#include "frontends/onnx/raising/RaisingSupport.h"

#include "dialects/shapes/SymbolicExpr.h"

#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace sits;
using namespace sits::onnx;
using namespace sits::onnx::raising;

namespace {

void raiseEmbedding(RaiseContext &rc, GatherOp gather) {
  Value table = gather.getData();
  auto tableType = dyn_cast<RankedTensorType>(table.getType());
  auto idsType = dyn_cast<RankedTensorType>(gather.getIndices().getType());
  if (!tableType || tableType.getRank() != 2 || !getFloatElementType(table) ||
      !idsType ||
      !(idsType.getElementType().isInteger(64) ||
        idsType.getElementType().isInteger(32)))
    return; // A gather on shapes or indices, not an embedding.
  if (gather.getAxis() != 0) {
    rc.noteNotRaised(gather, "a Gather on a 2-D float table along axis 1 is "
                             "not an embedding lookup");
    return;
  }
  SmallVector<Operation *> ops{gather};
  // A transposed table (a tied LM head's [hidden, vocab] weight) is that
  // weight's [vocab, hidden] form, which the LM head then shares.
  if (Value source = getEmbeddingTable(gather);
      source && !getConstant(source)) {
    auto transpose = definedBy<TransposeOp>(source);
    ops.push_back(transpose);
    table = *rc.getProjectionWeight(transpose.getData(), ops);
  }
  Value result = gather.getOutput();
  double scale = 1.0;
  // A constant scale right after the lookup (Gemma: * sqrt(hidden)).
  if (auto mul = dyn_cast_or_null<MulOp>(getSingleUser(result)))
    if (std::optional<double> factor =
            getScalarConstant(otherOperand(mul, result))) {
      scale = *factor;
      ops.push_back(mul);
      result = mul.getC();
    }
  if (result.getType() != gather.getOutput().getType()) {
    scale = 1.0;
    ops.pop_back();
    result = gather.getOutput();
  }
  OpBuilder &b = rc.getBuilder();
  b.setInsertionPointAfterValue(result);
  auto embedding = EmbeddingOp::create(
      b, rc.getFusedLoc(ops), result.getType(), table, gather.getIndices(),
      b.getF32FloatAttr(static_cast<float>(scale)));
  result.replaceAllUsesWith(embedding.getResult());
  rc.recordRaise("embeddings_raised", ops,
                 scale == 1.0 ? std::string("sits.embedding")
                              : "sits.embedding scale = " + formatFloat(scale),
                 "Gather(table [vocab, hidden], ids, axis 0) selects table "
                 "rows by id: an embedding lookup");
}

/// Whether the function returns `value`.
bool isReturned(Value value) {
  return llvm::any_of(value.getUsers(), [](Operation *user) {
    return isa<func::ReturnOp>(user);
  });
}

/// Whether `weight` is the table of an embedding in the function.
bool isEmbeddingTable(Value weight) {
  return llvm::any_of(weight.getUsers(), [&](Operation *user) {
    auto embedding = dyn_cast<EmbeddingOp>(user);
    return embedding && embedding.getTable() == weight;
  });
}

/// Whether a projection with `weight` [out, in] producing `result` is the
/// LM head: the function returns its result, and it maps to the vocabulary
/// of the model's embedding (its weight is the table, or has as many rows).
bool isLMHead(RaiseContext &rc, Value weight, Value result) {
  if (!isReturned(result))
    return false;
  if (isEmbeddingTable(weight))
    return true;
  AffineExpr outFeatures = rc.getShapes().getDim(weight, 0);
  bool found = false;
  rc.getFunction().walk([&](EmbeddingOp embedding) {
    found |= rc.getShapes().getDim(embedding.getTable(), 0) == outFeatures;
  });
  return found;
}

/// Creates sits.linear or sits.lm_head for `input x weight^T + bias`
/// replacing `result`.
void createProjection(RaiseContext &rc, Value input, Value weight, Value bias,
                      Value result, ArrayRef<Operation *> ops, StringRef rule) {
  OpBuilder &b = rc.getBuilder();
  b.setInsertionPointAfterValue(result);
  Location loc = rc.getFusedLoc(ops);
  if (isLMHead(rc, weight, result)) {
    bool tied = isEmbeddingTable(weight);
    auto head = LMHeadOp::create(b, loc, result.getType(), input, weight, bias,
                                 tied ? b.getUnitAttr() : UnitAttr());
    result.replaceAllUsesWith(head.getResult());
    rc.recordRaise(
        "lm_heads_raised", ops,
        std::string("sits.lm_head") + (tied ? " tied" : "") +
            (bias ? " with bias" : ""),
        (rule +
         "; its result is the function's output and it maps to the "
         "embedding's vocabulary (the logits)" +
         (tied ? ", and its weight is the embedding table (tied)" : ""))
            .str());
    return;
  }
  auto linear = LinearOp::create(b, loc, result.getType(), input, weight, bias);
  result.replaceAllUsesWith(linear.getResult());
  rc.recordRaise("linears_raised", ops,
                 std::string("sits.linear") + (bias ? " with bias" : ""),
                 rule.str());
}

/// A per-channel bias added right after the product, if any.
Value matchBias(RaiseContext &rc, Value &result, AffineExpr outFeatures,
                SmallVectorImpl<Operation *> &ops) {
  auto add = dyn_cast_or_null<onnx::AddOp>(getSingleUser(result));
  if (!add)
    return nullptr;
  Value other = otherOperand(add, result);
  Value bias = rc.getChannelVector(other, outFeatures);
  if (!bias || add.getC().getType() != result.getType() ||
      getFloatElementType(bias) != getFloatElementType(result))
    return nullptr;
  ops.push_back(add);
  result = add.getC();
  return bias;
}

void raiseMatMul(RaiseContext &rc, MatMulOp matmul) {
  Value input = matmul.getA(), weight = matmul.getB();
  auto weightType = dyn_cast<RankedTensorType>(weight.getType());
  auto inputType = dyn_cast<RankedTensorType>(input.getType());
  if (!weightType || weightType.getRank() != 2 || !inputType ||
      inputType.getRank() < 1 || !getFloatElementType(input) ||
      getFloatElementType(input) != getFloatElementType(weight))
    return;
  SmallVector<Operation *> ops{matmul};
  FailureOr<Value> projection = rc.getProjectionWeight(weight, ops);
  if (failed(projection)) {
    rc.noteNotRaised(matmul, "the 2-D right operand of this MatMul is not a "
                             "constant weight (nor the transpose of a tensor)");
    return;
  }
  Value result = matmul.getY();
  Value bias = matchBias(rc, result, rc.getShapes().getDim(weight, 1), ops);
  createProjection(rc, input, *projection, bias, result, ops,
                   "MatMul(x, W) with W [in, out] is x . W^T with the weight "
                   "stored [out, in] (transposed at compile time, or read "
                   "from Transpose(W0) as W0)" +
                       std::string(bias ? "; Add of a per-channel vector is "
                                          "the bias"
                                        : ""));
}

void raiseGemm(RaiseContext &rc, GemmOp gemm) {
  if (!getFloatElementType(gemm.getA()) ||
      getFloatElementType(gemm.getA()) != getFloatElementType(gemm.getB()))
    return;
  float alpha = gemm.getAlpha().convertToFloat();
  float beta = gemm.getBeta().convertToFloat();
  if (gemm.getTransA() != 0 || alpha != 1.0f || (gemm.getC() && beta != 1.0f)) {
    rc.noteNotRaised(gemm, "Gemm with transA, alpha != 1 or beta != 1");
    return;
  }
  SmallVector<Operation *> ops{gemm};
  Value weight = gemm.getB();
  if (gemm.getTransB() == 0) {
    FailureOr<Value> projection = rc.getProjectionWeight(weight, ops);
    if (failed(projection)) {
      rc.noteNotRaised(gemm, "Gemm's B is not a constant weight");
      return;
    }
    weight = *projection;
  }
  AffineExpr outFeatures = rc.getShapes().getDim(weight, 0);
  Value bias;
  if (Value c = gemm.getC()) {
    bias = rc.getChannelVector(c, outFeatures);
    if (!bias) {
      rc.noteNotRaised(gemm, "Gemm's C is not one value per output channel");
      return;
    }
  }
  Value result = gemm.getY();
  if (!bias)
    bias = matchBias(rc, result, outFeatures, ops);
  createProjection(rc, gemm.getA(), weight, bias, result, ops,
                   "Gemm(A, B, C) with alpha = beta = 1 is A . W^T + C with "
                   "the weight stored [out, in]");
}

/// A [begin, end) range of the last dim that `user` reads from a value of
/// width `width`, for each of its results: Split along the last axis, or a
/// step-1 Slice of it. Empty when `user` is anything else.
SmallVector<std::pair<int64_t, int64_t>>
getLastDimRanges(RaiseContext &rc, Operation *user, int64_t width) {
  SymbolicShapes &shapes = rc.getShapes();
  SmallVector<std::pair<int64_t, int64_t>> ranges;
  int64_t rank = shapes.getDims(user->getOperand(0))->size();
  auto isLast = [&](int64_t axis) { return axis == -1 || axis == rank - 1; };
  if (auto split = dyn_cast<SplitOp>(user)) {
    if (!isLast(static_cast<int64_t>(split.getAxis())))
      return {};
    int64_t begin = 0;
    for (Value part : split.getOutputs()) {
      std::optional<int64_t> size = getConstantValue(shapes.getDim(part, -1));
      if (!size)
        return {};
      ranges.push_back({begin, begin + *size});
      begin += *size;
    }
    return begin == width ? ranges : SmallVector<std::pair<int64_t, int64_t>>();
  }
  if (auto slice = dyn_cast<SliceOp>(user)) {
    std::optional<SmallVector<int64_t, 4>> starts =
        shapes.getConstantValues(slice.getStarts());
    std::optional<SmallVector<int64_t, 4>> ends =
        shapes.getConstantValues(slice.getEnds());
    std::optional<SmallVector<int64_t, 4>> axes =
        slice.getAxes() ? shapes.getConstantValues(slice.getAxes())
                        : std::optional<SmallVector<int64_t, 4>>(
                              SmallVector<int64_t, 4>{0});
    std::optional<SmallVector<int64_t, 4>> steps =
        slice.getSteps() ? shapes.getConstantValues(slice.getSteps())
                         : std::optional<SmallVector<int64_t, 4>>(
                               SmallVector<int64_t, 4>{1});
    if (!starts || !ends || !axes || !steps || starts->size() != 1 ||
        ends->size() != 1 || axes->size() != 1 || !isLast((*axes)[0]) ||
        (*steps)[0] != 1)
      return {};
    auto clamp = [&](int64_t v) {
      return std::clamp<int64_t>(v < 0 ? v + width : v, 0, width);
    };
    int64_t begin = clamp((*starts)[0]), end = clamp((*ends)[0]);
    if (begin >= end)
      return {};
    ranges.push_back({begin, end});
  }
  return ranges;
}

/// A fused projection (q, k and v in one weight) whose result is only read
/// in parts along its last dim becomes one projection per part, with the
/// weight rows (and bias) of that part.
void splitFusedProjection(RaiseContext &rc, LinearOp linear) {
  Value result = linear.getResult();
  std::optional<int64_t> width =
      getConstantValue(rc.getShapes().getDim(result, -1));
  if (!width || result.use_empty())
    return;
  SmallVector<std::pair<Operation *, SmallVector<std::pair<int64_t, int64_t>>>>
      parts;
  for (Operation *user : result.getUsers()) {
    SmallVector<std::pair<int64_t, int64_t>> ranges =
        getLastDimRanges(rc, user, *width);
    if (ranges.empty())
      return;
    parts.push_back({user, ranges});
  }
  for (auto &[user, ranges] : parts) {
    SmallVector<Value> pieces;
    for (auto [begin, end] : ranges) {
      Value weight = sliceWeightRows(rc, linear.getWeight(), begin, end);
      Value bias = linear.getBias()
                       ? sliceWeightRows(rc, linear.getBias(), begin, end)
                       : Value();
      if (!weight || (linear.getBias() && !bias))
        return;
      OpBuilder &b = rc.getBuilder();
      b.setInsertionPoint(user);
      pieces.push_back(
          LinearOp::create(b, rc.getFusedLoc({linear, user}),
                           withLastDim(result.getType(), end - begin),
                           linear.getInput(), weight, bias));
    }
    for (auto [piece, old] : llvm::zip(pieces, user->getResults())) {
      if (piece.getType() != old.getType())
        return;
      old.replaceAllUsesWith(piece);
    }
    rc.recordRaise("linears_raised", {linear, user},
                   "sits.linear x" + std::to_string(pieces.size()),
                   "a projection read only in parts of its last dim is one "
                   "projection per part, with those rows of the weight and "
                   "bias (fused q/k/v split afterwards)");
  }
}

} // namespace

void sits::onnx::raising::raiseProjections(RaiseContext &rc) {
  for (GatherOp op : collectOps<GatherOp>(rc.getFunction()))
    raiseEmbedding(rc, op);
  for (MatMulOp op : collectOps<MatMulOp>(rc.getFunction()))
    raiseMatMul(rc, op);
  for (GemmOp op : collectOps<GemmOp>(rc.getFunction()))
    raiseGemm(rc, op);
  for (LinearOp op : collectOps<LinearOp>(rc.getFunction()))
    splitFusedProjection(rc, op);
  // Linears raised earlier (MatMulNBits) that are the LM head.
  for (LinearOp op : collectOps<LinearOp>(rc.getFunction())) {
    if (!isLMHead(rc, op.getWeight(), op.getResult()))
      continue;
    OpBuilder &b = rc.getBuilder();
    b.setInsertionPoint(op);
    bool tied = isEmbeddingTable(op.getWeight());
    auto head = LMHeadOp::create(b, op.getLoc(), op.getResult().getType(),
                                 op.getInput(), op.getWeight(), op.getBias(),
                                 tied ? b.getUnitAttr() : UnitAttr());
    op.getResult().replaceAllUsesWith(head.getResult());
    rc.recordRaise("lm_heads_raised", {op}, "sits.lm_head",
                   "a projection whose result is the function's output and "
                   "maps to the embedding's vocabulary (the logits)");
  }
}
