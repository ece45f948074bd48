//===- SitsKernels.cpp - Kernels of the sits ops but attention ------------===//
//
// Each kernel implements its op's description in SitsOps.td literally, in
// f32; the executor rounds the result to its element type afterwards. Shapes
// are checked again at run time because dynamic dimensions pass the
// verifiers.
//
//===----------------------------------------------------------------------===//

#include "compiler/reference/Kernels.h"
#include "compiler/reference/Math.h"

#include "dialects/sits/SitsOps.h"

#include <algorithm>
#include <cmath>

using namespace mlir;
using namespace sits;
using namespace sits::reference;

/// `tensor` must have rank `rank`.
static llvm::Error expectRank(const KernelContext &context, StringRef what,
                              const Tensor &tensor, int64_t rank) {
  if (tensor.getRank() == rank)
    return llvm::Error::success();
  return context.error(what + " has shape " + formatShape(tensor.getShape()) +
                       ", expected rank " + std::to_string(rank));
}

/// `tensor` must be `[size]`.
static llvm::Error expectVector(const KernelContext &context, StringRef what,
                                const Tensor &tensor, int64_t size) {
  if (tensor.getRank() == 1 && tensor.getDim(0) == size)
    return llvm::Error::success();
  return context.error(what + " has shape " + formatShape(tensor.getShape()) +
                       ", expected [" + std::to_string(size) + "]");
}

//===----------------------------------------------------------------------===//
// Embedding, norms, projections
//===----------------------------------------------------------------------===//

static llvm::Error runEmbedding(KernelContext &context) {
  auto op = cast<EmbeddingOp>(context.getOp());
  const Tensor &table = context.tensor(op.getTable());
  const Tensor &ids = context.tensor(op.getIds());
  if (llvm::Error error = expectRank(context, "table", table, 2))
    return error;
  // A rank's part of the vocabulary is the program of more ranks than the
  // one this executor runs, unless it is the whole.
  if (ShardAttr shard = op.getVocabShardAttr();
      shard && shard.getParts() * shard.getReplicas() != 1)
    return context.error(
        "the program is tensor-parallel over " +
        std::to_string(shard.getParts() * shard.getReplicas()) +
        " ranks; the reference executor runs one");
  int64_t rows = table.getDim(0), hidden = table.getDim(1);
  int64_t first = op.getRowOffset();
  int64_t vocab = op.getVocab().value_or(first + rows);
  Shape shape(ids.getShape());
  shape.push_back(hidden);
  Tensor result = context.makeResult(0, shape);
  float scale = op.getScale().convertToFloat();
  for (int64_t i = 0; i < ids.getNumElements(); ++i) {
    int64_t id = ids.ints()[i];
    if (id < 0 || id >= vocab)
      return context.error("token id " + std::to_string(id) + " (element " +
                           std::to_string(i) +
                           " of ids) is outside the vocabulary [0, " +
                           std::to_string(vocab) + ")");
    float *out = result.floats().data() + i * hidden;
    // Another rank's row: zeros, which the ranks' all_reduce adds.
    if (id < first || id >= first + rows) {
      std::fill(out, out + hidden, 0.0f);
      continue;
    }
    const float *row = table.floats().data() + (id - first) * hidden;
    for (int64_t d = 0; d < hidden; ++d)
      out[d] = row[d] * scale;
  }
  context.setResult(0, std::move(result));
  return llvm::Error::success();
}

static llvm::Error runRMSNorm(KernelContext &context) {
  auto op = cast<RMSNormOp>(context.getOp());
  const Tensor &input = context.tensor(op.getInput());
  const Tensor &weight = context.tensor(op.getWeight());
  if (input.getRank() == 0)
    return context.error("input must have rank >= 1");
  int64_t hidden = input.getDim(-1);
  if (llvm::Error error = expectVector(context, "weight", weight, hidden))
    return error;
  float epsilon = op.getEpsilon().convertToFloat();
  float offset = op.getWeightOffset().convertToFloat();
  Tensor result = context.makeResult(0, input.getShape());
  int64_t rows = hidden ? input.getNumElements() / hidden : 0;
  for (int64_t r = 0; r < rows; ++r) {
    const float *x = input.floats().data() + r * hidden;
    float *y = result.floats().data() + r * hidden;
    float meanSquare = dotF32(x, x, hidden) / static_cast<float>(hidden);
    float rms = std::sqrt(meanSquare + epsilon);
    for (int64_t d = 0; d < hidden; ++d)
      y[d] = x[d] / rms * (weight.floats()[d] + offset);
  }
  context.setResult(0, std::move(result));
  return llvm::Error::success();
}

static llvm::Error runLayerNorm(KernelContext &context) {
  auto op = cast<LayerNormOp>(context.getOp());
  const Tensor &input = context.tensor(op.getInput());
  const Tensor &weight = context.tensor(op.getWeight());
  if (input.getRank() == 0)
    return context.error("input must have rank >= 1");
  int64_t hidden = input.getDim(-1);
  if (llvm::Error error = expectVector(context, "weight", weight, hidden))
    return error;
  const Tensor *bias = op.getBias() ? &context.tensor(op.getBias()) : nullptr;
  if (bias)
    if (llvm::Error error = expectVector(context, "bias", *bias, hidden))
      return error;
  float epsilon = op.getEpsilon().convertToFloat();
  Tensor result = context.makeResult(0, input.getShape());
  int64_t rows = hidden ? input.getNumElements() / hidden : 0;
  std::vector<float> centered(hidden);
  for (int64_t r = 0; r < rows; ++r) {
    const float *x = input.floats().data() + r * hidden;
    float *y = result.floats().data() + r * hidden;
    float mean = sumF32(x, hidden) / static_cast<float>(hidden);
    for (int64_t d = 0; d < hidden; ++d)
      centered[d] = x[d] - mean;
    float variance = dotF32(centered.data(), centered.data(), hidden) /
                     static_cast<float>(hidden);
    float deviation = std::sqrt(variance + epsilon);
    for (int64_t d = 0; d < hidden; ++d)
      y[d] = centered[d] / deviation * weight.floats()[d] +
             (bias ? bias->floats()[d] : 0.0f);
  }
  context.setResult(0, std::move(result));
  return llvm::Error::success();
}

/// sits.linear and sits.lm_head: `input [..., K] x weight [N, K] + bias`.
static llvm::Error runProjection(KernelContext &context, Value inputValue,
                                 Value weightValue, Value biasValue) {
  const Tensor &input = context.tensor(inputValue);
  const Tensor &weight = context.tensor(weightValue);
  if (llvm::Error error = expectRank(context, "weight", weight, 2))
    return error;
  int64_t outFeatures = weight.getDim(0), inFeatures = weight.getDim(1);
  if (input.getRank() == 0 || input.getDim(-1) != inFeatures)
    return context.error("input shape " + formatShape(input.getShape()) +
                         " does not end with the weight's in_features (" +
                         std::to_string(inFeatures) + ")");
  const Tensor *bias = biasValue ? &context.tensor(biasValue) : nullptr;
  if (bias)
    if (llvm::Error error = expectVector(context, "bias", *bias, outFeatures))
      return error;
  Shape shape(input.getShape());
  shape.back() = outFeatures;
  Tensor result = context.makeResult(0, shape);
  int64_t rows = numElementsOf(input.getShape().drop_back());
  matmulTransposedB(input.floats().data(), weight.floats().data(),
                    result.floats().data(), rows, outFeatures, inFeatures,
                    context.getNumThreads());
  if (bias)
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t n = 0; n < outFeatures; ++n)
        result.floats()[r * outFeatures + n] += bias->floats()[n];
  context.setResult(0, std::move(result));
  return llvm::Error::success();
}

static llvm::Error runLinear(KernelContext &context) {
  auto op = cast<LinearOp>(context.getOp());
  return runProjection(context, op.getInput(), op.getWeight(), op.getBias());
}

static llvm::Error runLMHead(KernelContext &context) {
  auto op = cast<LMHeadOp>(context.getOp());
  return runProjection(context, op.getInput(), op.getWeight(), op.getBias());
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

static float applyActivation(Activation kind, float x) {
  switch (kind) {
  case Activation::silu:
    return siluF32(x);
  case Activation::gelu:
    return geluErfF32(x);
  case Activation::gelu_tanh:
    return geluTanhF32(x);
  case Activation::relu:
    return x > 0.0f ? x : 0.0f;
  case Activation::sigmoid:
    return sigmoidF32(x);
  }
  return x;
}

static llvm::Error expectSameShape(const KernelContext &context, StringRef a,
                                   const Tensor &lhs, StringRef b,
                                   const Tensor &rhs) {
  if (lhs.getShape() == rhs.getShape())
    return llvm::Error::success();
  return context.error(a + " shape " + formatShape(lhs.getShape()) +
                       " differs from " + b + " shape " +
                       formatShape(rhs.getShape()));
}

static llvm::Error runAdd(KernelContext &context) {
  auto op = cast<AddOp>(context.getOp());
  const Tensor &lhs = context.tensor(op.getLhs());
  const Tensor &rhs = context.tensor(op.getRhs());
  if (llvm::Error error = expectSameShape(context, "lhs", lhs, "rhs", rhs))
    return error;
  Tensor result = context.makeResult(0, lhs.getShape());
  for (int64_t i = 0; i < lhs.getNumElements(); ++i)
    result.floats()[i] = lhs.floats()[i] + rhs.floats()[i];
  context.setResult(0, std::move(result));
  return llvm::Error::success();
}

static llvm::Error runActivation(KernelContext &context) {
  auto op = cast<ActivationOp>(context.getOp());
  const Tensor &input = context.tensor(op.getInput());
  Activation kind = op.getKind();
  Tensor result = context.makeResult(0, input.getShape());
  for (int64_t i = 0; i < input.getNumElements(); ++i)
    result.floats()[i] = applyActivation(kind, input.floats()[i]);
  context.setResult(0, std::move(result));
  return llvm::Error::success();
}

static llvm::Error runGLU(KernelContext &context) {
  auto op = cast<GLUOp>(context.getOp());
  const Tensor &gate = context.tensor(op.getGate());
  const Tensor &up = context.tensor(op.getUp());
  if (llvm::Error error = expectSameShape(context, "gate", gate, "up", up))
    return error;
  Activation kind = op.getKind();
  Tensor result = context.makeResult(0, gate.getShape());
  for (int64_t i = 0; i < gate.getNumElements(); ++i)
    result.floats()[i] =
        applyActivation(kind, gate.floats()[i]) * up.floats()[i];
  context.setResult(0, std::move(result));
  return llvm::Error::success();
}

//===----------------------------------------------------------------------===//
// Heads and positions
//===----------------------------------------------------------------------===//

static llvm::Error runSplitHeads(KernelContext &context) {
  auto op = cast<SplitHeadsOp>(context.getOp());
  const Tensor &input = context.tensor(op.getInput());
  if (llvm::Error error = expectRank(context, "input", input, 3))
    return error;
  int64_t heads = op.getNumHeads();
  int64_t batch = input.getDim(0), seq = input.getDim(1),
          width = input.getDim(2);
  if (width % heads != 0)
    return context.error("input width " + std::to_string(width) +
                         " is not a multiple of num_heads (" +
                         std::to_string(heads) + ")");
  int64_t headDim = width / heads;
  Tensor result = context.makeResult(0, {batch, heads, seq, headDim});
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t s = 0; s < seq; ++s)
        for (int64_t d = 0; d < headDim; ++d)
          result.floats()[((b * heads + h) * seq + s) * headDim + d] =
              input.floats()[(b * seq + s) * width + h * headDim + d];
  context.setResult(0, std::move(result));
  return llvm::Error::success();
}

static llvm::Error runMergeHeads(KernelContext &context) {
  auto op = cast<MergeHeadsOp>(context.getOp());
  const Tensor &input = context.tensor(op.getInput());
  if (llvm::Error error = expectRank(context, "input", input, 4))
    return error;
  int64_t batch = input.getDim(0), heads = input.getDim(1),
          seq = input.getDim(2), headDim = input.getDim(3);
  int64_t width = heads * headDim;
  Tensor result = context.makeResult(0, {batch, seq, width});
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t s = 0; s < seq; ++s)
        for (int64_t d = 0; d < headDim; ++d)
          result.floats()[(b * seq + s) * width + h * headDim + d] =
              input.floats()[((b * heads + h) * seq + s) * headDim + d];
  context.setResult(0, std::move(result));
  return llvm::Error::success();
}

static llvm::Error runPositionIds(KernelContext &context) {
  auto op = cast<PositionIdsOp>(context.getOp());
  const Tensor &ids = context.tensor(op.getIds());
  if (llvm::Error error = expectRank(context, "ids", ids, 2))
    return error;
  int64_t batch = ids.getDim(0), seq = ids.getDim(1);
  const Tensor *past =
      op.getPastLen() ? &context.tensor(op.getPastLen()) : nullptr;
  if (past)
    if (llvm::Error error = expectVector(context, "past_len", *past, batch))
      return error;
  Tensor result = context.makeResult(0, {batch, seq});
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t i = 0; i < seq; ++i)
      result.ints()[b * seq + i] = (past ? past->ints()[b] : 0) + i;
  context.setResult(0, std::move(result));
  return llvm::Error::success();
}

//===----------------------------------------------------------------------===//
// RoPE
//===----------------------------------------------------------------------===//

static llvm::Error runRopeCosSin(KernelContext &context) {
  auto op = cast<RopeCosSinOp>(context.getOp());
  const Tensor &positions = context.tensor(op.getPositions());
  if (llvm::Error error = expectRank(context, "positions", positions, 2))
    return error;
  llvm::Expected<Tensor> invFreq = Tensor::fromAttribute(op.getInvFreq());
  if (!invFreq)
    return context.error("inv_freq: " + llvm::toString(invFreq.takeError()));
  if (!invFreq->isFloat() || invFreq->getRank() != 1)
    return context.error("inv_freq must be a 1-D float tensor");
  int64_t half = invFreq->getDim(0);
  int64_t batch = positions.getDim(0), seq = positions.getDim(1);
  float scaling = op.getAttentionScaling().convertToFloat();
  Tensor cosTable = context.makeResult(0, {batch, seq, half});
  Tensor sinTable = context.makeResult(1, {batch, seq, half});
  for (int64_t p = 0; p < batch * seq; ++p) {
    float position = static_cast<float>(positions.ints()[p]);
    for (int64_t k = 0; k < half; ++k) {
      float angle = position * invFreq->floats()[k];
      cosTable.floats()[p * half + k] = std::cos(angle) * scaling;
      sinTable.floats()[p * half + k] = std::sin(angle) * scaling;
    }
  }
  context.setResult(0, std::move(cosTable));
  context.setResult(1, std::move(sinTable));
  return llvm::Error::success();
}

static llvm::Error runRopeGather(KernelContext &context) {
  auto op = cast<RopeGatherOp>(context.getOp());
  const Tensor &table = context.tensor(op.getTable());
  const Tensor &positions = context.tensor(op.getPositions());
  if (llvm::Error error = expectRank(context, "table", table, 2))
    return error;
  if (llvm::Error error = expectRank(context, "positions", positions, 2))
    return error;
  int64_t maxPositions = table.getDim(0), width = table.getDim(1);
  if (width % 2 != 0)
    return context.error("table width " + std::to_string(width) + " is odd");
  int64_t half = width / 2;
  int64_t batch = positions.getDim(0), seq = positions.getDim(1);
  Tensor cosTable = context.makeResult(0, {batch, seq, half});
  Tensor sinTable = context.makeResult(1, {batch, seq, half});
  for (int64_t p = 0; p < batch * seq; ++p) {
    int64_t position = positions.ints()[p];
    if (position < 0 || position >= maxPositions)
      return context.error("position " + std::to_string(position) +
                           " is outside the RoPE table [0, " +
                           std::to_string(maxPositions) + ")");
    const float *row = table.floats().data() + position * width;
    for (int64_t k = 0; k < half; ++k) {
      cosTable.floats()[p * half + k] = row[k];
      sinTable.floats()[p * half + k] = row[half + k];
    }
  }
  context.setResult(0, std::move(cosTable));
  context.setResult(1, std::move(sinTable));
  return llvm::Error::success();
}

static llvm::Error runRope(KernelContext &context) {
  auto op = cast<RopeOp>(context.getOp());
  const Tensor &input = context.tensor(op.getInput());
  const Tensor &cosTable = context.tensor(op.getCos());
  const Tensor &sinTable = context.tensor(op.getSin());
  if (llvm::Error error = expectRank(context, "input", input, 4))
    return error;
  int64_t batch = input.getDim(0), heads = input.getDim(1),
          seq = input.getDim(2), headDim = input.getDim(3);
  int64_t rotaryDim = op.getRotaryDim();
  if (rotaryDim <= 0 || rotaryDim % 2 != 0 || rotaryDim > headDim)
    return context.error("rotary_dim " + std::to_string(rotaryDim) +
                         " must be even, > 0 and at most the head dimension " +
                         std::to_string(headDim));
  int64_t half = rotaryDim / 2;
  for (const Tensor *table : {&cosTable, &sinTable}) {
    bool ok = table->getRank() == 3 &&
              (table->getDim(0) == 1 || table->getDim(0) == batch) &&
              table->getDim(1) == seq && table->getDim(2) == half;
    if (!ok)
      return context.error("cos/sin shape " + formatShape(table->getShape()) +
                           " must be [1 or " + std::to_string(batch) + ", " +
                           std::to_string(seq) + ", " + std::to_string(half) +
                           "]");
  }
  bool interleaved = op.getStyle() == RopeStyle::interleaved;
  Tensor result = context.makeResult(0, input.getShape());
  for (int64_t b = 0; b < batch; ++b) {
    int64_t tableBatch = cosTable.getDim(0) == 1 ? 0 : b;
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t s = 0; s < seq; ++s) {
        int64_t base = ((b * heads + h) * seq + s) * headDim;
        const float *x = input.floats().data() + base;
        float *y = result.floats().data() + base;
        const float *c =
            cosTable.floats().data() + (tableBatch * seq + s) * half;
        const float *n =
            sinTable.floats().data() + (tableBatch * seq + s) * half;
        for (int64_t k = 0; k < half; ++k) {
          int64_t first = interleaved ? 2 * k : k;
          int64_t second = interleaved ? 2 * k + 1 : k + half;
          y[first] = x[first] * c[k] - x[second] * n[k];
          y[second] = x[second] * c[k] + x[first] * n[k];
        }
        for (int64_t d = rotaryDim; d < headDim; ++d)
          y[d] = x[d];
      }
  }
  context.setResult(0, std::move(result));
  return llvm::Error::success();
}

void sits::reference::attachSitsKernels(MLIRContext *context) {
  attachKernel<runEmbedding, EmbeddingOp>(context);
  attachKernel<runRMSNorm, RMSNormOp>(context);
  attachKernel<runLayerNorm, LayerNormOp>(context);
  attachKernel<runLinear, LinearOp>(context);
  attachKernel<runLMHead, LMHeadOp>(context);
  attachKernel<runAdd, AddOp>(context);
  attachKernel<runActivation, ActivationOp>(context);
  attachKernel<runGLU, GLUOp>(context);
  attachKernel<runSplitHeads, SplitHeadsOp>(context);
  attachKernel<runMergeHeads, MergeHeadsOp>(context);
  attachKernel<runPositionIds, PositionIdsOp>(context);
  attachKernel<runRopeCosSin, RopeCosSinOp>(context);
  attachKernel<runRopeGather, RopeGatherOp>(context);
  attachKernel<runRope, RopeOp>(context);
}
