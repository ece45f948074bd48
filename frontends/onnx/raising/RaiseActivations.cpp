//===- RaiseActivations.cpp - Activations and gated units -----------------===//
//
// SiLU `x * Sigmoid(x)`, GELU as the `Gelu` op or spelled out with Erf
// (`x/2 * (1 + erf(x / sqrt 2))`) or Tanh (`x/2 * (1 + tanh(sqrt(2/pi) *
// (x + 0.044715 x^3)))`), ReLU and Sigmoid become sits.activation. Products
// are compared as products (any association and order of the factors, Div by
// a constant as a factor), with the constants checked. Then an activation
// multiplied by a tensor of the same shape is a gated unit (SwiGLU, GeGLU).
//
//===----------------------------------------------------------------------===//

#include "frontends/onnx/raising/RaisingSupport.h"

#include <cmath>

using namespace mlir;
using namespace sits;
using namespace sits::onnx;
using namespace sits::onnx::raising;

namespace {

constexpr double kInvSqrt2 = 0.70710678118654752440;
constexpr double kSqrt2OverPi = 0.79788456080286535588;
constexpr double kGeluCubic = 0.044715;

bool near(double actual, double expected, double tolerance = 1e-5) {
  return std::abs(actual - expected) <=
         tolerance * std::max(1.0, std::abs(expected));
}

/// Whether `product` is exactly `scale * x` (one factor).
bool isScaled(const Product &product, Value x, double scale) {
  return product.factors.size() == 1 && product.factors[0] == x &&
         near(product.scale, scale);
}

/// Whether `factors` holds exactly `a` and `b` (in any order).
bool holdsExactly(ArrayRef<Value> factors, Value a, Value b) {
  return factors.size() == 2 && ((factors[0] == a && factors[1] == b) ||
                                 (factors[0] == b && factors[1] == a));
}

/// From `start` (the `1 + f(x)` term) up through Mul/Div-by-constant users,
/// the first value that is `0.5 * x * start`; null if there is none.
Value climbToHalfProduct(Value start, Value x,
                         SmallVectorImpl<Operation *> &ops) {
  Value current = start;
  for (int depth = 0; depth < 4; ++depth) {
    Operation *user = getSingleUser(current);
    if (!isa_and_nonnull<MulOp, DivOp>(user))
      return nullptr;
    Value next = user->getResult(0);
    Product product = collectProduct(next);
    if (holdsExactly(product.factors, x, start) && near(product.scale, 0.5)) {
      ops.append(product.ops.begin(), product.ops.end());
      return next;
    }
    current = next;
  }
  return nullptr;
}

/// `1 + t` for the user of `t`; null otherwise.
Value matchOnePlus(Value t, SmallVectorImpl<Operation *> &ops) {
  auto add = dyn_cast_or_null<onnx::AddOp>(getSingleUser(t));
  if (!add || !isScalarConstant(otherOperand(add, t), 1.0))
    return nullptr;
  ops.push_back(add);
  return add.getC();
}

struct ActivationMatch {
  Activation kind;
  Value input, result;
  SmallVector<Operation *> ops;
  const char *rule;
};

std::optional<ActivationMatch> matchErfGelu(ErfOp erf) {
  Product argument = collectProduct(erf.getInput());
  if (argument.factors.size() != 1 || !near(argument.scale, kInvSqrt2))
    return std::nullopt;
  Value x = argument.factors[0];
  ActivationMatch match{Activation::gelu, x, nullptr, {erf}, ""};
  match.ops.append(argument.ops.begin(), argument.ops.end());
  Value onePlus = matchOnePlus(erf.getOutput(), match.ops);
  if (!onePlus)
    return std::nullopt;
  match.result = climbToHalfProduct(onePlus, x, match.ops);
  if (!match.result)
    return std::nullopt;
  match.rule = "x/2 * (1 + erf(x / sqrt(2))) with the constants checked: "
               "exact GELU";
  return match;
}

/// `x^3` as Pow(x, 3) or a product of three x.
bool isCube(Value value, Value x, double &scale,
            SmallVectorImpl<Operation *> &ops) {
  Product product = collectProduct(value);
  scale = product.scale;
  if (product.factors.size() == 3 &&
      llvm::all_of(product.factors, [&](Value f) { return f == x; })) {
    ops.append(product.ops.begin(), product.ops.end());
    return true;
  }
  if (product.factors.size() == 1)
    if (auto pow = definedBy<PowOp>(product.factors[0]))
      if (pow.getA() == x && isScalarConstant(pow.getB(), 3.0)) {
        ops.append(product.ops.begin(), product.ops.end());
        ops.push_back(pow);
        return true;
      }
  return false;
}

std::optional<ActivationMatch> matchTanhGelu(TanhOp tanh) {
  Product argument = collectProduct(tanh.getInput());
  if (argument.factors.size() != 1 || !near(argument.scale, kSqrt2OverPi))
    return std::nullopt;
  auto inner = definedBy<onnx::AddOp>(argument.factors[0]);
  if (!inner)
    return std::nullopt;
  ActivationMatch match{Activation::gelu_tanh, nullptr, nullptr, {tanh}, ""};
  match.ops.append(argument.ops.begin(), argument.ops.end());
  for (Value x : {inner.getA(), inner.getB()}) {
    double scale = 0.0;
    SmallVector<Operation *> cubeOps;
    if (isCube(otherOperand(inner, x), x, scale, cubeOps) &&
        near(scale, kGeluCubic, 1e-4)) {
      match.input = x;
      match.ops.push_back(inner);
      match.ops.append(cubeOps.begin(), cubeOps.end());
      break;
    }
  }
  if (!match.input)
    return std::nullopt;
  Value onePlus = matchOnePlus(tanh.getOutput(), match.ops);
  if (!onePlus)
    return std::nullopt;
  match.result = climbToHalfProduct(onePlus, match.input, match.ops);
  if (!match.result)
    return std::nullopt;
  match.rule = "x/2 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3))) with the "
               "constants checked: GELU, tanh approximation";
  return match;
}

std::optional<ActivationMatch> matchSilu(MulOp mul) {
  for (Value side : {mul.getA(), mul.getB()})
    if (auto sigmoid = definedBy<SigmoidOp>(side))
      if (otherOperand(mul, side) == sigmoid.getInput())
        return ActivationMatch{Activation::silu,
                               sigmoid.getInput(),
                               mul.getC(),
                               {sigmoid, mul},
                               "x * sigmoid(x) of the same x: SiLU"};
  return std::nullopt;
}

void createActivation(RaiseContext &rc, const ActivationMatch &match) {
  if (!getFloatElementType(match.input) ||
      match.input.getType() != match.result.getType())
    return;
  OpBuilder &b = rc.getBuilder();
  b.setInsertionPointAfterValue(match.result);
  auto activation = ActivationOp::create(
      b, rc.getFusedLoc(match.ops), match.result.getType(), match.input,
      ActivationAttr::get(b.getContext(), match.kind));
  Value result = match.result;
  result.replaceAllUsesWith(activation.getResult());
  rc.recordRaise("activations_raised", match.ops,
                 ("sits.activation " + stringifyActivation(match.kind)).str(),
                 match.rule);
}

} // namespace

void sits::onnx::raising::raiseActivations(RaiseContext &rc) {
  func::FuncOp function = rc.getFunction();
  for (MulOp mul : collectOps<MulOp>(function))
    if (std::optional<ActivationMatch> match = matchSilu(mul))
      createActivation(rc, *match);
  for (ErfOp erf : collectOps<ErfOp>(function)) {
    if (std::optional<ActivationMatch> match = matchErfGelu(erf))
      createActivation(rc, *match);
    else
      rc.noteNotRaised(erf, "this Erf is not part of x/2 * (1 + erf(x / "
                            "sqrt(2))) with those constants");
  }
  for (TanhOp tanh : collectOps<TanhOp>(function))
    if (std::optional<ActivationMatch> match = matchTanhGelu(tanh))
      createActivation(rc, *match);
  for (GeluOp gelu : collectOps<GeluOp>(function))
    createActivation(rc,
                     {gelu.getApproximate() == "tanh" ? Activation::gelu_tanh
                                                      : Activation::gelu,
                      gelu.getInput(),
                      gelu.getOutput(),
                      {gelu},
                      "the Gelu op"});
  for (ReluOp relu : collectOps<ReluOp>(function))
    createActivation(rc, {Activation::relu,
                          relu.getInput(),
                          relu.getOutput(),
                          {relu},
                          "the Relu op"});
  // Sigmoids that are not part of a SiLU (whose Mul is now dead).
  for (SigmoidOp sigmoid : collectOps<SigmoidOp>(function)) {
    bool partOfSilu =
        llvm::any_of(sigmoid.getOutput().getUsers(), [&](Operation *user) {
          auto mul = dyn_cast<MulOp>(user);
          return mul &&
                 otherOperand(mul, sigmoid.getOutput()) == sigmoid.getInput();
        });
    if (!partOfSilu)
      createActivation(rc, {Activation::sigmoid,
                            sigmoid.getInput(),
                            sigmoid.getOutput(),
                            {sigmoid},
                            "the Sigmoid op"});
  }
}

void sits::onnx::raising::raiseGatedUnits(RaiseContext &rc) {
  SymbolicShapes &shapes = rc.getShapes();
  for (MulOp mul : collectOps<MulOp>(rc.getFunction())) {
    for (Value side : {mul.getA(), mul.getB()}) {
      auto activation = definedBy<ActivationOp>(side);
      Value up = otherOperand(mul, side);
      if (!activation || !up)
        continue;
      Value gate = activation.getInput();
      if (gate.getType() != up.getType() ||
          mul.getC().getType() != gate.getType() ||
          !shapes.haveSameDims(gate, up)) {
        rc.noteNotRaised(mul, "an activation times a tensor of another shape "
                              "is not a gated unit");
        continue;
      }
      OpBuilder &b = rc.getBuilder();
      b.setInsertionPoint(mul);
      SmallVector<Operation *> ops{activation, mul};
      auto glu = GLUOp::create(b, rc.getFusedLoc(ops), mul.getC().getType(),
                               gate, up, activation.getKindAttr());
      mul.getC().replaceAllUsesWith(glu.getResult());
      rc.recordRaise(
          "glus_raised", ops,
          ("sits.glu " + stringifyActivation(activation.getKind())).str(),
          "act(gate) * up with gate and up of the same shape: a "
          "gated unit (SwiGLU with SiLU, GeGLU with GELU)");
      break;
    }
  }
}
