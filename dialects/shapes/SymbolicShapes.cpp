//===- SymbolicShapes.cpp - Symbolic shapes and values of tensors ---------===//

#include "dialects/shapes/SymbolicShapes.h"
#include "dialects/shapes/ShapeRuleOpInterface.h"
#include "dialects/shapes/SymbolicExpr.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallPtrSet.h"

using namespace mlir;
using namespace sits::onnx;

#include "dialects/shapes/ShapeRuleOpInterface.cpp.inc"

//===----------------------------------------------------------------------===//
// TensorFacts
//===----------------------------------------------------------------------===//

std::optional<int64_t> TensorFacts::getStaticNumElements() const {
  if (!ranked)
    return std::nullopt;
  int64_t count = 1;
  for (AffineExpr dim : dims) {
    std::optional<int64_t> size = getConstantValue(dim);
    if (!size || *size < 0 || __builtin_mul_overflow(count, *size, &count))
      return std::nullopt;
  }
  return count;
}

AffineExpr TensorFacts::getDim(int64_t index) const {
  int64_t rank = getRank();
  if (!ranked || index < -rank || index >= rank)
    return nullptr;
  return dims[index < 0 ? index + rank : index];
}

AffineExpr TensorFacts::getScalar() const {
  std::optional<int64_t> count = getStaticNumElements();
  if (!count || *count != 1)
    return nullptr;
  if (values && !values->empty())
    return (*values)[0];
  if (elementExpr) {
    SmallVector<AffineExpr> zeros(
        getRank(), getAffineConstantExpr(0, elementExpr.getContext()));
    return remapDims(elementExpr, zeros);
  }
  return nullptr;
}

//===----------------------------------------------------------------------===//
// ShapeRuleContext
//===----------------------------------------------------------------------===//

const TensorFacts &ShapeRuleContext::operand(unsigned index) const {
  return shapes.getFacts(op->getOperand(index));
}

AffineExpr ShapeRuleContext::constant(int64_t value) const {
  return getAffineConstantExpr(value, op->getContext());
}

AffineExpr ShapeRuleContext::unknown() const {
  return shapes.createUnknownSymbol();
}

std::string ShapeRuleContext::describe(ArrayRef<AffineExpr> dims) const {
  return shapes.print(dims);
}

std::string ShapeRuleContext::describe(AffineExpr expr) const {
  return shapes.print(expr);
}

//===----------------------------------------------------------------------===//
// Shared helpers
//===----------------------------------------------------------------------===//

FailureOr<SmallVector<AffineExpr, 4>>
sits::onnx::broadcastDims(ShapeRuleContext &ctx,
                          ArrayRef<ArrayRef<AffineExpr>> shapes) {
  size_t rank = 0;
  for (ArrayRef<AffineExpr> shape : shapes)
    rank = std::max(rank, shape.size());
  SmallVector<AffineExpr, 4> result;
  for (size_t i = 0; i < rank; ++i) {
    AffineExpr chosen;
    std::optional<int64_t> chosenConstant;
    bool ambiguous = false;
    for (ArrayRef<AffineExpr> shape : shapes) {
      if (i + shape.size() < rank)
        continue;
      AffineExpr dim = shape[i + shape.size() - rank];
      std::optional<int64_t> size = getConstantValue(dim);
      if (size && *size == 1)
        continue;
      if (size) {
        if (chosenConstant && *chosenConstant != *size)
          return ctx.fail() << "cannot broadcast dimension " << *chosenConstant
                            << " with " << *size << " (shapes " <<
                 [&] {
                   std::string all;
                   for (ArrayRef<AffineExpr> s : shapes)
                     all += (all.empty() ? "" : " and ") + ctx.describe(s);
                   return all;
                 }() << ")";
        chosenConstant = size;
        chosen = dim;
        ambiguous = false;
        continue;
      }
      if (chosenConstant)
        continue; // A symbolic dim broadcast against a constant is that one.
      if (chosen && chosen != dim)
        ambiguous = true;
      chosen = dim;
    }
    if (!chosen)
      chosen = ctx.constant(1);
    else if (ambiguous)
      chosen = ctx.unknown();
    result.push_back(chosen);
  }
  return result;
}

AffineExpr sits::onnx::remapDims(AffineExpr expr,
                                 ArrayRef<AffineExpr> replacements) {
  if (!expr || llvm::any_of(replacements, [](AffineExpr r) { return !r; }))
    return nullptr;
  return canonicalize(expr.replaceDims(replacements));
}

AffineExpr sits::onnx::broadcastElementExpr(AffineExpr elementExpr,
                                            ArrayRef<AffineExpr> operandDims,
                                            ArrayRef<AffineExpr> resultDims) {
  if (!elementExpr)
    return nullptr;
  MLIRContext *context = elementExpr.getContext();
  size_t offset = resultDims.size() - operandDims.size();
  SmallVector<AffineExpr> replacements;
  for (size_t i = 0; i < operandDims.size(); ++i) {
    std::optional<int64_t> size = getConstantValue(operandDims[i]);
    if (size && *size == 1)
      replacements.push_back(getAffineConstantExpr(0, context));
    else
      replacements.push_back(getAffineDimExpr(i + offset, context));
  }
  return remapDims(elementExpr, replacements);
}

FailureOr<int64_t> sits::onnx::normalizeAxis(ShapeRuleContext &ctx,
                                             StringRef what, int64_t axis,
                                             int64_t rank) {
  if (axis < -rank || axis >= rank)
    return ctx.fail() << what << " " << axis << " is out of range for rank "
                      << rank;
  return axis < 0 ? axis + rank : axis;
}

LogicalResult sits::onnx::requireRanked(ShapeRuleContext &ctx, unsigned index,
                                        StringRef name) {
  if (!ctx.operand(index).ranked)
    return ctx.fail() << name << " has an unknown rank";
  return success();
}

FailureOr<SmallVector<int64_t, 4>>
sits::onnx::requireConstantInts(ShapeRuleContext &ctx, unsigned index,
                                StringRef name) {
  const TensorFacts &facts = ctx.operand(index);
  SmallVector<int64_t, 4> result;
  if (facts.values) {
    for (AffineExpr value : *facts.values) {
      std::optional<int64_t> constant = getConstantValue(value);
      if (!constant)
        break;
      result.push_back(*constant);
    }
    if (result.size() == facts.values->size())
      return result;
  }
  return ctx.fail() << name << " must be a constant (or computable from "
                    << "shapes), but its values are not known";
}

AffineExpr sits::onnx::productOf(ArrayRef<AffineExpr> dims,
                                 MLIRContext *context) {
  AffineExpr product = getAffineConstantExpr(1, context);
  for (AffineExpr dim : dims)
    product = mulExprs(product, dim);
  return product;
}

/// Values of a 1-D operand whose length is a constant, with unknown
/// entries null (a shape operand).
FailureOr<SmallVector<AffineExpr, 4>>
sits::onnx::getShapeOperand(ShapeRuleContext &ctx, unsigned index,
                            StringRef name) {
  const TensorFacts &facts = ctx.operand(index);
  if (!facts.ranked || facts.getRank() != 1)
    return ctx.fail() << name << " must be 1-D";
  std::optional<int64_t> length = getConstantValue(facts.dims[0]);
  if (!length)
    return ctx.fail() << name << " has a length that is not a constant, so "
                      << "the result's rank is unknown";
  if (facts.values)
    return *facts.values;
  SmallVector<AffineExpr, 4> unknown(*length, AffineExpr());
  MLIRContext *context = ctx.getContext();
  for (int64_t i = 0; i < *length; ++i)
    unknown[i] = elementAt(facts, {i}, context);
  return unknown;
}

std::optional<SmallVector<int64_t, 4>>
sits::onnx::getConstantDims(const TensorFacts &facts) {
  if (!facts.ranked)
    return std::nullopt;
  SmallVector<int64_t, 4> dims;
  for (AffineExpr dim : facts.dims) {
    std::optional<int64_t> size = getConstantValue(dim);
    if (!size)
      return std::nullopt;
    dims.push_back(*size);
  }
  return dims;
}

AffineExpr sits::onnx::elementAt(const TensorFacts &facts,
                                 ArrayRef<int64_t> index,
                                 MLIRContext *context) {
  if (!facts.ranked)
    return nullptr;
  // Right-align the index with the tensor's dims, as broadcasting does.
  int64_t rank = facts.getRank();
  int64_t offset = static_cast<int64_t>(index.size()) - rank;
  if (offset < 0)
    return nullptr;
  SmallVector<int64_t, 4> own;
  for (int64_t i = 0; i < rank; ++i) {
    std::optional<int64_t> size = getConstantValue(facts.dims[i]);
    own.push_back(size && *size == 1 ? 0 : index[i + offset]);
  }
  if (facts.values) {
    std::optional<SmallVector<int64_t, 4>> dims = getConstantDims(facts);
    if (!dims)
      return nullptr;
    int64_t flat = 0;
    for (int64_t i = 0; i < rank; ++i) {
      if (own[i] >= (*dims)[i])
        return nullptr;
      flat = flat * (*dims)[i] + own[i];
    }
    return (*facts.values)[flat];
  }
  if (facts.elementExpr) {
    SmallVector<AffineExpr> replacements;
    for (int64_t i : own)
      replacements.push_back(getAffineConstantExpr(i, context));
    return remapDims(facts.elementExpr, replacements);
  }
  return nullptr;
}

void sits::onnx::forEachIndex(ArrayRef<int64_t> dims,
                              function_ref<void(ArrayRef<int64_t>)> fn) {
  for (int64_t dim : dims)
    if (dim <= 0)
      return;
  SmallVector<int64_t, 4> index(dims.size(), 0);
  while (true) {
    fn(index);
    int64_t axis = static_cast<int64_t>(dims.size()) - 1;
    while (axis >= 0 && ++index[axis] == dims[axis])
      index[axis--] = 0;
    if (axis < 0)
      return;
  }
}

void sits::onnx::setTrackedValues(TensorFacts &facts,
                                  SmallVector<AffineExpr, 4> values) {
  std::optional<int64_t> count = facts.getStaticNumElements();
  if (count && *count <= SymbolicShapes::kMaxTrackedElements &&
      static_cast<int64_t>(values.size()) == *count)
    facts.values = std::move(values);
  else
    facts.values.reset();
}

//===----------------------------------------------------------------------===//
// SymbolicShapes
//===----------------------------------------------------------------------===//

SymbolicShapes::SymbolicShapes(MLIRContext *context) : context(context) {}

AffineExpr SymbolicShapes::getNamedSymbol(StringRef name) {
  auto [it, inserted] = namedSymbols.try_emplace(name, symbolNames.size());
  if (inserted) {
    symbolNames.push_back(name.str());
    symbolIsUnknown.push_back(false);
  }
  return getAffineSymbolExpr(it->second, context);
}

AffineExpr SymbolicShapes::createUnknownSymbol() {
  unsigned position = symbolNames.size();
  symbolNames.push_back("?" + std::to_string(position));
  symbolIsUnknown.push_back(true);
  return getAffineSymbolExpr(position, context);
}

StringRef SymbolicShapes::getSymbolName(unsigned position) const {
  if (position < symbolNames.size())
    return symbolNames[position];
  return "?";
}

bool SymbolicShapes::isUnknownSymbol(AffineExpr expr) const {
  auto symbol = dyn_cast_or_null<AffineSymbolExpr>(expr);
  return symbol && symbol.getPosition() < symbolIsUnknown.size() &&
         symbolIsUnknown[symbol.getPosition()];
}

namespace {
/// Prints canonical expressions with symbol names, `a - b` for negative
/// terms, and parentheses only where needed.
class ExprPrinter {
public:
  explicit ExprPrinter(const SymbolicShapes &shapes) : shapes(shapes) {}

  void print(AffineExpr expr, llvm::raw_ostream &os, bool parenthesize) {
    switch (expr.getKind()) {
    case AffineExprKind::Constant:
      os << cast<AffineConstantExpr>(expr).getValue();
      return;
    case AffineExprKind::SymbolId:
      os << shapes.getSymbolName(cast<AffineSymbolExpr>(expr).getPosition());
      return;
    case AffineExprKind::DimId:
      os << "d" << cast<AffineDimExpr>(expr).getPosition();
      return;
    case AffineExprKind::Add: {
      auto bin = cast<AffineBinaryOpExpr>(expr);
      if (parenthesize)
        os << "(";
      print(bin.getLHS(), os, false);
      AffineExpr rhs = bin.getRHS();
      std::optional<int64_t> rhsConstant = getConstantValue(rhs);
      auto rhsMul = dyn_cast<AffineBinaryOpExpr>(rhs);
      std::optional<int64_t> rhsFactor =
          rhsMul && rhsMul.getKind() == AffineExprKind::Mul
              ? getConstantValue(rhsMul.getRHS())
              : std::nullopt;
      if (rhsConstant && *rhsConstant < 0) {
        os << " - " << -*rhsConstant;
      } else if (rhsFactor && *rhsFactor < 0) {
        os << " - ";
        if (*rhsFactor == -1) {
          print(rhsMul.getLHS(), os, true);
        } else {
          print(rhsMul.getLHS(), os, true);
          os << " * " << -*rhsFactor;
        }
      } else {
        os << " + ";
        print(rhs, os, false);
      }
      if (parenthesize)
        os << ")";
      return;
    }
    default: {
      auto bin = cast<AffineBinaryOpExpr>(expr);
      const char *op = expr.getKind() == AffineExprKind::Mul ? " * "
                       : expr.getKind() == AffineExprKind::FloorDiv
                           ? " floordiv "
                       : expr.getKind() == AffineExprKind::CeilDiv ? " ceildiv "
                                                                   : " mod ";
      print(bin.getLHS(), os, true);
      os << op;
      print(bin.getRHS(), os, true);
      return;
    }
    }
  }

private:
  const SymbolicShapes &shapes;
};
} // namespace

std::string SymbolicShapes::print(AffineExpr expr) const {
  if (!expr)
    return "?";
  std::string text;
  llvm::raw_string_ostream os(text);
  ExprPrinter(*this).print(expr, os, false);
  return text;
}

std::string SymbolicShapes::print(ArrayRef<AffineExpr> dims) const {
  std::string text = "[";
  for (auto [i, dim] : llvm::enumerate(dims))
    text += (i ? ", " : "") + print(dim);
  return text + "]";
}

TensorType SymbolicShapes::getType(const TensorFacts &facts) const {
  if (!facts.ranked)
    return UnrankedTensorType::get(facts.elementType);
  SmallVector<int64_t> shape;
  for (AffineExpr dim : facts.dims) {
    std::optional<int64_t> size = getConstantValue(dim);
    shape.push_back(size && *size >= 0 ? *size : ShapedType::kDynamic);
  }
  return RankedTensorType::get(shape, facts.elementType);
}

TensorFacts SymbolicShapes::factsFromType(Type type) {
  TensorFacts facts;
  auto shaped = dyn_cast<ShapedType>(type);
  if (!shaped) {
    facts.elementType = type;
    facts.ranked = true; // A scalar.
    return facts;
  }
  facts.elementType = shaped.getElementType();
  if (!shaped.hasRank())
    return facts;
  facts.ranked = true;
  for (int64_t size : shaped.getShape())
    facts.dims.push_back(ShapedType::isDynamic(size)
                             ? createUnknownSymbol()
                             : getAffineConstantExpr(size, context));
  return facts;
}

TensorFacts SymbolicShapes::factsFromConstant(ElementsAttr attr) {
  TensorFacts facts = factsFromType(attr.getType());
  Type elementType = attr.getElementType();
  if (!elementType.isInteger())
    return facts;
  MLIRContext *context = attr.getContext();
  int64_t count = attr.getNumElements();
  if (count <= SymbolicShapes::kMaxTrackedElements) {
    SmallVector<AffineExpr, 4> values;
    for (APInt value : attr.getValues<APInt>()) {
      int64_t v = elementType.isInteger(1) || elementType.isUnsignedInteger()
                      ? static_cast<int64_t>(value.getZExtValue())
                      : value.getSExtValue();
      values.push_back(getAffineConstantExpr(v, context));
    }
    facts.values = std::move(values);
  }
  if (attr.isSplat() && count > 0) {
    APInt value = attr.getSplatValue<APInt>();
    int64_t v = elementType.isInteger(1) || elementType.isUnsignedInteger()
                    ? static_cast<int64_t>(value.getZExtValue())
                    : value.getSExtValue();
    facts.elementExpr = getAffineConstantExpr(v, context);
  }
  return facts;
}

TensorFacts SymbolicShapes::computeForBlockArgument(BlockArgument arg) {
  TensorFacts facts;
  auto shaped = dyn_cast<ShapedType>(arg.getType());
  auto function =
      dyn_cast_or_null<FunctionOpInterface>(arg.getOwner()->getParentOp());
  ArrayAttr names;
  if (function && arg.getOwner()->isEntryBlock())
    names =
        function.getArgAttrOfType<ArrayAttr>(arg.getArgNumber(), kDimNamesAttr);
  if (!shaped || !shaped.hasRank() || !names)
    return factsFromType(arg.getType());
  facts.elementType = shaped.getElementType();
  facts.ranked = true;
  for (auto [i, size] : llvm::enumerate(shaped.getShape())) {
    if (!ShapedType::isDynamic(size)) {
      facts.dims.push_back(getAffineConstantExpr(size, context));
      continue;
    }
    auto name = i < names.size() ? dyn_cast<StringAttr>(names[i]) : nullptr;
    facts.dims.push_back(name && !name.getValue().empty()
                             ? getNamedSymbol(name.getValue())
                             : createUnknownSymbol());
  }
  return facts;
}

LogicalResult
SymbolicShapes::inferResults(Operation *op,
                             SmallVectorImpl<TensorFacts> &results,
                             std::string &message) {
  results.assign(op->getNumResults(), TensorFacts());
  ShapeRuleContext ctx(op, *this, results);
  LogicalResult status = failure();
  if (auto rule = dyn_cast<ShapeRuleOpInterface>(op)) {
    status = rule.inferShapeFacts(ctx);
  } else if (ElementsAttr attr;
             op->getNumResults() == 1 &&
             op->hasTrait<OpTrait::ConstantLike>() &&
             matchPattern(op->getResult(0), m_Constant(&attr))) {
    results[0] = factsFromConstant(attr);
    status = success();
  } else {
    (void)(ctx.fail() << "no shape rule for " << op->getName());
  }
  if (failed(status)) {
    message = ctx.getMessage();
    return failure();
  }
  for (auto [index, facts] : llvm::enumerate(results)) {
    if (!facts.elementType)
      facts.elementType = getElementTypeOrSelf(op->getResult(index).getType());
    for (auto [d, dim] : llvm::enumerate(facts.dims)) {
      if (!dim) {
        dim = createUnknownSymbol();
        continue;
      }
      dim = canonicalize(dim);
      if (std::optional<int64_t> size = getConstantValue(dim);
          size && *size < 0) {
        message = "result " + std::to_string(index) + " dimension " +
                  std::to_string(d) + " would be " + std::to_string(*size);
        return failure();
      }
    }
    if (facts.values) {
      std::optional<int64_t> count = facts.getStaticNumElements();
      if (!count || *count != static_cast<int64_t>(facts.values->size()))
        facts.values.reset();
      else
        for (AffineExpr &value : *facts.values)
          value = canonicalize(value);
    }
    facts.elementExpr = canonicalize(facts.elementExpr);
  }
  return success();
}

void SymbolicShapes::computeForOp(Operation *op) {
  SmallVector<TensorFacts> results;
  std::string message;
  bool inferred = succeeded(inferResults(op, results, message));
  for (auto [index, result] : llvm::enumerate(op->getResults())) {
    TensorFacts fromType = factsFromType(result.getType());
    if (!inferred) {
      cache[result.getAsOpaquePointer()] = std::move(fromType);
      continue;
    }
    TensorFacts &facts = results[index];
    // The IR's own static dims win over symbolic ones; a rank mismatch
    // means the IR was typed by hand inconsistently, so trust the type.
    if (fromType.ranked && facts.ranked) {
      if (fromType.getRank() != facts.getRank()) {
        cache[result.getAsOpaquePointer()] = std::move(fromType);
        continue;
      }
      for (auto [dim, typeDim] : llvm::zip(facts.dims, fromType.dims))
        if (getConstantValue(typeDim) && !getConstantValue(dim))
          dim = typeDim;
    } else {
      // The rank of facts and IR type must agree: users read both.
      cache[result.getAsOpaquePointer()] = std::move(fromType);
      continue;
    }
    facts.elementType = fromType.elementType;
    cache[result.getAsOpaquePointer()] = std::move(facts);
  }
}

void SymbolicShapes::compute(Value root) {
  // Iterative post-order over producers: operands before users.
  SmallVector<Value> stack{root};
  llvm::SmallPtrSet<Operation *, 16> expanded;
  while (!stack.empty()) {
    Value value = stack.back();
    if (cache.count(value.getAsOpaquePointer())) {
      stack.pop_back();
      continue;
    }
    if (auto arg = dyn_cast<BlockArgument>(value)) {
      cache[value.getAsOpaquePointer()] = computeForBlockArgument(arg);
      stack.pop_back();
      continue;
    }
    Operation *op = value.getDefiningOp();
    bool ready = true;
    if (expanded.insert(op).second) {
      for (Value operand : op->getOperands())
        if (!cache.count(operand.getAsOpaquePointer())) {
          stack.push_back(operand);
          ready = false;
        }
    } else {
      // Second visit: operands still missing can only be on a cycle
      // (graph regions); read them from their types.
      for (Value operand : op->getOperands())
        if (!cache.count(operand.getAsOpaquePointer()))
          cache[operand.getAsOpaquePointer()] =
              factsFromType(operand.getType());
    }
    if (!ready)
      continue;
    computeForOp(op);
    stack.pop_back();
  }
}

const TensorFacts &SymbolicShapes::getFacts(Value value) {
  auto it = cache.find(value.getAsOpaquePointer());
  if (it != cache.end())
    return it->second;
  compute(value);
  return cache.find(value.getAsOpaquePointer())->second;
}

std::optional<ArrayRef<AffineExpr>> SymbolicShapes::getDims(Value value) {
  const TensorFacts &facts = getFacts(value);
  if (!facts.ranked)
    return std::nullopt;
  return ArrayRef<AffineExpr>(facts.dims);
}

AffineExpr SymbolicShapes::getDim(Value value, int64_t index) {
  return getFacts(value).getDim(index);
}

std::optional<SmallVector<AffineExpr, 4>>
SymbolicShapes::getValues(Value value) {
  const TensorFacts &facts = getFacts(value);
  if (!facts.values ||
      llvm::any_of(*facts.values, [](AffineExpr v) { return !v; }))
    return std::nullopt;
  return *facts.values;
}

std::optional<SmallVector<int64_t, 4>>
SymbolicShapes::getConstantValues(Value value) {
  std::optional<SmallVector<AffineExpr, 4>> values = getValues(value);
  if (!values)
    return std::nullopt;
  SmallVector<int64_t, 4> constants;
  for (AffineExpr v : *values) {
    std::optional<int64_t> c = getConstantValue(v);
    if (!c)
      return std::nullopt;
    constants.push_back(*c);
  }
  return constants;
}

bool SymbolicShapes::haveSameDims(Value lhs, Value rhs) {
  std::optional<ArrayRef<AffineExpr>> a = getDims(lhs);
  if (!a)
    return false;
  SmallVector<AffineExpr, 4> first(*a);
  std::optional<ArrayRef<AffineExpr>> b = getDims(rhs);
  return b && llvm::equal(first, *b);
}

void SymbolicShapes::setFacts(Value value, TensorFacts facts) {
  cache[value.getAsOpaquePointer()] = std::move(facts);
}

void SymbolicShapes::forget(Value value) {
  cache.erase(value.getAsOpaquePointer());
}

void SymbolicShapes::clear() { cache.clear(); }
