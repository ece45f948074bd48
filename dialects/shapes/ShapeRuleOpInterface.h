//===- ShapeRuleOpInterface.h - Symbolic shape rules of ops -----*- C++ -*-===//
//
// ShapeRuleOpInterface (ShapeRuleOpInterface.td) and the helper with which a
// dialect attaches plain rule functions to its ops as external models.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_DIALECT_SHAPES_SHAPERULEOPINTERFACE_H
#define SITS_DIALECT_SHAPES_SHAPERULEOPINTERFACE_H

#include "dialects/shapes/SymbolicShapes.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OpDefinition.h"

#include "dialects/shapes/ShapeRuleOpInterface.h.inc"

namespace sits::onnx {

/// The model of `OpT` that runs `Rule`: rules are plain functions, many of
/// them shared by several ops (every unary elementwise op keeps its input's
/// shape), so the model is generated rather than written per op.
template <ShapeRule Rule, typename OpT>
struct ShapeRuleModel
    : ShapeRuleOpInterface::ExternalModel<ShapeRuleModel<Rule, OpT>, OpT> {
  mlir::LogicalResult inferShapeFacts(mlir::Operation *,
                                      ShapeRuleContext &ctx) const {
    return Rule(ctx);
  }
};

/// Attaches `Rule` as the shape rule of each op of `OpTs` (registered ops
/// of a loaded dialect; a dialect calls this from its initialize()).
template <ShapeRule Rule, typename... OpTs>
void attachShapeRule(mlir::MLIRContext *context) {
  (OpTs::template attachInterface<ShapeRuleModel<Rule, OpTs>>(*context), ...);
}

} // namespace sits::onnx

#endif // SITS_DIALECT_SHAPES_SHAPERULEOPINTERFACE_H
