//===- FoldWeightCasts.cpp - Weights stored in another float type ---------===//
//
// Half-precision checkpoints are exported with float16 initializers, each
// followed by a Cast to float32 (the graph computes in float32). The cast of a
// constant is a constant: this phase converts the weight at compile time so
// that the other patterns see a plain `sits.weight`, keeping its name.
//
//===----------------------------------------------------------------------===//

#include "frontends/onnx/raising/RaisingSupport.h"

#include "mlir/IR/BuiltinAttributes.h"

using namespace mlir;
using namespace sits;
using namespace sits::onnx;
using namespace sits::onnx::raising;

/// `weight`'s values converted to `type`'s float element type (rounded to
/// nearest even when narrowing).
static DenseElementsAttr convertWeight(ElementsAttr weight,
                                       RankedTensorType type) {
  auto elementType = cast<FloatType>(type.getElementType());
  SmallVector<APFloat> values;
  values.reserve(weight.getNumElements());
  for (APFloat value : weight.getValues<APFloat>()) {
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
    OpBuilder &b = rc.getBuilder();
    b.setInsertionPoint(cast);
    auto converted = WeightOp::create(b, weight.getLoc(), weight.getNameAttr(),
                                      convertWeight(weight.getValue(), to));
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
