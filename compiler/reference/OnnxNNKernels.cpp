//===- OnnxNNKernels.cpp - MatMul, norms, RoPE and attention onnx ops -----===//

#include "compiler/reference/Math.h"
#include "compiler/reference/OnnxSupport.h"

#include "dialects/onnx/OnnxOps.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace sits::reference;
using namespace sits::reference::onnx;

static llvm::Error
requireFloats(const KernelContext &context,
              std::initializer_list<const Tensor *> tensors) {
  for (const Tensor *tensor : tensors)
    if (tensor && !tensor->isFloat())
      return context.error("needs float operands");
  return llvm::Error::success();
}

//===----------------------------------------------------------------------===//
// Matrix products
//===----------------------------------------------------------------------===//

static llvm::Error runMatMul(KernelContext &context) {
  const Tensor &a = context.operand(0), &b = context.operand(1);
  if (llvm::Error error = requireFloats(context, {&a, &b}))
    return error;
  if (a.getRank() == 0 || b.getRank() == 0)
    return context.error("operands must have rank >= 1");
  // numpy: a 1-D operand is a row (A) or a column (B), dropped afterwards.
  Shape shapeA(a.getShape()), shapeB(b.getShape());
  if (a.getRank() == 1)
    shapeA.insert(shapeA.begin(), 1);
  if (b.getRank() == 1)
    shapeB.push_back(1);
  int64_t m = shapeA[shapeA.size() - 2], k = shapeA.back();
  int64_t n = shapeB.back();
  if (shapeB[shapeB.size() - 2] != k)
    return context.error("cannot multiply " + formatShape(a.getShape()) +
                         " by " + formatShape(b.getShape()));
  llvm::ArrayRef<int64_t> batchA = llvm::ArrayRef(shapeA).drop_back(2);
  llvm::ArrayRef<int64_t> batchB = llvm::ArrayRef(shapeB).drop_back(2);
  llvm::Expected<Shape> batch = broadcastShapes(context, {batchA, batchB});
  if (!batch)
    return batch.takeError();
  Shape shape = *batch;
  if (a.getRank() > 1)
    shape.push_back(m);
  if (b.getRank() > 1)
    shape.push_back(n);
  if (llvm::Error error = checkResultSize(context, shape))
    return error;
  Tensor result = context.makeResult(0, shape);
  std::array<llvm::SmallVector<int64_t, 6>, 2> strides = {
      *broadcastStrides(batchA, *batch), *broadcastStrides(batchB, *batch)};
  unsigned threads = context.getNumThreads();
  forEachBroadcast<2>(*batch, strides, [&](int64_t out, auto in) {
    matmulPlain(a.floats().data() + in[0] * m * k,
                b.floats().data() + in[1] * k * n,
                result.floats().data() + out * m * n, m, n, k, threads);
  });
  context.setResult(0, std::move(result));
  return llvm::Error::success();
}

/// A copy of a 2-D tensor's data, transposed when `transpose`.
static std::vector<float> matrixData(const Tensor &tensor, bool transpose,
                                     int64_t &rows, int64_t &cols) {
  rows = tensor.getDim(0);
  cols = tensor.getDim(1);
  if (!transpose)
    return {tensor.floats().begin(), tensor.floats().end()};
  std::vector<float> data(rows * cols);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j)
      data[j * rows + i] = tensor.floats()[i * cols + j];
  std::swap(rows, cols);
  return data;
}

static llvm::Error runGemm(KernelContext &context) {
  Operation *op = context.getOp();
  const Tensor &a = context.operand(0), &b = context.operand(1);
  const Tensor *c = inputTensor(context, 2);
  if (llvm::Error error = requireFloats(context, {&a, &b, c}))
    return error;
  if (a.getRank() != 2 || b.getRank() != 2)
    return context.error("A and B must be 2-D");
  int64_t m, k, k2, n;
  std::vector<float> dataA = matrixData(a, intAttr(op, "transA", 0), m, k);
  std::vector<float> dataB = matrixData(b, intAttr(op, "transB", 0), k2, n);
  if (k != k2)
    return context.error("inner dimensions differ: " + std::to_string(k) +
                         " and " + std::to_string(k2));
  float alpha = floatAttr(op, "alpha", 1.0f),
        beta = floatAttr(op, "beta", 1.0f);
  Tensor result = context.makeResult(0, {m, n});
  matmulPlain(dataA.data(), dataB.data(), result.floats().data(), m, n, k,
              context.getNumThreads());
  std::optional<llvm::SmallVector<int64_t, 6>> strides;
  if (c && !(strides = broadcastStrides(c->getShape(), {m, n})))
    return context.error("C of shape " + formatShape(c->getShape()) +
                         " does not broadcast to " + formatShape({m, n}));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      float &y = result.floats()[i * n + j];
      y *= alpha;
      if (c)
        y += beta * c->floats()[i * (*strides)[0] + j * (*strides)[1]];
    }
  context.setResult(0, std::move(result));
  return llvm::Error::success();
}

//===----------------------------------------------------------------------===//
// Normalizations
//===----------------------------------------------------------------------===//

/// Rows and row length of a normalization over the dims from `axis` on, and
/// the strides that read `parameter` broadcast to one row.
static llvm::Error
normalizationLayout(const KernelContext &context, const Tensor &x,
                    const Tensor *parameter, int64_t &axis, int64_t &rows,
                    int64_t &width,
                    llvm::SmallVector<int64_t, 6> *parameterStrides) {
  llvm::Expected<int64_t> normalized =
      normalizeAxis(context, intAttr(context.getOp(), "axis", -1), x.getRank());
  if (!normalized)
    return normalized.takeError();
  axis = *normalized;
  llvm::ArrayRef<int64_t> rowShape = x.getShape().drop_front(axis);
  rows = numElementsOf(x.getShape().take_front(axis));
  width = numElementsOf(rowShape);
  if (!parameter)
    return llvm::Error::success();
  std::optional<llvm::SmallVector<int64_t, 6>> strides =
      broadcastStrides(parameter->getShape(), rowShape);
  if (!strides)
    return context.error("scale/bias of shape " +
                         formatShape(parameter->getShape()) +
                         " does not broadcast to " + formatShape(rowShape));
  // Flatten to one stride per row element.
  parameterStrides->assign(width, 0);
  std::array<llvm::SmallVector<int64_t, 6>, 1> perDim = {*strides};
  forEachBroadcast<1>(rowShape, perDim, [&](int64_t out, auto in) {
    (*parameterStrides)[out] = in[0];
  });
  return llvm::Error::success();
}

static llvm::Error runLayerNormalization(KernelContext &context) {
  Operation *op = context.getOp();
  const Tensor &x = context.operand(0), &scale = context.operand(1);
  const Tensor *bias = inputTensor(context, 2);
  if (llvm::Error error = requireFloats(context, {&x, &scale, bias}))
    return error;
  int64_t axis, rows, width;
  llvm::SmallVector<int64_t, 6> scaleIndex, biasIndex;
  if (llvm::Error error = normalizationLayout(context, x, &scale, axis, rows,
                                              width, &scaleIndex))
    return error;
  if (bias)
    if (llvm::Error error = normalizationLayout(context, x, bias, axis, rows,
                                                width, &biasIndex))
      return error;
  float epsilon = floatAttr(op, "epsilon", 1e-5f);
  Tensor result = context.makeResult(0, x.getShape());
  Shape statsShape(x.getShape().take_front(axis));
  statsShape.append(x.getRank() - axis, 1);
  bool wantStats = op->getNumResults() > 1;
  Tensor mean = wantStats ? context.makeResult(1, statsShape) : Tensor();
  Tensor invStd =
      op->getNumResults() > 2 ? context.makeResult(2, statsShape) : Tensor();
  std::vector<float> centered(width);
  for (int64_t r = 0; r < rows; ++r) {
    const float *row = x.floats().data() + r * width;
    float mu = sumF32(row, width) / static_cast<float>(width);
    for (int64_t i = 0; i < width; ++i)
      centered[i] = row[i] - mu;
    float variance = dotF32(centered.data(), centered.data(), width) /
                     static_cast<float>(width);
    float inverse = 1.0f / std::sqrt(variance + epsilon);
    for (int64_t i = 0; i < width; ++i)
      result.floats()[r * width + i] =
          centered[i] * inverse * scale.floats()[scaleIndex[i]] +
          (bias ? bias->floats()[biasIndex[i]] : 0.0f);
    if (wantStats)
      mean.floats()[r] = mu;
    if (op->getNumResults() > 2)
      invStd.floats()[r] = inverse;
  }
  context.setResult(0, std::move(result));
  if (wantStats)
    context.setResult(1, std::move(mean));
  if (op->getNumResults() > 2)
    context.setResult(2, std::move(invStd));
  return llvm::Error::success();
}

static llvm::Error runRMSNormalization(KernelContext &context) {
  const Tensor &x = context.operand(0), &scale = context.operand(1);
  if (llvm::Error error = requireFloats(context, {&x, &scale}))
    return error;
  int64_t axis, rows, width;
  llvm::SmallVector<int64_t, 6> scaleIndex;
  if (llvm::Error error = normalizationLayout(context, x, &scale, axis, rows,
                                              width, &scaleIndex))
    return error;
  float epsilon = floatAttr(context.getOp(), "epsilon", 1e-5f);
  Tensor result = context.makeResult(0, x.getShape());
  for (int64_t r = 0; r < rows; ++r) {
    const float *row = x.floats().data() + r * width;
    float meanSquare = dotF32(row, row, width) / static_cast<float>(width);
    // As the ONNX function body: X * Reciprocal(Sqrt(mean + epsilon)) * scale.
    float inverse = 1.0f / std::sqrt(meanSquare + epsilon);
    for (int64_t i = 0; i < width; ++i)
      result.floats()[r * width + i] =
          row[i] * inverse * scale.floats()[scaleIndex[i]];
  }
  context.setResult(0, std::move(result));
  return llvm::Error::success();
}

//===----------------------------------------------------------------------===//
// RotaryEmbedding
//===----------------------------------------------------------------------===//

static llvm::Error runRotaryEmbedding(KernelContext &context) {
  Operation *op = context.getOp();
  const Tensor &x = context.operand(0);
  const Tensor &cosCache = context.operand(1), &sinCache = context.operand(2);
  const Tensor *positions = inputTensor(context, 3);
  if (llvm::Error error = requireFloats(context, {&x, &cosCache, &sinCache}))
    return error;
  int64_t batch, heads, seq, headDim;
  bool packed = x.getRank() == 3;
  if (packed) {
    std::optional<int64_t> numHeads = optionalIntAttr(op, "num_heads");
    if (!numHeads || *numHeads <= 0 || x.getDim(2) % *numHeads != 0)
      return context.error("a 3-D input needs num_heads dividing its width");
    batch = x.getDim(0);
    seq = x.getDim(1);
    heads = *numHeads;
    headDim = x.getDim(2) / heads;
  } else if (x.getRank() == 4) {
    batch = x.getDim(0);
    heads = x.getDim(1);
    seq = x.getDim(2);
    headDim = x.getDim(3);
  } else {
    return context.error("input must be 3-D or 4-D, got " +
                         formatShape(x.getShape()));
  }
  int64_t rotaryDim = intAttr(op, "rotary_embedding_dim", 0);
  if (rotaryDim == 0)
    rotaryDim = headDim;
  if (rotaryDim % 2 != 0 || rotaryDim > headDim)
    return context.error("rotary_embedding_dim " + std::to_string(rotaryDim) +
                         " must be even and at most the head size " +
                         std::to_string(headDim));
  int64_t half = rotaryDim / 2;
  bool interleaved = intAttr(op, "interleaved", 0) != 0;
  if (cosCache.getShape() != sinCache.getShape())
    return context.error("cos_cache and sin_cache differ in shape");
  int64_t cacheWidth = cosCache.getDim(-1);
  if (cacheWidth < half)
    return context.error("the caches hold " + std::to_string(cacheWidth) +
                         " values per position, fewer than rotary_dim / 2");
  // The cache row (offset) for batch b, position s.
  auto cacheRow = [&](int64_t b, int64_t s) -> llvm::Expected<int64_t> {
    if (positions) {
      int64_t maxPosition = cosCache.getDim(0);
      int64_t p =
          positions->getAsInt((positions->getDim(0) == 1 ? 0 : b) * seq + s);
      if (p < 0 || p >= maxPosition)
        return context.error("position " + std::to_string(p) +
                             " is outside the cache [0, " +
                             std::to_string(maxPosition) + ")");
      return p * cacheWidth;
    }
    int64_t cacheBatch = cosCache.getDim(0) == 1 ? 0 : b;
    return (cacheBatch * seq + s) * cacheWidth;
  };
  if (positions) {
    bool ok = cosCache.getRank() == 2 && positions->getRank() == 2 &&
              (positions->getDim(0) == batch || positions->getDim(0) == 1) &&
              positions->getDim(1) == seq;
    if (!ok)
      return context.error("with position_ids [batch, seq], the caches must "
                           "be [max_position, R/2]");
  } else if (cosCache.getRank() != 3 || cosCache.getDim(1) != seq ||
             (cosCache.getDim(0) != batch && cosCache.getDim(0) != 1)) {
    return context.error("without position_ids, the caches must be [batch, "
                         "seq, R/2], got " +
                         formatShape(cosCache.getShape()));
  }
  Tensor result = context.makeResult(0, x.getShape());
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t s = 0; s < seq; ++s) {
      llvm::Expected<int64_t> row = cacheRow(b, s);
      if (!row)
        return row.takeError();
      const float *c = cosCache.floats().data() + *row;
      const float *n = sinCache.floats().data() + *row;
      for (int64_t h = 0; h < heads; ++h) {
        int64_t base = packed ? (b * seq + s) * heads * headDim + h * headDim
                              : ((b * heads + h) * seq + s) * headDim;
        const float *in = x.floats().data() + base;
        float *out = result.floats().data() + base;
        for (int64_t k = 0; k < half; ++k) {
          int64_t first = interleaved ? 2 * k : k;
          int64_t second = interleaved ? 2 * k + 1 : k + half;
          out[first] = c[k] * in[first] - n[k] * in[second];
          out[second] = n[k] * in[first] + c[k] * in[second];
        }
        for (int64_t d = rotaryDim; d < headDim; ++d)
          out[d] = in[d];
      }
    }
  context.setResult(0, std::move(result));
  return llvm::Error::success();
}

//===----------------------------------------------------------------------===//
// Attention (opset 23)
//===----------------------------------------------------------------------===//

/// [batch, seq, heads * dim] -> [batch, heads, seq, dim].
static Tensor toHeadMajor(const Tensor &x, int64_t heads) {
  int64_t batch = x.getDim(0), seq = x.getDim(1), dim = x.getDim(2) / heads;
  Tensor result(ElementType::F32, {batch, heads, seq, dim});
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t s = 0; s < seq; ++s)
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t d = 0; d < dim; ++d)
          result.floats()[((b * heads + h) * seq + s) * dim + d] =
              x.floats()[(b * seq + s) * heads * dim + h * dim + d];
  return result;
}

/// `past` and `current` joined along the sequence (dim 2) of [b, h, s, d].
static Tensor concatSequence(const Tensor *past, const Tensor &current) {
  if (!past)
    return current;
  int64_t batch = current.getDim(0), heads = current.getDim(1),
          pastLen = past->getDim(2), seq = current.getDim(2),
          dim = current.getDim(3);
  Tensor result(ElementType::F32, {batch, heads, pastLen + seq, dim});
  for (int64_t bh = 0; bh < batch * heads; ++bh) {
    float *out = result.floats().data() + bh * (pastLen + seq) * dim;
    std::copy_n(past->floats().data() + bh * pastLen * dim, pastLen * dim, out);
    std::copy_n(current.floats().data() + bh * seq * dim, seq * dim,
                out + pastLen * dim);
  }
  return result;
}

static llvm::Error runAttention(KernelContext &context) {
  Operation *op = context.getOp();
  const Tensor &q3 = context.operand(0), &k3 = context.operand(1),
               &v3 = context.operand(2);
  const Tensor *mask = inputTensor(context, 3);
  const Tensor *pastKey = inputTensor(context, 4);
  const Tensor *pastValue = inputTensor(context, 5);
  if (llvm::Error error =
          requireFloats(context, {&q3, &k3, &v3, pastKey, pastValue}))
    return error;
  if ((pastKey == nullptr) != (pastValue == nullptr))
    return context.error("past_key and past_value come together");
  int64_t mode = intAttr(op, "qk_matmul_output_mode", 0);
  if (op->getNumResults() > 3 && mode != 0 && mode != 3)
    return context.error("qk_matmul_output_mode " + std::to_string(mode) +
                         " is not supported (0 and 3 are)");
  bool packed = q3.getRank() == 3;
  if (q3.getRank() != k3.getRank() || q3.getRank() != v3.getRank() ||
      (q3.getRank() != 3 && q3.getRank() != 4))
    return context.error("Q, K and V must all be 3-D or all 4-D");
  Tensor q, k, v;
  if (packed) {
    std::optional<int64_t> qHeads = optionalIntAttr(op, "q_num_heads");
    std::optional<int64_t> kvHeads = optionalIntAttr(op, "kv_num_heads");
    if (!qHeads || !kvHeads || *qHeads <= 0 || *kvHeads <= 0 ||
        q3.getDim(2) % *qHeads || k3.getDim(2) % *kvHeads ||
        v3.getDim(2) % *kvHeads)
      return context.error("3-D inputs need q_num_heads and kv_num_heads "
                           "dividing their widths");
    q = toHeadMajor(q3, *qHeads);
    k = toHeadMajor(k3, *kvHeads);
    v = toHeadMajor(v3, *kvHeads);
  } else {
    q = q3;
    k = k3;
    v = v3;
  }
  int64_t batch = q.getDim(0), heads = q.getDim(1), seqQ = q.getDim(2),
          headDim = q.getDim(3), kvHeads = k.getDim(1);
  if (k.getDim(0) != batch || v.getDim(0) != batch || v.getDim(1) != kvHeads ||
      k.getDim(3) != headDim || v.getDim(2) != k.getDim(2) ||
      heads % kvHeads != 0)
    return context.error("Q, K and V shapes do not fit together");
  for (const Tensor *past : {pastKey, pastValue})
    if (past && (past->getRank() != 4 || past->getDim(0) != batch ||
                 past->getDim(1) != kvHeads))
      return context.error("past_key/past_value must be [batch, kv_heads, "
                           "past, head_size]");
  Tensor presentKey = concatSequence(pastKey, k);
  Tensor presentValue = concatSequence(pastValue, v);
  int64_t seqK = presentKey.getDim(2), valueDim = presentValue.getDim(3);
  int64_t pastLen = pastKey ? pastKey->getDim(2) : 0;
  float scale = optionalFloatAttr(op, "scale")
                    .value_or(1.0f / std::sqrt(static_cast<float>(headDim)));
  float softcap = floatAttr(op, "softcap", 0.0f);
  bool causal = intAttr(op, "is_causal", 0) != 0;

  // A mask shorter than the keys leaves the missing keys masked.
  llvm::SmallVector<int64_t, 6> maskStrides;
  int64_t maskKeys = seqK;
  if (mask) {
    if (mask->getRank() > 4 || mask->getRank() < 1)
      return context.error("attn_mask must have rank 1 to 4");
    maskKeys = mask->getDim(-1);
    Shape target = {batch, heads, seqQ, maskKeys};
    std::optional<llvm::SmallVector<int64_t, 6>> strides =
        broadcastStrides(mask->getShape(), target);
    if (!strides || maskKeys > seqK)
      return context.error("attn_mask of shape " +
                           formatShape(mask->getShape()) +
                           " does not broadcast to " + formatShape(target));
    maskStrides = *strides;
  }

  int64_t group = heads / kvHeads;
  Tensor y(ElementType::F32, {batch, heads, seqQ, valueDim});
  bool wantScores = op->getNumResults() > 3;
  Tensor qk = wantScores ? Tensor(ElementType::F32, {batch, heads, seqQ, seqK})
                         : Tensor();
  std::vector<float> scores(seqK);
  std::vector<char> visible(seqK);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < heads; ++h) {
      const float *keys = presentKey.floats().data() +
                          (b * kvHeads + h / group) * seqK * headDim;
      const float *values = presentValue.floats().data() +
                            (b * kvHeads + h / group) * seqK * valueDim;
      for (int64_t i = 0; i < seqQ; ++i) {
        const float *query =
            q.floats().data() + ((b * heads + h) * seqQ + i) * headDim;
        float *out =
            y.floats().data() + ((b * heads + h) * seqQ + i) * valueDim;
        float *qkRow = wantScores ? qk.floats().data() +
                                        ((b * heads + h) * seqQ + i) * seqK
                                  : nullptr;
        float top = -std::numeric_limits<float>::infinity();
        for (int64_t j = 0; j < seqK; ++j) {
          float score = scale * dotF32(query, keys + j * headDim, headDim);
          if (qkRow && mode == 0)
            qkRow[j] = score;
          if (softcap > 0.0f)
            score = softcap * std::tanh(score / softcap);
          bool seen = !causal || j <= i + pastLen;
          if (mask) {
            if (j >= maskKeys) {
              seen = false;
            } else {
              int64_t at = b * maskStrides[0] + h * maskStrides[1] +
                           i * maskStrides[2] + j * maskStrides[3];
              if (!mask->isFloat())
                seen &= mask->ints()[at] != 0;
              else
                score += mask->floats()[at];
            }
          }
          // -inf from a float mask masks the key as false would.
          seen &= score != -std::numeric_limits<float>::infinity();
          visible[j] = seen;
          scores[j] = score;
          if (seen)
            top = std::max(top, score);
        }
        bool any = std::any_of(visible.begin(), visible.end(),
                               [](char c) { return c; });
        float sum = 0.0f;
        for (int64_t j = 0; j < seqK; ++j) {
          scores[j] = visible[j] ? std::exp(scores[j] - top) : 0.0f;
          sum += scores[j];
        }
        std::fill(out, out + valueDim, 0.0f);
        for (int64_t j = 0; j < seqK; ++j) {
          float weight = any ? scores[j] / sum : 0.0f;
          if (qkRow && mode == 3)
            qkRow[j] = weight;
          if (weight == 0.0f)
            continue;
          for (int64_t d = 0; d < valueDim; ++d)
            out[d] += weight * values[j * valueDim + d];
        }
      }
    }

  if (packed) {
    Tensor merged(ElementType::F32, {batch, seqQ, heads * valueDim});
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t s = 0; s < seqQ; ++s)
          for (int64_t d = 0; d < valueDim; ++d)
            merged.floats()[(b * seqQ + s) * heads * valueDim + h * valueDim +
                            d] =
                y.floats()[((b * heads + h) * seqQ + s) * valueDim + d];
    y = std::move(merged);
  }
  Tensor *outputs[] = {&y, &presentKey, &presentValue, &qk};
  for (unsigned i = 0; i < op->getNumResults() && i < 4; ++i) {
    outputs[i]->setElementTypeAndRound(context.resultType(i));
    context.setResult(i, std::move(*outputs[i]));
  }
  return llvm::Error::success();
}

void onnx::attachOnnxNNKernels(MLIRContext *context) {
  attachKernel<runMatMul, sits::onnx::MatMulOp>(context);
  attachKernel<runGemm, sits::onnx::GemmOp>(context);
  attachKernel<runLayerNormalization, sits::onnx::LayerNormalizationOp>(
      context);
  attachKernel<runRMSNormalization, sits::onnx::RMSNormalizationOp>(context);
  attachKernel<runRotaryEmbedding, sits::onnx::RotaryEmbeddingOp>(context);
  attachKernel<runAttention, sits::onnx::AttentionOp>(context);
}
