//===- SitsShapeRules.h - Symbolic shape rules of the sits ops --*- C++ -*-===//

#ifndef SITS_DIALECT_SITS_SITSSHAPERULES_H
#define SITS_DIALECT_SITS_SITSSHAPERULES_H

#include "mlir/IR/MLIRContext.h"

namespace sits {

/// Attaches the symbolic shape rules of the sits ops (ShapeRuleOpInterface)
/// to the loaded sits dialect's ops; the dialect calls it from initialize().
void attachSitsShapeRules(mlir::MLIRContext *context);

} // namespace sits

#endif // SITS_DIALECT_SITS_SITSSHAPERULES_H
