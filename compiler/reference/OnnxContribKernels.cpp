//===- OnnxContribKernels.cpp - ONNX Runtime contrib ops ------------------===//
//
// Reference kernels of the ops the GenAI model builder emits, with ONNX
// Runtime's CPU semantics (checked against onnxruntime by
// test/tools/check_contrib_ops.py): SimplifiedLayerNormalization,
// SkipSimplifiedLayerNormalization, MatMulNBits (dequantize, then an f32
// product: ONNX Runtime's accuracy_level 4 quantizes A to int8 instead, which
// differs by about 1e-2 relative), GatherBlockQuantized, RotaryEmbedding and
// GroupQueryAttention.
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

/// RMS-normalizes rows of `width` (f32): `x / sqrt(mean(x^2) + eps) * g`.
/// Returns 1 / sqrt(mean + eps).
float rmsRow(const float *row, const float *gamma, int64_t width, float epsilon,
             float *out) {
  float meanSquare = dotF32(row, row, width) / static_cast<float>(width);
  float inverse = 1.0f / std::sqrt(meanSquare + epsilon);
  for (int64_t i = 0; i < width; ++i)
    out[i] = row[i] * inverse * gamma[i];
  return inverse;
}

llvm::Error runSimplifiedLayerNormalization(KernelContext &context) {
  Operation *op = context.getOp();
  const Tensor &x = context.operand(0), &scale = context.operand(1);
  if (!x.isFloat() || !scale.isFloat())
    return context.error("needs float operands");
  llvm::Expected<int64_t> axis =
      normalizeAxis(context, intAttr(op, "axis", -1), x.getRank());
  if (!axis)
    return axis.takeError();
  int64_t rows = 1, width = 1;
  for (int64_t d = 0; d < x.getRank(); ++d)
    (d < *axis ? rows : width) *= x.getDim(d);
  if (scale.getNumElements() != width)
    return context.error("scale has " + llvm::Twine(scale.getNumElements()) +
                         " elements, not the normalized size " +
                         llvm::Twine(width));
  float epsilon = floatAttr(op, "epsilon", 1e-5f);
  Tensor y = context.makeResult(0, x.getShape());
  SmallVector<int64_t> statShape;
  for (int64_t d = 0; d < x.getRank(); ++d)
    statShape.push_back(d < *axis ? x.getDim(d) : 1);
  Tensor inv(ElementType::F32, statShape);
  for (int64_t r = 0; r < rows; ++r)
    inv.floats()[r] =
        rmsRow(x.floats().data() + r * width, scale.floats().data(), width,
               epsilon, y.floats().data() + r * width);
  context.setResult(0, std::move(y));
  if (op->getNumResults() > 1)
    context.setResult(1, std::move(inv));
  return llvm::Error::success();
}

llvm::Error runSkipSimplifiedLayerNormalization(KernelContext &context) {
  Operation *op = context.getOp();
  const Tensor &x = context.operand(0), &skip = context.operand(1);
  const Tensor *gamma = inputTensor(context, 2),
               *bias = inputTensor(context, 3);
  if (!x.isFloat() || !skip.isFloat() || !gamma->isFloat() ||
      (bias && !bias->isFloat()))
    return context.error("needs float operands");
  if (x.getRank() < 1 || skip.getShape() != x.getShape())
    return context.error("skip must have input's shape");
  int64_t width = x.getDim(x.getRank() - 1);
  int64_t rows = width ? x.getNumElements() / width : 0;
  if (gamma->getNumElements() != width ||
      (bias && bias->getNumElements() != width))
    return context.error("gamma and bias must have the hidden size");
  float epsilon = floatAttr(op, "epsilon", 1e-12f);
  Tensor sum(ElementType::F32, x.getShape());
  for (int64_t i = 0; i < x.getNumElements(); ++i)
    sum.floats()[i] = x.floats()[i] + skip.floats()[i] +
                      (bias ? bias->floats()[i % width] : 0.0f);
  Tensor y = context.makeResult(0, x.getShape());
  SmallVector<int64_t> statShape(x.getShape());
  statShape.back() = 1;
  Tensor mean(ElementType::F32, statShape), inv(ElementType::F32, statShape);
  for (int64_t r = 0; r < rows; ++r)
    inv.floats()[r] =
        rmsRow(sum.floats().data() + r * width, gamma->floats().data(), width,
               epsilon, y.floats().data() + r * width);
  context.setResult(0, std::move(y));
  Tensor *extra[] = {&mean, &inv, &sum};
  for (unsigned i = 1; i < op->getNumResults() && i < 4; ++i) {
    extra[i - 1]->setElementTypeAndRound(context.resultType(i));
    context.setResult(i, std::move(*extra[i - 1]));
  }
  return llvm::Error::success();
}

/// Value `index` of `bits` bits in little-endian packed bytes.
int64_t unpack(const Tensor &bytes, int64_t base, int64_t index, int64_t bits) {
  int64_t bit = index * bits;
  int64_t byte = bytes.getAsInt(base + bit / 8) & 0xff;
  return (byte >> (bit % 8)) & ((int64_t(1) << bits) - 1);
}

llvm::Error runMatMulNBits(KernelContext &context) {
  Operation *op = context.getOp();
  const Tensor &a = context.operand(0), &b = context.operand(1);
  const Tensor &scales = context.operand(2);
  const Tensor *zeroPoints = inputTensor(context, 3);
  const Tensor *bias = inputTensor(context, 5);
  int64_t k = intAttr(op, "K", 0), n = intAttr(op, "N", 0);
  int64_t bits = intAttr(op, "bits", 4), block = intAttr(op, "block_size", 0);
  if (!a.isFloat() || !scales.isFloat() || (bias && !bias->isFloat()))
    return context.error("A, scales and bias must be float");
  if (a.getRank() < 1 || a.getDim(a.getRank() - 1) != k)
    return context.error("A's last dim is not K = " + llvm::Twine(k));
  int64_t blocks = (k + block - 1) / block;
  int64_t blob = block * bits / 8;
  if (b.getNumElements() != n * blocks * blob)
    return context.error("B has " + llvm::Twine(b.getNumElements()) +
                         " bytes, not N * ceil(K / block_size) * "
                         "block_size * bits / 8 = " +
                         llvm::Twine(n * blocks * blob));
  if (scales.getNumElements() != n * blocks)
    return context.error(
        "scales has " + llvm::Twine(scales.getNumElements()) +
        " elements, not N * ceil(K / block_size) = " + llvm::Twine(n * blocks));
  int64_t zpBytes = (blocks * bits + 7) / 8;
  bool packedZp = zeroPoints && !zeroPoints->isFloat();
  if (zeroPoints &&
      zeroPoints->getNumElements() != (packedZp ? n * zpBytes : n * blocks))
    return context.error(
        "zero_points has " + llvm::Twine(zeroPoints->getNumElements()) +
        " elements, not " + llvm::Twine(packedZp ? n * zpBytes : n * blocks));
  // W^T [N, K], dequantized.
  std::vector<float> weight(static_cast<size_t>(n * k));
  float defaultZp = static_cast<float>(int64_t(1) << (bits - 1));
  for (int64_t row = 0; row < n; ++row)
    for (int64_t j = 0; j < blocks; ++j) {
      float scale = scales.floats()[row * blocks + j];
      float zp =
          !zeroPoints ? defaultZp
          : packedZp
              ? static_cast<float>(unpack(*zeroPoints, row * zpBytes, j, bits))
              : zeroPoints->floats()[row * blocks + j];
      for (int64_t e = 0; e < block && j * block + e < k; ++e) {
        float q =
            static_cast<float>(unpack(b, (row * blocks + j) * blob, e, bits));
        weight[row * k + j * block + e] = (q - zp) * scale;
      }
    }
  SmallVector<int64_t> shape(a.getShape());
  shape.back() = n;
  Tensor y = context.makeResult(0, shape);
  int64_t rows = k ? a.getNumElements() / k : 0;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t col = 0; col < n; ++col)
      y.floats()[r * n + col] =
          dotF32(a.floats().data() + r * k, weight.data() + col * k, k) +
          (bias ? bias->floats()[col] : 0.0f);
  context.setResult(0, std::move(y));
  return llvm::Error::success();
}

llvm::Error runGatherBlockQuantized(KernelContext &context) {
  Operation *op = context.getOp();
  const Tensor &data = context.operand(0), &indices = context.operand(1);
  const Tensor &scales = context.operand(2);
  const Tensor *zeroPoints = inputTensor(context, 3);
  int64_t bits = intAttr(op, "bits", 4), block = intAttr(op, "block_size", 128);
  if (data.isFloat() || indices.isFloat() || !scales.isFloat() ||
      data.getRank() != 2 || (zeroPoints && zeroPoints->isFloat()))
    return context.error("needs packed integer data [rows, cols], integer "
                         "indices and zero points, and float scales");
  int64_t rows = data.getDim(0), cols = data.getDim(1);
  int64_t k = cols * 8 / bits, blocks = (k + block - 1) / block;
  int64_t zpBytes = (blocks * bits + 7) / 8;
  if (scales.getNumElements() != rows * blocks)
    return context.error("scales has " + llvm::Twine(scales.getNumElements()) +
                         " elements, not rows * ceil(K / block_size) = " +
                         llvm::Twine(rows * blocks));
  if (zeroPoints && zeroPoints->getNumElements() != rows * zpBytes)
    return context.error("zero_points has " +
                         llvm::Twine(zeroPoints->getNumElements()) +
                         " elements, not " + llvm::Twine(rows * zpBytes));
  SmallVector<int64_t> shape(indices.getShape());
  shape.push_back(k);
  Tensor y(ElementType::F32, shape);
  for (int64_t i = 0; i < indices.getNumElements(); ++i) {
    int64_t row = indices.getAsInt(i);
    if (row < 0)
      row += rows;
    if (row < 0 || row >= rows)
      return context.error("index " + llvm::Twine(indices.getAsInt(i)) +
                           " is outside the " + llvm::Twine(rows) + " rows");
    for (int64_t e = 0; e < k; ++e) {
      int64_t j = e / block;
      float zp =
          zeroPoints
              ? static_cast<float>(unpack(*zeroPoints, row * zpBytes, j, bits))
              : static_cast<float>(int64_t(1) << (bits - 1));
      float q = static_cast<float>(unpack(data, row * cols, e, bits));
      y.floats()[i * k + e] = (q - zp) * scales.floats()[row * blocks + j];
    }
  }
  y.setElementTypeAndRound(context.resultType(0));
  context.setResult(0, std::move(y));
  return llvm::Error::success();
}

/// Rotates `x[0..rotary)` in place with the cos/sin row of `position`.
void rotate(float *x, const Tensor &cosCache, const Tensor &sinCache,
            int64_t position, int64_t rotary, bool interleaved) {
  int64_t half = rotary / 2;
  const float *c = cosCache.floats().data() + position * half;
  const float *s = sinCache.floats().data() + position * half;
  for (int64_t i = 0; i < half; ++i) {
    int64_t lo = interleaved ? 2 * i : i;
    int64_t hi = interleaved ? 2 * i + 1 : i + half;
    float x0 = x[lo], x1 = x[hi];
    x[lo] = x0 * c[i] - x1 * s[i];
    x[hi] = x1 * c[i] + x0 * s[i];
  }
}

llvm::Error checkCaches(const KernelContext &context, const Tensor &cosCache,
                        const Tensor &sinCache, int64_t headDim) {
  if (!cosCache.isFloat() || cosCache.getRank() != 2 ||
      sinCache.getShape() != cosCache.getShape())
    return context.error("cos_cache and sin_cache must be float [max_position, "
                         "rotary_dim / 2]");
  if (2 * cosCache.getDim(1) > headDim)
    return context.error("the rotary dim is larger than the head size");
  return llvm::Error::success();
}

llvm::Error runMsRotaryEmbedding(KernelContext &context) {
  Operation *op = context.getOp();
  const Tensor &x = context.operand(0), &positions = context.operand(1);
  const Tensor &cosCache = context.operand(2), &sinCache = context.operand(3);
  if (!x.isFloat())
    return context.error("needs a float input");
  bool interleaved = intAttr(op, "interleaved", 0) != 0;
  int64_t rotary = 2 * (cosCache.getRank() == 2 ? cosCache.getDim(1) : 0);
  int64_t batch = x.getDim(0), heads, seq, headDim;
  bool packed = x.getRank() == 3;
  if (packed) {
    seq = x.getDim(1);
    int64_t numHeads = intAttr(op, "num_heads", 0);
    headDim = numHeads ? x.getDim(2) / numHeads : rotary;
    if (headDim == 0 || x.getDim(2) % headDim != 0)
      return context.error("the hidden size is not a multiple of the head "
                           "size");
    heads = x.getDim(2) / headDim;
  } else {
    heads = x.getDim(1);
    seq = x.getDim(2);
    headDim = x.getDim(3);
  }
  if (int64_t attr = intAttr(op, "rotary_embedding_dim", 0);
      attr && attr != rotary)
    return context.error("rotary_embedding_dim does not match cos_cache");
  if (llvm::Error error = checkCaches(context, cosCache, sinCache, headDim))
    return error;
  bool offsetOnly = positions.getNumElements() == 1;
  if (!offsetOnly && positions.getNumElements() != batch * seq)
    return context.error("position_ids must be [batch, seq] or [1]");
  Tensor y(ElementType::F32, x.getShape());
  std::copy(x.floats().begin(), x.floats().end(), y.floats().begin());
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t s = 0; s < seq; ++s) {
      int64_t position = offsetOnly ? positions.getAsInt(0) + s
                                    : positions.getAsInt(b * seq + s);
      if (position < 0 || position >= cosCache.getDim(0))
        return context.error("position " + llvm::Twine(position) +
                             " is outside the cos/sin caches");
      for (int64_t h = 0; h < heads; ++h) {
        int64_t offset = packed ? ((b * seq + s) * heads + h) * headDim
                                : ((b * heads + h) * seq + s) * headDim;
        rotate(y.floats().data() + offset, cosCache, sinCache, position, rotary,
               interleaved);
      }
    }
  y.setElementTypeAndRound(context.resultType(0));
  context.setResult(0, std::move(y));
  return llvm::Error::success();
}

llvm::Error runGroupQueryAttention(KernelContext &context) {
  Operation *op = context.getOp();
  const Tensor &query = context.operand(0);
  const Tensor *key = inputTensor(context, 1), *value = inputTensor(context, 2);
  const Tensor *pastKey = inputTensor(context, 3);
  const Tensor *pastValue = inputTensor(context, 4);
  const Tensor *seqlens = inputTensor(context, 5);
  const Tensor *total = inputTensor(context, 6);
  const Tensor *cosCache = inputTensor(context, 7);
  const Tensor *sinCache = inputTensor(context, 8);
  const Tensor *positionIds = inputTensor(context, 9);
  const Tensor *bias = inputTensor(context, 10);
  const Tensor *sink = inputTensor(context, 11);
  int64_t heads = intAttr(op, "num_heads", 0);
  int64_t kvHeads = intAttr(op, "kv_num_heads", 0);
  if (!query.isFloat() || query.getRank() != 3)
    return context.error("query must be float [batch, seq, hidden]");
  int64_t batch = query.getDim(0), seq = query.getDim(1);
  int64_t width = query.getDim(2);
  int64_t headDim = key ? width / heads : width / (heads + 2 * kvHeads);
  if (headDim <= 0)
    return context.error("the query is too narrow for the heads");
  if (seqlens->getNumElements() != batch || total->getNumElements() != 1)
    return context.error("seqlens_k must be [batch] and "
                         "total_sequence_length a scalar");
  int64_t totalLength = total->getAsInt(0);
  int64_t pastBuffer = pastKey ? pastKey->getDim(2) : 0;
  if (pastKey &&
      (pastKey->getRank() != 4 || pastKey->getDim(0) != batch ||
       pastKey->getDim(1) != kvHeads || pastKey->getDim(3) != headDim ||
       pastValue->getShape() != pastKey->getShape()))
    return context.error("past_key/past_value must be [batch, kv_num_heads, "
                         "past, head_size]");
  bool doRotary = intAttr(op, "do_rotary", 0) != 0;
  bool interleaved = intAttr(op, "rotary_interleaved", 0) != 0;
  if (doRotary)
    if (llvm::Error error = checkCaches(context, *cosCache, *sinCache, headDim))
      return error;
  int64_t window = intAttr(op, "local_window_size", -1);
  float softcap = floatAttr(op, "softcap", 0.0f);
  float scale = floatAttr(op, "scale", 0.0f);
  if (scale == 0.0f)
    scale = 1.0f / std::sqrt(static_cast<float>(headDim));
  bool firstPrompt = seq == totalLength;
  int64_t presentLength = std::max(pastBuffer, totalLength);
  bool smooth = intAttr(op, "smooth_softmax", 0) != 0;
  if (positionIds && positionIds->getNumElements() != batch * seq)
    return context.error("position_ids must be [batch, seq]");
  if (sink && (!sink->isFloat() || sink->getNumElements() != heads))
    return context.error("head_sink must be float [num_heads]");
  if (bias && (!bias->isFloat() || bias->getRank() != 4 ||
               (bias->getDim(0) != 1 && bias->getDim(0) != batch) ||
               (bias->getDim(1) != 1 && bias->getDim(1) != heads) ||
               bias->getDim(2) != seq || bias->getDim(3) < totalLength))
    return context.error("attention_bias must be float [batch or 1, "
                         "num_heads or 1, seq, >= total_sequence_length]");
  // The rotary position of step row s: position_ids except at a first
  // prompt (ONNX Runtime's CPU kernel), else past + s.
  auto rotaryPosition = [&](int64_t b, int64_t past, int64_t totalB,
                            int64_t s) {
    if (positionIds && !firstPrompt)
      return positionIds->getAsInt(b * seq + s);
    return past + s < totalB ? past + s : int64_t(1);
  };

  // Split q, k, v: [b, s, heads, d].
  int64_t qWidth = heads * headDim, kvWidth = kvHeads * headDim;
  auto qAt = [&](int64_t b, int64_t s) {
    return query.floats().data() + (b * seq + s) * width;
  };
  auto kAt = [&](int64_t b, int64_t s) {
    return key ? key->floats().data() + (b * seq + s) * kvWidth
               : qAt(b, s) + qWidth;
  };
  auto vAt = [&](int64_t b, int64_t s) {
    return value ? value->floats().data() + (b * seq + s) * kvWidth
                 : qAt(b, s) + qWidth + kvWidth;
  };
  Tensor presentKey(ElementType::F32, {batch, kvHeads, presentLength, headDim});
  Tensor presentValue(ElementType::F32,
                      {batch, kvHeads, presentLength, headDim});
  Tensor output(ElementType::F32, {batch, seq, qWidth});
  std::vector<float> q(qWidth), scores;
  for (int64_t b = 0; b < batch; ++b) {
    int64_t totalB = seqlens->getAsInt(b) + 1;
    int64_t past = firstPrompt ? 0 : totalB - seq;
    if (past < 0 || past > pastBuffer || past + seq > presentLength)
      return context.error("seqlens_k[" + llvm::Twine(b) +
                           "] = " + llvm::Twine(totalB - 1) +
                           " does not fit the step and the past");
    // The past rows, then the new (rotated) keys and values.
    for (int64_t h = 0; h < kvHeads; ++h)
      for (int64_t t = 0; t < past; ++t)
        for (int64_t d = 0; d < headDim; ++d) {
          int64_t from = ((b * kvHeads + h) * pastBuffer + t) * headDim + d;
          int64_t to = ((b * kvHeads + h) * presentLength + t) * headDim + d;
          presentKey.floats()[to] = pastKey->floats()[from];
          presentValue.floats()[to] = pastValue->floats()[from];
        }
    for (int64_t s = 0; s < seq; ++s) {
      int64_t position = rotaryPosition(b, past, totalB, s);
      if (doRotary && (position < 0 || position >= cosCache->getDim(0)))
        return context.error("position " + llvm::Twine(position) +
                             " is outside the cos/sin caches");
      for (int64_t h = 0; h < kvHeads; ++h) {
        float *k = presentKey.floats().data() +
                   ((b * kvHeads + h) * presentLength + past + s) * headDim;
        float *v = presentValue.floats().data() +
                   ((b * kvHeads + h) * presentLength + past + s) * headDim;
        std::copy_n(kAt(b, s) + h * headDim, headDim, k);
        std::copy_n(vAt(b, s) + h * headDim, headDim, v);
        if (doRotary)
          rotate(k, *cosCache, *sinCache, position, 2 * cosCache->getDim(1),
                 interleaved);
      }
    }
    for (int64_t s = 0; s < seq; ++s) {
      int64_t position = rotaryPosition(b, past, totalB, s);
      int64_t visible = std::min(past + s + 1, presentLength);
      // local_window_size keys end at the query's own (ONNX Runtime's CPU
      // kernel; checked by check_contrib_ops.py).
      int64_t first = window >= 0 ? std::max<int64_t>(0, visible - window) : 0;
      for (int64_t h = 0; h < heads; ++h) {
        std::copy_n(qAt(b, s) + h * headDim, headDim, q.data());
        if (doRotary)
          rotate(q.data(), *cosCache, *sinCache, position,
                 2 * cosCache->getDim(1), interleaved);
        int64_t kvHead = h / (heads / kvHeads);
        const float *keys = presentKey.floats().data() +
                            (b * kvHeads + kvHead) * presentLength * headDim;
        const float *values = presentValue.floats().data() +
                              (b * kvHeads + kvHead) * presentLength * headDim;
        scores.assign(visible - first, 0.0f);
        float maximum = -std::numeric_limits<float>::infinity();
        for (int64_t j = first; j < visible; ++j) {
          float score = scale * dotF32(q.data(), keys + j * headDim, headDim);
          if (softcap > 0.0f)
            score = softcap * std::tanh(score / softcap);
          if (bias)
            score += bias->floats()[((std::min(b, bias->getDim(0) - 1) *
                                          bias->getDim(1) +
                                      std::min(h, bias->getDim(1) - 1)) *
                                         seq +
                                     s) *
                                        bias->getDim(3) +
                                    j];
          scores[j - first] = score;
          maximum = std::max(maximum, score);
        }
        // A sink logit (head_sink, or 0 for smooth_softmax) joins the
        // denominator only.
        std::optional<float> sinkLogit =
            sink     ? std::optional<float>(sink->floats()[h])
            : smooth ? std::optional<float>(0.0f)
                     : std::nullopt;
        if (sinkLogit)
          maximum = std::max(maximum, *sinkLogit);
        float sum = sinkLogit ? std::exp(*sinkLogit - maximum) : 0.0f;
        for (float &score : scores) {
          score = std::exp(score - maximum);
          sum += score;
        }
        float *out =
            output.floats().data() + (b * seq + s) * qWidth + h * headDim;
        for (int64_t j = first; j < visible; ++j)
          for (int64_t d = 0; d < headDim; ++d)
            out[d] += scores[j - first] / sum * values[j * headDim + d];
      }
    }
  }
  Tensor *results[] = {&output, &presentKey, &presentValue};
  for (unsigned i = 0; i < 3; ++i) {
    results[i]->setElementTypeAndRound(context.resultType(i));
    context.setResult(i, std::move(*results[i]));
  }
  if (op->getNumResults() > 3)
    return context.error("the output_qk output is not supported");
  return llvm::Error::success();
}

} // namespace

void onnx::attachOnnxContribKernels(MLIRContext *context) {
  attachKernel<runSimplifiedLayerNormalization,
               sits::onnx::SimplifiedLayerNormalizationOp>(context);
  attachKernel<runSkipSimplifiedLayerNormalization,
               sits::onnx::MsSkipSimplifiedLayerNormalizationOp>(context);
  attachKernel<runMatMulNBits, sits::onnx::MsMatMulNBitsOp>(context);
  attachKernel<runGatherBlockQuantized, sits::onnx::MsGatherBlockQuantizedOp>(
      context);
  attachKernel<runMsRotaryEmbedding, sits::onnx::MsRotaryEmbeddingOp>(context);
  attachKernel<runGroupQueryAttention, sits::onnx::MsGroupQueryAttentionOp>(
      context);
}
