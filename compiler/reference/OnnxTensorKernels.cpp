//===- OnnxTensorKernels.cpp - Shape and data-movement onnx ops -----------===//
//
// Data-movement ops compute, for each result element, the input element it
// copies (an index map), then copy with one loop per storage class.
//
//===----------------------------------------------------------------------===//

#include "compiler/reference/OnnxSupport.h"

#include "dialects/onnx/OnnxOps.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace sits::reference;
using namespace sits::reference::onnx;

/// A tensor of `type` and `shape` whose element i is source[sourceIndex[i]].
static Tensor takeElements(const Tensor &source, ElementType type,
                           llvm::ArrayRef<int64_t> shape,
                           llvm::ArrayRef<int64_t> sourceIndex) {
  Tensor result(type, shape);
  if (source.isFloat() && result.isFloat()) {
    for (size_t i = 0; i < sourceIndex.size(); ++i)
      result.floats()[i] = source.floats()[sourceIndex[i]];
  } else if (!source.isFloat() && !result.isFloat()) {
    for (size_t i = 0; i < sourceIndex.size(); ++i)
      result.ints()[i] = source.ints()[sourceIndex[i]];
  }
  return result;
}

/// The result's element type must have the data's storage class.
static llvm::Error checkSameStorage(const KernelContext &context,
                                    const Tensor &data) {
  if (isFloat(context.resultType(0)) == data.isFloat())
    return llvm::Error::success();
  return context.error(
      "result element type " + toString(context.resultType(0)) +
      " does not match the data's " + toString(data.getElementType()));
}

/// Same elements as operand 0, another shape.
static llvm::Error setReshaped(KernelContext &context,
                               llvm::ArrayRef<int64_t> shape) {
  const Tensor &data = context.operand(0);
  if (llvm::Error error = checkSameStorage(context, data))
    return error;
  if (numElementsOf(shape) != data.getNumElements())
    return context.error("cannot reshape " + formatShape(data.getShape()) +
                         " to " + formatShape(shape));
  context.setResult(0, data.reshaped(shape));
  return llvm::Error::success();
}

//===----------------------------------------------------------------------===//
// Constants
//===----------------------------------------------------------------------===//

static llvm::Error runConstant(KernelContext &context) {
  Operation *op = context.getOp();
  ElementType type = context.resultType(0);
  if (auto value = dyn_cast_or_null<ElementsAttr>(op->getAttr("value"))) {
    llvm::Expected<Tensor> tensor = Tensor::fromAttribute(value);
    if (!tensor)
      return context.error(llvm::toString(tensor.takeError()));
    context.setResult(0, std::move(*tensor));
  } else if (std::optional<float> value =
                 optionalFloatAttr(op, "value_float")) {
    context.setResult(0, Tensor::fromFloats(type, {}, {*value}));
  } else if (std::optional<int64_t> value = optionalIntAttr(op, "value_int")) {
    context.setResult(0, Tensor::fromInts(type, {}, {*value}));
  } else if (auto values = intsAttr(op, "value_ints")) {
    context.setResult(0, Tensor::fromInts(type, {int64_t(values->size())},
                                          {values->begin(), values->end()}));
  } else if (auto floats = dyn_cast_or_null<DenseF32ArrayAttr>(
                 op->getAttr("value_floats"))) {
    llvm::ArrayRef<float> values = floats.asArrayRef();
    context.setResult(0, Tensor::fromFloats(type, {int64_t(values.size())},
                                            {values.begin(), values.end()}));
  } else {
    return context.error("has no value attribute");
  }
  return llvm::Error::success();
}

static llvm::Error runConstantOfShape(KernelContext &context) {
  std::vector<int64_t> shape = intValues(context.operand(0));
  if (llvm::Error error = checkResultSize(context, shape))
    return error;
  double fill = 0.0;
  if (auto value =
          dyn_cast_or_null<ElementsAttr>(context.getOp()->getAttr("value"))) {
    llvm::Expected<Tensor> tensor = Tensor::fromAttribute(value);
    if (!tensor)
      return context.error(llvm::toString(tensor.takeError()));
    if (tensor->getNumElements() != 1)
      return context.error("value must hold one element");
    fill = tensor->getAsDouble(0);
  }
  Tensor result = context.makeResult(0, shape);
  if (result.isFloat())
    std::fill(result.floats().begin(), result.floats().end(),
              static_cast<float>(fill));
  else
    std::fill(result.ints().begin(), result.ints().end(),
              static_cast<int64_t>(fill));
  context.setResult(0, std::move(result));
  return llvm::Error::success();
}

static llvm::Error runRange(KernelContext &context) {
  const Tensor &start = context.operand(0), &limit = context.operand(1),
               &delta = context.operand(2);
  for (const Tensor *scalar : {&start, &limit, &delta})
    if (scalar->getNumElements() != 1)
      return context.error("start, limit and delta must be scalars");
  ElementType type = context.resultType(0);
  if (isFloat(type)) {
    float first = start.getAsDouble(0), last = limit.getAsDouble(0),
          step = delta.getAsDouble(0);
    if (step == 0.0f)
      return context.error("delta is 0");
    double span = std::ceil((double(last) - first) / step);
    if (!(span < double(int64_t(1) << 31)))
      return context.error("the range is too long");
    int64_t count = std::max<int64_t>(0, static_cast<int64_t>(span));
    Tensor result(type, {count});
    for (int64_t i = 0; i < count; ++i)
      result.floats()[i] = first + static_cast<float>(i) * step;
    context.setResult(0, std::move(result));
    return llvm::Error::success();
  }
  int64_t first = start.getAsInt(0), last = limit.getAsInt(0),
          step = delta.getAsInt(0);
  if (step == 0)
    return context.error("delta is 0");
  int64_t span = last - first;
  int64_t count = std::max<int64_t>(
      0, span / step + ((span % step != 0) && ((span < 0) == (step < 0))));
  if (llvm::Error error = checkResultSize(context, {count}))
    return error;
  Tensor result(type, {count});
  for (int64_t i = 0; i < count; ++i)
    result.ints()[i] = first + i * step;
  context.setResult(0, std::move(result));
  return llvm::Error::success();
}

//===----------------------------------------------------------------------===//
// Shapes
//===----------------------------------------------------------------------===//

static llvm::Error runShape(KernelContext &context) {
  const Tensor &data = context.operand(0);
  int64_t rank = data.getRank();
  auto clampIndex = [&](int64_t index) {
    if (index < 0)
      index += rank;
    return std::clamp<int64_t>(index, 0, rank);
  };
  int64_t start = clampIndex(intAttr(context.getOp(), "start", 0));
  int64_t end = clampIndex(intAttr(context.getOp(), "end", rank));
  std::vector<int64_t> dims;
  for (int64_t d = start; d < end; ++d)
    dims.push_back(data.getDim(d));
  context.setResult(
      0, Tensor::fromInts(context.resultType(0), {int64_t(dims.size())}, dims));
  return llvm::Error::success();
}

static llvm::Error runSize(KernelContext &context) {
  context.setResult(0, Tensor::fromInts(context.resultType(0), {},
                                        {context.operand(0).getNumElements()}));
  return llvm::Error::success();
}

static llvm::Error runReshape(KernelContext &context) {
  const Tensor &data = context.operand(0);
  std::vector<int64_t> requested = intValues(context.operand(1));
  bool allowZero = intAttr(context.getOp(), "allowzero", 0) != 0;
  Shape shape;
  int64_t inferred = -1, known = 1;
  for (size_t i = 0; i < requested.size(); ++i) {
    int64_t dim = requested[i];
    if (dim == 0 && !allowZero) {
      if (static_cast<int64_t>(i) >= data.getRank())
        return context.error("shape entry 0 at " + std::to_string(i) +
                             " copies a dimension the data lacks");
      dim = data.getDim(i);
    } else if (dim == -1) {
      if (inferred >= 0)
        return context.error("shape has more than one -1");
      inferred = i;
      shape.push_back(1);
      continue;
    } else if (dim < 0) {
      return context.error("invalid shape entry " + std::to_string(dim));
    }
    shape.push_back(dim);
    known *= dim;
  }
  if (inferred >= 0) {
    if (known == 0 || data.getNumElements() % known != 0)
      return context.error("cannot infer the -1 of " + formatShape(requested) +
                           " for " + formatShape(data.getShape()));
    shape[inferred] = data.getNumElements() / known;
  }
  return setReshaped(context, shape);
}

static llvm::Error runFlatten(KernelContext &context) {
  const Tensor &data = context.operand(0);
  int64_t rank = data.getRank();
  int64_t axis = intAttr(context.getOp(), "axis", 1);
  if (axis < -rank || axis > rank)
    return context.error("axis " + std::to_string(axis) + " is outside [-" +
                         std::to_string(rank) + ", " + std::to_string(rank) +
                         "]");
  if (axis < 0)
    axis += rank;
  return setReshaped(context,
                     {numElementsOf(data.getShape().take_front(axis)),
                      numElementsOf(data.getShape().drop_front(axis))});
}

static llvm::Error runSqueeze(KernelContext &context) {
  const Tensor &data = context.operand(0);
  const Tensor *axesTensor = inputTensor(context, 1);
  llvm::SmallVector<bool, 6> drop(data.getRank(), false);
  if (!axesTensor) {
    for (int64_t d = 0; d < data.getRank(); ++d)
      drop[d] = data.getDim(d) == 1;
  }
  for (int64_t axis :
       axesTensor ? intValues(*axesTensor) : std::vector<int64_t>()) {
    llvm::Expected<int64_t> normalized =
        normalizeAxis(context, axis, data.getRank());
    if (!normalized)
      return normalized.takeError();
    if (data.getDim(*normalized) != 1)
      return context.error("cannot squeeze dimension " +
                           std::to_string(*normalized) + " of " +
                           formatShape(data.getShape()));
    drop[*normalized] = true;
  }
  Shape shape;
  for (int64_t d = 0; d < data.getRank(); ++d)
    if (!drop[d])
      shape.push_back(data.getDim(d));
  return setReshaped(context, shape);
}

static llvm::Error runUnsqueeze(KernelContext &context) {
  const Tensor &data = context.operand(0);
  std::vector<int64_t> axes = intValues(context.operand(1));
  int64_t rank = data.getRank() + static_cast<int64_t>(axes.size());
  llvm::SmallVector<bool, 6> inserted(rank, false);
  for (int64_t axis : axes) {
    llvm::Expected<int64_t> normalized = normalizeAxis(context, axis, rank);
    if (!normalized)
      return normalized.takeError();
    if (inserted[*normalized])
      return context.error("axis " + std::to_string(axis) + " repeats");
    inserted[*normalized] = true;
  }
  Shape shape;
  int64_t next = 0;
  for (int64_t d = 0; d < rank; ++d)
    shape.push_back(inserted[d] ? 1 : data.getDim(next++));
  return setReshaped(context, shape);
}

static llvm::Error runExpand(KernelContext &context) {
  const Tensor &data = context.operand(0);
  std::vector<int64_t> requested = intValues(context.operand(1));
  if (llvm::Error error = checkResultSize(context, requested))
    return error;
  llvm::Expected<Shape> shape = broadcastShapes(
      context, {data.getShape(), llvm::ArrayRef<int64_t>(requested)});
  if (!shape)
    return shape.takeError();
  if (llvm::Error error = checkSameStorage(context, data))
    return error;
  std::vector<int64_t> index(numElementsOf(*shape));
  std::array<llvm::SmallVector<int64_t, 6>, 1> strides = {
      *broadcastStrides(data.getShape(), *shape)};
  forEachBroadcast<1>(*shape, strides,
                      [&](int64_t out, auto in) { index[out] = in[0]; });
  context.setResult(0,
                    takeElements(data, context.resultType(0), *shape, index));
  return llvm::Error::success();
}

static llvm::Error runTile(KernelContext &context) {
  const Tensor &data = context.operand(0);
  std::vector<int64_t> repeats = intValues(context.operand(1));
  if (static_cast<int64_t>(repeats.size()) != data.getRank())
    return context.error("repeats has " + std::to_string(repeats.size()) +
                         " entries for rank " + std::to_string(data.getRank()));
  Shape shape;
  for (int64_t d = 0; d < data.getRank(); ++d) {
    if (repeats[d] < 0 || (data.getDim(d) && repeats[d] > (int64_t(1) << 31)))
      return context.error("invalid repeat " + std::to_string(repeats[d]));
    shape.push_back(data.getDim(d) * repeats[d]);
  }
  if (llvm::Error error = checkResultSize(context, shape))
    return error;
  llvm::SmallVector<int64_t, 6> sourceStrides = stridesOf(data.getShape());
  std::vector<int64_t> index(numElementsOf(shape));
  llvm::SmallVector<int64_t, 6> outStrides = stridesOf(shape);
  for (size_t i = 0; i < index.size(); ++i) {
    int64_t rest = i, source = 0;
    for (int64_t d = 0; d < data.getRank(); ++d) {
      int64_t coordinate = rest / outStrides[d];
      rest %= outStrides[d];
      source += (coordinate % data.getDim(d)) * sourceStrides[d];
    }
    index[i] = source;
  }
  if (llvm::Error error = checkSameStorage(context, data))
    return error;
  context.setResult(0, takeElements(data, context.resultType(0), shape, index));
  return llvm::Error::success();
}

static llvm::Error runTranspose(KernelContext &context) {
  const Tensor &data = context.operand(0);
  int64_t rank = data.getRank();
  llvm::SmallVector<int64_t> perm;
  if (auto attr = intsAttr(context.getOp(), "perm"))
    perm = *attr;
  else
    for (int64_t d = rank - 1; d >= 0; --d)
      perm.push_back(d);
  llvm::SmallVector<bool, 6> seen(rank, false);
  bool valid = static_cast<int64_t>(perm.size()) == rank;
  for (int64_t p : perm) {
    valid &= p >= 0 && p < rank && !seen[p];
    if (valid)
      seen[p] = true;
  }
  if (!valid)
    return context.error("perm is not a permutation of the " +
                         std::to_string(rank) + " dimensions");
  Shape shape;
  for (int64_t p : perm)
    shape.push_back(data.getDim(p));
  llvm::SmallVector<int64_t, 6> sourceStrides = stridesOf(data.getShape());
  llvm::SmallVector<int64_t, 6> permutedStrides;
  for (int64_t p : perm)
    permutedStrides.push_back(sourceStrides[p]);
  std::vector<int64_t> index(numElementsOf(shape));
  std::array<llvm::SmallVector<int64_t, 6>, 1> strides = {permutedStrides};
  forEachBroadcast<1>(shape, strides,
                      [&](int64_t out, auto in) { index[out] = in[0]; });
  if (llvm::Error error = checkSameStorage(context, data))
    return error;
  context.setResult(0, takeElements(data, context.resultType(0), shape, index));
  return llvm::Error::success();
}

//===----------------------------------------------------------------------===//
// Joining, splitting, slicing, indexing
//===----------------------------------------------------------------------===//

static llvm::Error runConcat(KernelContext &context) {
  Operation *op = context.getOp();
  if (op->getNumOperands() == 0)
    return context.error("needs at least one input");
  const Tensor &first = context.operand(0);
  llvm::Expected<int64_t> axis =
      normalizeAxis(context, intAttr(op, "axis", 0), first.getRank());
  if (!axis)
    return axis.takeError();
  Shape shape(first.getShape());
  shape[*axis] = 0;
  for (Value operand : op->getOperands()) {
    const Tensor &part = context.tensor(operand);
    bool fits =
        part.getRank() == first.getRank() && part.isFloat() == first.isFloat();
    for (int64_t d = 0; fits && d < first.getRank(); ++d)
      fits = d == *axis || part.getDim(d) == first.getDim(d);
    if (!fits)
      return context.error(
          "cannot concatenate " + formatShape(part.getShape()) + " with " +
          formatShape(first.getShape()) + " on axis " + std::to_string(*axis));
    shape[*axis] += part.getDim(*axis);
  }
  if (llvm::Error error = checkSameStorage(context, first))
    return error;
  Tensor result = context.makeResult(0, shape);
  int64_t outer = numElementsOf(first.getShape().take_front(*axis));
  int64_t inner = numElementsOf(first.getShape().drop_front(*axis + 1));
  int64_t rowOut = shape[*axis] * inner, placed = 0;
  for (Value operand : op->getOperands()) {
    const Tensor &part = context.tensor(operand);
    int64_t row = part.getDim(*axis) * inner;
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < row; ++i) {
        if (result.isFloat())
          result.floats()[o * rowOut + placed + i] = part.floats()[o * row + i];
        else
          result.ints()[o * rowOut + placed + i] = part.ints()[o * row + i];
      }
    placed += row;
  }
  context.setResult(0, std::move(result));
  return llvm::Error::success();
}

/// The sub-tensor of `data` at [start, start + size) on `axis`.
static Tensor sliceAxis(const Tensor &data, ElementType type, int64_t axis,
                        int64_t start, int64_t size) {
  Shape shape(data.getShape());
  shape[axis] = size;
  int64_t outer = numElementsOf(data.getShape().take_front(axis));
  int64_t inner = numElementsOf(data.getShape().drop_front(axis + 1));
  std::vector<int64_t> index;
  index.reserve(numElementsOf(shape));
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t k = 0; k < size; ++k)
      for (int64_t i = 0; i < inner; ++i)
        index.push_back((o * data.getDim(axis) + start + k) * inner + i);
  return takeElements(data, type, shape, index);
}

static llvm::Error runSplit(KernelContext &context) {
  Operation *op = context.getOp();
  const Tensor &data = context.operand(0);
  llvm::Expected<int64_t> axis =
      normalizeAxis(context, intAttr(op, "axis", 0), data.getRank());
  if (!axis)
    return axis.takeError();
  int64_t length = data.getDim(*axis);
  unsigned parts = op->getNumResults();
  std::vector<int64_t> sizes;
  if (const Tensor *split = inputTensor(context, 1)) {
    sizes = intValues(*split);
  } else {
    int64_t chunk = (length + parts - 1) / parts;
    for (unsigned i = 0; i < parts; ++i)
      sizes.push_back(
          std::max<int64_t>(0, std::min(chunk, length - chunk * i)));
  }
  int64_t total = 0;
  for (int64_t size : sizes)
    total += size;
  if (sizes.size() != parts || total != length)
    return context.error("cannot split dimension " + std::to_string(length) +
                         " into " + formatShape(sizes) + " for " +
                         std::to_string(parts) + " results");
  int64_t start = 0;
  for (unsigned i = 0; i < parts; ++i) {
    context.setResult(
        i, sliceAxis(data, context.resultType(i), *axis, start, sizes[i]));
    start += sizes[i];
  }
  return llvm::Error::success();
}

static llvm::Error runSlice(KernelContext &context) {
  const Tensor &data = context.operand(0);
  std::vector<int64_t> starts = intValues(*inputTensor(context, 1));
  std::vector<int64_t> ends = intValues(*inputTensor(context, 2));
  const Tensor *axesTensor = inputTensor(context, 3);
  const Tensor *stepsTensor = inputTensor(context, 4);
  std::vector<int64_t> axes, steps;
  if (axesTensor)
    axes = intValues(*axesTensor);
  else
    for (size_t i = 0; i < starts.size(); ++i)
      axes.push_back(i);
  steps = stepsTensor ? intValues(*stepsTensor)
                      : std::vector<int64_t>(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() ||
      steps.size() != starts.size())
    return context.error("starts, ends, axes and steps differ in length");
  int64_t rank = data.getRank();
  llvm::SmallVector<int64_t, 6> begin(rank, 0), step(rank, 1), shape;
  for (int64_t d = 0; d < rank; ++d)
    shape.push_back(data.getDim(d));
  llvm::SmallVector<bool, 6> seen(rank, false);
  for (size_t i = 0; i < axes.size(); ++i) {
    llvm::Expected<int64_t> axis = normalizeAxis(context, axes[i], rank);
    if (!axis)
      return axis.takeError();
    if (seen[*axis])
      return context.error("axis " + std::to_string(axes[i]) + " repeats");
    seen[*axis] = true;
    if (steps[i] == 0)
      return context.error("step 0");
    int64_t dim = data.getDim(*axis);
    int64_t first = starts[i], last = ends[i];
    if (first < 0)
      first += dim;
    if (last < 0)
      last += dim;
    // Clamp as ONNX does: [0, dim] going forward, [-1, dim - 1] backward.
    if (steps[i] > 0) {
      first = std::clamp<int64_t>(first, 0, dim);
      last = std::clamp<int64_t>(last, 0, dim);
    } else {
      first = std::clamp<int64_t>(first, 0, dim - 1);
      last = std::clamp<int64_t>(last, -1, dim - 1);
    }
    int64_t span = last - first;
    int64_t count = steps[i] > 0 ? (span + steps[i] - 1) / steps[i]
                                 : (-span + (-steps[i]) - 1) / (-steps[i]);
    begin[*axis] = first;
    step[*axis] = steps[i];
    shape[*axis] = std::max<int64_t>(0, count);
  }
  llvm::SmallVector<int64_t, 6> sourceStrides = stridesOf(data.getShape());
  llvm::SmallVector<int64_t, 6> sliceStrides;
  int64_t base = 0;
  for (int64_t d = 0; d < rank; ++d) {
    sliceStrides.push_back(sourceStrides[d] * step[d]);
    base += begin[d] * sourceStrides[d];
  }
  std::vector<int64_t> index(numElementsOf(shape));
  std::array<llvm::SmallVector<int64_t, 6>, 1> strides = {sliceStrides};
  forEachBroadcast<1>(shape, strides,
                      [&](int64_t out, auto in) { index[out] = base + in[0]; });
  if (llvm::Error error = checkSameStorage(context, data))
    return error;
  context.setResult(0, takeElements(data, context.resultType(0), shape, index));
  return llvm::Error::success();
}

static llvm::Error runGather(KernelContext &context) {
  const Tensor &data = context.operand(0);
  const Tensor &indices = context.operand(1);
  llvm::Expected<int64_t> axis = normalizeAxis(
      context, intAttr(context.getOp(), "axis", 0), data.getRank());
  if (!axis)
    return axis.takeError();
  int64_t dim = data.getDim(*axis);
  Shape shape(data.getShape().take_front(*axis));
  shape.append(indices.getShape().begin(), indices.getShape().end());
  shape.append(data.getShape().begin() + *axis + 1, data.getShape().end());
  int64_t outer = numElementsOf(data.getShape().take_front(*axis));
  int64_t inner = numElementsOf(data.getShape().drop_front(*axis + 1));
  std::vector<int64_t> index;
  index.reserve(numElementsOf(shape));
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t n = 0; n < indices.getNumElements(); ++n) {
      int64_t at = indices.getAsInt(n);
      if (at < -dim || at >= dim)
        return context.error("index " + std::to_string(at) + " is outside [-" +
                             std::to_string(dim) + ", " + std::to_string(dim) +
                             ") on axis " + std::to_string(*axis));
      if (at < 0)
        at += dim;
      for (int64_t i = 0; i < inner; ++i)
        index.push_back((o * dim + at) * inner + i);
    }
  if (llvm::Error error = checkSameStorage(context, data))
    return error;
  context.setResult(0, takeElements(data, context.resultType(0), shape, index));
  return llvm::Error::success();
}

static llvm::Error runGatherND(KernelContext &context) {
  const Tensor &data = context.operand(0);
  const Tensor &indices = context.operand(1);
  int64_t batchDims = intAttr(context.getOp(), "batch_dims", 0);
  int64_t rank = data.getRank(), indexRank = indices.getRank();
  if (indexRank < 1 || batchDims < 0 || batchDims >= std::min(rank, indexRank))
    return context.error("invalid batch_dims " + std::to_string(batchDims));
  int64_t tuple = indices.getDim(-1);
  if (tuple > rank - batchDims)
    return context.error("index tuples of " + std::to_string(tuple) +
                         " exceed the data's rank");
  for (int64_t d = 0; d < batchDims; ++d)
    if (data.getDim(d) != indices.getDim(d))
      return context.error("batch dimensions of data and indices differ");
  Shape shape(indices.getShape().drop_back());
  shape.append(data.getShape().begin() + batchDims + tuple,
               data.getShape().end());
  int64_t batches = numElementsOf(data.getShape().take_front(batchDims));
  int64_t batchSize = numElementsOf(data.getShape().drop_front(batchDims));
  int64_t tuplesPerBatch = numElementsOf(indices.getShape().drop_back()) /
                           std::max<int64_t>(1, batches);
  int64_t slice = numElementsOf(data.getShape().drop_front(batchDims + tuple));
  llvm::SmallVector<int64_t, 6> strides = stridesOf(data.getShape());
  std::vector<int64_t> index;
  index.reserve(numElementsOf(shape));
  for (int64_t b = 0; b < batches; ++b)
    for (int64_t t = 0; t < tuplesPerBatch; ++t) {
      int64_t offset = b * batchSize;
      for (int64_t k = 0; k < tuple; ++k) {
        int64_t dim = data.getDim(batchDims + k);
        int64_t at = indices.getAsInt((b * tuplesPerBatch + t) * tuple + k);
        if (at < -dim || at >= dim)
          return context.error(
              "index " + std::to_string(at) + " is outside dimension " +
              std::to_string(batchDims + k) + " (" + std::to_string(dim) + ")");
        offset += (at < 0 ? at + dim : at) * strides[batchDims + k];
      }
      for (int64_t i = 0; i < slice; ++i)
        index.push_back(offset + i);
    }
  if (llvm::Error error = checkSameStorage(context, data))
    return error;
  context.setResult(0, takeElements(data, context.resultType(0), shape, index));
  return llvm::Error::success();
}

/// Where coordinate `c` (which may lie outside [0, dim)) of a padded axis
/// reads the input, or -1 for the constant; numpy's modes.
static int64_t padSource(int64_t c, int64_t dim, llvm::StringRef mode) {
  if (c >= 0 && c < dim)
    return c;
  if (mode == "edge")
    return std::clamp<int64_t>(c, 0, dim - 1);
  if (mode == "wrap")
    return ((c % dim) + dim) % dim;
  if (mode == "reflect") {
    if (dim == 1)
      return 0;
    int64_t period = 2 * (dim - 1);
    c = ((c % period) + period) % period;
    return c < dim ? c : period - c;
  }
  return -1;
}

static llvm::Error runPad(KernelContext &context) {
  const Tensor &data = context.operand(0);
  int64_t rank = data.getRank();
  std::string mode = stringAttr(context.getOp(), "mode", "constant");
  std::vector<int64_t> pads = intValues(context.operand(1));
  const Tensor *value = inputTensor(context, 2);
  const Tensor *axesTensor = inputTensor(context, 3);
  std::vector<int64_t> axes;
  if (axesTensor) {
    for (int64_t axis : intValues(*axesTensor)) {
      llvm::Expected<int64_t> normalized = normalizeAxis(context, axis, rank);
      if (!normalized)
        return normalized.takeError();
      axes.push_back(*normalized);
    }
  } else {
    for (int64_t axis = 0; axis < rank; ++axis)
      axes.push_back(axis);
  }
  if (pads.size() != 2 * axes.size())
    return context.error("pads has " + std::to_string(pads.size()) +
                         " entries for " + std::to_string(axes.size()) +
                         " axes (it needs two per axis)");
  if (value && value->getNumElements() != 1)
    return context.error("constant_value must hold one element");
  std::vector<int64_t> before(rank, 0);
  Shape shape(data.getShape());
  for (size_t i = 0; i < axes.size(); ++i) {
    before[axes[i]] += pads[i];
    shape[axes[i]] += pads[i] + pads[i + axes.size()];
    if (shape[axes[i]] < 0)
      return context.error("pads crop axis " + std::to_string(axes[i]) +
                           " below size 0");
    if (mode != "constant" && data.getDim(axes[i]) == 0 && shape[axes[i]] > 0)
      return context.error("mode '" + mode + "' cannot pad an empty axis");
  }
  if (llvm::Error error = checkResultSize(context, shape))
    return error;
  if (llvm::Error error = checkSameStorage(context, data))
    return error;
  Tensor result = context.makeResult(0, shape);
  llvm::SmallVector<int64_t, 6> outStrides = stridesOf(shape);
  llvm::SmallVector<int64_t, 6> inStrides = stridesOf(data.getShape());
  for (int64_t n = 0; n < result.getNumElements(); ++n) {
    int64_t rest = n, source = 0;
    for (int64_t d = 0; d < rank && source >= 0; ++d) {
      int64_t c =
          padSource(rest / outStrides[d] - before[d], data.getDim(d), mode);
      rest %= outStrides[d];
      source = c < 0 ? -1 : source + c * inStrides[d];
    }
    if (result.isFloat())
      result.floats()[n] = source >= 0 ? data.floats()[source]
                           : value     ? value->getAsDouble(0)
                                       : 0.0f;
    else
      result.ints()[n] = source >= 0 ? data.ints()[source]
                         : value     ? value->getAsInt(0)
                                     : 0;
  }
  context.setResult(0, std::move(result));
  return llvm::Error::success();
}

static llvm::Error runTrilu(KernelContext &context) {
  const Tensor &data = context.operand(0);
  if (data.getRank() < 2)
    return context.error("input must have rank >= 2");
  const Tensor *kTensor = inputTensor(context, 1);
  int64_t k = kTensor ? kTensor->getAsInt(0) : 0;
  bool upper = intAttr(context.getOp(), "upper", 1) != 0;
  int64_t rows = data.getDim(-2), cols = data.getDim(-1);
  if (llvm::Error error = checkSameStorage(context, data))
    return error;
  Tensor result = context.makeResult(0, data.getShape());
  for (int64_t n = 0; n < data.getNumElements(); ++n) {
    int64_t j = n % cols, i = (n / cols) % rows;
    bool keep = upper ? j - i >= k : j - i <= k;
    if (result.isFloat())
      result.floats()[n] = keep ? data.floats()[n] : 0.0f;
    else
      result.ints()[n] = keep ? data.ints()[n] : 0;
  }
  context.setResult(0, std::move(result));
  return llvm::Error::success();
}

void onnx::attachOnnxTensorKernels(MLIRContext *context) {
  attachKernel<runConstant, sits::onnx::ConstantOp>(context);
  attachKernel<runConstantOfShape, sits::onnx::ConstantOfShapeOp>(context);
  attachKernel<runRange, sits::onnx::RangeOp>(context);
  attachKernel<runShape, sits::onnx::ShapeOp>(context);
  attachKernel<runSize, sits::onnx::SizeOp>(context);
  attachKernel<runPad, sits::onnx::PadOp>(context);
  attachKernel<runReshape, sits::onnx::ReshapeOp>(context);
  attachKernel<runFlatten, sits::onnx::FlattenOp>(context);
  attachKernel<runSqueeze, sits::onnx::SqueezeOp>(context);
  attachKernel<runUnsqueeze, sits::onnx::UnsqueezeOp>(context);
  attachKernel<runExpand, sits::onnx::ExpandOp>(context);
  attachKernel<runTile, sits::onnx::TileOp>(context);
  attachKernel<runTranspose, sits::onnx::TransposeOp>(context);
  attachKernel<runConcat, sits::onnx::ConcatOp>(context);
  attachKernel<runSplit, sits::onnx::SplitOp>(context);
  attachKernel<runSlice, sits::onnx::SliceOp>(context);
  attachKernel<runGather, sits::onnx::GatherOp>(context);
  attachKernel<runGatherND, sits::onnx::GatherNDOp>(context);
  attachKernel<runTrilu, sits::onnx::TriluOp>(context);
}
