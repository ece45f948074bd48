//===- OnnxAttentionKernel.cpp - The onnx Attention op, opsets 23 to 25 ---===//
//
// Computed as the ONNX reference (onnx.reference.ops.op_attention) and the
// op's function body compute it, step by step, each step rounded to the
// inputs' type T (the function body's T1), so that f16 and bf16 inputs get
// the reference's numbers and not a more precise fused result:
//
//   Qs = Q * sqrt(scale), Ks = K * sqrt(scale)   (K after the past)
//   s  = Qs . Ks, then softcap * tanh(s / softcap)
//   w  = s + bias                  (bias: 0 or -inf per key, or a float mask)
//   p  = softmax(w)                (in softmax_precision when given)
//   Y  = p . V
//
// The bias holds a float mask's values, and -inf where a boolean mask is
// false, past a short mask's end, after the causal frontier `j > i +
// offset`, outside the window, and from `nonpad_kv_seqlen[b]` on. A query
// row whose bias is -inf for every key is a row of zeros, in Y and in the
// mode-3 output, decided on the bias (not on the scores).
//
//===----------------------------------------------------------------------===//

#include "compiler/reference/Math.h"
#include "compiler/reference/OnnxSupport.h"

#include "dialects/onnx/OnnxOps.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace sits::reference;
using namespace sits::reference::onnx;

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

/// [batch, seq, heads * dim] -> [batch, heads, seq, dim].
Tensor toHeadMajor(const Tensor &x, int64_t heads) {
  int64_t batch = x.getDim(0), seq = x.getDim(1), dim = x.getDim(2) / heads;
  Tensor result(x.getElementType(), {batch, heads, seq, dim});
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t s = 0; s < seq; ++s)
      for (int64_t h = 0; h < heads; ++h)
        std::copy_n(x.floats().data() + (b * seq + s) * heads * dim + h * dim,
                    dim,
                    result.floats().data() + ((b * heads + h) * seq + s) * dim);
  return result;
}

/// [batch, heads, seq, dim] -> [batch, seq, heads * dim].
Tensor toSequenceMajor(const Tensor &y) {
  int64_t batch = y.getDim(0), heads = y.getDim(1), seq = y.getDim(2),
          dim = y.getDim(3);
  Tensor result(y.getElementType(), {batch, seq, heads * dim});
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t s = 0; s < seq; ++s)
        std::copy_n(y.floats().data() + ((b * heads + h) * seq + s) * dim, dim,
                    result.floats().data() + (b * seq + s) * heads * dim +
                        h * dim);
  return result;
}

/// `past` and `current` joined along the sequence (dim 2) of [b, h, s, d].
Tensor concatSequence(const Tensor *past, const Tensor &current) {
  if (!past)
    return current;
  int64_t batch = current.getDim(0), heads = current.getDim(1),
          pastLen = past->getDim(2), seq = current.getDim(2),
          dim = current.getDim(3);
  Tensor result(current.getElementType(), {batch, heads, pastLen + seq, dim});
  for (int64_t bh = 0; bh < batch * heads; ++bh) {
    float *out = result.floats().data() + bh * (pastLen + seq) * dim;
    std::copy_n(past->floats().data() + bh * pastLen * dim, pastLen * dim, out);
    std::copy_n(current.floats().data() + bh * seq * dim, seq * dim,
                out + pastLen * dim);
  }
  return result;
}

/// The element type softmax_precision names (double computes as f32: the
/// difference is far below any tolerance the result is held to).
llvm::Expected<ElementType> softmaxType(const KernelContext &context,
                                        ElementType inputType) {
  std::optional<int64_t> precision =
      optionalIntAttr(context.getOp(), "softmax_precision");
  if (!precision)
    return inputType;
  switch (*precision) {
  case 1:
  case 11:
    return ElementType::F32;
  case 10:
    return ElementType::F16;
  case 16:
    return ElementType::BF16;
  default:
    return context.error("softmax_precision " + std::to_string(*precision) +
                         " is not one the spec allows (1 FLOAT, 10 FLOAT16, "
                         "11 DOUBLE, 16 BFLOAT16)");
  }
}

/// Everything the rows need, read and checked once.
struct Problem {
  Tensor q, presentKey, presentValue;
  const Tensor *mask = nullptr;
  llvm::SmallVector<int64_t, 6> maskStrides;
  int64_t maskKeys = 0;
  std::vector<int64_t> offsets;   // Per batch: the causal/window offset.
  std::vector<int64_t> validKeys; // Per batch: keys before the padding.
  int64_t batch = 0, heads = 0, kvHeads = 0, seqQ = 0, seqK = 0, headDim = 0,
          valueDim = 0;
  bool causal = false;
  int64_t left = -1, right = -1;
};

/// The additive bias of query row (b, h, i) at key j.
float biasAt(const Problem &p, int64_t b, int64_t h, int64_t i, int64_t j) {
  float bias = 0.0f;
  if (p.mask) {
    if (j >= p.maskKeys) {
      bias = kNegInf;
    } else {
      int64_t at = b * p.maskStrides[0] + h * p.maskStrides[1] +
                   i * p.maskStrides[2] + j * p.maskStrides[3];
      bias = p.mask->isFloat()    ? p.mask->floats()[at]
             : p.mask->ints()[at] ? 0.0f
                                  : kNegInf;
    }
  }
  // Query i sits at absolute position offset + i.
  int64_t distance = p.offsets[b] + i - j;
  bool excluded = (p.causal && distance < 0) ||
                  (p.left >= 0 && distance > p.left) ||
                  (p.right >= 0 && -distance > p.right) || j >= p.validKeys[b];
  return excluded ? bias + kNegInf : bias;
}

llvm::Error readProblem(const KernelContext &context, Problem &p) {
  Operation *op = context.getOp();
  const Tensor &q = context.operand(0), &k = context.operand(1),
               &v = context.operand(2);
  p.mask = inputTensor(context, 3);
  const Tensor *pastKey = inputTensor(context, 4);
  const Tensor *pastValue = inputTensor(context, 5);
  const Tensor *nonpad = inputTensor(context, 6);
  for (const Tensor *tensor : {&q, &k, &v, pastKey, pastValue})
    if (tensor && !tensor->isFloat())
      return context.error("Q, K, V, past_key and past_value must be float");
  if ((pastKey == nullptr) != (pastValue == nullptr))
    return context.error("past_key and past_value come together");
  if (nonpad && pastKey)
    return context.error("nonpad_kv_seqlen does not combine with past_key "
                         "and past_value");
  if (q.getRank() != k.getRank() || q.getRank() != v.getRank() ||
      (q.getRank() != 3 && q.getRank() != 4))
    return context.error("Q, K and V must all be 3-D or all 4-D");
  Tensor keys, values;
  if (q.getRank() == 3) {
    std::optional<int64_t> qHeads = optionalIntAttr(op, "q_num_heads");
    std::optional<int64_t> kvHeads = optionalIntAttr(op, "kv_num_heads");
    if (!qHeads || !kvHeads || *qHeads <= 0 || *kvHeads <= 0 ||
        q.getDim(2) % *qHeads || k.getDim(2) % *kvHeads ||
        v.getDim(2) % *kvHeads)
      return context.error("3-D inputs need q_num_heads and kv_num_heads "
                           "dividing their widths");
    p.q = toHeadMajor(q, *qHeads);
    keys = toHeadMajor(k, *kvHeads);
    values = toHeadMajor(v, *kvHeads);
  } else {
    p.q = q;
    keys = k;
    values = v;
  }
  p.batch = p.q.getDim(0);
  p.heads = p.q.getDim(1);
  p.seqQ = p.q.getDim(2);
  p.headDim = p.q.getDim(3);
  p.kvHeads = keys.getDim(1);
  if (keys.getDim(0) != p.batch || values.getDim(0) != p.batch ||
      values.getDim(1) != p.kvHeads || keys.getDim(3) != p.headDim ||
      values.getDim(2) != keys.getDim(2))
    return context.error("Q, K and V shapes do not fit together");
  if (p.kvHeads == 0 || p.heads % p.kvHeads != 0)
    return context.error("the " + std::to_string(p.heads) +
                         " query heads are not a multiple of the " +
                         std::to_string(p.kvHeads) + " key/value heads");
  for (const Tensor *past : {pastKey, pastValue})
    if (past &&
        (past->getRank() != 4 || past->getDim(0) != p.batch ||
         past->getDim(1) != p.kvHeads ||
         past->getDim(2) != pastKey->getDim(2) ||
         past->getDim(3) != (past == pastKey ? keys : values).getDim(3)))
      return context.error("past_key/past_value must be [batch, kv_heads, "
                           "past, head_size] of K and V");
  p.presentKey = concatSequence(pastKey, keys);
  p.presentValue = concatSequence(pastValue, values);
  p.seqK = p.presentKey.getDim(2);
  p.valueDim = p.presentValue.getDim(3);
  p.causal = intAttr(op, "is_causal", 0) != 0;
  p.left = intAttr(op, "left_window_size", -1);
  p.right = intAttr(op, "right_window_size", -1);

  p.offsets.assign(p.batch, pastKey ? pastKey->getDim(2) : 0);
  p.validKeys.assign(p.batch, p.seqK);
  if (nonpad) {
    if (nonpad->isFloat() || nonpad->getNumElements() != p.batch)
      return context.error("nonpad_kv_seqlen must hold one integer per batch "
                           "entry (" +
                           std::to_string(p.batch) + ")");
    for (int64_t b = 0; b < p.batch; ++b) {
      p.validKeys[b] = nonpad->getAsInt(b);
      if (p.validKeys[b] < 0 || p.validKeys[b] > p.seqK)
        return context.error("nonpad_kv_seqlen[" + std::to_string(b) +
                             "] = " + std::to_string(p.validKeys[b]) +
                             " is outside [0, " + std::to_string(p.seqK) + "]");
      // Negative for more queries than valid keys: leading rows see none.
      p.offsets[b] = p.validKeys[b] - p.seqQ;
    }
  }
  if (p.mask) {
    if (p.mask->getRank() > 4 || p.mask->getRank() < 1)
      return context.error("attn_mask must have rank 1 to 4");
    p.maskKeys = p.mask->getDim(-1);
    Shape target = {p.batch, p.heads, p.seqQ, p.maskKeys};
    std::optional<llvm::SmallVector<int64_t, 6>> strides =
        broadcastStrides(p.mask->getShape(), target);
    if (!strides || p.maskKeys > p.seqK)
      return context.error("attn_mask of shape " +
                           formatShape(p.mask->getShape()) +
                           " does not broadcast to " +
                           formatShape({p.batch, p.heads, p.seqQ, p.seqK}));
    p.maskStrides = *strides;
  }
  return llvm::Error::success();
}

llvm::Error runAttention(KernelContext &context) {
  Operation *op = context.getOp();
  Problem p;
  if (llvm::Error error = readProblem(context, p))
    return error;
  ElementType type = context.resultType(0);
  llvm::Expected<ElementType> precision = softmaxType(context, type);
  if (!precision)
    return precision.takeError();
  auto round = [type](float value) { return roundToFloatType(value, type); };
  auto roundSoftmax = [&](float value) {
    return roundToFloatType(value, *precision);
  };
  int64_t mode = intAttr(op, "qk_matmul_output_mode", 0);
  if (mode < 0 || mode > 3)
    return context.error("qk_matmul_output_mode " + std::to_string(mode) +
                         " is not 0 to 3");
  double scale = optionalFloatAttr(op, "scale")
                     .value_or(1.0 / std::sqrt(double(p.headDim)));
  float rootScale = round(static_cast<float>(std::sqrt(scale)));
  float softcap = floatAttr(op, "softcap", 0.0f);

  auto scaled = [&](const Tensor &x) {
    Tensor result = x;
    for (float &value : result.floats())
      value = round(value * rootScale);
    return result;
  };
  Tensor qs = scaled(p.q), ks = scaled(p.presentKey);

  int64_t group = p.heads / p.kvHeads;
  Tensor y(type, {p.batch, p.heads, p.seqQ, p.valueDim});
  bool wantScores = op->getNumResults() > 3;
  Tensor qk =
      wantScores ? Tensor(type, {p.batch, p.heads, p.seqQ, p.seqK}) : Tensor();
  std::vector<float> weights(p.seqK), bias(p.seqK);
  for (int64_t b = 0; b < p.batch; ++b)
    for (int64_t h = 0; h < p.heads; ++h) {
      int64_t kvHead = b * p.kvHeads + h / group;
      const float *keys = ks.floats().data() + kvHead * p.seqK * p.headDim;
      const float *values =
          p.presentValue.floats().data() + kvHead * p.seqK * p.valueDim;
      for (int64_t i = 0; i < p.seqQ; ++i) {
        int64_t row = (b * p.heads + h) * p.seqQ + i;
        const float *query = qs.floats().data() + row * p.headDim;
        float *qkRow = wantScores ? qk.floats().data() + row * p.seqK : nullptr;
        // numpy's max: NaN wins, so a NaN bias never reads as all masked.
        float biasMax = kNegInf;
        for (int64_t j = 0; j < p.seqK; ++j) {
          bias[j] = biasAt(p, b, h, i, j);
          biasMax = std::isnan(bias[j]) || std::isnan(biasMax)
                        ? std::nanf("")
                        : std::max(biasMax, bias[j]);
        }
        bool allMasked = biasMax == kNegInf;
        float top = kNegInf;
        bool nan = false;
        for (int64_t j = 0; j < p.seqK; ++j) {
          float score = round(dotF32(query, keys + j * p.headDim, p.headDim));
          if (qkRow && mode == 0)
            qkRow[j] = score;
          if (softcap > 0.0f)
            score = round(round(std::tanh(round(score / softcap))) * softcap);
          if (qkRow && mode == 1)
            qkRow[j] = score;
          float weight = round(score + bias[j]);
          if (qkRow && mode == 2)
            qkRow[j] = weight;
          weights[j] = roundSoftmax(weight);
          nan |= std::isnan(weights[j]);
          top = std::max(top, weights[j]);
        }
        // An all -inf row: exp(w - 0) is 0 everywhere, the sum 0 counts as
        // 1, so the row is 0 (as the reference's softmax guards it).
        float shift = nan ? std::nanf("") : top == kNegInf ? 0.0f : top;
        float sum = 0.0f;
        for (int64_t j = 0; j < p.seqK; ++j) {
          weights[j] = roundSoftmax(std::exp(roundSoftmax(weights[j] - shift)));
          sum += weights[j];
        }
        sum = roundSoftmax(sum);
        if (sum == 0.0f)
          sum = 1.0f;
        for (int64_t j = 0; j < p.seqK; ++j) {
          weights[j] = allMasked ? 0.0f : round(roundSoftmax(weights[j] / sum));
          if (qkRow && mode == 3)
            qkRow[j] = weights[j];
        }
        float *out = y.floats().data() + row * p.valueDim;
        for (int64_t d = 0; d < p.valueDim; ++d) {
          float total = 0.0f;
          for (int64_t j = 0; j < p.seqK; ++j)
            total += weights[j] * values[j * p.valueDim + d];
          out[d] = total;
        }
      }
    }

  if (context.operand(0).getRank() == 3)
    y = toSequenceMajor(y);
  Tensor *outputs[] = {&y, &p.presentKey, &p.presentValue, &qk};
  for (unsigned i = 0; i < op->getNumResults() && i < 4; ++i) {
    outputs[i]->setElementTypeAndRound(context.resultType(i));
    context.setResult(i, std::move(*outputs[i]));
  }
  return llvm::Error::success();
}

} // namespace

void onnx::attachOnnxAttentionKernel(MLIRContext *context) {
  attachKernel<runAttention, sits::onnx::AttentionOp>(context);
}
