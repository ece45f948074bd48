//===- Passes.h - Passes of the ONNX frontend -------------------*- C++ -*-===//

#ifndef SITS_FRONTENDS_ONNX_PASSES_H
#define SITS_FRONTENDS_ONNX_PASSES_H

#include "dialects/onnx/OnnxDialect.h"
#include "dialects/sits/SitsDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

#include <memory>

namespace sits {

#define GEN_PASS_DECL
#include "frontends/onnx/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "frontends/onnx/Passes.h.inc"

} // namespace sits

#endif // SITS_FRONTENDS_ONNX_PASSES_H
