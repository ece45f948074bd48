//===- Npy.h - NumPy .npy files for the reference executor ------*- C++ -*-===//
//
// A small reader and writer of NumPy's .npy format (versions 1 to 3), for the
// element types the executor uses: little-endian f32, f16, i64, i32, i8, u8
// and bool, C order. bf16 tensors are written as f32 (NumPy has no bf16).
//
//===----------------------------------------------------------------------===//

#ifndef SITS_COMPILER_REFERENCE_NPY_H
#define SITS_COMPILER_REFERENCE_NPY_H

#include "compiler/reference/Tensor.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

namespace sits::reference {

/// Parses the bytes of a .npy file.
llvm::Expected<Tensor> parseNpy(llvm::StringRef bytes);
llvm::Expected<Tensor> readNpyFile(llvm::StringRef path);

/// The bytes of a .npy file holding `tensor`.
std::string serializeNpy(const Tensor &tensor);
/// Writes `tensor` to `path` (atomically: a temporary file renamed into
/// place, so that a failure never leaves a half-written file).
llvm::Error writeNpyFile(llvm::StringRef path, const Tensor &tensor);

} // namespace sits::reference

#endif // SITS_COMPILER_REFERENCE_NPY_H
