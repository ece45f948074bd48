//===- AttentionKernels.cpp - sits.attention and the KV-cache ops ---------===//

#include "compiler/reference/Kernels.h"
#include "compiler/reference/Math.h"

#include "dialects/sits/SitsOps.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace sits;
using namespace sits::reference;

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

namespace {
/// The attention's parameters and operands, checked against each other.
struct AttentionProblem {
  const Tensor *query, *key, *value, *mask = nullptr, *pastLen = nullptr;
  /// The cold part of a quantized cache (null without one).
  const Tensor *coldKey = nullptr, *coldValue = nullptr;
  int64_t hotWindow = 0, coldKeyBlock = 1;
  int64_t batch, heads, kvHeads, seqQ, seqK, headDim, valueDim;
  llvm::SmallVector<int64_t, 6> maskStrides;
  float scale;
  CausalMode causal;
  std::optional<int64_t> window;
  std::optional<float> softcap;
};
} // namespace

static llvm::Expected<AttentionProblem> checkAttention(KernelContext &context,
                                                       AttentionOp op) {
  AttentionProblem p;
  p.query = &context.tensor(op.getQuery());
  p.key = &context.tensor(op.getKey());
  p.value = &context.tensor(op.getValue());
  for (auto [name, tensor] :
       {std::pair{"query", p.query}, {"key", p.key}, {"value", p.value}})
    if (tensor->getRank() != 4)
      return context.error(llvm::Twine(name) + " has shape " +
                           formatShape(tensor->getShape()) +
                           ", expected rank 4");
  p.batch = p.query->getDim(0);
  p.heads = p.query->getDim(1);
  p.seqQ = p.query->getDim(2);
  p.headDim = p.query->getDim(3);
  p.kvHeads = p.key->getDim(1);
  p.seqK = p.key->getDim(2);
  p.valueDim = p.value->getDim(3);
  if (p.heads != op.getNumHeads() || p.kvHeads != op.getNumKvHeads() ||
      p.kvHeads <= 0 || p.heads % p.kvHeads != 0)
    return context.error("query/key heads " + std::to_string(p.heads) + "/" +
                         std::to_string(p.kvHeads) +
                         " do not match num_heads/num_kv_heads " +
                         std::to_string(op.getNumHeads()) + "/" +
                         std::to_string(op.getNumKvHeads()));
  bool keyOk = p.key->getDim(0) == p.batch && p.key->getDim(3) == p.headDim;
  bool valueOk = p.value->getDim(0) == p.batch &&
                 p.value->getDim(1) == p.kvHeads &&
                 p.value->getDim(2) == p.seqK;
  if (!keyOk || !valueOk)
    return context.error("query " + formatShape(p.query->getShape()) +
                         ", key " + formatShape(p.key->getShape()) +
                         " and value " + formatShape(p.value->getShape()) +
                         " do not fit together");
  if (Value mask = op.getMask()) {
    p.mask = &context.tensor(mask);
    std::optional<llvm::SmallVector<int64_t, 6>> strides = broadcastStrides(
        p.mask->getShape(), {p.batch, p.heads, p.seqQ, p.seqK});
    if (!strides)
      return context.error("mask shape " + formatShape(p.mask->getShape()) +
                           " does not broadcast to " +
                           formatShape({p.batch, p.heads, p.seqQ, p.seqK}));
    p.maskStrides = *strides;
  }
  if (Value past = op.getPastLen()) {
    p.pastLen = &context.tensor(past);
    if (p.pastLen->getRank() != 1 || p.pastLen->getDim(0) != p.batch)
      return context.error("past_len has shape " +
                           formatShape(p.pastLen->getShape()) + ", expected [" +
                           std::to_string(p.batch) + "]");
  }
  if (Value coldKey = op.getColdKey()) {
    p.coldKey = &context.tensor(coldKey);
    p.coldValue = &context.tensor(op.getColdValue());
    if (p.coldKey->getShape() != p.key->getShape() ||
        p.coldValue->getShape() != p.value->getShape())
      return context.error("cold key " + formatShape(p.coldKey->getShape()) +
                           " and cold value " +
                           formatShape(p.coldValue->getShape()) +
                           " must have the key's and value's shapes");
    p.hotWindow = static_cast<int64_t>(op.getHotWindow().value_or(0));
    p.coldKeyBlock = op.getColdKeyBlock();
    if (p.hotWindow < 1 || p.coldKeyBlock < 1)
      return context.error("hot_window and cold_key_block must be >= 1");
  }
  p.scale = op.getScale().convertToFloat();
  p.causal = op.getCausal();
  if (std::optional<uint64_t> window = op.getWindow())
    p.window = static_cast<int64_t>(*window);
  if (std::optional<APFloat> softcap = op.getSoftcap())
    p.softcap = softcap->convertToFloat();
  return p;
}

static llvm::Error runAttention(KernelContext &context) {
  auto op = cast<AttentionOp>(context.getOp());
  llvm::Expected<AttentionProblem> checked = checkAttention(context, op);
  if (!checked)
    return checked.takeError();
  const AttentionProblem &p = *checked;
  Tensor result = context.makeResult(0, {p.batch, p.heads, p.seqQ, p.valueDim});
  int64_t group = p.heads / p.kvHeads;
  std::vector<float> scores(p.seqK);
  std::vector<char> visible(p.seqK);
  std::vector<float> accumulator(p.valueDim);
  const float kNegInf = -std::numeric_limits<float>::infinity();

  for (int64_t b = 0; b < p.batch; ++b) {
    int64_t offset = p.pastLen ? p.pastLen->ints()[b] : p.seqK - p.seqQ;
    int64_t bound = offset + p.seqQ;
    if (p.pastLen && (offset < 0 || bound > p.seqK))
      return context.error(
          "past_len " + std::to_string(offset) + " + " +
          std::to_string(p.seqQ) + " queries exceeds the key length " +
          std::to_string(p.seqK) + " (batch " + std::to_string(b) + ")");
    for (int64_t h = 0; h < p.heads; ++h) {
      int64_t kvHead = h / group;
      const float *keys = p.key->floats().data() +
                          (b * p.kvHeads + kvHead) * p.seqK * p.headDim;
      const float *values = p.value->floats().data() +
                            (b * p.kvHeads + kvHead) * p.seqK * p.valueDim;
      const float *coldKeys =
          p.coldKey ? p.coldKey->floats().data() +
                          (b * p.kvHeads + kvHead) * p.seqK * p.headDim
                    : nullptr;
      const float *coldValues =
          p.coldValue ? p.coldValue->floats().data() +
                            (b * p.kvHeads + kvHead) * p.seqK * p.valueDim
                      : nullptr;
      for (int64_t i = 0; i < p.seqQ; ++i) {
        const float *q = p.query->floats().data() +
                         ((b * p.heads + h) * p.seqQ + i) * p.headDim;
        float *out = result.floats().data() +
                     ((b * p.heads + h) * p.seqQ + i) * p.valueDim;
        // The visible keys are a range [begin, end) before the mask.
        int64_t end = std::min(bound, p.seqK);
        if (p.causal == CausalMode::bottom_right)
          end = std::min(end, i + offset + 1);
        else if (p.causal == CausalMode::top_left)
          end = std::min(end, i + 1);
        int64_t begin =
            p.window ? std::max<int64_t>(0, i + offset - *p.window + 1) : 0;
        float maxScore = kNegInf;
        bool any = false, sawNaN = false;
        for (int64_t j = begin; j < end; ++j) {
          visible[j] = 1;
          float maskValue = 0.0f;
          if (p.mask) {
            int64_t index = b * p.maskStrides[0] + h * p.maskStrides[1] +
                            i * p.maskStrides[2] + j * p.maskStrides[3];
            if (!p.mask->isFloat()) {
              if (!p.mask->ints()[index]) {
                visible[j] = 0;
                continue;
              }
            } else {
              maskValue = p.mask->floats()[index];
            }
          }
          // Query position offset + i reads key j cold once j's block has
          // left the hot window.
          int64_t position = offset + i;
          bool coldKey =
              coldKeys && position - ((j / p.coldKeyBlock) * p.coldKeyBlock +
                                      p.coldKeyBlock - 1) >=
                              p.hotWindow;
          const float *keyRow = (coldKey ? coldKeys : keys) + j * p.headDim;
          float score = p.scale * dotF32(q, keyRow, p.headDim);
          if (p.softcap)
            score = *p.softcap * std::tanh(score / *p.softcap);
          score += maskValue;
          scores[j] = score;
          any = true;
          sawNaN |= std::isnan(score);
          maxScore = std::max(maxScore, score);
        }
        if (sawNaN) {
          std::fill(out, out + p.valueDim, std::nanf(""));
          continue;
        }
        std::fill(accumulator.begin(), accumulator.end(), 0.0f);
        // No visible key (or every float mask entry -inf): zeros.
        if (!any || maxScore == kNegInf) {
          std::copy(accumulator.begin(), accumulator.end(), out);
          continue;
        }
        float sum = 0.0f;
        for (int64_t j = begin; j < end; ++j)
          if (visible[j]) {
            scores[j] = std::exp(scores[j] - maxScore);
            sum += scores[j];
          }
        for (int64_t j = begin; j < end; ++j) {
          if (!visible[j])
            continue;
          float weight = scores[j] / sum;
          bool coldValue = coldValues && offset + i - j >= p.hotWindow;
          const float *v = (coldValue ? coldValues : values) + j * p.valueDim;
          for (int64_t d = 0; d < p.valueDim; ++d)
            accumulator[d] += weight * v[d];
        }
        std::copy(accumulator.begin(), accumulator.end(), out);
      }
    }
  }
  context.setResult(0, std::move(result));
  return llvm::Error::success();
}

//===----------------------------------------------------------------------===//
// KV cache
//===----------------------------------------------------------------------===//

static std::shared_ptr<KVCacheState> cacheOf(KernelContext &context,
                                             Value value) {
  return context.value(value).getKVCache();
}

/// Binds the cache's runtime batch from what the op knows: the batch already
/// bound, else the static batch of `resultType`, else the step's batch.
static llvm::Error resolveBatch(KernelContext &context, KVCacheState &cache,
                                Type resultType) {
  if (cache.getBatch() >= 0)
    return llvm::Error::success();
  int64_t batch = cast<RankedTensorType>(resultType).getDimSize(0);
  if (ShapedType::isDynamic(batch)) {
    if (!context.getStepBatch())
      return context.error(
          "the cache's runtime batch is unknown: nothing has been appended, "
          "the result's batch is dynamic, and the function has no [batch, "
          "seq] token-id argument");
    batch = *context.getStepBatch();
  }
  if (llvm::Error error = cache.bindBatch(batch))
    return context.error(llvm::toString(std::move(error)));
  return llvm::Error::success();
}

static llvm::Error runKVCacheInit(KernelContext &context) {
  auto op = cast<KVCacheInitOp>(context.getOp());
  llvm::Expected<KVCacheConfig> config =
      KVCacheConfig::fromType(op.getResult().getType());
  if (!config)
    return context.error(llvm::toString(config.takeError()));
  context.setResult(0, std::make_shared<KVCacheState>(*config));
  return llvm::Error::success();
}

static llvm::Error runKVLength(KernelContext &context) {
  auto op = cast<KVLengthOp>(context.getOp());
  std::shared_ptr<KVCacheState> cache = cacheOf(context, op.getCache());
  if (llvm::Error error =
          resolveBatch(context, *cache, op.getResult().getType()))
    return error;
  llvm::ArrayRef<int64_t> lengths = cache->getLengths();
  Tensor result = context.makeResult(0, {cache->getBatch()});
  std::copy(lengths.begin(), lengths.end(), result.ints().begin());
  context.setResult(0, std::move(result));
  return llvm::Error::success();
}

static llvm::Error runKVAppend(KernelContext &context) {
  auto op = cast<KVAppendOp>(context.getOp());
  std::shared_ptr<KVCacheState> cache = cacheOf(context, op.getCache());
  const Tensor &pastLen = context.tensor(op.getPastLen());
  if (pastLen.getRank() != 1)
    return context.error("past_len has shape " +
                         formatShape(pastLen.getShape()) + ", expected rank 1");
  if (llvm::Error error =
          cache->append(op.getLayer(), context.tensor(op.getKey()),
                        context.tensor(op.getValue()), pastLen.ints()))
    return context.error(llvm::toString(std::move(error)));
  context.setResult(0, cache);
  return llvm::Error::success();
}

static llvm::Error runKVRead(KernelContext &context) {
  auto op = cast<KVReadOp>(context.getOp());
  std::shared_ptr<KVCacheState> cache = cacheOf(context, op.getCache());
  if (llvm::Error error = resolveBatch(context, *cache, op.getKey().getType()))
    return error;
  context.setResult(0, cache->readKeys(op.getLayer(), context.resultType(0)));
  context.setResult(1, cache->readValues(op.getLayer(), context.resultType(1)));
  return llvm::Error::success();
}

static llvm::Error runKVAdvance(KernelContext &context) {
  auto op = cast<KVAdvanceOp>(context.getOp());
  std::shared_ptr<KVCacheState> cache = cacheOf(context, op.getCache());
  const Tensor &ids = context.tensor(op.getIds());
  if (ids.getRank() != 2)
    return context.error("ids has shape " + formatShape(ids.getShape()) +
                         ", expected [batch, seq]");
  if (llvm::Error error = cache->advance(ids.getDim(0), ids.getDim(1)))
    return context.error(llvm::toString(std::move(error)));
  context.setResult(0, cache);
  return llvm::Error::success();
}

void sits::reference::attachAttentionKernels(MLIRContext *context) {
  attachKernel<runAttention, AttentionOp>(context);
  attachKernel<runKVCacheInit, KVCacheInitOp>(context);
  attachKernel<runKVLength, KVLengthOp>(context);
  attachKernel<runKVAppend, KVAppendOp>(context);
  attachKernel<runKVRead, KVReadOp>(context);
  attachKernel<runKVAdvance, KVAdvanceOp>(context);
}
