//===- WeightData.cpp - Reading and making weight constants ---------------===//

#include "passes/WeightData.h"
#include "dialects/sits/WeightView.h"

#include "mlir/IR/AsmState.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "llvm/ADT/APFloat.h"

#include <cstring>

using namespace mlir;

FailureOr<std::vector<float>> sits::readFloatValues(ElementsAttr attr) {
  auto type = dyn_cast<RankedTensorType>(attr.getType());
  if (!type || !type.hasStaticShape() ||
      !isa<Float32Type, Float16Type, BFloat16Type>(type.getElementType()))
    return failure();
  int64_t count = type.getNumElements();
  // Dense, mapped (dense_resource) and viewed weights, in one pass.
  FailureOr<WeightStorage> storage = getWeightStorage(attr);
  if (succeeded(storage)) {
    std::vector<float> values(count);
    if (failed(copyWeightValues(*storage, 0, count, WeightElement::F32,
                                reinterpret_cast<char *>(values.data()))))
      return failure();
    return values;
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
