//===- SitsOps.cpp - Verifiers and folders of the sits ops ----------------===//
//
// Verifiers say exactly which operand, dimension or attribute is wrong and
// what was expected, so that a bad program points at its cause.
//
//===----------------------------------------------------------------------===//

#include "dialects/sits/SitsOps.h"
#include "dialects/sits/QuantMath.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace sits;

//===----------------------------------------------------------------------===//
// Verification helpers
//===----------------------------------------------------------------------===//

namespace {
/// Checks ranks, dimensions and element types of one op, reporting the first
/// mismatch with the names of the values involved. Dynamic dimensions match
/// anything.
class ShapeChecker {
public:
  explicit ShapeChecker(Operation *op) : op(op) {}

  LogicalResult rank(StringRef what, Value value, int64_t expected) {
    auto type = cast<RankedTensorType>(value.getType());
    if (type.getRank() == expected)
      return success();
    return op->emitOpError() << what << " must have rank " << expected
                             << ", got " << type;
  }

  /// `what`'s dimension `index` must equal `expected` (`what2`).
  LogicalResult dim(StringRef what, Value value, int64_t index,
                    int64_t expected, const llvm::Twine &expectedWhat) {
    if (index < 0)
      index += cast<RankedTensorType>(value.getType()).getRank();
    int64_t actual = dimOf(value, index);
    if (ShapedType::isDynamic(actual) || ShapedType::isDynamic(expected) ||
        actual == expected)
      return success();
    return op->emitOpError()
           << what << " dimension " << index << " is " << actual
           << ", but must equal " << expectedWhat << " (" << expected << ")";
  }

  LogicalResult sameElementType(StringRef what, Value value,
                                StringRef otherWhat, Value other) {
    Type a = getElementTypeOrSelf(value.getType());
    Type b = getElementTypeOrSelf(other.getType());
    if (a == b)
      return success();
    return op->emitOpError() << what << " element type " << a
                             << " must match " << otherWhat
                             << " element type " << b;
  }

  static int64_t dimOf(Value value, int64_t index) {
    auto type = cast<RankedTensorType>(value.getType());
    if (index < 0)
      index += type.getRank();
    return type.getDimSize(index);
  }

private:
  Operation *op;
};
} // namespace

/// Checks that `result` keeps every leading dimension of `input` (all but the
/// last) and has the same rank.
static LogicalResult verifyLeadingDims(ShapeChecker &check, Value input,
                                       Value result, StringRef inputName) {
  auto inputType = cast<RankedTensorType>(input.getType());
  if (failed(check.rank("result", result, inputType.getRank())))
    return failure();
  for (int64_t i = 0; i + 1 < inputType.getRank(); ++i)
    if (failed(check.dim("result", result, i, inputType.getDimSize(i),
                         inputName + " dimension " + llvm::Twine(i))))
      return failure();
  return success();
}

//===----------------------------------------------------------------------===//
// WeightOp
//===----------------------------------------------------------------------===//

OpFoldResult WeightOp::fold(FoldAdaptor) { return getValue(); }

LogicalResult WeightOp::verify() {
  if (getName().empty())
    return emitOpError() << "needs a non-empty name";
  return success();
}

void WeightOp::getAsmResultNames(OpAsmSetValueNameFn setNameFn) {
  // Name the SSA value after the parameter, keeping only characters that SSA
  // names allow, so that dumps read `%layers.0.self_attn.q_proj.weight`.
  std::string name;
  for (char c : getName())
    name += (llvm::isAlnum(c) || c == '.' || c == '_') ? c : '_';
  setNameFn(getResult(), name);
}

//===----------------------------------------------------------------------===//
// EmbeddingOp
//===----------------------------------------------------------------------===//

LogicalResult EmbeddingOp::verify() {
  ShapeChecker check(*this);
  auto idsType = getIds().getType();
  if (failed(check.rank("table", getTable(), 2)) ||
      failed(check.rank("result", getResult(), idsType.getRank() + 1)) ||
      failed(check.sameElementType("result", getResult(), "table",
                                   getTable())))
    return failure();
  for (int64_t i = 0; i < idsType.getRank(); ++i)
    if (failed(check.dim("result", getResult(), i, idsType.getDimSize(i),
                         "ids dimension " + llvm::Twine(i))))
      return failure();
  if (failed(check.dim("result", getResult(), -1,
                       ShapeChecker::dimOf(getTable(), 1),
                       "the table's hidden size")))
    return failure();
  return verifyVocabularyPart();
}

//===----------------------------------------------------------------------===//
// Norms
//===----------------------------------------------------------------------===//

/// A norm's weight (or bias) is `[hidden]`, with `hidden` the input's last
/// dimension, and its result has the input's shape.
static LogicalResult verifyNorm(Operation *op, Value input, Value weight,
                                Value bias, Value result, float epsilon) {
  ShapeChecker check(op);
  int64_t hidden = ShapeChecker::dimOf(input, -1);
  if (failed(check.rank("weight", weight, 1)) ||
      failed(check.dim("weight", weight, 0, hidden,
                       "the input's last dimension")))
    return failure();
  if (bias && (failed(check.rank("bias", bias, 1)) ||
               failed(check.dim("bias", bias, 0, hidden,
                                "the input's last dimension"))))
    return failure();
  if (failed(verifyLeadingDims(check, input, result, "input")) ||
      failed(check.dim("result", result, -1, hidden, "the input's last "
                                                      "dimension")) ||
      failed(check.sameElementType("result", result, "input", input)))
    return failure();
  if (!(epsilon >= 0.0f))
    return op->emitOpError() << "epsilon must be >= 0, got " << epsilon;
  return success();
}

LogicalResult RMSNormOp::verify() {
  return verifyNorm(*this, getInput(), getWeight(), Value(), getResult(),
                    getEpsilon().convertToFloat());
}

LogicalResult LayerNormOp::verify() {
  return verifyNorm(*this, getInput(), getWeight(), getBias(), getResult(),
                    getEpsilon().convertToFloat());
}

//===----------------------------------------------------------------------===//
// Linear layers
//===----------------------------------------------------------------------===//

/// `input [..., K] x weight [N, K] (+ bias [N]) -> [..., N]`.
static LogicalResult verifyProjection(Operation *op, Value input, Value weight,
                                      Value bias, Value result) {
  ShapeChecker check(op);
  if (failed(check.rank("weight", weight, 2)) ||
      failed(check.dim("input", input, -1, ShapeChecker::dimOf(weight, 1),
                       "the weight's in_features (dimension 1)")) ||
      failed(verifyLeadingDims(check, input, result, "input")) ||
      failed(check.dim("result", result, -1, ShapeChecker::dimOf(weight, 0),
                       "the weight's out_features (dimension 0)")) ||
      failed(check.sameElementType("weight", weight, "input", input)) ||
      failed(check.sameElementType("result", result, "input", input)))
    return failure();
  if (bias && (failed(check.rank("bias", bias, 1)) ||
               failed(check.dim("bias", bias, 0, ShapeChecker::dimOf(weight, 0),
                                "the weight's out_features"))))
    return failure();
  return success();
}

LogicalResult LinearOp::verify() {
  return verifyProjection(*this, getInput(), getWeight(), getBias(),
                          getResult());
}

LogicalResult LMHeadOp::verify() {
  return verifyProjection(*this, getInput(), getWeight(), getBias(),
                          getResult());
}

//===----------------------------------------------------------------------===//
// Heads and positions
//===----------------------------------------------------------------------===//

LogicalResult SplitHeadsOp::verify() {
  ShapeChecker check(*this);
  int64_t heads = getNumHeads();
  if (heads <= 0)
    return emitOpError() << "num_heads must be > 0, got " << heads;
  if (failed(check.rank("input", getInput(), 3)) ||
      failed(check.rank("result", getResult(), 4)) ||
      failed(check.sameElementType("result", getResult(), "input",
                                   getInput())))
    return failure();
  int64_t width = ShapeChecker::dimOf(getInput(), 2);
  if (!ShapedType::isDynamic(width) && width % heads != 0)
    return emitOpError() << "input width " << width
                         << " is not a multiple of num_heads (" << heads << ")";
  int64_t headDim = ShapedType::isDynamic(width) ? width : width / heads;
  if (failed(check.dim("result", getResult(), 0,
                       ShapeChecker::dimOf(getInput(), 0), "the batch size")) ||
      failed(check.dim("result", getResult(), 1, heads, "num_heads")) ||
      failed(check.dim("result", getResult(), 2,
                       ShapeChecker::dimOf(getInput(), 1),
                       "the sequence length")) ||
      failed(check.dim("result", getResult(), 3, headDim,
                       "input width / num_heads")))
    return failure();
  return success();
}

LogicalResult MergeHeadsOp::verify() {
  ShapeChecker check(*this);
  if (failed(check.rank("input", getInput(), 4)) ||
      failed(check.rank("result", getResult(), 3)) ||
      failed(check.sameElementType("result", getResult(), "input",
                                   getInput())))
    return failure();
  int64_t heads = ShapeChecker::dimOf(getInput(), 1);
  int64_t headDim = ShapeChecker::dimOf(getInput(), 3);
  int64_t width = ShapedType::isDynamic(heads) || ShapedType::isDynamic(headDim)
                      ? ShapedType::kDynamic
                      : heads * headDim;
  if (failed(check.dim("result", getResult(), 0,
                       ShapeChecker::dimOf(getInput(), 0), "the batch size")) ||
      failed(check.dim("result", getResult(), 1,
                       ShapeChecker::dimOf(getInput(), 2),
                       "the sequence length")) ||
      failed(check.dim("result", getResult(), 2, width,
                       "heads * head_dim")))
    return failure();
  return success();
}

LogicalResult PositionIdsOp::verify() {
  ShapeChecker check(*this);
  if (failed(check.rank("ids", getIds(), 2)) ||
      failed(check.rank("result", getResult(), 2)) ||
      failed(check.dim("result", getResult(), 0,
                       ShapeChecker::dimOf(getIds(), 0), "the batch size")) ||
      failed(check.dim("result", getResult(), 1,
                       ShapeChecker::dimOf(getIds(), 1),
                       "the sequence length")))
    return failure();
  if (Value past = getPastLen())
    if (failed(check.rank("past_len", past, 1)) ||
        failed(check.dim("past_len", past, 0, ShapeChecker::dimOf(getIds(), 0),
                         "the batch size")))
      return failure();
  return success();
}

//===----------------------------------------------------------------------===//
// RoPE
//===----------------------------------------------------------------------===//

/// cos and sin are `[batch, seq, half]` tensors of one type, with positions
/// `[batch, seq]`.
static LogicalResult verifyCosSin(ShapeChecker &check, Operation *op,
                                  Value positions, Value cos, Value sin,
                                  int64_t half, StringRef halfWhat) {
  if (failed(check.rank("positions", positions, 2)) ||
      failed(check.rank("cos", cos, 3)))
    return failure();
  if (cos.getType() != sin.getType())
    return op->emitOpError() << "cos type " << cos.getType()
                             << " and sin type " << sin.getType()
                             << " must match";
  if (failed(check.dim("cos", cos, 0, ShapeChecker::dimOf(positions, 0),
                       "the positions' batch size")) ||
      failed(check.dim("cos", cos, 1, ShapeChecker::dimOf(positions, 1),
                       "the positions' sequence length")) ||
      failed(check.dim("cos", cos, 2, half, halfWhat)))
    return failure();
  return success();
}

LogicalResult RopeCosSinOp::verify() {
  ShapeChecker check(*this);
  auto freqType = dyn_cast<RankedTensorType>(getInvFreq().getType());
  if (!freqType || freqType.getRank() != 1 ||
      !isa<FloatType>(freqType.getElementType()))
    return emitOpError() << "inv_freq must be a 1-D float tensor, got "
                         << getInvFreq().getType();
  return verifyCosSin(check, *this, getPositions(), getCos(), getSin(),
                      freqType.getDimSize(0), "the number of inv_freq values");
}

LogicalResult RopeGatherOp::verify() {
  ShapeChecker check(*this);
  if (failed(check.rank("table", getTable(), 2)))
    return failure();
  int64_t width = ShapeChecker::dimOf(getTable(), 1);
  if (!ShapedType::isDynamic(width) && width % 2 != 0)
    return emitOpError() << "table width " << width
                         << " must be even (cos and sin halves)";
  if (failed(check.sameElementType("cos", getCos(), "table", getTable())))
    return failure();
  return verifyCosSin(check, *this, getPositions(), getCos(), getSin(),
                      ShapedType::isDynamic(width) ? width : width / 2,
                      "half the table width");
}

LogicalResult RopeOp::verify() {
  ShapeChecker check(*this);
  if (failed(check.rank("input", getInput(), 4)) ||
      failed(check.rank("cos", getCos(), 3)))
    return failure();
  if (getCos().getType() != getSin().getType())
    return emitOpError() << "cos type " << getCos().getType()
                         << " and sin type " << getSin().getType()
                         << " must match";
  int64_t rotaryDim = getRotaryDim();
  int64_t headDim = ShapeChecker::dimOf(getInput(), 3);
  if (rotaryDim <= 0 || rotaryDim % 2 != 0)
    return emitOpError() << "rotary_dim must be even and > 0, got "
                         << rotaryDim;
  if (!ShapedType::isDynamic(headDim) && rotaryDim > headDim)
    return emitOpError() << "rotary_dim " << rotaryDim
                         << " exceeds the head dimension " << headDim;
  int64_t cosBatch = ShapeChecker::dimOf(getCos(), 0);
  if (cosBatch != 1 &&
      failed(check.dim("cos", getCos(), 0, ShapeChecker::dimOf(getInput(), 0),
                       "1 or the input's batch size")))
    return failure();
  if (failed(check.dim("cos", getCos(), 1, ShapeChecker::dimOf(getInput(), 2),
                       "the input's sequence length (dimension 2)")) ||
      failed(check.dim("cos", getCos(), 2, rotaryDim / 2, "rotary_dim / 2")))
    return failure();
  if (getResult().getType() != getInput().getType())
    return emitOpError() << "result type " << getResult().getType()
                         << " must match the input type "
                         << getInput().getType();
  return success();
}

//===----------------------------------------------------------------------===//
// AttentionOp
//===----------------------------------------------------------------------===//

LogicalResult AttentionOp::verify() {
  ShapeChecker check(*this);
  int64_t heads = getNumHeads(), kvHeads = getNumKvHeads();
  if (heads <= 0 || kvHeads <= 0)
    return emitOpError() << "num_heads (" << heads << ") and num_kv_heads ("
                         << kvHeads << ") must be > 0";
  if (heads % kvHeads != 0)
    return emitOpError() << "num_heads (" << heads
                         << ") must be a multiple of num_kv_heads (" << kvHeads
                         << ")";
  Value q = getQuery(), k = getKey(), v = getValue(), out = getResult();
  if (failed(check.rank("query", q, 4)) || failed(check.rank("key", k, 4)) ||
      failed(check.rank("value", v, 4)) || failed(check.rank("result", out, 4)))
    return failure();
  if (failed(check.dim("query", q, 1, heads, "num_heads")) ||
      failed(check.dim("key", k, 1, kvHeads, "num_kv_heads")) ||
      failed(check.dim("value", v, 1, kvHeads, "num_kv_heads")) ||
      failed(check.dim("key", k, 0, ShapeChecker::dimOf(q, 0),
                       "the query's batch size")) ||
      failed(check.dim("value", v, 0, ShapeChecker::dimOf(q, 0),
                       "the query's batch size")) ||
      failed(check.dim("key", k, 3, ShapeChecker::dimOf(q, 3),
                       "the query's head_dim")) ||
      failed(check.dim("value", v, 2, ShapeChecker::dimOf(k, 2),
                       "the key's sequence length")))
    return failure();
  if (failed(check.dim("result", out, 0, ShapeChecker::dimOf(q, 0),
                       "the query's batch size")) ||
      failed(check.dim("result", out, 1, heads, "num_heads")) ||
      failed(check.dim("result", out, 2, ShapeChecker::dimOf(q, 2),
                       "the query's sequence length")) ||
      failed(check.dim("result", out, 3, ShapeChecker::dimOf(v, 3),
                       "the value's head_dim")) ||
      failed(check.sameElementType("key", k, "query", q)) ||
      failed(check.sameElementType("value", v, "query", q)) ||
      failed(check.sameElementType("result", out, "query", q)))
    return failure();

  float scale = getScale().convertToFloat();
  if (!std::isfinite(scale) || scale <= 0.0f)
    return emitOpError() << "scale must be finite and > 0, got " << scale;
  if (std::optional<uint64_t> window = getWindow(); window && *window == 0)
    return emitOpError() << "window must be > 0";
  if (std::optional<APFloat> softcap = getSoftcap();
      softcap && !(softcap->convertToFloat() > 0.0f))
    return emitOpError() << "softcap must be > 0";

  if (Value mask = getMask()) {
    auto maskType = cast<RankedTensorType>(mask.getType());
    Type element = maskType.getElementType();
    if (!element.isInteger(1) && !isa<FloatType>(element))
      return emitOpError() << "mask must be i1 (true = visible) or float "
                              "(added to the scores), got "
                           << maskType;
    if (maskType.getRank() > 4)
      return emitOpError() << "mask rank must be at most 4, got "
                           << maskType.getRank();
    // Broadcast from the right against [batch, num_heads, seq_q, seq_k].
    int64_t full[4] = {ShapeChecker::dimOf(q, 0), heads,
                       ShapeChecker::dimOf(q, 2), ShapeChecker::dimOf(k, 2)};
    for (int64_t i = 0; i < maskType.getRank(); ++i) {
      int64_t dim = maskType.getDimSize(maskType.getRank() - 1 - i);
      int64_t expected = full[3 - i];
      if (dim == 1 || ShapedType::isDynamic(dim) ||
          ShapedType::isDynamic(expected) || dim == expected)
        continue;
      return emitOpError() << "mask dimension "
                           << maskType.getRank() - 1 - i << " is " << dim
                           << ", which does not broadcast to " << expected;
    }
  }
  if (Value past = getPastLen())
    if (failed(check.rank("past_len", past, 1)) ||
        failed(check.dim("past_len", past, 0, ShapeChecker::dimOf(q, 0),
                         "the query's batch size")))
      return failure();
  return verifyColdPart();
}

LogicalResult AttentionOp::verifyColdPart() {
  Value coldKey = getColdKey(), coldValue = getColdValue();
  std::optional<uint64_t> hotWindow = getHotWindow();
  if (!coldKey) {
    if (hotWindow)
      return emitOpError() << "hot_window needs cold(key, value) operands";
    if (getColdKeyBlock() != 1)
      return emitOpError() << "cold_key_block needs cold(key, value) operands";
    return success();
  }
  if (!hotWindow || *hotWindow == 0)
    return emitOpError() << "cold(key, value) operands need hot_window >= 1";
  if (getColdKeyBlock() < 1)
    return emitOpError() << "cold_key_block must be >= 1, got "
                         << getColdKeyBlock();
  if (coldKey.getType() != getKey().getType())
    return emitOpError() << "cold key type " << coldKey.getType()
                         << " must match the key type " << getKey().getType();
  if (coldValue.getType() != getValue().getType())
    return emitOpError() << "cold value type " << coldValue.getType()
                         << " must match the value type "
                         << getValue().getType();
  if (getMask())
    return emitOpError() << "cold(key, value) operands cannot be combined "
                            "with a mask";
  return success();
}

//===----------------------------------------------------------------------===//
// Quantization
//===----------------------------------------------------------------------===//

/// `values` (the float side) and `data`/`scales` (the quantized side) agree
/// with `bits`, `axis` and `group_size` as sits.quantize states.
static LogicalResult verifyGrouped(Operation *op, Value values, Value data,
                                   Value scales, int64_t bits, int64_t axis,
                                   int64_t groupSize) {
  ShapeChecker check(op);
  auto valuesType = cast<RankedTensorType>(values.getType());
  int64_t rank = valuesType.getRank();
  if (bits != 4 && bits != 8)
    return op->emitOpError() << "bits must be 4 or 8, got " << bits;
  if (rank < 1)
    return op->emitOpError() << "needs a tensor of rank >= 1";
  if (axis < 0 || axis >= rank)
    return op->emitOpError() << "axis " << axis << " is outside rank "
                             << rank;
  if (groupSize < 1)
    return op->emitOpError() << "group_size must be >= 1, got " << groupSize;
  if (failed(check.rank("data", data, rank)) ||
      failed(check.rank("scales", scales, rank)))
    return failure();
  for (int64_t i = 0; i + 1 < rank; ++i)
    if (failed(check.dim("data", data, i, valuesType.getDimSize(i),
                         "the values' dimension " + llvm::Twine(i))))
      return failure();
  int64_t last = valuesType.getDimSize(rank - 1);
  int64_t rowBytes = ShapeChecker::dimOf(data, rank - 1);
  if (!ShapedType::isDynamic(last) && !ShapedType::isDynamic(rowBytes)) {
    int64_t packed = quant::GroupLayout::packedRowBytes(last, bits);
    if (rowBytes < packed || rowBytes > packed + 15)
      return op->emitOpError()
             << "data rows take " << rowBytes << " bytes, but " << last << " "
             << bits << "-bit values need " << packed
             << " (plus at most 15 bytes of padding)";
  }
  for (int64_t i = 0; i < rank; ++i) {
    int64_t dim = valuesType.getDimSize(i);
    int64_t expected = i != axis || ShapedType::isDynamic(dim)
                           ? dim
                           : (dim + groupSize - 1) / groupSize;
    if (failed(check.dim("scales", scales, i, expected,
                         i == axis ? llvm::Twine("the number of groups")
                                   : "the values' dimension " +
                                         llvm::Twine(i))))
      return failure();
  }
  return success();
}

LogicalResult QuantizeOp::verify() {
  return verifyGrouped(*this, getInput(), getData(), getScales(), getBits(),
                       getAxis(), getGroupSize());
}

LogicalResult DequantizeOp::verify() {
  return verifyGrouped(*this, getResult(), getData(), getScales(), getBits(),
                       getAxis(), getGroupSize());
}

//===----------------------------------------------------------------------===//
// TVCLMHeadOp
//===----------------------------------------------------------------------===//

LogicalResult TVCLMHeadOp::verify() {
  ShapeChecker check(*this);
  Value weight = getWeight();
  if (failed(verifyProjection(*this, getInput(), weight, Value(),
                              getResult())) ||
      failed(check.rank("preview_left", getPreviewLeft(), 2)) ||
      failed(check.rank("preview_right", getPreviewRight(), 2)) ||
      failed(check.rank("row_bounds", getRowBounds(), 2)))
    return failure();
  int64_t vocab = ShapeChecker::dimOf(weight, 0);
  int64_t hidden = ShapeChecker::dimOf(weight, 1);
  int64_t rank = ShapeChecker::dimOf(getPreviewLeft(), 1);
  if (failed(check.dim("preview_left", getPreviewLeft(), 0, vocab,
                       "the vocabulary size")) ||
      failed(check.dim("preview_right", getPreviewRight(), 0, rank,
                       "the preview rank (preview_left dimension 1)")) ||
      failed(check.dim("preview_right", getPreviewRight(), 1, hidden,
                       "the hidden size")) ||
      failed(check.dim("row_bounds", getRowBounds(), 0, vocab,
                       "the vocabulary size")) ||
      failed(check.dim("row_bounds", getRowBounds(), 1, 4,
                       "4 (rho, sigma, pi, omega)")))
    return failure();
  int64_t candidates = getCandidates(), exactTop = getExactTop();
  if (candidates < 1 ||
      (!ShapedType::isDynamic(vocab) && candidates > vocab))
    return emitOpError() << "candidates must be between 1 and the vocabulary "
                            "size ("
                         << vocab << "), got " << candidates;
  if (exactTop < 1 || exactTop > candidates)
    return emitOpError() << "exact_top must be between 1 and candidates ("
                         << candidates << "), got " << exactTop;
  return success();
}

//===----------------------------------------------------------------------===//
// KV cache
//===----------------------------------------------------------------------===//

LogicalResult KVLengthOp::verify() {
  ShapeChecker check(*this);
  return check.rank("result", getResult(), 1);
}

/// The layer index is inside the cache, and `tensor` is
/// `[batch, kv_heads, rows, head_dim]` (rows = `rows`, any when dynamic).
static LogicalResult verifyLayerTensor(Operation *op, KVCacheType cache,
                                       int64_t layer, StringRef what,
                                       Value tensor, int64_t rows,
                                       StringRef rowsWhat) {
  ShapeChecker check(op);
  if (layer < 0 || layer >= static_cast<int64_t>(cache.getLayers()))
    return op->emitOpError() << "layer " << layer << " is outside the cache ("
                             << cache.getLayers() << " layers)";
  if (failed(check.rank(what, tensor, 4)) ||
      failed(check.dim(what, tensor, 1, cache.getKvHeads(),
                       "the cache's kv_heads")) ||
      failed(check.dim(what, tensor, 2, rows, rowsWhat)) ||
      failed(check.dim(what, tensor, 3, cache.getHeadDim(),
                       "the cache's head_dim")))
    return failure();
  int64_t batch = ShapeChecker::dimOf(tensor, 0);
  if (!ShapedType::isDynamic(batch) &&
      batch > static_cast<int64_t>(cache.getMaxBatch()))
    return op->emitOpError() << what << " batch " << batch
                             << " exceeds the cache's max_batch ("
                             << cache.getMaxBatch() << ")";
  return success();
}

LogicalResult KVAppendOp::verify() {
  auto cache = getCache().getType();
  ShapeChecker check(*this);
  if (failed(verifyLayerTensor(*this, cache, getLayer(), "key", getKey(),
                               ShapedType::kDynamic, "")) ||
      failed(verifyLayerTensor(*this, cache, getLayer(), "value", getValue(),
                               ShapeChecker::dimOf(getKey(), 2),
                               "the key's sequence length")) ||
      failed(check.rank("past_len", getPastLen(), 1)) ||
      failed(check.dim("past_len", getPastLen(), 0,
                       ShapeChecker::dimOf(getKey(), 0),
                       "the key's batch size")))
    return failure();
  int64_t rows = ShapeChecker::dimOf(getKey(), 2);
  if (!ShapedType::isDynamic(rows) &&
      rows > static_cast<int64_t>(cache.getCapacity()))
    return emitOpError() << "appends " << rows
                         << " tokens, more than the cache capacity ("
                         << cache.getCapacity() << ")";
  return success();
}

LogicalResult KVReadOp::verify() {
  auto cache = getCache().getType();
  if (failed(verifyLayerTensor(*this, cache, getLayer(), "key", getKey(),
                               cache.getCapacity(), "the cache capacity")) ||
      failed(verifyLayerTensor(*this, cache, getLayer(), "value", getValue(),
                               cache.getCapacity(), "the cache capacity")))
    return failure();
  if (getKey().getType() != getValue().getType())
    return emitOpError() << "key and value types must match";
  return success();
}

#define GET_OP_CLASSES
#include "dialects/sits/SitsOps.cpp.inc"
