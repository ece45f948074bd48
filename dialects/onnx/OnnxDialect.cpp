//===- OnnxDialect.cpp - The onnx import dialect --------------------------===//

#include "dialects/onnx/OnnxDialect.h"
#include "dialects/onnx/OnnxOps.h"

using namespace mlir;
using namespace sits::onnx;

#include "dialects/onnx/OnnxDialect.cpp.inc"

void OnnxDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dialects/onnx/OnnxOps.cpp.inc"
      >();
}
