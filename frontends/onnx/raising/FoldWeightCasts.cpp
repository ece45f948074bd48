//===- FoldWeightCasts.cpp - Weights stored in another float type ---------===//
//
// Half-precision checkpoints are exported with float16 initializers, each
// followed by a Cast to float32 (the graph computes in float32). The cast of a
// constant is a constant: this phase converts the weight at compile time so
// that the other patterns see a plain `sits.weight`, keeping its name.
//
//===----------------------------------------------------------------------===//

#include "frontends/onnx/raising/RaisingSupport.h"

#include "dialects/sits/WeightView.h"

#include "mlir/IR/BuiltinAttributes.h"

#include <cstring>
#include <vector>

using namespace mlir;
using namespace sits;
using namespace sits::onnx;
using namespace sits::onnx::raising;

/// A float16 bit pattern as a float (exact: every half is a float).
static float halfToFloat(uint16_t half) {
  uint32_t sign = uint32_t(half & 0x8000) << 16;
  uint32_t exponent = (half >> 10) & 0x1f;
  uint32_t mantissa = half & 0x3ff;
  uint32_t bits;
  if (exponent == 0x1f) {
    bits = sign | 0x7f800000 | (mantissa << 13); // inf, nan
  } else if (exponent != 0) {
    bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
  } else if (mantissa == 0) {
    bits = sign; // +-0
  } else {
    // Subnormal half: normalize into a float.
    int shift = 0;
    while (!(mantissa & 0x400)) {
      mantissa <<= 1;
      ++shift;
    }
    bits = sign | ((113 - shift) << 23) | ((mantissa & 0x3ff) << 13);
  }
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

/// `weight`'s values converted to `type`'s float element type (rounded to
/// nearest even when narrowing), or null. A large (or mapped) weight
/// becomes a view, converted when the engine is written; a small one is
/// converted here (half and bfloat16 to float from the raw bits).
static ElementsAttr convertWeight(ElementsAttr weight, RankedTensorType type) {
  auto elementType = cast<FloatType>(type.getElementType());
  auto dense = dyn_cast<DenseElementsAttr>(weight);
  if (!dense ||
      (!dense.isSplat() && getWeightBytes(weight) >= kLargeWeightBytes))
    if (ElementsAttr view = getWeightView(weight, type, /*transposed=*/false))
      return view;
  if (!dense && !(dense = materializeWeight(weight)))
    return nullptr;
  Type from = weight.getElementType();
  if (dense && !dense.isSplat() && elementType.isF32() &&
      (from.isF16() || from.isBF16())) {
    ArrayRef<char> raw = dense.getRawData();
    std::vector<float> values(raw.size() / 2);
    for (size_t i = 0; i < values.size(); ++i) {
      uint16_t bits;
      std::memcpy(&bits, raw.data() + 2 * i, sizeof(bits));
      if (from.isF16()) {
        values[i] = halfToFloat(bits);
      } else {
        uint32_t wide = uint32_t(bits) << 16;
        std::memcpy(&values[i], &wide, sizeof(float));
      }
    }
    return DenseElementsAttr::get(type, llvm::ArrayRef(values));
  }
  SmallVector<APFloat> values;
  values.reserve(weight.getNumElements());
  for (APFloat value : dense.getValues<APFloat>()) {
    bool losesInfo;
    value.convert(elementType.getFloatSemantics(), APFloat::rmNearestTiesToEven,
                  &losesInfo);
    values.push_back(value);
  }
  return DenseElementsAttr::get(type, values);
}

void sits::onnx::raising::foldWeightCasts(RaiseContext &rc) {
  for (CastOp cast : collectOps<CastOp>(rc.getFunction())) {
    auto weight = cast.getInput().getDefiningOp<WeightOp>();
    auto from = dyn_cast<RankedTensorType>(cast.getInput().getType());
    auto to = dyn_cast<RankedTensorType>(cast.getOutput().getType());
    if (!weight || !from || !to || !isa<FloatType>(from.getElementType()) ||
        !isa<FloatType>(to.getElementType()) ||
        from.getShape() != to.getShape())
      continue;
    ElementsAttr value = convertWeight(weight.getValue(), to);
    if (!value)
      continue;
    OpBuilder &b = rc.getBuilder();
    b.setInsertionPoint(cast);
    auto converted =
        WeightOp::create(b, weight.getLoc(), weight.getNameAttr(), value);
    cast.getOutput().replaceAllUsesWith(converted.getResult());
    rc.recordRaise(
        "weight_casts_folded", {cast},
        "sits.weight '" + weight.getName().str() + "' as " +
            llvm::Twine(to.getElementType().getIntOrFloatBitWidth()).str() +
            "-bit floats",
        "the cast of a constant weight is the weight converted at "
        "compile time (float16 to float32 is exact)");
  }
}
