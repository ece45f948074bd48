//===- WeightData.cpp - Reading and making weight constants ---------------===//

#include "passes/WeightData.h"

#include "mlir/IR/AsmState.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "llvm/ADT/APFloat.h"

#include <cstring>

using namespace mlir;

/// f32 values of raw little-endian f32/f16/bf16 data.
static FailureOr<std::vector<float>> decode(Type element, ArrayRef<char> raw,
                                            int64_t count, bool splat) {
  unsigned width = element.getIntOrFloatBitWidth() / 8;
  if (raw.size() < static_cast<size_t>(splat ? width : count * width))
    return failure();
  std::vector<float> values(count);
  for (int64_t i = 0; i < count; ++i) {
    const char *p = raw.data() + (splat ? 0 : i) * width;
    if (element.isF32()) {
      std::memcpy(&values[i], p, 4);
      continue;
    }
    uint16_t bits;
    std::memcpy(&bits, p, 2);
    if (element.isBF16()) {
      uint32_t wide = static_cast<uint32_t>(bits) << 16;
      std::memcpy(&values[i], &wide, 4);
    } else {
      values[i] =
          llvm::APFloat(llvm::APFloat::IEEEhalf(), llvm::APInt(16, bits))
              .convertToFloat();
    }
  }
  return values;
}

FailureOr<std::vector<float>> sits::readFloatValues(ElementsAttr attr) {
  auto type = dyn_cast<RankedTensorType>(attr.getType());
  if (!type || !type.hasStaticShape() ||
      !isa<Float32Type, Float16Type, BFloat16Type>(type.getElementType()))
    return failure();
  int64_t count = type.getNumElements();
  if (auto dense = dyn_cast<DenseIntOrFPElementsAttr>(attr))
    return decode(type.getElementType(), dense.getRawData(), count,
                  dense.isSplat());
  if (auto resource = dyn_cast<DenseResourceElementsAttr>(attr)) {
    AsmResourceBlob *blob = resource.getRawHandle().getBlob();
    if (!blob)
      return failure();
    return decode(type.getElementType(), blob->getData(), count, false);
  }
  auto values = attr.tryGetValues<APFloat>();
  if (!values)
    return failure();
  std::vector<float> result;
  result.reserve(count);
  for (APFloat value : *values) {
    bool lost;
    value.convert(APFloat::IEEEsingle(), APFloat::rmNearestTiesToEven, &lost);
    result.push_back(value.convertToFloat());
  }
  return result;
}

DenseElementsAttr sits::makeI8Attr(MLIRContext *context,
                                   ArrayRef<int64_t> shape,
                                   ArrayRef<int8_t> bytes) {
  auto type = RankedTensorType::get(shape, IntegerType::get(context, 8));
  return DenseElementsAttr::getFromRawBuffer(
      type, ArrayRef<char>(reinterpret_cast<const char *>(bytes.data()),
                           bytes.size()));
}

DenseElementsAttr sits::makeFloatAttr(MLIRContext *context,
                                      ArrayRef<int64_t> shape,
                                      ArrayRef<float> values, bool half) {
  if (!half) {
    auto type = RankedTensorType::get(shape, Float32Type::get(context));
    return DenseElementsAttr::getFromRawBuffer(
        type, ArrayRef<char>(reinterpret_cast<const char *>(values.data()),
                             values.size() * 4));
  }
  auto type = RankedTensorType::get(shape, Float16Type::get(context));
  std::vector<uint16_t> bits(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    APFloat value(values[i]);
    bool lost;
    value.convert(APFloat::IEEEhalf(), APFloat::rmNearestTiesToEven, &lost);
    bits[i] = static_cast<uint16_t>(value.bitcastToAPInt().getZExtValue());
  }
  return DenseElementsAttr::getFromRawBuffer(
      type, ArrayRef<char>(reinterpret_cast<const char *>(bits.data()),
                           bits.size() * 2));
}
