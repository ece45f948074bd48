//===- ShapeRulesElementwise.cpp - Elementwise, reductions, matmul --------===//
//
// Shape rules of the elementwise ops (numpy broadcasting), the reductions and
// the matrix products. Elementwise ops on small integer tensors also compute
// their values (shape arithmetic: `Shape(x)[1] + 1`), and on tensors with a
// per-element expression compute the result's (`arange + 1`).
//
//===----------------------------------------------------------------------===//

#include "dialects/onnx/OnnxOps.h"
#include "dialects/onnx/ShapeRules.h"
#include "dialects/shapes/ShapeRuleOpInterface.h"
#include "dialects/shapes/SymbolicExpr.h"
#include "dialects/shapes/SymbolicShapes.h"

#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace sits::onnx;

namespace {

/// Combines operand element values into the result's; null when unknown.
using Combine = AffineExpr (*)(ArrayRef<AffineExpr> operands,
                               MLIRContext *context);

AffineExpr constantExpr(int64_t value, MLIRContext *context) {
  return getAffineConstantExpr(value, context);
}

/// `lhs - rhs` when it is a constant (decides comparisons of sizes such as
/// `seq + 1 > seq`).
std::optional<int64_t> constantDifference(AffineExpr lhs, AffineExpr rhs) {
  if (!lhs || !rhs)
    return std::nullopt;
  return getConstantValue(subExprs(lhs, rhs));
}

AffineExpr combineAdd(ArrayRef<AffineExpr> v, MLIRContext *) {
  return addExprs(v[0], v[1]);
}
AffineExpr combineSub(ArrayRef<AffineExpr> v, MLIRContext *) {
  return subExprs(v[0], v[1]);
}
AffineExpr combineMul(ArrayRef<AffineExpr> v, MLIRContext *) {
  return mulExprs(v[0], v[1]);
}
AffineExpr combineDiv(ArrayRef<AffineExpr> v, MLIRContext *context) {
  std::optional<int64_t> a = getConstantValue(v[0]);
  std::optional<int64_t> b = getConstantValue(v[1]);
  if (a && b) {
    if (*b == 0 || (*a == INT64_MIN && *b == -1))
      return nullptr;
    return constantExpr(*a / *b, context); // ONNX integer Div truncates.
  }
  std::optional<AffineExpr> exact = divideExactly(v[0], v[1]);
  return exact ? *exact : nullptr;
}
/// Integer Mod of constants: the sign of the divisor (`fmod = 0`, Python's
/// `%`) or of the dividend (`fmod = 1`, C's `%`).
template <bool fmod>
AffineExpr combineMod(ArrayRef<AffineExpr> v, MLIRContext *context) {
  std::optional<int64_t> a = getConstantValue(v[0]);
  std::optional<int64_t> b = getConstantValue(v[1]);
  if (!a || !b || *b == 0 || (*a == INT64_MIN && *b == -1))
    return nullptr;
  int64_t remainder = *a % *b;
  if (!fmod && remainder != 0 && ((remainder < 0) != (*b < 0)))
    remainder += *b;
  return constantExpr(remainder, context);
}
AffineExpr combineNeg(ArrayRef<AffineExpr> v, MLIRContext *context) {
  return mulExprs(v[0], constantExpr(-1, context));
}
AffineExpr combineIdentity(ArrayRef<AffineExpr> v, MLIRContext *) {
  return v[0];
}
AffineExpr combineAbs(ArrayRef<AffineExpr> v, MLIRContext *context) {
  std::optional<int64_t> a = getConstantValue(v[0]);
  if (!a || *a == INT64_MIN)
    return nullptr;
  return constantExpr(*a < 0 ? -*a : *a, context);
}
AffineExpr combineRelu(ArrayRef<AffineExpr> v, MLIRContext *context) {
  std::optional<int64_t> a = getConstantValue(v[0]);
  return a ? constantExpr(std::max<int64_t>(*a, 0), context) : nullptr;
}
AffineExpr combinePow(ArrayRef<AffineExpr> v, MLIRContext *context) {
  std::optional<int64_t> a = getConstantValue(v[0]);
  std::optional<int64_t> b = getConstantValue(v[1]);
  if (!a || !b || *b < 0 || *b > 62)
    return nullptr;
  int64_t result = 1;
  for (int64_t i = 0; i < *b; ++i)
    if (__builtin_mul_overflow(result, *a, &result))
      return nullptr;
  return constantExpr(result, context);
}

AffineExpr combineSum(ArrayRef<AffineExpr> v, MLIRContext *) {
  AffineExpr sum = v[0];
  for (AffineExpr next : v.drop_front())
    sum = addExprs(sum, next);
  return sum;
}

template <bool isMax>
AffineExpr combineMinMax(ArrayRef<AffineExpr> v, MLIRContext *) {
  AffineExpr best = v[0];
  for (AffineExpr next : v.drop_front()) {
    std::optional<int64_t> diff = constantDifference(next, best);
    if (!diff)
      return nullptr;
    if (isMax ? *diff > 0 : *diff < 0)
      best = next;
  }
  return best;
}

/// A lower bound of `expr` when every symbol and dim in it is a size or an
/// index (>= 0): sums and products of such terms and of constants. Decides
/// `batch == -1` (the TorchScript exporter's Expand targets) as false.
std::optional<int64_t> lowerBound(AffineExpr expr) {
  if (auto constant = dyn_cast<AffineConstantExpr>(expr))
    return constant.getValue();
  if (isa<AffineSymbolExpr, AffineDimExpr>(expr))
    return 0;
  auto binary = dyn_cast<AffineBinaryOpExpr>(expr);
  if (!binary)
    return std::nullopt;
  std::optional<int64_t> lhs = lowerBound(binary.getLHS());
  std::optional<int64_t> rhs = lowerBound(binary.getRHS());
  if (!lhs || !rhs)
    return std::nullopt;
  int64_t result;
  switch (binary.getKind()) {
  case AffineExprKind::Add:
    if (__builtin_add_overflow(*lhs, *rhs, &result))
      return std::nullopt;
    return result;
  case AffineExprKind::Mul:
    if (*lhs < 0 || *rhs < 0 || __builtin_mul_overflow(*lhs, *rhs, &result))
      return std::nullopt;
    return result;
  default:
    return std::nullopt;
  }
}

enum class Comparison { Equal, Less, LessOrEqual, Greater, GreaterOrEqual };

template <Comparison kind>
AffineExpr combineCompare(ArrayRef<AffineExpr> v, MLIRContext *context) {
  std::optional<int64_t> diff = constantDifference(v[0], v[1]);
  if (!diff && v[0] && v[1]) {
    // Not a constant, but maybe of a known sign: v0 - v1 >= 1 or <= -1
    // decides every comparison, >= 0 or <= 0 some of them.
    std::optional<int64_t> above = lowerBound(subExprs(v[0], v[1]));
    std::optional<int64_t> below = lowerBound(subExprs(v[1], v[0]));
    if (above && *above >= 1)
      diff = 1;
    else if (below && *below >= 1)
      diff = -1;
    else if (above && *above >= 0 && kind == Comparison::GreaterOrEqual)
      diff = 0;
    else if (above && *above >= 0 && kind == Comparison::Less)
      diff = 0;
    else if (below && *below >= 0 && kind == Comparison::LessOrEqual)
      diff = 0;
    else if (below && *below >= 0 && kind == Comparison::Greater)
      diff = 0;
  }
  if (!diff)
    return nullptr;
  bool result = false;
  switch (kind) {
  case Comparison::Equal:
    result = *diff == 0;
    break;
  case Comparison::Less:
    result = *diff < 0;
    break;
  case Comparison::LessOrEqual:
    result = *diff <= 0;
    break;
  case Comparison::Greater:
    result = *diff > 0;
    break;
  case Comparison::GreaterOrEqual:
    result = *diff >= 0;
    break;
  }
  return constantExpr(result ? 1 : 0, context);
}

AffineExpr combineAnd(ArrayRef<AffineExpr> v, MLIRContext *context) {
  std::optional<int64_t> a = getConstantValue(v[0]);
  std::optional<int64_t> b = getConstantValue(v[1]);
  if ((a && *a == 0) || (b && *b == 0))
    return constantExpr(0, context);
  return a && b ? constantExpr(1, context) : nullptr;
}
AffineExpr combineOr(ArrayRef<AffineExpr> v, MLIRContext *context) {
  std::optional<int64_t> a = getConstantValue(v[0]);
  std::optional<int64_t> b = getConstantValue(v[1]);
  if ((a && *a != 0) || (b && *b != 0))
    return constantExpr(1, context);
  return a && b ? constantExpr(0, context) : nullptr;
}
AffineExpr combineNot(ArrayRef<AffineExpr> v, MLIRContext *context) {
  std::optional<int64_t> a = getConstantValue(v[0]);
  return a ? constantExpr(*a == 0 ? 1 : 0, context) : nullptr;
}
/// An integer cast to bool: known when the integer is a constant.
AffineExpr combineToBool(ArrayRef<AffineExpr> v, MLIRContext *context) {
  std::optional<int64_t> a = getConstantValue(v[0]);
  return a ? constantExpr(*a != 0 ? 1 : 0, context) : nullptr;
}
AffineExpr combineWhere(ArrayRef<AffineExpr> v, MLIRContext *) {
  std::optional<int64_t> condition = getConstantValue(v[0]);
  if (condition)
    return *condition ? v[1] : v[2];
  return v[1] == v[2] ? v[1] : nullptr;
}

/// The element type a rule gives its result.
enum class ResultType { SameAsFirst, SameAsSecond, Bool };

/// Shape, values and element expression of a broadcasting elementwise op
/// over `operands` (indices into the op's operands).
LogicalResult inferElementwise(ShapeRuleContext &ctx,
                               ArrayRef<unsigned> operands, Combine combine,
                               ResultType resultType) {
  SmallVector<ArrayRef<AffineExpr>> shapes;
  for (unsigned index : operands) {
    if (failed(requireRanked(ctx, index, "operand " + std::to_string(index))))
      return failure();
    shapes.push_back(ctx.operand(index).dims);
  }
  FailureOr<SmallVector<AffineExpr, 4>> dims = broadcastDims(ctx, shapes);
  if (failed(dims))
    return failure();
  TensorFacts &result = ctx.result();
  result.ranked = true;
  result.dims = *dims;
  switch (resultType) {
  case ResultType::SameAsFirst:
    result.elementType = ctx.operand(operands[0]).elementType;
    break;
  case ResultType::SameAsSecond:
    result.elementType = ctx.operand(operands[1]).elementType;
    break;
  case ResultType::Bool:
    result.elementType = IntegerType::get(ctx.getContext(), 1);
    break;
  }
  if (!combine)
    return success();
  MLIRContext *context = ctx.getContext();

  // Element values of small integer results.
  std::optional<SmallVector<int64_t, 4>> staticDims = getConstantDims(result);
  std::optional<int64_t> count = result.getStaticNumElements();
  if (result.elementType && result.elementType.isInteger() && staticDims &&
      count && *count <= SymbolicShapes::kMaxTrackedElements) {
    SmallVector<AffineExpr, 4> values;
    bool anyKnown = false;
    forEachIndex(*staticDims, [&](ArrayRef<int64_t> index) {
      SmallVector<AffineExpr, 3> inputs;
      bool known = true;
      for (unsigned operand : operands) {
        AffineExpr value = elementAt(ctx.operand(operand), index, context);
        known &= static_cast<bool>(value);
        inputs.push_back(value);
      }
      AffineExpr value;
      if (known)
        value = combine(inputs, context);
      else if (combine == combineWhere && inputs[0])
        value = combine(inputs, context); // Only the chosen side matters.
      anyKnown |= static_cast<bool>(value);
      values.push_back(value);
    });
    if (anyKnown)
      setTrackedValues(result, std::move(values));
  }

  // Per-element expression, when every operand has one.
  SmallVector<AffineExpr, 3> exprs;
  for (unsigned operand : operands) {
    const TensorFacts &facts = ctx.operand(operand);
    AffineExpr expr = facts.elementExpr ? facts.elementExpr : facts.getScalar();
    if (!expr)
      return success();
    exprs.push_back(broadcastElementExpr(expr, facts.dims, result.dims));
  }
  result.elementExpr = combine(exprs, context);
  return success();
}

template <Combine combine, ResultType type = ResultType::SameAsFirst>
LogicalResult binaryRule(ShapeRuleContext &ctx) {
  return inferElementwise(ctx, {0, 1}, combine, type);
}

template <Combine combine, ResultType type = ResultType::SameAsFirst>
LogicalResult unaryRule(ShapeRuleContext &ctx) {
  return inferElementwise(ctx, {0}, combine, type);
}

/// Max, Min and Sum of one or more inputs.
template <Combine combine> LogicalResult variadicRule(ShapeRuleContext &ctx) {
  SmallVector<unsigned> operands;
  for (unsigned i = 0; i < ctx.getOp()->getNumOperands(); ++i)
    operands.push_back(i);
  return inferElementwise(ctx, operands, combine, ResultType::SameAsFirst);
}

LogicalResult modRule(ShapeRuleContext &ctx) {
  bool fmod = cast<ModOp>(ctx.getOp()).getFmod() != 0;
  return inferElementwise(ctx, {0, 1},
                          fmod ? combineMod<true> : combineMod<false>,
                          ResultType::SameAsFirst);
}

LogicalResult whereRule(ShapeRuleContext &ctx) {
  if (!ctx.operand(0).elementType.isInteger(1))
    return ctx.fail() << "condition must be bool";
  return inferElementwise(ctx, {0, 1, 2}, combineWhere,
                          ResultType::SameAsSecond);
}

LogicalResult castRule(ShapeRuleContext &ctx) {
  auto op = cast<CastOp>(ctx.getOp());
  int64_t to = static_cast<int64_t>(op.getTo());
  Type target = getElementTypeForOnnx(ctx.getContext(), to);
  if (!target)
    return ctx.fail() << "Cast to " << getOnnxElementTypeName(to)
                      << " is not supported";
  Type source = ctx.operand(0).elementType;
  // Integer and bool values keep their value through integer and float
  // casts (shape values are small); anything else becomes unknown.
  Combine combine = nullptr;
  if (source && source.isInteger() && !target.isInteger(1))
    combine = combineIdentity;
  else if (source && source.isInteger() && target.isInteger(1))
    combine = combineToBool;
  if (failed(inferElementwise(ctx, {0}, combine, ResultType::SameAsFirst)))
    return failure();
  ctx.result().elementType = target;
  if (!target.isInteger())
    ctx.result().values.reset();
  return success();
}

/// Ops whose result has the first operand's shape and element type.
LogicalResult sameAsInputRule(ShapeRuleContext &ctx) {
  if (failed(requireRanked(ctx, 0, "the input")))
    return failure();
  TensorFacts &result = ctx.result();
  const TensorFacts &input = ctx.operand(0);
  result.ranked = true;
  result.dims = input.dims;
  result.elementType = input.elementType;
  return success();
}

LogicalResult dropoutRule(ShapeRuleContext &ctx) {
  if (failed(requireRanked(ctx, 0, "data")))
    return failure();
  const TensorFacts &data = ctx.operand(0);
  ctx.result(0) = data;
  if (ctx.getNumResults() > 1) {
    TensorFacts &mask = ctx.result(1);
    mask.ranked = true;
    mask.dims = data.dims;
    mask.elementType = IntegerType::get(ctx.getContext(), 1);
  }
  return success();
}

/// Shared by the three reductions.
LogicalResult reduceRule(ShapeRuleContext &ctx) {
  Operation *op = ctx.getOp();
  if (failed(requireRanked(ctx, 0, "data")))
    return failure();
  const TensorFacts &data = ctx.operand(0);
  int64_t rank = data.getRank();
  bool keepdims = op->getAttrOfType<IntegerAttr>("keepdims")
                      ? op->getAttrOfType<IntegerAttr>("keepdims").getInt() != 0
                      : true;
  auto noopAttr = op->getAttrOfType<IntegerAttr>("noop_with_empty_axes");
  bool noopWithEmptyAxes = noopAttr && noopAttr.getInt() != 0;
  SmallVector<bool> reduced(rank, false);
  SmallVector<int64_t, 4> axes;
  if (op->getNumOperands() > 1) {
    FailureOr<SmallVector<int64_t, 4>> values =
        requireConstantInts(ctx, 1, "axes");
    if (failed(values))
      return failure();
    axes = *values;
  }
  if (axes.empty()) {
    if (noopWithEmptyAxes) {
      ctx.result() = TensorFacts();
      ctx.result().ranked = true;
      ctx.result().dims = data.dims;
      ctx.result().elementType = data.elementType;
      return success();
    }
    reduced.assign(rank, true);
  }
  for (int64_t axis : axes) {
    FailureOr<int64_t> normalized = normalizeAxis(ctx, "axis", axis, rank);
    if (failed(normalized))
      return failure();
    reduced[*normalized] = true;
  }
  TensorFacts &result = ctx.result();
  result.ranked = true;
  result.elementType = data.elementType;
  for (int64_t i = 0; i < rank; ++i) {
    if (!reduced[i])
      result.dims.push_back(data.dims[i]);
    else if (keepdims)
      result.dims.push_back(ctx.constant(1));
  }
  return success();
}

/// Whether two contraction sizes can match; fails only on two different
/// constants.
LogicalResult checkContraction(ShapeRuleContext &ctx, AffineExpr lhs,
                               AffineExpr rhs, StringRef what) {
  std::optional<int64_t> a = getConstantValue(lhs);
  std::optional<int64_t> b = getConstantValue(rhs);
  if (a && b && *a != *b)
    return ctx.fail() << what << " sizes differ: " << *a << " and " << *b;
  return success();
}

LogicalResult matMulRule(ShapeRuleContext &ctx) {
  if (failed(requireRanked(ctx, 0, "A")) || failed(requireRanked(ctx, 1, "B")))
    return failure();
  SmallVector<AffineExpr, 4> a(ctx.operand(0).dims);
  SmallVector<AffineExpr, 4> b(ctx.operand(1).dims);
  if (a.empty() || b.empty())
    return ctx.fail() << "MatMul operands must have rank >= 1";
  bool vectorA = a.size() == 1, vectorB = b.size() == 1;
  if (vectorA)
    a.insert(a.begin(), ctx.constant(1));
  if (vectorB)
    b.push_back(ctx.constant(1));
  if (failed(checkContraction(ctx, a.back(), b[b.size() - 2],
                              "MatMul inner (contraction)")))
    return failure();
  ArrayRef<AffineExpr> batchA = ArrayRef<AffineExpr>(a).drop_back(2);
  ArrayRef<AffineExpr> batchB = ArrayRef<AffineExpr>(b).drop_back(2);
  FailureOr<SmallVector<AffineExpr, 4>> batch =
      broadcastDims(ctx, {batchA, batchB});
  if (failed(batch))
    return failure();
  TensorFacts &result = ctx.result();
  result.ranked = true;
  result.elementType = ctx.operand(0).elementType;
  result.dims = *batch;
  if (!vectorA)
    result.dims.push_back(a[a.size() - 2]);
  if (!vectorB)
    result.dims.push_back(b.back());
  return success();
}

LogicalResult gemmRule(ShapeRuleContext &ctx) {
  auto op = cast<GemmOp>(ctx.getOp());
  if (failed(requireRanked(ctx, 0, "A")) || failed(requireRanked(ctx, 1, "B")))
    return failure();
  ArrayRef<AffineExpr> a = ctx.operand(0).dims, b = ctx.operand(1).dims;
  if (a.size() != 2 || b.size() != 2)
    return ctx.fail() << "Gemm operands must be 2-D";
  bool transA = op.getTransA() != 0, transB = op.getTransB() != 0;
  AffineExpr m = transA ? a[1] : a[0], kA = transA ? a[0] : a[1];
  AffineExpr kB = transB ? b[1] : b[0], n = transB ? b[0] : b[1];
  if (failed(checkContraction(ctx, kA, kB, "Gemm inner (contraction)")))
    return failure();
  TensorFacts &result = ctx.result();
  result.ranked = true;
  result.elementType = ctx.operand(0).elementType;
  result.dims = {m, n};
  if (op.getC()) {
    if (failed(requireRanked(ctx, 2, "C")))
      return failure();
    if (failed(broadcastDims(ctx, {ArrayRef<AffineExpr>(result.dims),
                                   ArrayRef<AffineExpr>(ctx.operand(2).dims)})))
      return failure();
  }
  return success();
}

} // namespace

void sits::onnx::attachElementwiseShapeRules(MLIRContext *context) {
  attachShapeRule<sameAsInputRule, SqrtOp, ReciprocalOp, CosOp, SinOp, ExpOp,
                  LogOp, ErfOp, TanhOp, SigmoidOp, GeluOp, SoftmaxOp, CumSumOp,
                  ClipOp, TriluOp>(context);
  attachShapeRule<binaryRule<combineAdd>, AddOp>(context);
  attachShapeRule<binaryRule<combineSub>, SubOp>(context);
  attachShapeRule<binaryRule<combineMul>, MulOp>(context);
  attachShapeRule<binaryRule<combineDiv>, DivOp>(context);
  attachShapeRule<binaryRule<combinePow>, PowOp>(context);
  attachShapeRule<
      binaryRule<combineCompare<Comparison::Equal>, ResultType::Bool>, EqualOp>(
      context);
  attachShapeRule<
      binaryRule<combineCompare<Comparison::Less>, ResultType::Bool>, LessOp>(
      context);
  attachShapeRule<
      binaryRule<combineCompare<Comparison::LessOrEqual>, ResultType::Bool>,
      LessOrEqualOp>(context);
  attachShapeRule<
      binaryRule<combineCompare<Comparison::Greater>, ResultType::Bool>,
      GreaterOp>(context);
  attachShapeRule<
      binaryRule<combineCompare<Comparison::GreaterOrEqual>, ResultType::Bool>,
      GreaterOrEqualOp>(context);
  attachShapeRule<binaryRule<combineAnd, ResultType::Bool>, AndOp>(context);
  attachShapeRule<binaryRule<combineOr, ResultType::Bool>, OrOp>(context);
  attachShapeRule<unaryRule<combineNot, ResultType::Bool>, NotOp>(context);
  attachShapeRule<unaryRule<nullptr, ResultType::Bool>, IsNaNOp>(context);
  attachShapeRule<variadicRule<combineMinMax<true>>, MaxOp>(context);
  attachShapeRule<variadicRule<combineMinMax<false>>, MinOp>(context);
  attachShapeRule<variadicRule<combineSum>, SumOp>(context);
  attachShapeRule<whereRule, WhereOp>(context);
  attachShapeRule<modRule, ModOp>(context);
  attachShapeRule<castRule, CastOp>(context);
  attachShapeRule<unaryRule<combineNeg>, NegOp>(context);
  attachShapeRule<unaryRule<combineAbs>, AbsOp>(context);
  attachShapeRule<unaryRule<combineRelu>, ReluOp>(context);
  attachShapeRule<unaryRule<combineIdentity>, IdentityOp>(context);
  attachShapeRule<dropoutRule, DropoutOp>(context);
  attachShapeRule<reduceRule, ReduceMeanOp, ReduceSumOp, ReduceMaxOp>(context);
  attachShapeRule<matMulRule, MatMulOp>(context);
  attachShapeRule<gemmRule, GemmOp>(context);
}
