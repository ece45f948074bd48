//===- Registration.h - Everything sitsc and sits-opt register --*- C++ -*-===//

#ifndef SITS_COMPILER_REGISTRATION_REGISTRATION_H
#define SITS_COMPILER_REGISTRATION_REGISTRATION_H

#include "mlir/IR/DialectRegistry.h"

namespace sits {

/// The sits and onnx dialects and the upstream dialects sits programs use.
void registerAllDialects(mlir::DialectRegistry &registry);

/// Every sits pass and pipeline, plus the upstream passes the pipeline uses
/// (canonicalize, CSE, ...).
void registerAllPasses();

} // namespace sits

#endif // SITS_COMPILER_REGISTRATION_REGISTRATION_H
