//===- OnnxKernels.cpp - Shared helpers of the onnx-op kernels ------------===//

#include "compiler/reference/OnnxSupport.h"

using namespace mlir;
using namespace sits::reference;
using namespace sits::reference::onnx;

Value onnx::input(Operation *op, unsigned index) {
  if (auto segments = dyn_cast_or_null<DenseI32ArrayAttr>(
          op->getAttr("operandSegmentSizes"))) {
    llvm::ArrayRef<int32_t> sizes = segments.asArrayRef();
    if (index >= sizes.size() || sizes[index] == 0)
      return Value();
    unsigned start = 0;
    for (unsigned i = 0; i < index; ++i)
      start += sizes[i];
    return start < op->getNumOperands() ? op->getOperand(start) : Value();
  }
  return index < op->getNumOperands() ? op->getOperand(index) : Value();
}

const Tensor *onnx::inputTensor(const KernelContext &context, unsigned index) {
  Value value = input(context.getOp(), index);
  return value ? &context.tensor(value) : nullptr;
}

std::optional<int64_t> onnx::optionalIntAttr(Operation *op, StringRef name) {
  if (auto attr = dyn_cast_or_null<IntegerAttr>(op->getAttr(name)))
    return attr.getValue().getSExtValue();
  return std::nullopt;
}

int64_t onnx::intAttr(Operation *op, StringRef name, int64_t fallback) {
  return optionalIntAttr(op, name).value_or(fallback);
}

std::optional<float> onnx::optionalFloatAttr(Operation *op, StringRef name) {
  if (auto attr = dyn_cast_or_null<FloatAttr>(op->getAttr(name)))
    return static_cast<float>(attr.getValueAsDouble());
  return std::nullopt;
}

float onnx::floatAttr(Operation *op, StringRef name, float fallback) {
  return optionalFloatAttr(op, name).value_or(fallback);
}

std::optional<llvm::SmallVector<int64_t>> onnx::intsAttr(Operation *op,
                                                         StringRef name) {
  Attribute attr = op->getAttr(name);
  if (!attr)
    return std::nullopt;
  llvm::SmallVector<int64_t> values;
  if (auto dense = dyn_cast<DenseI64ArrayAttr>(attr)) {
    values.assign(dense.asArrayRef().begin(), dense.asArrayRef().end());
  } else if (auto array = dyn_cast<ArrayAttr>(attr)) {
    for (Attribute element : array)
      if (auto integer = dyn_cast<IntegerAttr>(element))
        values.push_back(integer.getValue().getSExtValue());
  } else if (auto elements = dyn_cast<DenseIntElementsAttr>(attr)) {
    for (const APInt &value : elements.getValues<APInt>())
      values.push_back(value.getSExtValue());
  } else {
    return std::nullopt;
  }
  return values;
}

std::string onnx::stringAttr(Operation *op, StringRef name,
                             StringRef fallback) {
  if (auto attr = dyn_cast_or_null<StringAttr>(op->getAttr(name)))
    return attr.getValue().str();
  return fallback.str();
}

llvm::Expected<int64_t> onnx::normalizeAxis(const KernelContext &context,
                                            int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank)
    return context.error("axis " + std::to_string(axis) + " is outside [-" +
                         std::to_string(rank) + ", " + std::to_string(rank) +
                         ")");
  return axis < 0 ? axis + rank : axis;
}

std::vector<int64_t> onnx::intValues(const Tensor &tensor) {
  std::vector<int64_t> values(tensor.getNumElements());
  for (int64_t i = 0; i < tensor.getNumElements(); ++i)
    values[i] = tensor.getAsInt(i);
  return values;
}

llvm::Error onnx::checkResultSize(const KernelContext &context,
                                  llvm::ArrayRef<int64_t> shape) {
  constexpr int64_t kMaxElements = int64_t(1) << 31;
  int64_t count = 1;
  for (int64_t dim : shape) {
    if (dim < 0)
      return context.error("negative dimension in " + formatShape(shape));
    if (dim != 0 && count > kMaxElements / dim)
      return context.error("a result of shape " + formatShape(shape) +
                           " is too large for the reference executor");
    count *= dim;
  }
  return llvm::Error::success();
}

llvm::Expected<Shape>
onnx::broadcastShapes(const KernelContext &context,
                      llvm::ArrayRef<llvm::ArrayRef<int64_t>> shapes) {
  size_t rank = 0;
  for (llvm::ArrayRef<int64_t> shape : shapes)
    rank = std::max(rank, shape.size());
  Shape result(rank, 1);
  for (llvm::ArrayRef<int64_t> shape : shapes) {
    size_t offset = rank - shape.size();
    for (size_t i = 0; i < shape.size(); ++i) {
      int64_t dim = shape[i];
      int64_t &out = result[offset + i];
      if (dim == out || dim == 1)
        continue;
      if (out != 1) {
        std::string names;
        for (llvm::ArrayRef<int64_t> s : shapes)
          names += (names.empty() ? "" : " and ") + formatShape(s);
        return context.error("shapes " + names + " do not broadcast");
      }
      out = dim;
    }
  }
  if (llvm::Error error = checkResultSize(context, result))
    return std::move(error);
  return result;
}

llvm::Expected<Shape>
onnx::broadcastShapes(const KernelContext &context,
                      llvm::ArrayRef<const Tensor *> tensors) {
  llvm::SmallVector<llvm::ArrayRef<int64_t>, 4> shapes;
  for (const Tensor *tensor : tensors)
    shapes.push_back(tensor->getShape());
  return broadcastShapes(context, shapes);
}

void sits::reference::attachOnnxKernels(MLIRContext *context) {
  attachOnnxElementwiseKernels(context);
  attachOnnxTensorKernels(context);
  attachOnnxNNKernels(context);
  attachOnnxAttentionKernel(context);
  attachOnnxContribKernels(context);
}
