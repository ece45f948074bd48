//===- Passes.h - The sits optimization passes ------------------*- C++ -*-===//

#ifndef SITS_PASSES_PASSES_H
#define SITS_PASSES_PASSES_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"

#include <memory>

namespace sits {

#define GEN_PASS_DECL
#include "passes/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/Passes.h.inc"

} // namespace sits

#endif // SITS_PASSES_PASSES_H
