//===- RaiseNorms.cpp - RMS and layer norms into sits ---------------------===//
//
// `RMSNormalization` (opset 23; over several trailing dims, flattened into
// one), `LayerNormalization` over the last dim, and the RMSNorm exporters
// decompose:
//
//   y = x * Reciprocal(Sqrt(ReduceMean(Pow(x, 2), [-1]) + eps)) * w
//
// in any of its spellings: `x * x` for the square, `Div(x, Sqrt(..))` or
// `Pow(.., -0.5)` for the reciprocal root, either operand order, fp32 casts
// around it, no weight, and Gemma's `(1 + w)`. The match starts at the
// ReduceMean and requires each step's exact role (the mean is over the last
// dim and kept, epsilon is added before the root, the value normalized is
// the value squared), so look-alikes are left alone with a reason.
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

/// Whether `axes` (an operand of a reduction) names only the last dim of a
/// tensor of `rank`.
bool isLastAxisOnly(RaiseContext &rc, Value axes, int64_t rank) {
  if (!axes)
    return rank == 1;
  std::optional<SmallVector<int64_t, 4>> values =
      rc.getShapes().getConstantValues(axes);
  return values && values->size() == 1 &&
         ((*values)[0] == -1 || (*values)[0] == rank - 1);
}

/// `x` squared: Pow(x, 2) or Mul(x, x).
Value matchSquare(Value value, SmallVectorImpl<Operation *> &ops) {
  if (auto pow = definedBy<PowOp>(value)) {
    if (!isScalarConstant(pow.getB(), 2.0))
      return nullptr;
    ops.push_back(pow);
    return pow.getA();
  }
  if (auto mul = definedBy<MulOp>(value)) {
    if (mul.getA() != mul.getB())
      return nullptr;
    ops.push_back(mul);
    return mul.getA();
  }
  return nullptr;
}

/// A decomposed RMSNorm found from its ReduceMean.
struct RMSNormMatch {
  /// The value squared and normalized, and the same value before an fp32
  /// cast (null without one).
  Value squared, uncast;
  Value weight; // Null: no weight (ones).
  double epsilon = 0.0;
  double weightOffset = 0.0;
  Value result;
  SmallVector<Operation *> ops;
};

/// Follows the chain up from `mean`. Fails with `reason` set when the
/// ReduceMean is a mean of squares but what follows is not an RMSNorm.
FailureOr<RMSNormMatch> matchDecomposedRMSNorm(RaiseContext &rc,
                                               ReduceMeanOp mean,
                                               std::string &reason) {
  RMSNormMatch match;
  SymbolicShapes &shapes = rc.getShapes();
  Value x = matchSquare(mean.getData(), match.ops);
  if (!x || !getFloatElementType(x))
    return failure(); // Not a mean of squares: not an RMSNorm candidate.
  match.squared = x;
  match.ops.push_back(mean);
  const TensorFacts &facts = shapes.getFacts(x);
  if (!facts.ranked || facts.getRank() < 1)
    return failure();
  if (!isLastAxisOnly(rc, mean.getAxes(), facts.getRank())) {
    reason = "the mean of squares is not over the last dim only (RMSNorm "
             "normalizes the last dim)";
    return failure();
  }
  if (mean.getKeepdims() != 1) {
    reason = "the mean of squares drops the reduced dim (keepdims = 0)";
    return failure();
  }

  // + epsilon (before the root).
  Value value = mean.getReduced();
  Operation *next = getSingleUser(value);
  if (auto add = dyn_cast_or_null<onnx::AddOp>(next)) {
    std::optional<double> eps = getScalarConstant(otherOperand(add, value));
    if (!eps || *eps < 0.0) {
      reason = "what is added to the mean of squares is not a constant "
               "epsilon >= 0";
      return failure();
    }
    match.epsilon = *eps;
    match.ops.push_back(add);
    value = add.getC();
    next = getSingleUser(value);
  }

  // The inverse root: Reciprocal(Sqrt(v)), Div(1, Sqrt(v)), Pow(v, -0.5),
  // or directly Div(x, Sqrt(v)).
  Value inverseRoot, normalized;
  if (auto sqrt = dyn_cast_or_null<SqrtOp>(next)) {
    match.ops.push_back(sqrt);
    Operation *user = getSingleUser(sqrt.getOutput());
    auto div = dyn_cast_or_null<DivOp>(user);
    if (auto reciprocal = dyn_cast_or_null<ReciprocalOp>(user)) {
      match.ops.push_back(reciprocal);
      inverseRoot = reciprocal.getOutput();
    } else if (div && div.getB() == sqrt.getOutput()) {
      match.ops.push_back(div);
      if (isScalarConstant(div.getA(), 1.0)) {
        inverseRoot = div.getC();
      } else if (div.getA() == x) {
        normalized = div.getC();
      } else {
        reason = "the value divided by the root is not the value squared";
        return failure();
      }
    } else if (isa_and_nonnull<onnx::AddOp>(user)) {
      reason = "epsilon is added after the square root, not before it";
      return failure();
    }
  } else if (auto pow = dyn_cast_or_null<PowOp>(next)) {
    if (isScalarConstant(pow.getB(), -0.5)) {
      match.ops.push_back(pow);
      inverseRoot = pow.getC();
    }
  }
  if (!inverseRoot && !normalized) {
    reason = "the mean of squares is not followed by (+ epsilon and) an "
             "inverse square root";
    return failure();
  }
  if (inverseRoot) {
    auto mul = dyn_cast_or_null<MulOp>(getSingleUser(inverseRoot));
    if (!mul || otherOperand(mul, inverseRoot) != x) {
      reason = "the inverse root does not multiply the value that was "
               "squared";
      return failure();
    }
    match.ops.push_back(mul);
    normalized = mul.getC();
  }

  // The input before an fp32 cast, a cast back, the weight.
  if (auto cast = definedBy<CastOp>(x))
    if (getFloatElementType(cast.getInput())) {
      match.uncast = cast.getInput();
      match.ops.push_back(cast);
    }
  match.result = normalized;
  if (auto castBack = dyn_cast_or_null<CastOp>(getSingleUser(normalized)))
    if (getFloatElementType(castBack.getOutput())) {
      match.ops.push_back(castBack);
      match.result = castBack.getOutput();
    }
  AffineExpr hidden = shapes.getDim(x, -1);
  if (auto mul = dyn_cast_or_null<MulOp>(getSingleUser(match.result))) {
    Value weight = otherOperand(mul, match.result);
    // Gemma stores w - 1 and multiplies by (1 + w).
    if (auto add = definedBy<onnx::AddOp>(weight)) {
      for (Value side : {add.getA(), add.getB()}) {
        std::optional<double> offset =
            getScalarConstant(otherOperand(add, side));
        if (!offset)
          continue;
        if (Value vector = rc.getChannelVector(side, hidden)) {
          match.weight = vector;
          match.weightOffset = *offset;
          match.ops.push_back(add);
          break;
        }
      }
    } else {
      match.weight = rc.getChannelVector(weight, hidden);
    }
    if (match.weight) {
      match.ops.push_back(mul);
      match.result = mul.getC();
    }
  }
  return match;
}

/// A 1-D tensor of ones for a norm without weight.
Value createUnitWeight(RaiseContext &rc, Location loc, FloatType type,
                       int64_t size, StringRef name) {
  auto tensorType = RankedTensorType::get({size}, type);
  for (WeightOp existing : rc.getFunction().front().getOps<WeightOp>())
    if (existing.getName() == name && existing.getType() == tensorType)
      return existing;
  OpBuilder &b = rc.getBuilder();
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&rc.getFunction().front());
  auto value = DenseElementsAttr::get(tensorType, b.getFloatAttr(type, 1.0));
  return WeightOp::create(b, loc, tensorType, b.getStringAttr(name), value);
}

void raiseDecomposedRMSNorm(RaiseContext &rc, ReduceMeanOp mean) {
  std::string reason;
  FailureOr<RMSNormMatch> match = matchDecomposedRMSNorm(rc, mean, reason);
  if (failed(match)) {
    if (!reason.empty())
      rc.noteNotRaised(mean, "not an RMSNorm: " + reason);
    return;
  }
  Type resultType = match->result.getType();
  FloatType elementType = getFloatElementType(match->result);
  // The sits op computes in f32 whatever its types: take the value before
  // the fp32 cast when the result is cast back to its type.
  Value input = match->squared;
  if (match->uncast && getFloatElementType(match->uncast) == elementType)
    input = match->uncast;
  Value weight = match->weight;
  Location loc = rc.getFusedLoc(match->ops);
  if (!weight) {
    std::optional<int64_t> size =
        getConstantValue(rc.getShapes().getDim(input, -1));
    if (!size) {
      rc.noteNotRaised(mean, "RMSNorm without weight over a dynamic dim");
      return;
    }
    std::string name = "rms_norm.ones." + std::to_string(*size);
    weight = createUnitWeight(rc, loc, elementType, *size, name);
  }
  if (getFloatElementType(input) != elementType ||
      getFloatElementType(weight) != elementType) {
    rc.noteNotRaised(mean, "RMSNorm input, weight and result have different "
                           "element types");
    return;
  }
  OpBuilder &b = rc.getBuilder();
  b.setInsertionPointAfterValue(match->result);
  auto norm = RMSNormOp::create(
      b, loc, resultType, input, weight,
      b.getF32FloatAttr(static_cast<float>(match->epsilon)),
      b.getF32FloatAttr(static_cast<float>(match->weightOffset)));
  match->result.replaceAllUsesWith(norm.getResult());
  rc.recordRaise(
      "rms_norms_raised", match->ops,
      "sits.rms_norm epsilon = " + formatFloat(match->epsilon) +
          (match->weightOffset != 0.0
               ? " weight_offset = " + formatFloat(match->weightOffset)
               : std::string()),
      "x / sqrt(mean(x^2) + eps) * w: the mean of squares is over the last "
      "dim with keepdims, epsilon is added before the square root, the "
      "value normalized is the value squared, and w is one value per "
      "channel of the last dim; the sits op computes in f32 as the casts "
      "did");
}

/// `value` reshaped by onnx.Reshape to `shape` (0 copies the input's dim),
/// of type `type`.
Value reshapeTo(OpBuilder &b, Location loc, Value value,
                ArrayRef<int64_t> shape, Type type) {
  auto shapeType = RankedTensorType::get({static_cast<int64_t>(shape.size())},
                                         b.getI64Type());
  auto constant = ConstantOp::create(b, loc, shapeType,
                                     DenseElementsAttr::get(shapeType, shape),
                                     nullptr, nullptr, nullptr, nullptr);
  return ReshapeOp::create(b, loc, type, value, constant.getResult(),
                           b.getI64IntegerAttr(0));
}

constexpr llvm::StringLiteral kRmsRounding =
    " (sits.rms_norm computes in f32 and rounds once; the op's function "
    "body rounds x / rms to the input type before the scale, which for f32 "
    "is the same)";

void raiseRMSNormalization(RaiseContext &rc, RMSNormalizationOp op) {
  SymbolicShapes &shapes = rc.getShapes();
  const TensorFacts &facts = shapes.getFacts(op.getX());
  if (!facts.ranked)
    return;
  if (op.getStashType() != 1) {
    rc.noteNotRaised(op, "RMSNormalization with stash_type " +
                             std::to_string(op.getStashType()) +
                             " (sits.rms_norm computes in f32)");
    return;
  }
  int64_t rank = facts.getRank();
  int64_t axis = static_cast<int64_t>(op.getAxis());
  if (axis < 0)
    axis += rank;
  Type elementType = getFloatElementType(op.getX());
  OpBuilder &b = rc.getBuilder();
  float epsilon = op.getEpsilon().convertToFloat();
  if (axis == rank - 1) {
    Value weight = rc.getChannelVector(op.getScale(), facts.dims.back());
    if (!weight || getFloatElementType(weight) != elementType ||
        getFloatElementType(op.getY()) != elementType) {
      rc.noteNotRaised(op, "the scale is not one value per channel of the "
                           "input's element type");
      return;
    }
    b.setInsertionPoint(op);
    auto norm = RMSNormOp::create(b, op.getLoc(), op.getY().getType(),
                                  op.getX(), weight, b.getF32FloatAttr(epsilon),
                                  b.getF32FloatAttr(0.0f));
    op.getY().replaceAllUsesWith(norm.getResult());
    rc.recordRaise("rms_norms_raised", {op},
                   "sits.rms_norm epsilon = " + formatFloat(epsilon),
                   ("RMSNormalization over the last dim with a per-channel "
                    "scale is sits.rms_norm" +
                    kRmsRounding)
                       .str());
    return;
  }
  // Over the dims from `axis` on: sits.rms_norm over them flattened into
  // one, with the scale broadcast over them and flattened the same way.
  SmallVector<int64_t> normalized;
  int64_t width = 1;
  for (int64_t d = axis; d < rank; ++d) {
    std::optional<int64_t> size = getConstantValue(facts.dims[d]);
    if (!size) {
      rc.noteNotRaised(op, "RMSNormalization over dims whose sizes are not "
                           "constants");
      return;
    }
    normalized.push_back(*size);
    width *= *size;
  }
  Value weight = rc.getFlattenedWeight(op.getScale(), normalized);
  if (!weight || getFloatElementType(weight) != elementType ||
      getFloatElementType(op.getY()) != elementType) {
    rc.noteNotRaised(op, "RMSNormalization over several dims with a scale "
                         "that is not a constant of the input's element "
                         "type");
    return;
  }
  auto type = cast<RankedTensorType>(op.getX().getType());
  SmallVector<int64_t> flatDims(type.getShape().take_front(axis));
  flatDims.push_back(width);
  auto flatType = RankedTensorType::get(flatDims, type.getElementType());
  SmallVector<int64_t> flatShape(axis, 0), backShape(axis, 0);
  flatShape.push_back(width);
  backShape.append(normalized.begin(), normalized.end());
  b.setInsertionPoint(op);
  Value flat = reshapeTo(b, op.getLoc(), op.getX(), flatShape, flatType);
  auto norm =
      RMSNormOp::create(b, op.getLoc(), flatType, flat, weight,
                        b.getF32FloatAttr(epsilon), b.getF32FloatAttr(0.0f));
  Value back = reshapeTo(b, op.getLoc(), norm.getResult(), backShape,
                         op.getY().getType());
  op.getY().replaceAllUsesWith(back);
  rc.recordRaise(
      "rms_norms_raised", {op},
      llvm::formatv("sits.rms_norm epsilon = {0} over {1} values, reshaped "
                    "around it",
                    formatFloat(epsilon), width)
          .str(),
      ("RMSNormalization over the dims from axis " + std::to_string(axis) +
       " on is sits.rms_norm over them flattened into one (onnx.Reshape "
       "before and after), the scale broadcast over them and flattened" +
       kRmsRounding)
          .str());
}

void raiseLayerNormalization(RaiseContext &rc, LayerNormalizationOp op) {
  SymbolicShapes &shapes = rc.getShapes();
  const TensorFacts &facts = shapes.getFacts(op.getX());
  int64_t axis = static_cast<int64_t>(op.getAxis());
  if (!facts.ranked || (axis != -1 && axis != facts.getRank() - 1)) {
    rc.noteNotRaised(op, "LayerNormalization over more than the last dim");
    return;
  }
  for (Value statistic : op.getStatistics())
    if (!statistic.use_empty()) {
      rc.noteNotRaised(op, "its Mean or InvStdDev output is used");
      return;
    }
  Value weight = rc.getChannelVector(op.getScale(), facts.dims.back());
  Value bias =
      op.getB() ? rc.getChannelVector(op.getB(), facts.dims.back()) : Value();
  if (!weight || (op.getB() && !bias)) {
    rc.noteNotRaised(op, "the scale or bias is not one value per channel");
    return;
  }
  OpBuilder &b = rc.getBuilder();
  b.setInsertionPoint(op);
  auto norm = LayerNormOp::create(
      b, op.getLoc(), op.getY().getType(), op.getX(), weight, bias,
      b.getF32FloatAttr(op.getEpsilon().convertToFloat()));
  op.getY().replaceAllUsesWith(norm.getResult());
  rc.recordRaise("layer_norms_raised", {op},
                 "sits.layer_norm epsilon = " +
                     formatFloat(op.getEpsilon().convertToFloat()),
                 "LayerNormalization over the last dim with per-channel "
                 "scale and bias is sits.layer_norm");
}

} // namespace

void sits::onnx::raising::raiseNorms(RaiseContext &rc) {
  for (RMSNormalizationOp op : collectOps<RMSNormalizationOp>(rc.getFunction()))
    raiseRMSNormalization(rc, op);
  for (LayerNormalizationOp op :
       collectOps<LayerNormalizationOp>(rc.getFunction()))
    raiseLayerNormalization(rc, op);
  for (ReduceMeanOp op : collectOps<ReduceMeanOp>(rc.getFunction()))
    raiseDecomposedRMSNorm(rc, op);
}
