//===- OnnxDialect.h - The onnx import dialect ------------------*- C++ -*-===//

#ifndef SITS_DIALECT_ONNX_ONNXDIALECT_H
#define SITS_DIALECT_ONNX_ONNXDIALECT_H

#include "dialects/sits/SitsDialect.h"
#include "mlir/IR/Dialect.h"

#include "dialects/onnx/OnnxDialect.h.inc"

#endif // SITS_DIALECT_ONNX_ONNXDIALECT_H
