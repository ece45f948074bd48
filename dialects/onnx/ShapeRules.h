//===- ShapeRules.h - Symbolic shape rules of the onnx ops ------*- C++ -*-===//
//
// Internal to the onnx dialect: each ShapeRules*.cpp attaches the rules of
// one op family as its ops' ShapeRuleOpInterface models. The dialect calls
// them when it loads, so that every context that has the ops has their
// rules.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_DIALECT_ONNX_SHAPERULES_H
#define SITS_DIALECT_ONNX_SHAPERULES_H

#include "mlir/IR/MLIRContext.h"

namespace sits::onnx {

void attachElementwiseShapeRules(mlir::MLIRContext *context);
void attachTensorShapeRules(mlir::MLIRContext *context);
void attachIndexingShapeRules(mlir::MLIRContext *context);
void attachNNShapeRules(mlir::MLIRContext *context);
void attachContribShapeRules(mlir::MLIRContext *context);

} // namespace sits::onnx

#endif // SITS_DIALECT_ONNX_SHAPERULES_H
