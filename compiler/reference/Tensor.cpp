//===- Tensor.cpp - Host tensors of the reference executor ----------------===//

#include "compiler/reference/Tensor.h"
#include "dialects/sits/SitsDialect.h"
#include "dialects/sits/WeightView.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "llvm/ADT/APFloat.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <cstring>
#include <limits>

using namespace mlir;
using namespace sits::reference;

//===----------------------------------------------------------------------===//
// Element types and rounding
//===----------------------------------------------------------------------===//

bool sits::reference::isFloat(ElementType type) {
  return type == ElementType::F32 || type == ElementType::F16 ||
         type == ElementType::BF16 || type == ElementType::F64;
}

bool sits::reference::isUnsigned(ElementType type) {
  return type == ElementType::U32 || type == ElementType::U16 ||
         type == ElementType::U8 || type == ElementType::I1;
}

llvm::StringRef sits::reference::toString(ElementType type) {
  switch (type) {
  case ElementType::F32:
    return "f32";
  case ElementType::F16:
    return "f16";
  case ElementType::BF16:
    return "bf16";
  case ElementType::F64:
    return "f64";
  case ElementType::I64:
    return "i64";
  case ElementType::I32:
    return "i32";
  case ElementType::U32:
    return "ui32";
  case ElementType::I16:
    return "i16";
  case ElementType::U16:
    return "ui16";
  case ElementType::I8:
    return "i8";
  case ElementType::U8:
    return "ui8";
  case ElementType::I1:
    return "i1";
  }
  return "?";
}

llvm::Expected<ElementType> sits::reference::elementTypeOf(Type type) {
  if (type.isF32())
    return ElementType::F32;
  if (type.isF16())
    return ElementType::F16;
  if (type.isBF16())
    return ElementType::BF16;
  if (type.isF64())
    return ElementType::F64;
  if (type.isIndex())
    return ElementType::I64;
  if (auto integer = dyn_cast<IntegerType>(type)) {
    unsigned width = integer.getWidth();
    if (width == 1)
      return ElementType::I1;
    if (width == 64)
      return ElementType::I64;
    if (width == 32)
      return integer.isUnsigned() ? ElementType::U32 : ElementType::I32;
    if (width == 16)
      return integer.isUnsigned() ? ElementType::U16 : ElementType::I16;
    if (width == 8)
      return integer.isUnsigned() ? ElementType::U8 : ElementType::I8;
  }
  std::string name;
  llvm::raw_string_ostream os(name);
  os << type;
  return llvm::createStringError("element type " + name +
                                 " is not supported by the reference executor");
}

/// Rounds `value` to a multiple of 2^(e - mantissaBits), where e is the
/// exponent of `value`, clamped below at `minExponent` (the subnormal range),
/// ties to even. Dividing and multiplying by a power of two is exact, so the
/// only rounding is the one nearbyint makes in the default rounding mode.
static float roundToPrecision(float value, int mantissaBits, int minExponent) {
  if (!std::isfinite(value) || value == 0.0f)
    return value;
  int exponent = std::ilogb(value);
  if (exponent < minExponent)
    exponent = minExponent;
  float quantum = std::ldexp(1.0f, exponent - mantissaBits);
  return std::nearbyint(value / quantum) * quantum;
}

float sits::reference::roundToF16(float value) {
  constexpr float kMaxHalf = 65504.0f;
  float rounded = roundToPrecision(value, /*mantissaBits=*/10,
                                   /*minExponent=*/-14);
  if (std::fabs(rounded) > kMaxHalf)
    return std::copysign(std::numeric_limits<float>::infinity(), value);
  return rounded;
}

float sits::reference::roundToBF16(float value) {
  // Rounding past the largest bf16 overflows the f32 product to infinity,
  // as it should.
  return roundToPrecision(value, /*mantissaBits=*/7, /*minExponent=*/-126);
}

float sits::reference::roundToFloatType(float value, ElementType type) {
  if (type == ElementType::F16)
    return roundToF16(value);
  if (type == ElementType::BF16)
    return roundToBF16(value);
  return value;
}

int64_t sits::reference::wrapToIntegerType(int64_t value, ElementType type) {
  switch (type) {
  case ElementType::I32:
    return static_cast<int32_t>(static_cast<uint32_t>(value));
  case ElementType::U32:
    return static_cast<uint32_t>(value);
  case ElementType::I16:
    return static_cast<int16_t>(static_cast<uint16_t>(value));
  case ElementType::U16:
    return static_cast<uint16_t>(value);
  case ElementType::I8:
    return static_cast<int8_t>(static_cast<uint8_t>(value));
  case ElementType::U8:
    return static_cast<uint8_t>(value);
  case ElementType::I1:
    return value != 0 ? 1 : 0;
  default:
    return value;
  }
}

int64_t sits::reference::numElementsOf(llvm::ArrayRef<int64_t> shape) {
  int64_t count = 1;
  for (int64_t dim : shape)
    count *= dim;
  return count;
}

std::string sits::reference::formatShape(llvm::ArrayRef<int64_t> shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i)
      text += ", ";
    text += std::to_string(shape[i]);
  }
  return text + "]";
}

//===----------------------------------------------------------------------===//
// Tensor
//===----------------------------------------------------------------------===//

Tensor::Tensor(ElementType type, llvm::ArrayRef<int64_t> shape)
    : elementType(type), shape(shape.begin(), shape.end()) {
  if (reference::isFloat(type))
    floatData.assign(numElementsOf(shape), 0.0f);
  else
    intData.assign(numElementsOf(shape), 0);
}

Tensor Tensor::fromFloats(ElementType type, llvm::ArrayRef<int64_t> shape,
                          std::vector<float> values) {
  Tensor tensor;
  tensor.elementType = type;
  tensor.shape.assign(shape.begin(), shape.end());
  tensor.floatData = std::move(values);
  tensor.setElementTypeAndRound(type);
  return tensor;
}

Tensor Tensor::fromInts(ElementType type, llvm::ArrayRef<int64_t> shape,
                        std::vector<int64_t> values) {
  Tensor tensor;
  tensor.elementType = type;
  tensor.shape.assign(shape.begin(), shape.end());
  tensor.intData = std::move(values);
  tensor.setElementTypeAndRound(type);
  return tensor;
}

int64_t Tensor::getDim(int64_t index) const {
  if (index < 0)
    index += getRank();
  return shape[index];
}

double Tensor::getAsDouble(int64_t index) const {
  if (isFloat())
    return floatData[index];
  return static_cast<double>(intData[index]);
}

int64_t Tensor::getAsInt(int64_t index) const {
  if (!isFloat())
    return intData[index];
  float value = floatData[index];
  if (std::isnan(value))
    return 0;
  if (value >= 9.2233720368547758e18f)
    return std::numeric_limits<int64_t>::max();
  if (value <= -9.2233720368547758e18f)
    return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(value);
}

Tensor Tensor::reshaped(llvm::ArrayRef<int64_t> newShape) const {
  Tensor result = *this;
  result.shape.assign(newShape.begin(), newShape.end());
  return result;
}

void Tensor::setElementTypeAndRound(ElementType type) {
  elementType = type;
  if (type == ElementType::F16 || type == ElementType::BF16) {
    for (float &value : floatData)
      value = roundToFloatType(value, type);
  } else if (!reference::isFloat(type) && type != ElementType::I64) {
    for (int64_t &value : intData)
      value = wrapToIntegerType(value, type);
  }
}

Tensor Tensor::castTo(ElementType type) const {
  Tensor result(type, shape);
  int64_t count = getNumElements();
  if (reference::isFloat(type)) {
    llvm::MutableArrayRef<float> out = result.floats();
    for (int64_t i = 0; i < count; ++i)
      out[i] = isFloat() ? floatData[i] : static_cast<float>(intData[i]);
  } else if (type == ElementType::I1 && isFloat()) {
    llvm::MutableArrayRef<int64_t> out = result.ints();
    for (int64_t i = 0; i < count; ++i)
      out[i] = floatData[i] != 0.0f;
  } else {
    llvm::MutableArrayRef<int64_t> out = result.ints();
    for (int64_t i = 0; i < count; ++i)
      out[i] = getAsInt(i);
  }
  result.setElementTypeAndRound(type);
  return result;
}

//===----------------------------------------------------------------------===//
// Constants
//===----------------------------------------------------------------------===//

size_t sits::reference::getElementBytes(ElementType type) {
  switch (type) {
  case ElementType::F64:
  case ElementType::I64:
    return 8;
  case ElementType::F32:
  case ElementType::I32:
  case ElementType::U32:
    return 4;
  case ElementType::F16:
  case ElementType::BF16:
  case ElementType::I16:
  case ElementType::U16:
    return 2;
  case ElementType::I8:
  case ElementType::U8:
  case ElementType::I1:
    return 1;
  }
  return 1;
}

/// Element `p` (little-endian, of `type`) as the executor stores it.
static float decodeFloat(const char *p, ElementType type) {
  switch (type) {
  case ElementType::F32: {
    float value;
    std::memcpy(&value, p, 4);
    return value;
  }
  case ElementType::F64: {
    double value;
    std::memcpy(&value, p, 8);
    return static_cast<float>(value);
  }
  case ElementType::BF16: {
    uint16_t half;
    std::memcpy(&half, p, 2);
    uint32_t wide = static_cast<uint32_t>(half) << 16;
    float value;
    std::memcpy(&value, &wide, 4);
    return value;
  }
  default: {
    uint16_t half;
    std::memcpy(&half, p, 2);
    return llvm::APFloat(llvm::APFloat::IEEEhalf(), llvm::APInt(16, half))
        .convertToFloat();
  }
  }
}

static int64_t decodeInt(const char *p, ElementType type) {
  switch (getElementBytes(type)) {
  case 8: {
    int64_t value;
    std::memcpy(&value, p, 8);
    return value;
  }
  case 4: {
    int32_t value;
    std::memcpy(&value, p, 4);
    return isUnsigned(type) ? static_cast<uint32_t>(value) : value;
  }
  case 2: {
    int16_t value;
    std::memcpy(&value, p, 2);
    return isUnsigned(type) ? static_cast<uint16_t>(value) : value;
  }
  default:
    return isUnsigned(type) ? static_cast<uint8_t>(*p)
                            : static_cast<int8_t>(*p);
  }
}

llvm::Expected<Tensor> Tensor::fromLittleEndian(ElementType type,
                                                llvm::ArrayRef<int64_t> shape,
                                                llvm::ArrayRef<char> bytes,
                                                bool splat) {
  int64_t count = numElementsOf(shape);
  size_t elementBytes = getElementBytes(type);
  size_t stored = splat ? 1 : static_cast<size_t>(count);
  if (bytes.size() < stored * elementBytes)
    return llvm::createStringError(
        "data holds " + std::to_string(bytes.size()) + " bytes, fewer than " +
        std::to_string(stored) + " " + toString(type).str() +
        " elements need (" + std::to_string(stored * elementBytes) + ")");
  Tensor tensor(type, shape);
  for (int64_t i = 0; i < count; ++i) {
    const char *p = bytes.data() + (splat ? 0 : i) * elementBytes;
    if (tensor.isFloat())
      tensor.floatData[i] = decodeFloat(p, type);
    else
      tensor.intData[i] = decodeInt(p, type);
  }
  tensor.setElementTypeAndRound(type);
  return tensor;
}

llvm::Expected<Tensor> Tensor::fromAttribute(ElementsAttr attr) {
  auto shapedType = cast<ShapedType>(attr.getType());
  if (!shapedType.hasStaticShape())
    return llvm::createStringError("constant has a dynamic shape");
  Type mlirType = shapedType.getElementType();
  llvm::Expected<ElementType> type = elementTypeOf(mlirType);
  if (!type)
    return type.takeError();
  llvm::ArrayRef<int64_t> shape = shapedType.getShape();

  // Float weights, dense, mapped or viewed: converted in one pass.
  if (reference::isFloat(*type)) {
    FailureOr<WeightStorage> storage = getWeightStorage(attr);
    if (succeeded(storage)) {
      Tensor tensor(*type, shape);
      if (succeeded(copyWeightValues(
              *storage, 0, storage->numElements(), WeightElement::F32,
              reinterpret_cast<char *>(tensor.floats().data()))))
        return tensor;
    }
  }
  if (isa<WeightViewAttr>(attr)) {
    FailureOr<std::vector<char>> values = readWeightValues(attr);
    if (failed(values))
      return llvm::createStringError("cannot read the weight view's values");
    return fromLittleEndian(*type, shape, *values, false);
  }
  if (auto dense = dyn_cast<DenseIntOrFPElementsAttr>(attr)) {
    // i1 storage in DenseElementsAttr is an implementation detail: read it
    // through the value iterator.
    if (*type == ElementType::I1) {
      std::vector<int64_t> values;
      values.reserve(numElementsOf(shape));
      for (bool value : dense.getValues<bool>())
        values.push_back(value);
      return fromInts(*type, shape, std::move(values));
    }
    return fromLittleEndian(*type, shape, dense.getRawData(), dense.isSplat());
  }
  if (auto resource = dyn_cast<DenseResourceElementsAttr>(attr)) {
    AsmResourceBlob *blob = resource.getRawHandle().getBlob();
    if (!blob)
      return llvm::createStringError(
          "constant refers to a resource blob that holds no data");
    return fromLittleEndian(*type, shape, blob->getData(), false);
  }
  // Any other ElementsAttr: go through its element values.
  if (reference::isFloat(*type)) {
    auto values = attr.tryGetValues<llvm::APFloat>();
    if (!values)
      return llvm::createStringError("cannot read the constant's values");
    std::vector<float> data;
    for (const llvm::APFloat &value : *values) {
      llvm::APFloat copy = value;
      bool lost;
      copy.convert(llvm::APFloat::IEEEsingle(),
                   llvm::APFloat::rmNearestTiesToEven, &lost);
      data.push_back(copy.convertToFloat());
    }
    return fromFloats(*type, shape, std::move(data));
  }
  auto values = attr.tryGetValues<llvm::APInt>();
  if (!values)
    return llvm::createStringError("cannot read the constant's values");
  std::vector<int64_t> data;
  for (const llvm::APInt &value : *values)
    data.push_back(isUnsigned(*type)
                       ? static_cast<int64_t>(value.getZExtValue())
                       : value.getSExtValue());
  return fromInts(*type, shape, std::move(data));
}
