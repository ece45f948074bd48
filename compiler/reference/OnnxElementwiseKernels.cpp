//===- OnnxElementwiseKernels.cpp - Elementwise and reduction onnx ops ----===//
//
// ONNX semantics: numpy broadcasting, integer arithmetic in i64 (wrapped to
// the result type), floats in f32 (rounded to the result type afterwards).
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

//===----------------------------------------------------------------------===//
// One input
//===----------------------------------------------------------------------===//

namespace {
enum class Unary {
  Abs,
  Cos,
  Erf,
  Exp,
  Identity,
  IsNaN,
  Log,
  Neg,
  Not,
  Reciprocal,
  Relu,
  Sigmoid,
  Sin,
  Sqrt,
  Tanh,
  GeluErf,
  GeluTanh
};
} // namespace

static float applyUnary(Unary kind, float x) {
  switch (kind) {
  case Unary::Abs:
    return std::fabs(x);
  case Unary::Cos:
    return std::cos(x);
  case Unary::Erf:
    return std::erf(x);
  case Unary::Exp:
    return std::exp(x);
  case Unary::Log:
    return std::log(x);
  case Unary::Neg:
    return -x;
  case Unary::Reciprocal:
    return 1.0f / x;
  case Unary::Relu:
    return x > 0.0f ? x : 0.0f;
  case Unary::Sigmoid:
    return sigmoidF32(x);
  case Unary::Sin:
    return std::sin(x);
  case Unary::Sqrt:
    return std::sqrt(x);
  case Unary::Tanh:
    return std::tanh(x);
  case Unary::GeluErf:
    return geluErfF32(x);
  case Unary::GeluTanh:
    return geluTanhF32(x);
  default:
    return x;
  }
}

static llvm::Error runUnary(KernelContext &context, Unary kind) {
  const Tensor &x = context.operand(0);
  int64_t count = x.getNumElements();
  if (kind == Unary::Identity) {
    context.setResult(0, context.value(context.getOp()->getOperand(0)));
    return llvm::Error::success();
  }
  Tensor result = context.makeResult(0, x.getShape());
  if (kind == Unary::IsNaN || kind == Unary::Not) {
    if (result.isFloat() || (kind == Unary::IsNaN && !x.isFloat()) ||
        (kind == Unary::Not && x.isFloat()))
      return context.error("unsupported operand or result element type");
    for (int64_t i = 0; i < count; ++i)
      result.ints()[i] =
          kind == Unary::IsNaN ? std::isnan(x.floats()[i]) : !x.ints()[i];
  } else if (!x.isFloat()) {
    // Integer Abs and Neg; the float-only ops reject integers.
    if (kind != Unary::Abs && kind != Unary::Neg && kind != Unary::Relu)
      return context.error("integer operands are not supported");
    for (int64_t i = 0; i < count; ++i) {
      int64_t v = x.ints()[i];
      result.ints()[i] = kind == Unary::Abs   ? (v < 0 ? -v : v)
                         : kind == Unary::Neg ? -v
                                              : std::max<int64_t>(v, 0);
    }
  } else {
    for (int64_t i = 0; i < count; ++i)
      result.floats()[i] = applyUnary(kind, x.floats()[i]);
  }
  context.setResult(0, std::move(result));
  return llvm::Error::success();
}

template <Unary kind> static llvm::Error runUnaryOp(KernelContext &context) {
  return runUnary(context, kind);
}

static llvm::Error runGelu(KernelContext &context) {
  std::string approximate = stringAttr(context.getOp(), "approximate", "none");
  if (approximate != "none" && approximate != "tanh")
    return context.error("unknown approximate '" + approximate + "'");
  return runUnary(context,
                  approximate == "tanh" ? Unary::GeluTanh : Unary::GeluErf);
}

static llvm::Error runCast(KernelContext &context) {
  context.setResult(0, context.operand(0).castTo(context.resultType(0)));
  return llvm::Error::success();
}

static llvm::Error runDropout(KernelContext &context) {
  // Training mode draws a random mask: sits compiles for inference.
  if (const Tensor *training = inputTensor(context, 2))
    if (training->getNumElements() == 1 && training->getAsInt(0) != 0)
      return context.error("training_mode is true: Dropout would draw a "
                           "random mask, and sits runs inference only");
  context.setResult(0, context.value(context.getOp()->getOperand(0)));
  if (context.getOp()->getNumResults() > 1) {
    Tensor mask = context.makeResult(1, context.operand(0).getShape());
    std::fill(mask.ints().begin(), mask.ints().end(), 1);
    context.setResult(1, std::move(mask));
  }
  return llvm::Error::success();
}

static llvm::Error runClip(KernelContext &context) {
  const Tensor &x = context.operand(0);
  const Tensor *low = inputTensor(context, 1);
  const Tensor *high = inputTensor(context, 2);
  for (const Tensor *bound : {low, high})
    if (bound && bound->getNumElements() != 1)
      return context.error("min and max must be scalars");
  Tensor result = context.makeResult(0, x.getShape());
  for (int64_t i = 0; i < x.getNumElements(); ++i) {
    if (x.isFloat()) {
      float v = x.floats()[i];
      if (low)
        v = std::max(v, static_cast<float>(low->getAsDouble(0)));
      if (high)
        v = std::min(v, static_cast<float>(high->getAsDouble(0)));
      result.floats()[i] = v;
    } else {
      int64_t v = x.ints()[i];
      if (low)
        v = std::max(v, low->getAsInt(0));
      if (high)
        v = std::min(v, high->getAsInt(0));
      result.ints()[i] = v;
    }
  }
  context.setResult(0, std::move(result));
  return llvm::Error::success();
}

static llvm::Error runCumSum(KernelContext &context) {
  const Tensor &x = context.operand(0);
  const Tensor &axisTensor = context.operand(1);
  if (axisTensor.getNumElements() != 1)
    return context.error("axis must be a scalar");
  llvm::Expected<int64_t> axis =
      normalizeAxis(context, axisTensor.getAsInt(0), x.getRank());
  if (!axis)
    return axis.takeError();
  bool exclusive = intAttr(context.getOp(), "exclusive", 0) != 0;
  bool reverse = intAttr(context.getOp(), "reverse", 0) != 0;
  int64_t length = x.getDim(*axis);
  int64_t inner = numElementsOf(x.getShape().drop_front(*axis + 1));
  int64_t outer = numElementsOf(x.getShape().take_front(*axis));
  Tensor result = context.makeResult(0, x.getShape());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t in = 0; in < inner; ++in) {
      float floatSum = 0.0f;
      int64_t intSum = 0;
      for (int64_t step = 0; step < length; ++step) {
        int64_t k = reverse ? length - 1 - step : step;
        int64_t index = (o * length + k) * inner + in;
        if (x.isFloat()) {
          if (!exclusive)
            floatSum += x.floats()[index];
          result.floats()[index] = floatSum;
          if (exclusive)
            floatSum += x.floats()[index];
        } else {
          if (!exclusive)
            intSum += x.ints()[index];
          result.ints()[index] = intSum;
          if (exclusive)
            intSum += x.ints()[index];
        }
      }
    }
  context.setResult(0, std::move(result));
  return llvm::Error::success();
}

//===----------------------------------------------------------------------===//
// Broadcasting
//===----------------------------------------------------------------------===//

namespace {
enum class Binary {
  Add,
  Sub,
  Mul,
  Div,
  Pow,
  Equal,
  Less,
  LessOrEqual,
  Greater,
  GreaterOrEqual,
  And,
  Or,
  Max,
  Min,
  /// Mod with the divisor's sign (`fmod = 0`), with the dividend's (1).
  Mod,
  FMod
};
} // namespace

static bool isComparison(Binary kind) {
  return kind == Binary::Equal || kind == Binary::Less ||
         kind == Binary::LessOrEqual || kind == Binary::Greater ||
         kind == Binary::GreaterOrEqual;
}

static float floatBinary(Binary kind, float a, float b) {
  switch (kind) {
  case Binary::Add:
    return a + b;
  case Binary::Sub:
    return a - b;
  case Binary::Mul:
    return a * b;
  case Binary::Div:
    return a / b;
  case Binary::Pow:
    // x^2 is the exporters' square (RMSNorm); keep it exact as x * x.
    return b == 2.0f ? a * a : std::pow(a, b);
  case Binary::Max:
    return std::isnan(a) || std::isnan(b) ? std::nanf("") : std::max(a, b);
  case Binary::Min:
    return std::isnan(a) || std::isnan(b) ? std::nanf("") : std::min(a, b);
  case Binary::FMod:
    return std::fmod(a, b);
  default:
    return 0.0f;
  }
}

template <typename T> static bool compareValues(Binary kind, T a, T b) {
  switch (kind) {
  case Binary::Equal:
    return a == b;
  case Binary::Less:
    return a < b;
  case Binary::LessOrEqual:
    return a <= b;
  case Binary::Greater:
    return a > b;
  default:
    return a >= b;
  }
}

static int64_t intPow(int64_t base, int64_t exponent) {
  int64_t result = 1;
  for (int64_t i = 0; i < exponent; ++i)
    result *= base;
  return exponent < 0 ? 0 : result;
}

/// `result = a (op) b` with numpy broadcasting; `result` already sized.
static llvm::Error binaryInto(KernelContext &context, Binary kind,
                              const Tensor &a, const Tensor &b,
                              Tensor &result) {
  auto stridesA = broadcastStrides(a.getShape(), result.getShape());
  auto stridesB = broadcastStrides(b.getShape(), result.getShape());
  std::array<llvm::SmallVector<int64_t, 6>, 2> strides = {*stridesA, *stridesB};
  llvm::ArrayRef<int64_t> shape = result.getShape();
  if (isComparison(kind)) {
    bool useFloat = a.isFloat() || b.isFloat();
    forEachBroadcast<2>(shape, strides, [&](int64_t out, auto offsets) {
      result.ints()[out] =
          useFloat
              ? compareValues(kind, a.getAsDouble(offsets[0]),
                              b.getAsDouble(offsets[1]))
              : compareValues(kind, a.ints()[offsets[0]], b.ints()[offsets[1]]);
    });
    return llvm::Error::success();
  }
  if (kind == Binary::And || kind == Binary::Or) {
    if (a.isFloat() || b.isFloat())
      return context.error("logical ops need bool operands");
    forEachBroadcast<2>(shape, strides, [&](int64_t out, auto offsets) {
      bool x = a.ints()[offsets[0]] != 0, y = b.ints()[offsets[1]] != 0;
      result.ints()[out] = kind == Binary::And ? (x && y) : (x || y);
    });
    return llvm::Error::success();
  }
  if (result.isFloat()) {
    if (!a.isFloat())
      return context.error("an integer operand with a float result");
    // Pow may take an integer exponent.
    bool exponentIsInt = !b.isFloat();
    forEachBroadcast<2>(shape, strides, [&](int64_t out, auto offsets) {
      float y = exponentIsInt ? static_cast<float>(b.ints()[offsets[1]])
                              : b.floats()[offsets[1]];
      result.floats()[out] = floatBinary(kind, a.floats()[offsets[0]], y);
    });
    return llvm::Error::success();
  }
  if (kind == Binary::Pow && !a.isFloat() && b.isFloat()) {
    // An integer base to a float power: the power in double, truncated to
    // the base's type as Cast truncates (NaN 0, saturating past i64).
    forEachBroadcast<2>(shape, strides, [&](int64_t out, auto offsets) {
      double power = std::pow(static_cast<double>(a.ints()[offsets[0]]),
                              static_cast<double>(b.floats()[offsets[1]]));
      constexpr double kLimit = 9.2233720368547758e18;
      result.ints()[out] =
          std::isnan(power)  ? 0
          : power >= kLimit  ? std::numeric_limits<int64_t>::max()
          : power <= -kLimit ? std::numeric_limits<int64_t>::min()
                             : static_cast<int64_t>(power);
    });
    return llvm::Error::success();
  }
  if (a.isFloat() || b.isFloat())
    return context.error("a float operand with an integer result");
  bool divisionByZero = false;
  forEachBroadcast<2>(shape, strides, [&](int64_t out, auto offsets) {
    int64_t x = a.ints()[offsets[0]], y = b.ints()[offsets[1]];
    int64_t value = 0;
    switch (kind) {
    case Binary::Add:
      value = static_cast<int64_t>(static_cast<uint64_t>(x) + y);
      break;
    case Binary::Sub:
      value = static_cast<int64_t>(static_cast<uint64_t>(x) - y);
      break;
    case Binary::Mul:
      value = static_cast<int64_t>(static_cast<uint64_t>(x) * y);
      break;
    case Binary::Div:
      divisionByZero |= y == 0;
      value = y == 0 ? 0 : x / y;
      break;
    case Binary::Pow:
      value = intPow(x, y);
      break;
    case Binary::Max:
      value = std::max(x, y);
      break;
    case Binary::Min:
      value = std::min(x, y);
      break;
    case Binary::Mod:
    case Binary::FMod:
      divisionByZero |= y == 0;
      // INT64_MIN % -1 overflows in C++; the remainder is 0.
      value = y == 0 || y == -1 ? 0 : x % y;
      if (kind == Binary::Mod && value != 0 && (value < 0) != (y < 0))
        value += y;
      break;
    default:
      break;
    }
    result.ints()[out] = value;
  });
  if (divisionByZero)
    return context.error("integer division by zero");
  return llvm::Error::success();
}

static llvm::Error runBinary(KernelContext &context, Binary kind) {
  const Tensor &a = context.operand(0);
  const Tensor &b = context.operand(1);
  llvm::Expected<Shape> shape = broadcastShapes(context, {&a, &b});
  if (!shape)
    return shape.takeError();
  Tensor result = context.makeResult(0, *shape);
  if (llvm::Error error = binaryInto(context, kind, a, b, result))
    return error;
  context.setResult(0, std::move(result));
  return llvm::Error::success();
}

template <Binary kind> static llvm::Error runBinaryOp(KernelContext &context) {
  return runBinary(context, kind);
}

static llvm::Error runMod(KernelContext &context) {
  bool fmod = intAttr(context.getOp(), "fmod", 0) != 0;
  if (!fmod && context.operand(0).isFloat())
    return context.error("float operands need fmod = 1");
  return runBinary(context, fmod ? Binary::FMod : Binary::Mod);
}

/// Max, Min and Sum of one or more inputs, folded left to right.
template <Binary kind>
static llvm::Error runVariadicOp(KernelContext &context) {
  llvm::SmallVector<const Tensor *> tensors;
  for (Value operand : context.getOp()->getOperands())
    tensors.push_back(&context.tensor(operand));
  if (tensors.empty())
    return context.error("needs at least one input");
  llvm::Expected<Shape> shape = broadcastShapes(context, tensors);
  if (!shape)
    return shape.takeError();
  Tensor accumulated = tensors[0]->castTo(context.resultType(0));
  for (size_t i = 1; i < tensors.size(); ++i) {
    llvm::Expected<Shape> merged =
        broadcastShapes(context, {&accumulated, tensors[i]});
    if (!merged)
      return merged.takeError();
    Tensor next = context.makeResult(0, *merged);
    if (llvm::Error error =
            binaryInto(context, kind, accumulated, *tensors[i], next))
      return error;
    accumulated = std::move(next);
  }
  context.setResult(0, std::move(accumulated));
  return llvm::Error::success();
}

static llvm::Error runWhere(KernelContext &context) {
  const Tensor &condition = context.operand(0);
  const Tensor &x = context.operand(1);
  const Tensor &y = context.operand(2);
  if (condition.isFloat() || x.isFloat() != y.isFloat())
    return context.error("condition must be bool and X, Y of one type");
  llvm::Expected<Shape> shape = broadcastShapes(context, {&condition, &x, &y});
  if (!shape)
    return shape.takeError();
  Tensor result = context.makeResult(0, *shape);
  std::array<llvm::SmallVector<int64_t, 6>, 3> strides = {
      *broadcastStrides(condition.getShape(), *shape),
      *broadcastStrides(x.getShape(), *shape),
      *broadcastStrides(y.getShape(), *shape)};
  forEachBroadcast<3>(*shape, strides, [&](int64_t out, auto offsets) {
    bool pick = condition.ints()[offsets[0]] != 0;
    if (result.isFloat())
      result.floats()[out] =
          pick ? x.floats()[offsets[1]] : y.floats()[offsets[2]];
    else
      result.ints()[out] = pick ? x.ints()[offsets[1]] : y.ints()[offsets[2]];
  });
  context.setResult(0, std::move(result));
  return llvm::Error::success();
}

//===----------------------------------------------------------------------===//
// Reductions and softmax
//===----------------------------------------------------------------------===//

namespace {
enum class Reduce { Mean, Sum, Max };
} // namespace

static llvm::Error runReduce(KernelContext &context, Reduce kind) {
  Operation *op = context.getOp();
  const Tensor &data = context.operand(0);
  const Tensor *axesTensor = inputTensor(context, 1);
  bool keepDims = intAttr(op, "keepdims", 1) != 0;
  bool noopWithEmptyAxes = intAttr(op, "noop_with_empty_axes", 0) != 0;
  int64_t rank = data.getRank();
  llvm::SmallVector<bool, 6> reduced(rank, false);
  std::vector<int64_t> axes =
      axesTensor ? intValues(*axesTensor) : std::vector<int64_t>();
  if (axes.empty()) {
    if (noopWithEmptyAxes) {
      context.setResult(0, context.value(op->getOperand(0)));
      return llvm::Error::success();
    }
    reduced.assign(rank, true);
  }
  for (int64_t axis : axes) {
    llvm::Expected<int64_t> normalized = normalizeAxis(context, axis, rank);
    if (!normalized)
      return normalized.takeError();
    reduced[*normalized] = true;
  }
  Shape keptShape, outShape;
  for (int64_t d = 0; d < rank; ++d) {
    keptShape.push_back(reduced[d] ? 1 : data.getDim(d));
    if (!reduced[d] || keepDims)
      outShape.push_back(keptShape.back());
  }
  int64_t outCount = numElementsOf(keptShape);
  int64_t reducedCount = outCount ? data.getNumElements() / outCount : 0;
  // Each input element adds into the output element it reduces to, in input
  // order (strides of the kept shape, 0 on reduced dims).
  llvm::SmallVector<int64_t, 6> outStrides = stridesOf(keptShape);
  for (int64_t d = 0; d < rank; ++d)
    if (reduced[d])
      outStrides[d] = 0;
  std::array<llvm::SmallVector<int64_t, 6>, 1> strides = {outStrides};
  Tensor result = context.makeResult(0, outShape);
  if (data.isFloat() != result.isFloat())
    return context.error("result type must match the data type");
  if (result.isFloat()) {
    std::vector<float> accumulator(
        outCount,
        kind == Reduce::Max ? -std::numeric_limits<float>::infinity() : 0.0f);
    forEachBroadcast<1>(data.getShape(), strides, [&](int64_t in, auto out) {
      float x = data.floats()[in];
      float &acc = accumulator[out[0]];
      if (kind == Reduce::Max)
        acc =
            std::isnan(x) || std::isnan(acc) ? std::nanf("") : std::max(acc, x);
      else
        acc += x;
    });
    for (int64_t i = 0; i < outCount; ++i)
      result.floats()[i] =
          kind == Reduce::Mean
              ? accumulator[i] / static_cast<float>(reducedCount)
              : accumulator[i];
  } else {
    std::vector<int64_t> accumulator(
        outCount,
        kind == Reduce::Max ? std::numeric_limits<int64_t>::min() : 0);
    forEachBroadcast<1>(data.getShape(), strides, [&](int64_t in, auto out) {
      int64_t x = data.ints()[in];
      accumulator[out[0]] = kind == Reduce::Max
                                ? std::max(accumulator[out[0]], x)
                                : accumulator[out[0]] + x;
    });
    for (int64_t i = 0; i < outCount; ++i)
      result.ints()[i] = kind == Reduce::Mean && reducedCount
                             ? accumulator[i] / reducedCount
                             : accumulator[i];
  }
  context.setResult(0, std::move(result));
  return llvm::Error::success();
}

template <Reduce kind> static llvm::Error runReduceOp(KernelContext &context) {
  return runReduce(context, kind);
}

static llvm::Error runSoftmax(KernelContext &context) {
  const Tensor &x = context.operand(0);
  if (!x.isFloat())
    return context.error("softmax needs a float input");
  llvm::Expected<int64_t> axis =
      normalizeAxis(context, intAttr(context.getOp(), "axis", -1), x.getRank());
  if (!axis)
    return axis.takeError();
  int64_t length = x.getDim(*axis);
  int64_t inner = numElementsOf(x.getShape().drop_front(*axis + 1));
  int64_t outer = numElementsOf(x.getShape().take_front(*axis));
  Tensor result = context.makeResult(0, x.getShape());
  // As the function body (ReduceMax, Sub, Exp, ReduceSum, Div): each step's
  // result in the input's type, so f16 and bf16 round at every step.
  ElementType type = result.getElementType();
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t in = 0; in < inner; ++in) {
      auto at = [&](int64_t k) { return (o * length + k) * inner + in; };
      float top = -std::numeric_limits<float>::infinity();
      for (int64_t k = 0; k < length; ++k)
        top = std::isnan(x.floats()[at(k)]) ? x.floats()[at(k)]
                                            : std::max(top, x.floats()[at(k)]);
      // An all -inf row gives exp(-inf - -inf) = NaN, as ONNX does.
      float sum = 0.0f;
      for (int64_t k = 0; k < length; ++k) {
        float e = roundToFloatType(
            std::exp(roundToFloatType(x.floats()[at(k)] - top, type)), type);
        result.floats()[at(k)] = e;
        sum += e;
      }
      sum = roundToFloatType(sum, type);
      for (int64_t k = 0; k < length; ++k)
        result.floats()[at(k)] /= sum;
    }
  context.setResult(0, std::move(result));
  return llvm::Error::success();
}

void onnx::attachOnnxElementwiseKernels(MLIRContext *context) {
  attachKernel<runUnaryOp<Unary::Abs>, sits::onnx::AbsOp>(context);
  attachKernel<runUnaryOp<Unary::Cos>, sits::onnx::CosOp>(context);
  attachKernel<runUnaryOp<Unary::Erf>, sits::onnx::ErfOp>(context);
  attachKernel<runUnaryOp<Unary::Exp>, sits::onnx::ExpOp>(context);
  attachKernel<runUnaryOp<Unary::Identity>, sits::onnx::IdentityOp>(context);
  attachKernel<runUnaryOp<Unary::IsNaN>, sits::onnx::IsNaNOp>(context);
  attachKernel<runUnaryOp<Unary::Log>, sits::onnx::LogOp>(context);
  attachKernel<runUnaryOp<Unary::Neg>, sits::onnx::NegOp>(context);
  attachKernel<runUnaryOp<Unary::Not>, sits::onnx::NotOp>(context);
  attachKernel<runUnaryOp<Unary::Reciprocal>, sits::onnx::ReciprocalOp>(
      context);
  attachKernel<runUnaryOp<Unary::Relu>, sits::onnx::ReluOp>(context);
  attachKernel<runUnaryOp<Unary::Sigmoid>, sits::onnx::SigmoidOp>(context);
  attachKernel<runUnaryOp<Unary::Sin>, sits::onnx::SinOp>(context);
  attachKernel<runUnaryOp<Unary::Sqrt>, sits::onnx::SqrtOp>(context);
  attachKernel<runUnaryOp<Unary::Tanh>, sits::onnx::TanhOp>(context);
  attachKernel<runGelu, sits::onnx::GeluOp>(context);
  attachKernel<runCast, sits::onnx::CastOp>(context);
  attachKernel<runClip, sits::onnx::ClipOp>(context);
  attachKernel<runDropout, sits::onnx::DropoutOp>(context);
  attachKernel<runCumSum, sits::onnx::CumSumOp>(context);
  attachKernel<runBinaryOp<Binary::Add>, sits::onnx::AddOp>(context);
  attachKernel<runBinaryOp<Binary::Sub>, sits::onnx::SubOp>(context);
  attachKernel<runBinaryOp<Binary::Mul>, sits::onnx::MulOp>(context);
  attachKernel<runBinaryOp<Binary::Div>, sits::onnx::DivOp>(context);
  attachKernel<runBinaryOp<Binary::Pow>, sits::onnx::PowOp>(context);
  attachKernel<runBinaryOp<Binary::Equal>, sits::onnx::EqualOp>(context);
  attachKernel<runBinaryOp<Binary::Less>, sits::onnx::LessOp>(context);
  attachKernel<runBinaryOp<Binary::LessOrEqual>, sits::onnx::LessOrEqualOp>(
      context);
  attachKernel<runBinaryOp<Binary::Greater>, sits::onnx::GreaterOp>(context);
  attachKernel<runBinaryOp<Binary::GreaterOrEqual>,
               sits::onnx::GreaterOrEqualOp>(context);
  attachKernel<runBinaryOp<Binary::And>, sits::onnx::AndOp>(context);
  attachKernel<runBinaryOp<Binary::Or>, sits::onnx::OrOp>(context);
  attachKernel<runMod, sits::onnx::ModOp>(context);
  attachKernel<runVariadicOp<Binary::Max>, sits::onnx::MaxOp>(context);
  attachKernel<runVariadicOp<Binary::Min>, sits::onnx::MinOp>(context);
  attachKernel<runVariadicOp<Binary::Add>, sits::onnx::SumOp>(context);
  attachKernel<runWhere, sits::onnx::WhereOp>(context);
  attachKernel<runReduceOp<Reduce::Mean>, sits::onnx::ReduceMeanOp>(context);
  attachKernel<runReduceOp<Reduce::Sum>, sits::onnx::ReduceSumOp>(context);
  attachKernel<runReduceOp<Reduce::Max>, sits::onnx::ReduceMaxOp>(context);
  attachKernel<runSoftmax, sits::onnx::SoftmaxOp>(context);
}
