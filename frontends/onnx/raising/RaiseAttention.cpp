//===- RaiseAttention.cpp - Attention into sits.attention -----------------===//
//
// Decomposed attention `MatMul(Softmax(scale * Q K^T + mask), V)` and the
// opset-23 `Attention` op become sits.attention on the head-major q, k, v.
// K^T, and the GQA repetition of K and V, are read by what the layout ops do
// to the dims (LayoutTracer), not by their sequence: K^T must be
// `[b, heads, d, s]` of a `[b, kv_heads, s, d]` key, and the heads dim either
// the kv heads themselves or the kv heads each repeated (`kv, rep`: query
// head h reads kv head h / rep, as sits.attention does). The scale is the
// product of the scalar constants multiplied into q, into k and into the
// scores. An additive `Where(m, 0, -big)` mask is the boolean m; a
// `Where(IsNaN(p), 0, p)` after the softmax is sits.attention's "a row with
// no visible key yields zeros".
//
//===----------------------------------------------------------------------===//

#include "frontends/onnx/raising/LayoutTracer.h"
#include "frontends/onnx/raising/RaisingSupport.h"

#include "dialects/shapes/SymbolicExpr.h"

#include "llvm/Support/FormatVariadic.h"

#include <cmath>

using namespace mlir;
using namespace sits;
using namespace sits::onnx;
using namespace sits::onnx::raising;

namespace {

/// Below this a finite additive mask value hides a key as -inf would: the
/// softmax weight exp(score - big - max) is 0 in f32 for any score that
/// could be unmasked.
constexpr double kMaskingConstant = -1e30;

/// The attention operands, head-major, with their GQA structure.
struct HeadOperands {
  Value query, key, value;
  int64_t numHeads = 0, numKvHeads = 0;
  double scale = 1.0;
  SmallVector<Operation *> ops;
};

/// Checks that `traced` (rank 4) has the atoms `order` of its base, with
/// the heads dim (index `headsIndex`) being the base's dim 1, optionally
/// followed by a repetition. Returns the repetition factor (1 without one)
/// or 0 when the layout is something else.
int64_t checkHeadLayout(const TracedLayout &traced, ArrayRef<int64_t> order,
                        unsigned headsIndex, std::string &reason) {
  if (traced.dims.size() != 4)
    return 0;
  for (unsigned i = 0; i < 4; ++i)
    if (i != headsIndex && !traced.dimIs(i, {order[i]}))
      return 0;
  const auto &heads = traced.dims[headsIndex];
  int64_t repetition = 1;
  size_t next = 0;
  if (next < heads.size() && heads[next].baseDim == 1)
    ++next;
  if (next < heads.size() && heads[next].isRepetition()) {
    std::optional<int64_t> factor = getConstantValue(heads[next].size);
    if (!factor)
      return 0;
    repetition = *factor;
    ++next;
  }
  if (next != heads.size()) {
    if (llvm::any_of(heads,
                     [](const LayoutAtom &a) { return a.isRepetition(); }))
      reason = "the kv heads are repeated outer-most (query head h would read "
               "kv head h % kv_heads); sits.attention reads h / (heads / "
               "kv_heads)";
    return 0;
  }
  return repetition;
}

/// Reads q `[b, H, s, d]`, k and v (through transposes and GQA repetition)
/// back to their head-major bases. `keyTransposed`: the key operand is K^T.
/// `groupsHeads`: the consumer itself lets query head h read kv head
/// h / (heads / kv_heads), as the Attention op does, so the kv heads (times
/// any repetition) need only divide the query heads.
std::optional<HeadOperands> matchHeads(RaiseContext &rc, Value query, Value key,
                                       Value value, bool keyTransposed,
                                       std::string &reason,
                                       bool groupsHeads = false) {
  SymbolicShapes &shapes = rc.getShapes();
  HeadOperands heads;
  FailureOr<TracedLayout> q = traceLayout(shapes, query, reason);
  if (failed(q))
    return std::nullopt;
  FailureOr<TracedLayout> k = traceLayout(shapes, key, reason);
  if (failed(k))
    return std::nullopt;
  FailureOr<TracedLayout> v = traceLayout(shapes, value, reason);
  if (failed(v))
    return std::nullopt;
  if (v->scale != 1.0) {
    reason = "the values are scaled";
    return std::nullopt;
  }
  if (checkHeadLayout(*q, {0, 1, 2, 3}, 1, reason) != 1) {
    if (reason.empty())
      reason = "the query is not a [batch, heads, seq, head_dim] tensor";
    return std::nullopt;
  }
  int64_t keyRepetition =
      checkHeadLayout(*k,
                      keyTransposed ? ArrayRef<int64_t>{0, 1, 3, 2}
                                    : ArrayRef<int64_t>{0, 1, 2, 3},
                      1, reason);
  int64_t valueRepetition = checkHeadLayout(*v, {0, 1, 2, 3}, 1, reason);
  if (keyRepetition == 0 || valueRepetition == 0) {
    if (reason.empty())
      reason = keyTransposed ? "the key operand is not the transpose of a "
                               "[batch, kv_heads, seq, head_dim] key"
                             : "the key or value is not a [batch, kv_heads, "
                               "seq, head_dim] tensor";
    return std::nullopt;
  }
  std::optional<ArrayRef<AffineExpr>> qDims = shapes.getDims(q->base);
  std::optional<ArrayRef<AffineExpr>> kDims = shapes.getDims(k->base);
  std::optional<ArrayRef<AffineExpr>> vDims = shapes.getDims(v->base);
  if (!qDims || !kDims || !vDims || qDims->size() != 4 || kDims->size() != 4 ||
      vDims->size() != 4)
    return std::nullopt;
  std::optional<int64_t> numHeads = getConstantValue((*qDims)[1]);
  std::optional<int64_t> numKvHeads = getConstantValue((*kDims)[1]);
  bool headsFit =
      numHeads && numKvHeads &&
      (groupsHeads
           ? *numKvHeads > 0 && *numHeads % (*numKvHeads * keyRepetition) == 0
           : *numKvHeads * keyRepetition == *numHeads);
  if (!headsFit || (*vDims)[1] != (*kDims)[1] ||
      keyRepetition != valueRepetition) {
    reason = "the query heads are not the kv heads times one repetition";
    return std::nullopt;
  }
  if ((*kDims)[0] != (*qDims)[0] || (*vDims)[0] != (*qDims)[0] ||
      (*kDims)[3] != (*qDims)[3] || (*vDims)[2] != (*kDims)[2]) {
    reason = "query, key and value dims do not line up (batch, head_dim, "
             "key length)";
    return std::nullopt;
  }
  if (getFloatElementType(q->base) != getFloatElementType(k->base) ||
      getFloatElementType(q->base) != getFloatElementType(v->base))
    return std::nullopt;
  heads.query = q->base;
  heads.key = k->base;
  heads.value = v->base;
  heads.numHeads = *numHeads;
  heads.numKvHeads = *numKvHeads;
  heads.scale = q->scale * k->scale;
  for (const TracedLayout *t : {&*q, &*k, &*v})
    heads.ops.append(t->ops.begin(), t->ops.end());
  return heads;
}

/// Whether `mask` broadcasts to the scores `[b, H, sq, sk]` of `heads`.
bool broadcastsToScores(RaiseContext &rc, Value mask,
                        const HeadOperands &heads) {
  SymbolicShapes &shapes = rc.getShapes();
  std::optional<ArrayRef<AffineExpr>> maskDims = shapes.getDims(mask);
  if (!maskDims || maskDims->size() > 4)
    return false;
  SmallVector<AffineExpr, 4> m(*maskDims);
  SmallVector<AffineExpr, 4> scores = {
      shapes.getDim(heads.query, 0), shapes.getDim(heads.query, 1),
      shapes.getDim(heads.query, 2), shapes.getDim(heads.key, 2)};
  size_t offset = 4 - m.size();
  for (size_t i = 0; i < m.size(); ++i)
    if (getConstantValue(m[i]) != std::optional<int64_t>(1) &&
        m[i] != scores[i + offset])
      return false;
  return true;
}

/// `Where(m, 0, -big)`: the boolean mask m.
Value matchBooleanMask(Value additive, SmallVectorImpl<Operation *> &ops) {
  auto where = definedBy<WhereOp>(additive);
  if (!where)
    return nullptr;
  std::optional<double> keep = getScalarConstant(where.getX());
  std::optional<double> hide = getScalarConstant(where.getY());
  if (!keep || *keep != 0.0 || !hide || !(*hide <= kMaskingConstant))
    return nullptr;
  ops.push_back(where);
  return where.getCondition();
}

/// The visibility rule of a sits.attention beside its mask.
struct Visibility {
  CausalMode causal = CausalMode::none;
  std::optional<int64_t> window;
};

/// sits.attention in place of `result`; `mergeHeads`: `result` is
/// `[b, s, H * d]` and the attention's `[b, H, s, d]` is merged into it.
void createAttention(RaiseContext &rc, const HeadOperands &heads, Value mask,
                     Value result, Visibility visibility,
                     std::optional<float> softcap, ArrayRef<Operation *> ops,
                     StringRef rule, bool mergeHeads = false) {
  OpBuilder &b = rc.getBuilder();
  b.setInsertionPointAfterValue(result);
  Location loc = rc.getFusedLoc(ops);
  Type type = result.getType();
  if (mergeHeads) {
    auto merged = cast<RankedTensorType>(type);
    int64_t width = merged.getDimSize(2);
    type = RankedTensorType::get(
        {merged.getDimSize(0), heads.numHeads, merged.getDimSize(1),
         ShapedType::isDynamic(width) ? width : width / heads.numHeads},
        merged.getElementType());
  }
  auto attention = sits::AttentionOp::create(
      b, loc, type, heads.query, heads.key, heads.value, mask,
      /*past_len=*/Value(), b.getI64IntegerAttr(heads.numHeads),
      b.getI64IntegerAttr(heads.numKvHeads),
      b.getF32FloatAttr(static_cast<float>(heads.scale)),
      CausalModeAttr::get(b.getContext(), visibility.causal),
      visibility.window ? b.getI64IntegerAttr(*visibility.window)
                        : IntegerAttr(),
      softcap ? b.getF32FloatAttr(*softcap) : FloatAttr());
  Value replacement = attention.getResult();
  if (mergeHeads)
    replacement = MergeHeadsOp::create(b, loc, result.getType(), replacement);
  result.replaceAllUsesWith(replacement);
  rc.recordRaise(
      "attentions_raised", ops,
      llvm::formatv(
          "sits.attention num_heads = {0} num_kv_heads = {1} scale = "
          "{2}{3}{4}{5}{6}",
          heads.numHeads, heads.numKvHeads, formatFloat(heads.scale),
          mask ? " with mask" : "",
          visibility.causal == CausalMode::none
              ? ""
              : " causal = " + stringifyCausalMode(visibility.causal).str(),
          visibility.window ? " window = " + std::to_string(*visibility.window)
                            : "",
          mergeHeads ? ", heads split and merged" : "")
          .str(),
      rule);
}

/// The scores `c * (Q K^T)`, or soft-capped `cap * tanh(c * (Q K^T))`.
struct Scores {
  MatMulOp qk;
  /// The constant multiplied into the product before any softcap.
  double scale = 1.0;
  std::optional<double> softcap;
  SmallVector<Operation *> ops;
};

std::optional<Scores> matchScores(Value value) {
  Scores scores;
  Product outer = collectProduct(value);
  if (outer.factors.size() != 1)
    return std::nullopt;
  scores.ops.append(outer.ops.begin(), outer.ops.end());
  if (auto tanh = definedBy<TanhOp>(outer.factors[0])) {
    // cap * tanh(c * QK / cap): sits applies the cap after the scale.
    Product inner = collectProduct(tanh.getInput());
    if (inner.factors.size() != 1 || !(outer.scale > 0.0))
      return std::nullopt;
    scores.qk = definedBy<MatMulOp>(inner.factors[0]);
    scores.softcap = outer.scale;
    scores.scale = inner.scale * outer.scale;
    scores.ops.push_back(tanh);
    scores.ops.append(inner.ops.begin(), inner.ops.end());
  } else {
    scores.qk = definedBy<MatMulOp>(outer.factors[0]);
    scores.scale = outer.scale;
  }
  if (!scores.qk)
    return std::nullopt;
  scores.ops.push_back(scores.qk);
  return scores;
}

/// MatMul(P, V) with P = Softmax(scores) (optionally NaN-guarded).
void raiseDecomposed(RaiseContext &rc, MatMulOp output) {
  SmallVector<Operation *> ops{output};
  Value probabilities = output.getA();
  bool nanGuard = false;
  if (auto where = definedBy<WhereOp>(probabilities)) {
    auto isNaN = definedBy<IsNaNOp>(where.getCondition());
    if (isNaN && isNaN.getInput() == where.getY() &&
        isScalarConstant(where.getX(), 0.0)) {
      ops.append({where, isNaN});
      probabilities = where.getY();
      nanGuard = true;
    }
  }
  auto softmax = definedBy<SoftmaxOp>(probabilities);
  if (!softmax)
    return;
  ops.push_back(softmax);
  std::optional<ArrayRef<AffineExpr>> dims =
      rc.getShapes().getDims(softmax.getInput());
  if (!dims || dims->size() != 4)
    return;
  int64_t axis = static_cast<int64_t>(softmax.getAxis());
  if (axis != -1 && axis != 3) {
    rc.noteNotRaised(output, llvm::formatv("not attention: the softmax is over "
                                           "axis {0}, not the key axis (3)",
                                           axis));
    return;
  }

  // Scores: [mask +] scale * (q . k^T); the mask as Add or as Where.
  Value scores = softmax.getInput();
  Value mask;
  bool additiveMask = false;
  if (auto add = definedBy<onnx::AddOp>(scores)) {
    for (Value side : {add.getA(), add.getB()}) {
      if (!matchScores(side))
        continue;
      Value other = otherOperand(add, side);
      ops.push_back(add);
      mask = matchBooleanMask(other, ops);
      if (!mask) {
        mask = other;
        additiveMask = true;
      }
      scores = side;
      break;
    }
  } else if (auto where = definedBy<WhereOp>(scores)) {
    std::optional<double> hide = getScalarConstant(where.getY());
    if (hide && *hide <= kMaskingConstant) {
      ops.push_back(where);
      mask = where.getCondition();
      scores = where.getX();
    }
  }
  std::optional<Scores> matched = matchScores(scores);
  if (!matched) {
    rc.noteNotRaised(output, "not attention: the softmax input is not a "
                             "constant multiple of Q K^T (plus a mask)");
    return;
  }
  MatMulOp qk = matched->qk;
  ops.append(matched->ops.begin(), matched->ops.end());
  std::string reason;
  std::optional<HeadOperands> heads =
      matchHeads(rc, qk.getA(), qk.getB(), output.getB(), true, reason);
  if (!heads) {
    rc.noteNotRaised(output, "not attention: " + reason);
    return;
  }
  heads->scale *= matched->scale;
  if (!std::isfinite(heads->scale) || heads->scale <= 0.0) {
    rc.noteNotRaised(output, "attention with a scale that is not > 0");
    return;
  }
  if (mask && !broadcastsToScores(rc, mask, *heads)) {
    rc.noteNotRaised(output, "the attention mask does not broadcast to "
                             "[batch, heads, seq_q, seq_k]");
    return;
  }
  if (getFloatElementType(output.getY()) != getFloatElementType(heads->query))
    return;
  ops.append(heads->ops.begin(), heads->ops.end());
  std::string rule =
      "softmax over the key axis of scale * q . k^T, times v; k^T and the "
      "GQA repetition read from what the layout ops do to the dims; the "
      "scale is the product of the constants multiplied into q, k and the "
      "scores";
  if (mask && !additiveMask)
    rule += "; adding Where(m, 0, -big) with -big <= -1e30 (or selecting "
            "-big where m is false) gives masked keys weight 0 exactly as the "
            "boolean mask m does, for every row with a visible key (a row "
            "with none yields zeros in sits, uniform weights in the graph)";
  if (nanGuard)
    rule += "; Where(IsNaN(p), 0, p) after the softmax is the op's rule that "
            "a row with no visible key yields zeros";
  if (matched->softcap)
    rule += "; cap * tanh(s / cap) of the scaled scores is the softcap";
  std::optional<float> softcap;
  if (matched->softcap)
    softcap = static_cast<float>(*matched->softcap);
  createAttention(rc, *heads, mask, output.getY(), Visibility(), softcap, ops,
                  rule);
}

/// The sits visibility of an Attention op without a past: its causal rule
/// (offset 0: query i sees keys j <= i) and its window (keys
/// `i - left <= j <= i + right`); none when sits has no form of it.
std::optional<Visibility> attentionVisibility(sits::onnx::AttentionOp op,
                                              bool square, std::string &rule,
                                              std::string &reason) {
  Visibility visibility;
  bool causal = op.getIsCausal() != 0;
  int64_t left = static_cast<int64_t>(op.getLeftWindowSize());
  int64_t right = static_cast<int64_t>(op.getRightWindowSize());
  // right_window_size 0 bounds the keys as is_causal does.
  if (right == 0)
    causal = true;
  else if (right > 0 && !causal) {
    reason = "a window reaching past the query (right_window_size " +
             std::to_string(right) + ") has no sits form";
    return std::nullopt;
  }
  if (left >= 0) {
    // sits' window holds the W keys ending at position i + seq_k - seq_q.
    if (!square) {
      reason = "a sliding window over queries and keys of lengths that may "
               "differ (sits counts it from the last key)";
      return std::nullopt;
    }
    visibility.window = left + 1;
    rule += "; left_window_size " + std::to_string(left) + " is window " +
            std::to_string(left + 1) + " (keys i - " + std::to_string(left) +
            " to i)";
  }
  if (!causal)
    return visibility;
  // With as many queries as keys, j <= i is also bottom_right, the rule the
  // KV cache takes.
  visibility.causal = square ? CausalMode::bottom_right : CausalMode::top_left;
  rule += square ? "; is_causal without a past is j <= i (offset 0), which "
                   "for seq_q = seq_k is bottom_right"
                 : "; is_causal without a past is j <= i (offset 0): "
                   "top_left, since seq_q and seq_k may differ";
  return visibility;
}

/// `[b, s, heads * d]` as sits.split_heads `[b, heads, s, d]`; null when the
/// width is not a known multiple of `heads`.
Value splitHeads(RaiseContext &rc, Value value, int64_t heads, Location loc) {
  auto type = dyn_cast<RankedTensorType>(value.getType());
  if (!type || type.getRank() != 3 || type.isDynamicDim(2) ||
      type.getDimSize(2) % heads != 0)
    return nullptr;
  OpBuilder &b = rc.getBuilder();
  b.setInsertionPointAfterValue(value);
  auto split =
      RankedTensorType::get({type.getDimSize(0), heads, type.getDimSize(1),
                             type.getDimSize(2) / heads},
                            type.getElementType());
  return SplitHeadsOp::create(b, loc, split, value, b.getI64IntegerAttr(heads));
}

void raiseAttentionOp(RaiseContext &rc, sits::onnx::AttentionOp op) {
  if (op.getPastKey()) {
    rc.noteNotRaised(op, "Attention with past_key/past_value (the KV cache "
                         "is the compiler's job: export without it)");
    return;
  }
  if (op.getNonpadKvSeqlen()) {
    rc.noteNotRaised(op, "Attention with nonpad_kv_seqlen (an external "
                         "cache's lengths: the KV cache is the compiler's "
                         "job)");
    return;
  }
  for (Value extra : op.getExtraOutputs())
    if (!extra.use_empty()) {
      rc.noteNotRaised(op, "Attention's present_key, present_value or "
                           "qk_matmul_output is used");
      return;
    }
  std::optional<ArrayRef<AffineExpr>> dims = rc.getShapes().getDims(op.getQ());
  if (!dims || (dims->size() != 3 && dims->size() != 4))
    return;
  Value query = op.getQ(), key = op.getK(), value = op.getV();
  bool packed = dims->size() == 3;
  if (packed) {
    // [b, s, heads * d]: the op's own head split, done by sits.split_heads.
    int64_t heads = static_cast<int64_t>(op.getQNumHeads().value_or(0));
    int64_t kvHeads = static_cast<int64_t>(op.getKvNumHeads().value_or(0));
    query = splitHeads(rc, query, heads, op.getLoc());
    key = splitHeads(rc, key, kvHeads, op.getLoc());
    value = splitHeads(rc, value, kvHeads, op.getLoc());
    if (!query || !key || !value) {
      rc.noteNotRaised(op, "3-D Attention whose hidden sizes are not "
                           "constant multiples of q_num_heads and "
                           "kv_num_heads");
      return;
    }
  }
  std::string reason;
  std::optional<HeadOperands> heads =
      matchHeads(rc, query, key, value, false, reason, /*groupsHeads=*/true);
  if (!heads) {
    rc.noteNotRaised(op, "Attention: " + reason);
    return;
  }
  std::optional<int64_t> headDim =
      getConstantValue(rc.getShapes().getDim(heads->query, 3));
  double scale = op.getScale() ? op.getScale()->convertToDouble()
                 : headDim     ? 1.0 / std::sqrt(static_cast<double>(*headDim))
                               : 0.0;
  if (!(scale > 0.0)) {
    rc.noteNotRaised(op, "Attention without scale on a dynamic head size");
    return;
  }
  heads->scale *= scale;
  Value mask = op.getAttnMask();
  if (mask && !broadcastsToScores(rc, mask, *heads)) {
    rc.noteNotRaised(op, "the attention mask does not broadcast to [batch, "
                         "heads, seq_q, seq_k]");
    return;
  }
  SymbolicShapes &shapes = rc.getShapes();
  bool square = shapes.getDim(heads->query, 2) == shapes.getDim(heads->key, 2);
  std::string rule = packed ? "3-D Attention is its heads split, "
                              "sits.attention, the heads merged"
                            : "Attention on head-major inputs is "
                              "sits.attention";
  std::optional<Visibility> visibility =
      attentionVisibility(op, square, rule, reason);
  if (!visibility) {
    rc.noteNotRaised(op, "Attention: " + reason);
    return;
  }
  float softcap = op.getSoftcap().convertToFloat();
  SmallVector<Operation *> ops{op};
  ops.append(heads->ops.begin(), heads->ops.end());
  createAttention(
      rc, *heads, mask, op.getY(), *visibility,
      softcap > 0.0f ? std::optional<float>(softcap) : std::nullopt, ops,
      rule + "; query head h reads kv head h / (heads / kv_heads), any GQA "
             "repetition of K and V absorbed into num_kv_heads",
      packed);
}

} // namespace

void sits::onnx::raising::raiseAttention(RaiseContext &rc) {
  for (sits::onnx::AttentionOp op :
       collectOps<sits::onnx::AttentionOp>(rc.getFunction()))
    raiseAttentionOp(rc, op);
  for (MatMulOp op : collectOps<MatMulOp>(rc.getFunction()))
    raiseDecomposed(rc, op);
}
