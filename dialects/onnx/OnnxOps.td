//===- OnnxOps.td - Operations of the onnx dialect ---------*- tablegen -*-===//
//
// Entry point: every onnx op, grouped by kind. Semantics are ONNX's (see
// https://onnx.ai/onnx/operators/); descriptions note only what the import
// adds or normalizes.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_DIALECT_ONNX_ONNXOPS_TD
#define SITS_DIALECT_ONNX_ONNXOPS_TD

include "dialects/onnx/OnnxBase.td"
include "dialects/onnx/OnnxMathOps.td"
include "dialects/onnx/OnnxTensorOps.td"
include "dialects/onnx/OnnxNNOps.td"
include "dialects/onnx/OnnxContribOps.td"

#endif // SITS_DIALECT_ONNX_ONNXOPS_TD
