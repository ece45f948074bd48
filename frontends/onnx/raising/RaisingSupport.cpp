//===- RaisingSupport.cpp - Shared state and helpers of raising -----------===//

#include "frontends/onnx/raising/RaisingSupport.h"

#include "dialects/shapes/SymbolicExpr.h"
#include "dialects/sits/WeightView.h"

#include "mlir/IR/Matchers.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringSet.h"

#include <algorithm>
#include <cstring>
#include <memory>

using namespace mlir;
using namespace sits;
using namespace sits::onnx;
using namespace sits::onnx::raising;

const StringRef sits::onnx::raising::kRaiseCounters[] = {
    "embeddings_raised",    "rms_norms_raised",
    "layer_norms_raised",   "linears_raised",
    "lm_heads_raised",      "activations_raised",
    "glus_raised",          "split_heads_raised",
    "merge_heads_raised",   "rope_tables_raised",
    "ropes_raised",         "attentions_raised",
    "residual_adds_raised", "identities_removed",
    "weight_casts_folded",  "merged_decoders_unmerged",
    "kv_cache_io_raised",   "position_inputs_replaced",
    "onnx_ops_left"};
const size_t sits::onnx::raising::kNumRaiseCounters =
    std::size(sits::onnx::raising::kRaiseCounters);

RaiseContext::RaiseContext(func::FuncOp function, PassAudit &audit)
    : function(function), audit(audit), builder(function.getContext()),
      shapes(function.getContext()) {}

void RaiseContext::recordChange(StringRef counter, Location loc,
                                StringRef replaced, StringRef with,
                                StringRef rule) {
  audit.add(counter);
  audit.change(loc, replaced.str(), with.str(), rule.str());
}

Location RaiseContext::getFusedLoc(ArrayRef<Operation *> ops) {
  llvm::SetVector<Location> locations;
  for (Operation *op : ops)
    locations.insert(op->getLoc());
  if (locations.size() == 1)
    return locations.front();
  return FusedLoc::get(getContext(), locations.getArrayRef());
}

void RaiseContext::recordRaise(StringRef counter,
                               ArrayRef<Operation *> replaced, StringRef with,
                               StringRef rule) {
  audit.add(counter);
  SmallVector<Location> locations;
  for (Operation *op : replaced)
    locations.push_back(op->getLoc());
  audit.change(locations, describeOps(replaced), with.str(), rule.str());
}

void RaiseContext::noteNotRaised(Operation *anchor, const llvm::Twine &reason) {
  reasons.try_emplace(anchor, reason.str());
}

StringRef RaiseContext::getReason(Operation *op) const {
  auto it = reasons.find(op);
  return it == reasons.end() ? StringRef() : StringRef(it->second);
}

/// The name of a weight-like constant (sits.weight name), or "".
static StringRef getWeightName(Value value) {
  if (auto weight = definedBy<WeightOp>(value))
    return weight.getName();
  return "";
}

/// `attr` `[K, N]` as `[N, K]`: a large (or mapped) weight as a view that the
/// engine writer transposes while it writes, a small one copied.
static ElementsAttr transposeMatrix(ElementsAttr attr) {
  auto type = dyn_cast<RankedTensorType>(attr.getType());
  if (!type || type.getRank() != 2)
    return nullptr;
  auto transposedType = RankedTensorType::get(
      {type.getDimSize(1), type.getDimSize(0)}, type.getElementType());
  auto dense = dyn_cast<DenseElementsAttr>(attr);
  if (!dense || (!dense.isSplat() && getWeightBytes(attr) >= kLargeWeightBytes))
    return getWeightView(attr, transposedType, /*transposed=*/true);
  if (dense.isSplat())
    return dense.reshape(transposedType);
  unsigned bits = type.getElementTypeBitWidth();
  if (bits % 8 != 0)
    return nullptr;
  size_t size = bits / 8;
  int64_t rows = type.getDimSize(0), cols = type.getDimSize(1);
  ArrayRef<char> in = dense.getRawData();
  // Uninitialized (a weight can be gigabytes), and transposed in tiles so
  // that reads and writes both stay within a few pages: an element-wise
  // column walk over a large matrix misses the TLB on every write.
  std::unique_ptr<char[]> out(new char[in.size()]);
  constexpr int64_t kTile = 64;
  for (int64_t k0 = 0; k0 < rows; k0 += kTile)
    for (int64_t n0 = 0; n0 < cols; n0 += kTile) {
      int64_t kEnd = std::min(rows, k0 + kTile);
      int64_t nEnd = std::min(cols, n0 + kTile);
      for (int64_t k = k0; k < kEnd; ++k)
        for (int64_t n = n0; n < nEnd; ++n)
          std::memcpy(&out[(n * rows + k) * size], &in[(k * cols + n) * size],
                      size);
    }
  return DenseElementsAttr::getFromRawBuffer(
      transposedType, ArrayRef<char>(out.get(), in.size()));
}

FailureOr<Value>
RaiseContext::getProjectionWeight(Value weight,
                                  SmallVectorImpl<Operation *> &used) {
  auto type = dyn_cast<RankedTensorType>(weight.getType());
  if (!type || type.getRank() != 2)
    return failure();
  if (auto transpose = definedBy<TransposeOp>(weight)) {
    SmallVector<int64_t> perm = transpose.getPermutation();
    if (perm == SmallVector<int64_t>{1, 0}) {
      used.push_back(transpose);
      return transpose.getData();
    }
  }
  auto it = transposed.find(weight);
  if (it != transposed.end())
    return it->second;
  ElementsAttr value = getConstant(weight);
  if (!value)
    return failure();
  ElementsAttr flipped = transposeMatrix(value);
  if (!flipped)
    return failure();
  Operation *producer = weight.getDefiningOp();
  OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPointAfter(producer);
  StringRef name = getWeightName(weight);
  std::string newName =
      (name.empty() ? std::string("weight") : name.str()) + ".T";
  auto created =
      WeightOp::create(builder, producer->getLoc(), flipped.getType(),
                       builder.getStringAttr(newName), flipped);
  transposed[weight] = created.getResult();
  derivedWeights.push_back({created, weight, name.str()});
  return created.getResult();
}

Value RaiseContext::getChannelVector(Value value, AffineExpr size) {
  const TensorFacts &facts = shapes.getFacts(value);
  if (!facts.ranked || !getFloatElementType(value))
    return nullptr;
  if (facts.getRank() == 1)
    return facts.dims[0] == size ? value : nullptr;
  for (AffineExpr dim : ArrayRef<AffineExpr>(facts.dims).drop_back())
    if (getConstantValue(dim) != std::optional<int64_t>(1))
      return nullptr;
  if (facts.dims.back() != size)
    return nullptr;
  std::optional<int64_t> length = getConstantValue(size);
  return length ? getFlattenedWeight(value, {*length}) : nullptr;
}

Value RaiseContext::getFlattenedWeight(Value value, ArrayRef<int64_t> shape) {
  DenseElementsAttr dense = getDenseConstant(value);
  if (!dense || !isa<FloatType>(dense.getElementType()))
    return nullptr;
  // Leading 1s beyond `shape`'s rank broadcast away.
  ArrayRef<int64_t> from = dense.getType().getShape();
  while (from.size() > shape.size() && from.front() == 1)
    from = from.drop_front();
  if (from.size() > shape.size())
    return nullptr;
  size_t lead = shape.size() - from.size();
  for (size_t d = 0; d < from.size(); ++d)
    if (from[d] != 1 && from[d] != shape[lead + d])
      return nullptr;
  int64_t count = 1;
  for (int64_t dim : shape)
    count *= dim;
  SmallVector<APFloat> values(dense.getValues<APFloat>());
  SmallVector<APFloat> flat;
  flat.reserve(count);
  for (int64_t i = 0; i < count; ++i) {
    // The element of `value` that index i of `shape` reads.
    int64_t rest = i, source = 0, stride = 1;
    for (size_t d = shape.size(); d-- > lead;) {
      int64_t coordinate = rest % shape[d];
      rest /= shape[d];
      int64_t size = from[d - lead];
      source += (size == 1 ? 0 : coordinate) * stride;
      stride *= size;
    }
    flat.push_back(values[dense.isSplat() ? 0 : source]);
  }
  auto vectorType = RankedTensorType::get({count}, dense.getElementType());
  Operation *producer = value.getDefiningOp();
  OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPointAfter(producer);
  StringRef name = getWeightName(value);
  auto created = WeightOp::create(
      builder, producer->getLoc(), vectorType,
      builder.getStringAttr((name.empty() ? "vector" : name.str()) + ".flat"),
      DenseElementsAttr::get(vectorType, flat));
  derivedWeights.push_back({created, value, name.str()});
  return created.getResult();
}

void RaiseContext::finishPhase() {
  Block &body = function.front();
  // Dead ops, users before producers.
  bool changed = true;
  while (changed) {
    changed = false;
    for (Operation &op : llvm::make_early_inc_range(llvm::reverse(body))) {
      if (op.hasTrait<OpTrait::IsTerminator>() || !isOpTriviallyDead(&op))
        continue;
      reasons.erase(&op);
      llvm::erase_if(replacedInputs,
                     [&](const auto &input) { return input.second == &op; });
      op.erase();
      changed = true;
    }
  }
  // A weight derived from one that is now gone (transposed, flattened)
  // takes the original's name: the engine's weight table then points back
  // at the initializer. While the original lives, the suffix tells them
  // apart.
  llvm::StringSet<> taken;
  llvm::SmallPtrSet<Operation *, 16> alive;
  for (auto weight : body.getOps<WeightOp>()) {
    taken.insert(weight.getName());
    alive.insert(weight);
  }
  for (auto &[derived, original, base] : derivedWeights) {
    (void)original;
    if (base.empty() || !alive.contains(derived) || taken.contains(base))
      continue;
    derived.setName(base);
    taken.insert(base);
  }
  derivedWeights.clear();
  transposed.clear();
  shapes.clear();
}

//===----------------------------------------------------------------------===//
// Matchers
//===----------------------------------------------------------------------===//

ElementsAttr sits::onnx::raising::getConstant(Value value) {
  if (!value)
    return nullptr;
  if (auto weight = definedBy<WeightOp>(value))
    return weight.getValue();
  if (auto constant = definedBy<ConstantOp>(value))
    return constant.getValueAsElements();
  Attribute attr;
  if (matchPattern(value, m_Constant(&attr)))
    return dyn_cast<ElementsAttr>(attr);
  return nullptr;
}

DenseElementsAttr sits::onnx::raising::getDenseConstant(Value value) {
  ElementsAttr attr = getConstant(value);
  return attr ? materializeWeight(attr) : nullptr;
}

Value sits::onnx::raising::getEmbeddingTable(GatherOp gather) {
  Value table = gather.getData();
  auto type = dyn_cast<RankedTensorType>(table.getType());
  if (!type || type.getRank() != 2 || gather.getAxis() != 0)
    return nullptr;
  if (getConstant(table))
    return table;
  auto transpose = definedBy<TransposeOp>(table);
  if (transpose && getConstant(transpose.getData()) &&
      transpose.getPermutation() == SmallVector<int64_t>{1, 0})
    return table;
  return nullptr;
}

BlockArgument sits::onnx::raising::findTokenIds(func::FuncOp function) {
  for (BlockArgument arg : function.getArguments())
    for (OpOperand &use : arg.getUses()) {
      auto gather = dyn_cast<GatherOp>(use.getOwner());
      if (gather && gather.getIndices() == arg && getEmbeddingTable(gather))
        return arg;
      auto quantized = dyn_cast<MsGatherBlockQuantizedOp>(use.getOwner());
      if (quantized && quantized.getIndices() == arg)
        return arg;
      auto embedding = dyn_cast<EmbeddingOp>(use.getOwner());
      if (embedding && embedding.getIds() == arg)
        return arg;
    }
  return nullptr;
}

Value sits::onnx::raising::sliceWeightRows(RaiseContext &rc, Value value,
                                           int64_t begin, int64_t end) {
  // A mapped or viewed weight is copied here (fused projections are not
  // read in place).
  DenseElementsAttr dense = getDenseConstant(value);
  auto type = dense ? dyn_cast<RankedTensorType>(dense.getType()) : nullptr;
  if (!type || type.getElementTypeBitWidth() % 8 != 0)
    return nullptr;
  SmallVector<int64_t> shape(type.getShape());
  int64_t rowElements = 1;
  for (int64_t size : ArrayRef<int64_t>(shape).drop_front())
    rowElements *= size;
  shape[0] = end - begin;
  auto sliceType = RankedTensorType::get(shape, type.getElementType());
  DenseElementsAttr sliced;
  if (dense.isSplat()) {
    sliced = dense.resizeSplat(sliceType);
  } else {
    size_t rowBytes = rowElements * type.getElementTypeBitWidth() / 8;
    ArrayRef<char> raw = dense.getRawData();
    sliced = DenseElementsAttr::getFromRawBuffer(
        sliceType, raw.slice(begin * rowBytes, (end - begin) * rowBytes));
  }
  // Named after the initializer (a transposed copy has its name + ".T"):
  // rows [begin:end) of its [out, in] form.
  auto weight = definedBy<WeightOp>(value);
  StringRef base = weight ? weight.getName() : StringRef("weight");
  base.consume_back(".T");
  std::string name = base.str() + "[" + std::to_string(begin) + ":" +
                     std::to_string(end) + "]";
  OpBuilder &b = rc.getBuilder();
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointAfterValue(value);
  return WeightOp::create(b, value.getLoc(), sliceType, b.getStringAttr(name),
                          sliced);
}

Value sits::onnx::raising::createRopeTable(OpBuilder &b, Location loc,
                                           Value cos, Value sin) {
  DenseElementsAttr cosTable = getDenseConstant(cos);
  DenseElementsAttr sinTable = getDenseConstant(sin);
  auto type =
      cosTable ? dyn_cast<RankedTensorType>(cosTable.getType()) : nullptr;
  if (!type || !sinTable || cosTable.getType() != sinTable.getType() ||
      type.getRank() != 2 || !isa<FloatType>(type.getElementType()))
    return nullptr;
  int64_t rows = type.getDimSize(0), half = type.getDimSize(1);
  SmallVector<APFloat> cosValues(cosTable.getValues<APFloat>());
  SmallVector<APFloat> sinValues(sinTable.getValues<APFloat>());
  SmallVector<APFloat> values;
  values.reserve(rows * half * 2);
  for (int64_t row = 0; row < rows; ++row) {
    values.append(cosValues.begin() + row * half,
                  cosValues.begin() + (row + 1) * half);
    values.append(sinValues.begin() + row * half,
                  sinValues.begin() + (row + 1) * half);
  }
  auto tableType =
      RankedTensorType::get({rows, 2 * half}, type.getElementType());
  return WeightOp::create(b, loc, tableType, b.getStringAttr("rope_table"),
                          DenseElementsAttr::get(tableType, values));
}

std::optional<double> sits::onnx::raising::getScalarConstant(Value value) {
  // A constant cast to a float type: its value rounded to that type.
  if (auto cast = definedBy<CastOp>(value)) {
    auto type = dyn_cast<FloatType>(getElementTypeOrSelf(cast.getOutput()));
    std::optional<double> source = getScalarConstant(cast.getInput());
    if (!type || !source)
      return std::nullopt;
    APFloat rounded(*source);
    bool lost = false;
    rounded.convert(type.getFloatSemantics(), APFloat::rmNearestTiesToEven,
                    &lost);
    return rounded.convertToDouble();
  }
  ElementsAttr constant = getConstant(value);
  if (!constant || constant.getNumElements() != 1)
    return std::nullopt;
  DenseElementsAttr attr = materializeWeight(constant);
  if (!attr)
    return std::nullopt;
  Type type = attr.getElementType();
  if (isa<FloatType>(type))
    return (*attr.getValues<APFloat>().begin()).convertToDouble();
  if (type.isInteger(1))
    return (*attr.getValues<APInt>().begin()).getZExtValue() ? 1.0 : 0.0;
  if (type.isInteger())
    return static_cast<double>(
        (*attr.getValues<APInt>().begin()).getSExtValue());
  return std::nullopt;
}

bool sits::onnx::raising::isScalarConstant(Value value, double expected,
                                           double tolerance) {
  std::optional<double> actual = getScalarConstant(value);
  if (!actual)
    return false;
  return std::abs(*actual - expected) <=
         tolerance * std::max(1.0, std::abs(expected));
}

bool sits::onnx::raising::isZeroTensor(Value value) {
  while (Operation *op = value.getDefiningOp()) {
    if (!isa<CastOp, ReshapeOp, ExpandOp>(op))
      break;
    value = op->getOperand(0);
  }
  ElementsAttr constant = getConstant(value);
  if (auto fill = definedBy<ConstantOfShapeOp>(value)) {
    // Without a value: a float 0.
    if (!fill.getValueAttr())
      return true;
    constant = fill.getValueAttr();
  }
  if (!constant)
    return false;
  if (auto dense = dyn_cast<DenseElementsAttr>(constant)) {
    if (dense.getElementType().isIntOrIndex())
      return llvm::all_of(dense.getValues<APInt>(),
                          [](const APInt &v) { return v.isZero(); });
    if (isa<FloatType>(dense.getElementType()))
      return llvm::all_of(dense.getValues<APFloat>(),
                          [](const APFloat &v) { return v.isZero(); });
  }
  return false;
}

Value sits::onnx::raising::otherOperand(Operation *op, Value operand) {
  if (!op || op->getNumOperands() != 2)
    return nullptr;
  if (op->getOperand(0) == operand)
    return op->getOperand(1);
  if (op->getOperand(1) == operand)
    return op->getOperand(0);
  return nullptr;
}

static void collectInto(Value value, Product &product, int depth) {
  if (depth > 16) {
    product.factors.push_back(value);
    return;
  }
  if (std::optional<double> constant = getScalarConstant(value)) {
    product.scale *= *constant;
    return;
  }
  if (auto mul = definedBy<MulOp>(value)) {
    product.ops.push_back(mul);
    collectInto(mul.getA(), product, depth + 1);
    collectInto(mul.getB(), product, depth + 1);
    return;
  }
  if (auto div = definedBy<DivOp>(value)) {
    if (std::optional<double> divisor = getScalarConstant(div.getB());
        divisor && *divisor != 0.0) {
      product.ops.push_back(div);
      product.scale /= *divisor;
      collectInto(div.getA(), product, depth + 1);
      return;
    }
  }
  if (auto neg = definedBy<NegOp>(value)) {
    product.ops.push_back(neg);
    product.scale = -product.scale;
    collectInto(neg.getInput(), product, depth + 1);
    return;
  }
  product.factors.push_back(value);
}

Product sits::onnx::raising::collectProduct(Value value) {
  Product product;
  collectInto(value, product, 0);
  return product;
}

FloatType sits::onnx::raising::getFloatElementType(Value value) {
  auto type = dyn_cast<ShapedType>(value.getType());
  return type ? dyn_cast<FloatType>(type.getElementType()) : nullptr;
}

std::string sits::onnx::raising::describeOps(ArrayRef<Operation *> ops) {
  llvm::MapVector<StringRef, int> counts;
  llvm::SmallPtrSet<Operation *, 16> seen;
  for (Operation *op : ops)
    if (seen.insert(op).second)
      ++counts[isa<OnnxDialect>(op->getDialect())
                   ? op->getName().stripDialect()
                   : op->getName().getStringRef()];
  std::string text;
  for (auto [name, count] : counts) {
    text += (text.empty() ? "" : ", ") + name.str();
    if (count > 1)
      text += " x" + std::to_string(count);
  }
  return text + " (" + std::to_string(seen.size()) +
         (seen.size() == 1 ? " op)" : " ops)");
}

RankedTensorType sits::onnx::raising::withLastDim(Type type, int64_t size) {
  auto ranked = cast<RankedTensorType>(type);
  SmallVector<int64_t> shape(ranked.getShape());
  shape.back() = size;
  return RankedTensorType::get(shape, ranked.getElementType());
}

int64_t sits::onnx::raising::staticSize(AffineExpr dim) {
  std::optional<int64_t> size = getConstantValue(dim);
  return size ? *size : ShapedType::kDynamic;
}

Operation *sits::onnx::raising::getSingleUser(Value value) {
  if (!value || !value.hasOneUse())
    return nullptr;
  return *value.getUsers().begin();
}

std::string sits::onnx::raising::formatFloat(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%.9g", value);
  return buffer;
}
