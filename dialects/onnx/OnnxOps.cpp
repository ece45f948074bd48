//===- OnnxOps.cpp - Verifiers and folders of the onnx ops ----------------===//
//
// Verifiers check what ONNX itself requires of a node and that a malformed
// op would otherwise make shape inference or raising misread it: axes in
// range, permutations that permute, operands of the right rank. Shapes of
// results are the business of the symbolic shape analysis, not of these.
//
//===----------------------------------------------------------------------===//

#include "dialects/onnx/OnnxOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Matchers.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallSet.h"

using namespace mlir;
using namespace sits::onnx;

#define GET_OP_CLASSES
#include "dialects/onnx/OnnxOps.cpp.inc"

//===----------------------------------------------------------------------===//
// Element types
//===----------------------------------------------------------------------===//

Type sits::onnx::getElementTypeForOnnx(MLIRContext *context, int64_t onnxType) {
  Builder b(context);
  switch (static_cast<OnnxElementType>(onnxType)) {
  case OnnxElementType::Float:
    return b.getF32Type();
  case OnnxElementType::Float16:
    return b.getF16Type();
  case OnnxElementType::BFloat16:
    return b.getBF16Type();
  case OnnxElementType::Double:
    return b.getF64Type();
  case OnnxElementType::Int8:
    return b.getIntegerType(8);
  case OnnxElementType::Int16:
    return b.getIntegerType(16);
  case OnnxElementType::Int32:
    return b.getIntegerType(32);
  case OnnxElementType::Int64:
    return b.getIntegerType(64);
  case OnnxElementType::UInt8:
    return b.getIntegerType(8, /*isSigned=*/false);
  case OnnxElementType::UInt16:
    return b.getIntegerType(16, /*isSigned=*/false);
  case OnnxElementType::UInt32:
    return b.getIntegerType(32, /*isSigned=*/false);
  case OnnxElementType::UInt64:
    return b.getIntegerType(64, /*isSigned=*/false);
  case OnnxElementType::Bool:
    return b.getI1Type();
  default:
    return nullptr;
  }
}

std::optional<int64_t> sits::onnx::getOnnxElementTypeNumber(Type type) {
  for (int64_t number = 1; number <= 16; ++number)
    if (getElementTypeForOnnx(type.getContext(), number) == type)
      return number;
  return std::nullopt;
}

std::string sits::onnx::getOnnxElementTypeName(int64_t onnxType) {
  static const char *const names[] = {
      "UNDEFINED",      "FLOAT",      "UINT8",
      "INT8",           "UINT16",     "INT16",
      "INT32",          "INT64",      "STRING",
      "BOOL",           "FLOAT16",    "DOUBLE",
      "UINT32",         "UINT64",     "COMPLEX64",
      "COMPLEX128",     "BFLOAT16",   "FLOAT8E4M3FN",
      "FLOAT8E4M3FNUZ", "FLOAT8E5M2", "FLOAT8E5M2FNUZ",
      "UINT4",          "INT4",       "FLOAT4E2M1",
      "FLOAT8E8M0",     "UINT2",      "INT2"};
  if (onnxType >= 0 && onnxType < static_cast<int64_t>(std::size(names)))
    return names[onnxType];
  return "type " + std::to_string(onnxType);
}

//===----------------------------------------------------------------------===//
// Verification helpers
//===----------------------------------------------------------------------===//

/// Rank of `value`'s type, or nullopt when unranked.
static std::optional<int64_t> rankOf(Value value) {
  if (auto ranked = dyn_cast<RankedTensorType>(value.getType()))
    return ranked.getRank();
  return std::nullopt;
}

/// `axis` must lie in [-rank, rank) (or [-rank, rank] when `inclusiveEnd`).
static LogicalResult verifyAxis(Operation *op, StringRef what, int64_t axis,
                                std::optional<int64_t> rank,
                                bool inclusiveEnd = false) {
  if (!rank)
    return success();
  int64_t upper = inclusiveEnd ? *rank : *rank - 1;
  if (axis < -*rank || axis > upper)
    return op->emitOpError()
           << what << " " << axis << " is out of range [" << -*rank << ", "
           << upper << "] for rank " << *rank;
  return success();
}

/// `value` must be a 1-D (or, with `allowScalar`, 0-D) tensor of integers.
static LogicalResult verifyIndexVector(Operation *op, StringRef what,
                                       Value value, bool allowScalar = false) {
  auto type = cast<TensorType>(value.getType());
  if (!type.getElementType().isInteger() || type.getElementType().isInteger(1))
    return op->emitOpError()
           << what << " must hold integers, got " << value.getType();
  if (std::optional<int64_t> rank = rankOf(value))
    if (*rank != 1 && !(allowScalar && *rank == 0))
      return op->emitOpError()
             << what << " must be " << (allowScalar ? "0-D or " : "")
             << "1-D, got " << value.getType();
  return success();
}

static LogicalResult verifyFlag(Operation *op, StringRef name, int64_t value) {
  if (value != 0 && value != 1)
    return op->emitOpError() << name << " must be 0 or 1, got " << value;
  return success();
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

LogicalResult GeluOp::verify() {
  if (getApproximate() != "none" && getApproximate() != "tanh")
    return emitOpError() << "approximate must be \"none\" or \"tanh\", got \""
                         << getApproximate() << "\"";
  return success();
}

LogicalResult CastOp::verify() {
  int64_t to = static_cast<int64_t>(getTo());
  Type expected = getElementTypeForOnnx(getContext(), to);
  if (!expected)
    return emitOpError() << "casts to " << getOnnxElementTypeName(to)
                         << ", which sits does not support";
  Type actual = cast<TensorType>(getOutput().getType()).getElementType();
  if (actual != expected)
    return emitOpError() << "result element type " << actual
                         << " does not match to = " << to << " ("
                         << getOnnxElementTypeName(to) << ", " << expected
                         << ")";
  return verifyFlag(*this, "saturate", static_cast<int64_t>(getSaturate()));
}

LogicalResult CumSumOp::verify() {
  if (failed(verifyIndexVector(*this, "axis", getAxis(), /*allowScalar=*/true)))
    return failure();
  if (failed(
          verifyFlag(*this, "exclusive", static_cast<int64_t>(getExclusive()))))
    return failure();
  return verifyFlag(*this, "reverse", static_cast<int64_t>(getReverse()));
}

LogicalResult ModOp::verify() {
  if (failed(verifyFlag(*this, "fmod", static_cast<int64_t>(getFmod()))))
    return failure();
  Type element = cast<TensorType>(getA().getType()).getElementType();
  if (isa<FloatType>(element) && getFmod() == 0)
    return emitOpError() << "needs fmod = 1 for float operands";
  return success();
}

LogicalResult MaxOp::verify() {
  if (getData().empty())
    return emitOpError() << "needs at least one input";
  return success();
}

LogicalResult MinOp::verify() {
  if (getData().empty())
    return emitOpError() << "needs at least one input";
  return success();
}

LogicalResult SumOp::verify() {
  if (getData_0().empty())
    return emitOpError() << "needs at least one input";
  return success();
}

template <typename ReduceOpTy>
static LogicalResult verifyReduce(ReduceOpTy op) {
  if (Value axes = op.getAxes())
    if (failed(verifyIndexVector(op, "axes", axes)))
      return failure();
  if (failed(
          verifyFlag(op, "keepdims", static_cast<int64_t>(op.getKeepdims()))))
    return failure();
  return verifyFlag(op, "noop_with_empty_axes",
                    static_cast<int64_t>(op.getNoopWithEmptyAxes()));
}

LogicalResult ReduceMeanOp::verify() { return verifyReduce(*this); }
LogicalResult ReduceSumOp::verify() { return verifyReduce(*this); }
LogicalResult ReduceMaxOp::verify() { return verifyReduce(*this); }

LogicalResult GemmOp::verify() {
  for (auto [name, value] : {std::pair<StringRef, Value>{"A", getA()},
                             std::pair<StringRef, Value>{"B", getB()}})
    if (std::optional<int64_t> rank = rankOf(value); rank && *rank != 2)
      return emitOpError() << name << " must be 2-D, got " << value.getType();
  if (failed(verifyFlag(*this, "transA", static_cast<int64_t>(getTransA()))))
    return failure();
  return verifyFlag(*this, "transB", static_cast<int64_t>(getTransB()));
}

//===----------------------------------------------------------------------===//
// Constants
//===----------------------------------------------------------------------===//

ElementsAttr ConstantOp::getValueAsElements() {
  auto type = dyn_cast<RankedTensorType>(getOutput().getType());
  if (!type)
    return nullptr;
  if (std::optional<ElementsAttr> value = getValue())
    return *value;
  if (std::optional<APFloat> value = getValueFloat())
    return DenseElementsAttr::get(type, value->convertToFloat());
  if (std::optional<ArrayRef<float>> values = getValueFloats())
    return DenseElementsAttr::get(type, *values);
  if (std::optional<uint64_t> value = getValueInt())
    return DenseElementsAttr::get(type, static_cast<int64_t>(*value));
  if (std::optional<ArrayRef<int64_t>> values = getValueInts())
    return DenseElementsAttr::get(type, *values);
  return nullptr;
}

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValueAsElements(); }

LogicalResult ConstantOp::verify() {
  int set = (getValue() ? 1 : 0) + (getValueFloat() ? 1 : 0) +
            (getValueFloats() ? 1 : 0) + (getValueInt() ? 1 : 0) +
            (getValueInts() ? 1 : 0);
  if (set != 1)
    return emitOpError() << "needs exactly one of value, value_float, "
                            "value_floats, value_int, value_ints; got "
                         << set;
  auto type = dyn_cast<RankedTensorType>(getOutput().getType());
  if (!type)
    return emitOpError() << "result must be a ranked tensor";
  Builder b(getContext());
  RankedTensorType expected;
  if (std::optional<ElementsAttr> value = getValue())
    expected = dyn_cast<RankedTensorType>(value->getType());
  else if (getValueFloat())
    expected = RankedTensorType::get({}, b.getF32Type());
  else if (std::optional<ArrayRef<float>> values = getValueFloats())
    expected = RankedTensorType::get({static_cast<int64_t>(values->size())},
                                     b.getF32Type());
  else if (getValueInt())
    expected = RankedTensorType::get({}, b.getI64Type());
  else if (std::optional<ArrayRef<int64_t>> values = getValueInts())
    expected = RankedTensorType::get({static_cast<int64_t>(values->size())},
                                     b.getI64Type());
  if (expected != type)
    return emitOpError() << "result type " << type
                         << " does not match the value's type " << expected;
  return success();
}

LogicalResult ConstantOfShapeOp::verify() {
  if (failed(verifyIndexVector(*this, "input", getInput())))
    return failure();
  if (std::optional<ElementsAttr> value = getValue()) {
    if (value->getNumElements() != 1)
      return emitOpError() << "value must hold exactly one element, got "
                           << value->getNumElements();
    Type resultElement =
        cast<TensorType>(getOutput().getType()).getElementType();
    if (value->getElementType() != resultElement)
      return emitOpError() << "value element type " << value->getElementType()
                           << " does not match the result's " << resultElement;
  }
  return success();
}

LogicalResult RangeOp::verify() {
  for (Value operand : getOperands())
    if (std::optional<int64_t> rank = rankOf(operand); rank && *rank != 0)
      return emitOpError() << "start, limit and delta must be scalars, got "
                           << operand.getType();
  return success();
}

//===----------------------------------------------------------------------===//
// Shapes
//===----------------------------------------------------------------------===//

LogicalResult ShapeOp::verify() {
  auto type = cast<TensorType>(getShape().getType());
  if (!type.getElementType().isInteger(64) ||
      (type.hasRank() && type.getRank() != 1))
    return emitOpError() << "result must be a 1-D int64 tensor, got " << type;
  return success();
}

LogicalResult ReshapeOp::verify() {
  if (failed(verifyIndexVector(*this, "shape", getShape())))
    return failure();
  return verifyFlag(*this, "allowzero", static_cast<int64_t>(getAllowzero()));
}

LogicalResult FlattenOp::verify() {
  return verifyAxis(*this, "axis", static_cast<int64_t>(getAxis()),
                    rankOf(getInput()), /*inclusiveEnd=*/true);
}

LogicalResult SqueezeOp::verify() {
  if (Value axes = getAxes())
    return verifyIndexVector(*this, "axes", axes);
  return success();
}

LogicalResult UnsqueezeOp::verify() {
  return verifyIndexVector(*this, "axes", getAxes());
}

LogicalResult ExpandOp::verify() {
  return verifyIndexVector(*this, "shape", getShape());
}

LogicalResult TileOp::verify() {
  if (failed(verifyIndexVector(*this, "repeats", getRepeats())))
    return failure();
  auto repeats = dyn_cast<RankedTensorType>(getRepeats().getType());
  std::optional<int64_t> rank = rankOf(getInput());
  if (repeats && rank && !repeats.isDynamicDim(0) &&
      repeats.getDimSize(0) != *rank)
    return emitOpError() << "repeats has " << repeats.getDimSize(0)
                         << " values for an input of rank " << *rank;
  return success();
}

SmallVector<int64_t> TransposeOp::getPermutation() {
  if (std::optional<ArrayRef<int64_t>> perm = getPerm())
    return SmallVector<int64_t>(*perm);
  SmallVector<int64_t> reversed;
  if (std::optional<int64_t> rank = rankOf(getData()))
    for (int64_t i = *rank - 1; i >= 0; --i)
      reversed.push_back(i);
  return reversed;
}

LogicalResult TransposeOp::verify() {
  std::optional<ArrayRef<int64_t>> perm = getPerm();
  if (!perm)
    return success();
  std::optional<int64_t> rank = rankOf(getData());
  if (rank && static_cast<int64_t>(perm->size()) != *rank)
    return emitOpError() << "perm has " << perm->size()
                         << " entries for an input of rank " << *rank;
  llvm::SmallSet<int64_t, 8> seen;
  for (int64_t p : *perm)
    if (p < 0 || p >= static_cast<int64_t>(perm->size()) ||
        !seen.insert(p).second)
      return emitOpError() << "perm must be a permutation of 0.."
                           << static_cast<int64_t>(perm->size()) - 1;
  return success();
}

//===----------------------------------------------------------------------===//
// Slicing, joining, indexing
//===----------------------------------------------------------------------===//

LogicalResult ConcatOp::verify() {
  if (getInputs().empty())
    return emitOpError() << "needs at least one input";
  std::optional<int64_t> rank;
  for (Value input : getInputs()) {
    std::optional<int64_t> inputRank = rankOf(input);
    if (!inputRank)
      continue;
    if (rank && *rank != *inputRank)
      return emitOpError() << "inputs must have one rank, got " << *rank
                           << " and " << *inputRank;
    rank = inputRank;
  }
  return verifyAxis(*this, "axis", static_cast<int64_t>(getAxis()), rank);
}

LogicalResult SplitOp::verify() {
  if (getOutputs().empty())
    return emitOpError() << "needs at least one result";
  if (failed(verifyAxis(*this, "axis", static_cast<int64_t>(getAxis()),
                        rankOf(getInput()))))
    return failure();
  if (Value split = getSplit())
    if (failed(verifyIndexVector(*this, "split", split)))
      return failure();
  if (std::optional<uint64_t> n = getNumOutputs()) {
    if (getSplit())
      return emitOpError() << "takes either split or num_outputs, not both";
    if (static_cast<int64_t>(*n) != static_cast<int64_t>(getNumResults()))
      return emitOpError() << "num_outputs is " << static_cast<int64_t>(*n)
                           << " but the op has " << getNumResults()
                           << " results";
  }
  return success();
}

LogicalResult SliceOp::verify() {
  for (auto [name, value] : {std::pair<StringRef, Value>{"starts", getStarts()},
                             {"ends", getEnds()},
                             {"axes", getAxes()},
                             {"steps", getSteps()}})
    if (value && failed(verifyIndexVector(*this, name, value)))
      return failure();
  return success();
}

LogicalResult GatherOp::verify() {
  auto indices = cast<TensorType>(getIndices().getType());
  if (!indices.getElementType().isInteger() ||
      indices.getElementType().isInteger(1))
    return emitOpError() << "indices must hold integers, got " << indices;
  return verifyAxis(*this, "axis", static_cast<int64_t>(getAxis()),
                    rankOf(getData()));
}

LogicalResult GatherNDOp::verify() {
  int64_t batchDims = static_cast<int64_t>(getBatchDims());
  if (batchDims < 0)
    return emitOpError() << "batch_dims must be >= 0, got " << batchDims;
  std::optional<int64_t> dataRank = rankOf(getData());
  std::optional<int64_t> indicesRank = rankOf(getIndices());
  if (indicesRank && *indicesRank < 1)
    return emitOpError() << "indices must have rank >= 1";
  if (dataRank && indicesRank &&
      (batchDims >= std::min(*dataRank, *indicesRank)))
    return emitOpError() << "batch_dims " << batchDims
                         << " must be less than both ranks";
  return success();
}

LogicalResult PadOp::verify() {
  StringRef mode = getMode();
  if (mode != "constant" && mode != "reflect" && mode != "edge" &&
      mode != "wrap")
    return emitOpError() << "mode must be constant, reflect, edge or wrap, "
                            "got \""
                         << mode << "\"";
  if (failed(verifyIndexVector(*this, "pads", getPads())))
    return failure();
  if (Value axes = getAxes())
    if (failed(verifyIndexVector(*this, "axes", axes)))
      return failure();
  if (Value value = getConstantValue())
    if (std::optional<int64_t> rank = rankOf(value); rank && *rank > 1)
      return emitOpError() << "constant_value must be a scalar, got "
                           << value.getType();
  return success();
}

LogicalResult TriluOp::verify() {
  if (std::optional<int64_t> rank = rankOf(getInput()); rank && *rank < 2)
    return emitOpError() << "input must have rank >= 2, got " << *rank;
  if (Value k = getK())
    if (std::optional<int64_t> rank = rankOf(k); rank && *rank != 0)
      return emitOpError() << "k must be a scalar, got " << k.getType();
  return verifyFlag(*this, "upper", static_cast<int64_t>(getUpper()));
}

//===----------------------------------------------------------------------===//
// Softmax, norms, rotary embedding, attention
//===----------------------------------------------------------------------===//

LogicalResult SoftmaxOp::verify() {
  return verifyAxis(*this, "axis", static_cast<int64_t>(getAxis()),
                    rankOf(getInput()));
}

LogicalResult LayerNormalizationOp::verify() {
  if (getStatistics().size() > 2)
    return emitOpError() << "has at most 3 results (Y, Mean, InvStdDev)";
  return verifyAxis(*this, "axis", static_cast<int64_t>(getAxis()),
                    rankOf(getX()));
}

LogicalResult RMSNormalizationOp::verify() {
  return verifyAxis(*this, "axis", static_cast<int64_t>(getAxis()),
                    rankOf(getX()));
}

LogicalResult RotaryEmbeddingOp::verify() {
  std::optional<int64_t> rank = rankOf(getX());
  if (rank && *rank != 3 && *rank != 4)
    return emitOpError() << "X must have rank 3 or 4, got " << *rank;
  if (rank && *rank == 3 && !getNumHeads())
    return emitOpError() << "needs num_heads for a 3-D X";
  if (std::optional<uint64_t> heads = getNumHeads();
      heads && static_cast<int64_t>(*heads) <= 0)
    return emitOpError() << "num_heads must be > 0";
  int64_t rotaryDim = static_cast<int64_t>(getRotaryEmbeddingDim());
  if (rotaryDim < 0 || rotaryDim % 2 != 0)
    return emitOpError() << "rotary_embedding_dim must be even and >= 0, got "
                         << rotaryDim;
  return verifyFlag(*this, "interleaved",
                    static_cast<int64_t>(getInterleaved()));
}

LogicalResult AttentionOp::verify() {
  std::optional<int64_t> rank = rankOf(getQ());
  if (rank && *rank != 3 && *rank != 4)
    return emitOpError() << "Q must have rank 3 or 4, got " << *rank;
  if (rank && *rank == 3 && (!getQNumHeads() || !getKvNumHeads()))
    return emitOpError() << "needs q_num_heads and kv_num_heads for 3-D "
                            "inputs";
  for (std::optional<uint64_t> heads : {getQNumHeads(), getKvNumHeads()})
    if (heads && static_cast<int64_t>(*heads) <= 0)
      return emitOpError() << "q_num_heads and kv_num_heads must be > 0";
  if (static_cast<bool>(getPastKey()) != static_cast<bool>(getPastValue()))
    return emitOpError() << "takes past_key and past_value together";
  if (getExtraOutputs().size() > 3)
    return emitOpError() << "has at most 4 results (Y, present_key, "
                            "present_value, qk_matmul_output)";
  if (std::optional<APFloat> scale = getScale())
    if (!(scale->convertToFloat() > 0.0f))
      return emitOpError() << "scale must be > 0";
  int64_t mode = static_cast<int64_t>(getQkMatmulOutputMode());
  if (mode < 0 || mode > 3)
    return emitOpError() << "qk_matmul_output_mode must be 0 to 3, got "
                         << mode;
  for (auto [name, size] :
       {std::pair{"left_window_size", getLeftWindowSize()},
        std::pair{"right_window_size", getRightWindowSize()}})
    if (static_cast<int64_t>(size) < -1)
      return emitOpError() << name << " must be -1 (unbounded) or >= 0, got "
                           << static_cast<int64_t>(size);
  // The spec: an external cache's lengths do not combine with a past.
  if (getNonpadKvSeqlen() && getPastKey())
    return emitOpError() << "takes nonpad_kv_seqlen or past_key/past_value, "
                            "not both";
  return verifyFlag(*this, "is_causal", static_cast<int64_t>(getIsCausal()));
}
