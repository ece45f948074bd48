//===- Tensor.h - Host tensors of the reference executor --------*- C++ -*-===//
//
// The values the CPU reference executor computes with. A tensor has a shape
// and an element type; floating-point elements are stored as f32 and integer
// and boolean elements as i64, whatever the element type. An f16 or bf16
// element holds the exact f32 value of the f16/bf16 number (rounded to
// nearest, ties to even), so that "fp16-emulating" execution means: compute
// in f32, then round each op's result to its element type. An f64 element
// is held as f32 too (the nearest f32): the executor computes f64 graphs
// (ONNX's softmax_precision = DOUBLE) in f32.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_COMPILER_REFERENCE_TENSOR_H
#define SITS_COMPILER_REFERENCE_TENSOR_H

#include "mlir/IR/BuiltinAttributeInterfaces.h"
#include "mlir/IR/Types.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>
#include <vector>

namespace sits::reference {

/// Element types the executor computes with.
enum class ElementType {
  F32,
  F16,
  BF16,
  F64,
  I64,
  I32,
  U32,
  I16,
  U16,
  I8,
  U8,
  I1
};

/// True for F32, F16, BF16 and F64 (stored as f32).
bool isFloat(ElementType type);
/// `f32`, `f16`, ..., as MLIR spells them.
llvm::StringRef toString(ElementType type);
/// Bytes of one element of `type` in ONNX, numpy and MLIR raw data (bool:
/// one byte).
size_t getElementBytes(ElementType type);
/// True for the unsigned integer types (U32, U16, U8) and I1.
bool isUnsigned(ElementType type);
/// The executor's element type of an MLIR type (`index` maps to i64).
llvm::Expected<ElementType> elementTypeOf(mlir::Type type);

/// Rounds an f32 value to the nearest f16 (ties to even; overflow to
/// infinity; subnormals kept) and returns that f16 value as f32.
float roundToF16(float value);
/// Rounds an f32 value to the nearest bf16 (ties to even) and returns it as
/// f32. NaN stays NaN.
float roundToBF16(float value);
/// Rounds `value` to `type` when it is F16 or BF16; F32 is unchanged.
float roundToFloatType(float value, ElementType type);
/// Wraps `value` into the range of an integer type (two's complement, as a
/// static_cast would); I1 becomes 0 or 1 (nonzero is true).
int64_t wrapToIntegerType(int64_t value, ElementType type);

using Shape = llvm::SmallVector<int64_t, 6>;

/// Number of elements of a shape (1 for rank 0).
int64_t numElementsOf(llvm::ArrayRef<int64_t> shape);
/// `[2, 12, 512]`.
std::string formatShape(llvm::ArrayRef<int64_t> shape);

/// A dense, row-major (C order) host tensor.
class Tensor {
public:
  Tensor() = default;
  /// A zero-filled tensor.
  Tensor(ElementType type, llvm::ArrayRef<int64_t> shape);

  static Tensor fromFloats(ElementType type, llvm::ArrayRef<int64_t> shape,
                           std::vector<float> values);
  static Tensor fromInts(ElementType type, llvm::ArrayRef<int64_t> shape,
                         std::vector<int64_t> values);

  /// Elements of `type` stored little-endian in `bytes` (`splat`: one
  /// element repeated), rounded to the type; an error when there are too
  /// few bytes.
  static llvm::Expected<Tensor> fromLittleEndian(ElementType type,
                                                 llvm::ArrayRef<int64_t> shape,
                                                 llvm::ArrayRef<char> bytes,
                                                 bool splat = false);

  /// The value of a constant attribute (DenseElementsAttr, splat or not, or
  /// DenseResourceElementsAttr), rounded to its element type.
  static llvm::Expected<Tensor> fromAttribute(mlir::ElementsAttr attr);

  ElementType getElementType() const { return elementType; }
  llvm::ArrayRef<int64_t> getShape() const { return shape; }
  int64_t getRank() const { return static_cast<int64_t>(shape.size()); }
  /// Dimension `index`; negative indices count from the end.
  int64_t getDim(int64_t index) const;
  int64_t getNumElements() const { return numElementsOf(shape); }
  bool isFloat() const { return reference::isFloat(elementType); }

  /// Float elements (valid when isFloat()).
  llvm::ArrayRef<float> floats() const { return floatData; }
  llvm::MutableArrayRef<float> floats() { return floatData; }
  /// Integer and boolean elements (valid when !isFloat()).
  llvm::ArrayRef<int64_t> ints() const { return intData; }
  llvm::MutableArrayRef<int64_t> ints() { return intData; }

  /// Element `index` as a double / as an integer, whatever the storage
  /// (floats truncate toward zero as a cast would).
  double getAsDouble(int64_t index) const;
  int64_t getAsInt(int64_t index) const;

  /// Same elements, another shape with the same number of elements.
  Tensor reshaped(llvm::ArrayRef<int64_t> newShape) const;

  /// Changes the element type tag and rounds (floats) or wraps (integers)
  /// the stored values to it. The storage class (float or integer) must not
  /// change: use a conversion (castTo) for that.
  void setElementTypeAndRound(ElementType type);

  /// Elementwise conversion to another element type, as ONNX Cast does
  /// (float to integer truncates toward zero; to bool is `!= 0`).
  Tensor castTo(ElementType type) const;

private:
  ElementType elementType = ElementType::F32;
  Shape shape;
  std::vector<float> floatData;
  std::vector<int64_t> intData;
};

} // namespace sits::reference

#endif // SITS_COMPILER_REFERENCE_TENSOR_H
