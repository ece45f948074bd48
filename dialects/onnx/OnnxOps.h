//===- OnnxOps.h - Operations of the onnx dialect ---------------*- C++ -*-===//

#ifndef SITS_DIALECT_ONNX_ONNXOPS_H
#define SITS_DIALECT_ONNX_ONNXOPS_H

#include "dialects/onnx/OnnxDialect.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#define GET_OP_CLASSES
#include "dialects/onnx/OnnxOps.h.inc"

namespace sits::onnx {

/// ONNX TensorProto element type numbers (TensorProto.DataType).
enum class OnnxElementType : int64_t {
  Undefined = 0,
  Float = 1,
  UInt8 = 2,
  Int8 = 3,
  UInt16 = 4,
  Int16 = 5,
  Int32 = 6,
  Int64 = 7,
  String = 8,
  Bool = 9,
  Float16 = 10,
  Double = 11,
  UInt32 = 12,
  UInt64 = 13,
  Complex64 = 14,
  Complex128 = 15,
  BFloat16 = 16,
};

/// The MLIR element type of an ONNX element type number, or null when sits
/// does not support it (strings, complex, 8-bit and 4-bit floats).
mlir::Type getElementTypeForOnnx(mlir::MLIRContext *context, int64_t onnxType);

/// The ONNX element type number of an MLIR element type (the inverse of
/// getElementTypeForOnnx); nullopt for types ONNX has no number for here.
std::optional<int64_t> getOnnxElementTypeNumber(mlir::Type type);

/// The ONNX name of an element type number ("FLOAT", "INT64", ...), for
/// messages; "type N" for numbers ONNX does not define.
std::string getOnnxElementTypeName(int64_t onnxType);

} // namespace sits::onnx

#endif // SITS_DIALECT_ONNX_ONNXOPS_H
