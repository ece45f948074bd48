//===- OnnxDialect.cpp - The onnx import dialect --------------------------===//

#include "dialects/onnx/OnnxDialect.h"
#include "dialects/onnx/OnnxOps.h"
#include "dialects/onnx/ShapeRules.h"

using namespace mlir;
using namespace sits::onnx;

#include "dialects/onnx/OnnxDialect.cpp.inc"

void OnnxDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dialects/onnx/OnnxOps.cpp.inc"
      >();
  attachElementwiseShapeRules(getContext());
  attachTensorShapeRules(getContext());
  attachIndexingShapeRules(getContext());
  attachNNShapeRules(getContext());
  attachContribShapeRules(getContext());
}
