//===- OnnxNNKernels.cpp - MatMul, norms and RoPE onnx ops ----------------===//

#include "compiler/reference/Math.h"
#include "compiler/reference/OnnxSupport.h"

#include "dialects/onnx/OnnxOps.h"

#include <cmath>

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
  int64_t stashType = intAttr(context.getOp(), "stash_type", 1);
  if (stashType != 1)
    return context.error("stash_type " + std::to_string(stashType) +
                         " is not supported (1: float, as onnx.reference)");
  float epsilon = floatAttr(context.getOp(), "epsilon", 1e-5f);
  ElementType type = context.resultType(0);
  Tensor result = context.makeResult(0, x.getShape());
  for (int64_t r = 0; r < rows; ++r) {
    const float *row = x.floats().data() + r * width;
    float meanSquare = dotF32(row, row, width) / static_cast<float>(width);
    // As the ONNX function body: X / Sqrt(mean + epsilon) in float, cast to
    // the input type, times scale.
    float rms = std::sqrt(meanSquare + epsilon);
    for (int64_t i = 0; i < width; ++i)
      result.floats()[r * width + i] =
          roundToFloatType(row[i] / rms, type) * scale.floats()[scaleIndex[i]];
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
  if (cacheWidth != half)
    return context.error("the caches hold " + std::to_string(cacheWidth) +
                         " values per position, not rotary_embedding_dim / "
                         "2 = " +
                         std::to_string(half));
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

void onnx::attachOnnxNNKernels(MLIRContext *context) {
  attachKernel<runMatMul, sits::onnx::MatMulOp>(context);
  attachKernel<runGemm, sits::onnx::GemmOp>(context);
  attachKernel<runLayerNormalization, sits::onnx::LayerNormalizationOp>(
      context);
  attachKernel<runRMSNormalization, sits::onnx::RMSNormalizationOp>(context);
  attachKernel<runRotaryEmbedding, sits::onnx::RotaryEmbeddingOp>(context);
}
