//===- OnnxSupport.h - Helpers of the onnx-op kernels -----------*- C++ -*-===//
//
// The onnx kernels read ops generically, by ONNX input position and ONNX
// attribute name (the import dialect keeps both), so that they depend only on
// the ONNX operator definitions, not on the dialect's C++ classes.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_COMPILER_REFERENCE_ONNXSUPPORT_H
#define SITS_COMPILER_REFERENCE_ONNXSUPPORT_H

#include "compiler/reference/Kernels.h"

#include "mlir/IR/BuiltinAttributes.h"

#include <array>

namespace sits::reference::onnx {

/// The value of ONNX input `index`: null when that optional input is absent
/// (ops with several optional inputs carry `operandSegmentSizes`).
mlir::Value input(mlir::Operation *op, unsigned index);
/// The tensor of ONNX input `index`, or null when absent.
const Tensor *inputTensor(const KernelContext &context, unsigned index);

int64_t intAttr(mlir::Operation *op, llvm::StringRef name, int64_t fallback);
std::optional<int64_t> optionalIntAttr(mlir::Operation *op,
                                       llvm::StringRef name);
float floatAttr(mlir::Operation *op, llvm::StringRef name, float fallback);
std::optional<float> optionalFloatAttr(mlir::Operation *op,
                                       llvm::StringRef name);
/// INTS attributes: array<i64>, or an ArrayAttr / elements of integers.
std::optional<llvm::SmallVector<int64_t>> intsAttr(mlir::Operation *op,
                                                   llvm::StringRef name);
std::string stringAttr(mlir::Operation *op, llvm::StringRef name,
                       llvm::StringRef fallback);

/// Normalizes an ONNX axis in [-rank, rank) to [0, rank), or fails.
llvm::Expected<int64_t> normalizeAxis(const KernelContext &context,
                                      int64_t axis, int64_t rank);

/// The elements of an integer tensor input (shape, axes, starts...).
std::vector<int64_t> intValues(const Tensor &tensor);

/// Fails when a result of `shape` would be unreasonably large (more than
/// 2^31 elements, or a size that overflows): shapes computed from data must
/// not turn into a crash on allocation.
llvm::Error checkResultSize(const KernelContext &context,
                            llvm::ArrayRef<int64_t> shape);

/// numpy broadcasting of several shapes, or an error naming them.
llvm::Expected<Shape>
broadcastShapes(const KernelContext &context,
                llvm::ArrayRef<llvm::ArrayRef<int64_t>> shapes);
llvm::Expected<Shape> broadcastShapes(const KernelContext &context,
                                      llvm::ArrayRef<const Tensor *> tensors);

/// Calls `body(outIndex, offsets)` for every element of `shape`, where
/// offsets[n] is the element of operand n read there (strides from
/// broadcastStrides). The innermost dimension runs in a tight loop.
template <size_t N, typename Body>
void forEachBroadcast(
    llvm::ArrayRef<int64_t> shape,
    const std::array<llvm::SmallVector<int64_t, 6>, N> &strides, Body body) {
  int64_t total = numElementsOf(shape);
  if (total == 0)
    return;
  int64_t rank = shape.size();
  std::array<int64_t, N> base{};
  if (rank == 0) {
    body(0, base);
    return;
  }
  int64_t inner = shape[rank - 1];
  std::array<int64_t, N> innerStride;
  for (size_t n = 0; n < N; ++n)
    innerStride[n] = strides[n][rank - 1];
  llvm::SmallVector<int64_t, 6> counter(rank, 0);
  std::array<int64_t, N> offsets;
  for (int64_t out = 0; out < total; out += inner) {
    for (int64_t i = 0; i < inner; ++i) {
      for (size_t n = 0; n < N; ++n)
        offsets[n] = base[n] + i * innerStride[n];
      body(out + i, offsets);
    }
    // Advance the outer dimensions like an odometer.
    for (int64_t d = rank - 2; d >= 0; --d) {
      for (size_t n = 0; n < N; ++n)
        base[n] += strides[n][d];
      if (++counter[d] < shape[d])
        break;
      for (size_t n = 0; n < N; ++n)
        base[n] -= strides[n][d] * shape[d];
      counter[d] = 0;
    }
  }
}

/// Attaches each onnx kernel family to its ops.
void attachOnnxElementwiseKernels(mlir::MLIRContext *context);
void attachOnnxTensorKernels(mlir::MLIRContext *context);
void attachOnnxNNKernels(mlir::MLIRContext *context);
void attachOnnxAttentionKernel(mlir::MLIRContext *context);
void attachOnnxContribKernels(mlir::MLIRContext *context);

} // namespace sits::reference::onnx

#endif // SITS_COMPILER_REFERENCE_ONNXSUPPORT_H
