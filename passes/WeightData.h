//===- WeightData.h - Reading and making weight constants -------*- C++ -*-===//
//
// The quantization passes read weights as f32 values and write new weights
// (int8/int4 data, f16/f32 scales, TVC factors) as dense constants.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_PASSES_WEIGHTDATA_H
#define SITS_PASSES_WEIGHTDATA_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/Support/LLVM.h"

#include <cstdint>
#include <vector>

namespace sits {

/// The values of a static-shaped f32, f16 or bf16 constant as f32 (exact),
/// or failure for anything else.
mlir::FailureOr<std::vector<float>> readFloatValues(mlir::ElementsAttr attr);

/// A dense `i8` constant of `shape` holding `bytes`.
mlir::DenseElementsAttr makeI8Attr(mlir::MLIRContext *context,
                                   llvm::ArrayRef<int64_t> shape,
                                   llvm::ArrayRef<int8_t> bytes);

/// A dense f32 or f16 constant of `shape` holding `values` (each exactly
/// representable in that type; f16 values are converted bit-exactly).
mlir::DenseElementsAttr makeFloatAttr(mlir::MLIRContext *context,
                                      llvm::ArrayRef<int64_t> shape,
                                      llvm::ArrayRef<float> values, bool half);

} // namespace sits

#endif // SITS_PASSES_WEIGHTDATA_H
