//===- MaskProver.cpp - Prove what an attention mask computes -------------===//

#include "passes/MaskProver.h"

#include "dialects/onnx/OnnxOps.h"
#include "dialects/shapes/SymbolicExpr.h"
#include "dialects/sits/SitsOps.h"

#include "mlir/IR/AffineExprVisitor.h"
#include "mlir/IR/Matchers.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace sits;
namespace ox = sits::onnx;

namespace {

/// Constants up to this many elements are expanded element by element.
constexpr int64_t kMaxConstantElements = 4096;

bool isBool(Value value) {
  return getElementTypeOrSelf(value.getType()).isInteger(1);
}
bool isInt(Value value) {
  Type type = getElementTypeOrSelf(value.getType());
  return type.isSignlessInteger() && !type.isInteger(1);
}

std::vector<const void *> keyOf(ArrayRef<AffineExpr> index) {
  std::vector<const void *> key;
  for (AffineExpr e : index)
    key.push_back(e.getAsOpaquePointer());
  return key;
}

} // namespace

MaskProver::MaskProver(ox::SymbolicShapes &shapes)
    : shapes(shapes), context(shapes.getContext()) {}

LogicalResult MaskProver::fail(Operation *op, const Twine &why) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << "'" << op->getName() << "'";
  if (auto name = dyn_cast<NameLoc>(op->getLoc()))
    os << " (" << name.getName() << ")";
  os << ": " << why;
  reason = text;
  return failure();
}

LogicalResult MaskProver::fail(const Twine &why) {
  reason = why.str();
  return failure();
}

Atom MaskProver::greaterOrEqual(AffineExpr lhs, AffineExpr rhs) {
  return Atom{ox::subExprs(lhs, rhs), false};
}

//===----------------------------------------------------------------------===//
// Booleans
//===----------------------------------------------------------------------===//

/// Combines the pieces of two terms with `fn` on their values.
static Term combine(MaskProver &prover, const Term &lhs, const Term &rhs,
                    llvm::function_ref<AffineExpr(AffineExpr, AffineExpr)> fn) {
  Term result;
  for (const Term::Piece &a : lhs.pieces)
    for (const Term::Piece &b : rhs.pieces) {
      Formula condition = prover.conjoin(a.condition, b.condition);
      if (!condition.isFalse())
        result.pieces.push_back({std::move(condition), fn(a.value, b.value)});
    }
  return result;
}

/// Where `lhs` and `rhs` compare as `atom(lhs - rhs)` says.
static Formula compare(MaskProver &prover, const Term &lhs, const Term &rhs,
                       llvm::function_ref<Atom(AffineExpr)> atom) {
  Formula result = Formula::getFalse();
  for (const Term::Piece &a : lhs.pieces)
    for (const Term::Piece &b : rhs.pieces) {
      Formula condition = prover.conjoin(
          prover.conjoin(a.condition, b.condition),
          Formula::get(atom(sits::onnx::subExprs(a.value, b.value))));
      result = prover.disjoin(result, condition);
    }
  return result;
}

FailureOr<Formula> MaskProver::constantBool(ElementsAttr attr,
                                            ArrayRef<AffineExpr> index) {
  auto type = cast<ShapedType>(attr.getType());
  if (attr.isSplat())
    return attr.getSplatValue<bool>() ? Formula::getTrue()
                                      : Formula::getFalse();
  if (!type.hasStaticShape() || type.getNumElements() > kMaxConstantElements)
    return fail("a constant boolean mask too large to expand");
  // A constant mask (e.g. triangular): the OR of the points that are true.
  Formula result;
  SmallVector<int64_t> strides(type.getRank(), 1);
  for (int64_t k = type.getRank() - 2; k >= 0; --k)
    strides[k] = strides[k + 1] * type.getDimSize(k + 1);
  int64_t flat = 0;
  for (bool value : attr.getValues<bool>()) {
    if (value) {
      Formula::Conjunction point;
      for (int64_t k = 0; k < type.getRank(); ++k)
        point.push_back(Atom{
            ox::subExprs(index[k], getAffineConstantExpr((flat / strides[k]) %
                                                             type.getDimSize(k),
                                                         context)),
            true});
      result.disjuncts.push_back(std::move(point));
    }
    ++flat;
  }
  return prune(std::move(result));
}

FailureOr<Formula> MaskProver::evalBool(Value value,
                                        ArrayRef<AffineExpr> index) {
  auto key = std::make_pair(value.getAsOpaquePointer(), keyOf(index));
  if (auto it = boolCache.find(key); it != boolCache.end())
    return it->second;
  if (!isBool(value))
    return fail("expected a boolean tensor");
  // A tensor the shape analysis knows to be all true or all false (a
  // padding mask of ones, gathered and reshaped).
  if (AffineExpr element = shapes.getFacts(value).elementExpr)
    if (std::optional<int64_t> constant = ox::getConstantValue(element))
      return *constant ? Formula::getTrue() : Formula::getFalse();
  Operation *op = value.getDefiningOp();
  if (!op)
    return fail("the mask depends on function argument #" +
                Twine(cast<BlockArgument>(value).getArgNumber()) +
                " (runtime data, such as a padding mask)");
  FailureOr<Formula> result = evalBoolOp(op, index);
  if (succeeded(result))
    boolCache[key] = *result;
  return result;
}

FailureOr<Formula> MaskProver::evalBoolOp(Operation *op,
                                          ArrayRef<AffineExpr> index) {
  Value result = op->getResult(0);
  ElementsAttr constant;
  if (matchPattern(result, m_Constant(&constant)))
    return constantBool(constant, index);
  auto operandAt = [&](Value operand) {
    return broadcastIndex(operand, result, index);
  };
  auto boolOperand = [&](Value operand) -> FailureOr<Formula> {
    FailureOr<SmallVector<AffineExpr, 4>> at = operandAt(operand);
    if (failed(at))
      return failure();
    return evalBool(operand, *at);
  };
  auto intOperand = [&](Value operand) -> FailureOr<Term> {
    FailureOr<SmallVector<AffineExpr, 4>> at = operandAt(operand);
    if (failed(at))
      return failure();
    return evalInt(operand, *at);
  };
  // An integer comparison, as an atom on lhs - rhs.
  auto compareInts =
      [&](Value lhs, Value rhs,
          llvm::function_ref<Atom(AffineExpr)> atom) -> FailureOr<Formula> {
    FailureOr<Term> a = intOperand(lhs), b = intOperand(rhs);
    if (failed(a) || failed(b))
      return failure();
    return compare(*this, *a, *b, atom);
  };
  AffineExpr one = getAffineConstantExpr(1, context);
  AffineExpr minusOne = getAffineConstantExpr(-1, context);

  if (auto notOp = dyn_cast<ox::NotOp>(op)) {
    FailureOr<Formula> input = boolOperand(notOp.getInput());
    if (failed(input))
      return failure();
    return negate(*input);
  }
  if (isa<ox::AndOp, ox::OrOp>(op)) {
    FailureOr<Formula> a = boolOperand(op->getOperand(0));
    FailureOr<Formula> b = boolOperand(op->getOperand(1));
    if (failed(a) || failed(b))
      return failure();
    return isa<ox::AndOp>(op) ? conjoin(*a, *b) : disjoin(*a, *b);
  }
  if (auto equal = dyn_cast<ox::EqualOp>(op)) {
    if (isBool(equal.getA())) {
      FailureOr<Formula> a = boolOperand(equal.getA());
      FailureOr<Formula> b = boolOperand(equal.getB());
      if (failed(a) || failed(b))
        return failure();
      return disjoin(conjoin(*a, *b), conjoin(negate(*a), negate(*b)));
    }
    return compareInts(equal.getA(), equal.getB(), [](AffineExpr d) {
      return Atom{d, true};
    });
  }
  if (auto less = dyn_cast<ox::LessOp>(op))
    return compareInts(less.getA(), less.getB(), [&](AffineExpr d) {
      return Atom{ox::subExprs(ox::mulExprs(d, minusOne), one), false};
    });
  if (auto lessOrEqual = dyn_cast<ox::LessOrEqualOp>(op))
    return compareInts(lessOrEqual.getA(), lessOrEqual.getB(),
                       [&](AffineExpr d) {
                         return Atom{ox::mulExprs(d, minusOne), false};
                       });
  if (auto greater = dyn_cast<ox::GreaterOp>(op))
    return compareInts(greater.getA(), greater.getB(), [&](AffineExpr d) {
      return Atom{ox::subExprs(d, one), false};
    });
  if (auto greaterOrEqual = dyn_cast<ox::GreaterOrEqualOp>(op))
    return compareInts(greaterOrEqual.getA(), greaterOrEqual.getB(),
                       [](AffineExpr d) {
                         return Atom{d, false};
                       });
  if (auto where = dyn_cast<ox::WhereOp>(op)) {
    FailureOr<Formula> c = boolOperand(where.getCondition());
    FailureOr<Formula> x = boolOperand(where.getX());
    FailureOr<Formula> y = boolOperand(where.getY());
    if (failed(c) || failed(x) || failed(y))
      return failure();
    return disjoin(conjoin(*c, *x), conjoin(negate(*c), *y));
  }
  if (auto cast = dyn_cast<ox::CastOp>(op)) {
    Value input = cast.getInput();
    if (isBool(input))
      return boolOperand(input);
    if (!isInt(input))
      return fail(op, "casts a float to bool");
    FailureOr<Term> value = intOperand(input);
    if (failed(value))
      return failure();
    Term zero{{{Formula::getTrue(), getAffineConstantExpr(0, context)}}};
    return negate(compare(*this, *value, zero, [](AffineExpr d) {
      return Atom{d, true};
    }));
  }
  if (auto trilu = dyn_cast<ox::TriluOp>(op)) {
    int64_t k = 0;
    if (Value kValue = trilu.getK()) {
      auto values = shapes.getConstantValues(kValue);
      if (!values || values->size() != 1)
        return fail(op, "k is not a constant");
      k = values->front();
    }
    FailureOr<Formula> input = evalBool(trilu.getInput(), index);
    if (failed(input))
      return failure();
    AffineExpr row = index[index.size() - 2], column = index.back();
    AffineExpr diagonal = ox::subExprs(column, row); // j - i
    Atom keep =
        trilu.getUpper()
            ? Atom{ox::subExprs(diagonal, getAffineConstantExpr(k, context)),
                   false}
            : Atom{ox::subExprs(getAffineConstantExpr(k, context), diagonal),
                   false};
    return conjoin(*input, Formula::get(keep));
  }
  if (auto fill = dyn_cast<ox::ConstantOfShapeOp>(op)) {
    if (auto value = fill.getValueAttr())
      return value.getSplatValue<bool>() ? Formula::getTrue()
                                         : Formula::getFalse();
    return Formula::getFalse();
  }
  if (isa<ox::ConcatOp, ox::GatherOp, ox::GatherNDOp>(op)) {
    FailureOr<std::vector<Read>> reads = piecewiseReads(op, index);
    if (failed(reads))
      return failure();
    Formula formula = Formula::getFalse();
    for (const Read &read : *reads) {
      FailureOr<Formula> value = evalBool(read.source, read.index);
      if (failed(value))
        return failure();
      formula = disjoin(formula, conjoin(read.condition, *value));
    }
    return formula;
  }
  FailureOr<SmallVector<AffineExpr, 4>> source = sourceIndex(op, index);
  if (failed(source))
    return failure();
  return evalBool(op->getOperand(0), *source);
}

//===----------------------------------------------------------------------===//
// Integers
//===----------------------------------------------------------------------===//

FailureOr<bool> MaskProver::isZeroEverywhere(Value value) {
  std::optional<ArrayRef<AffineExpr>> dims = shapes.getDims(value);
  if (!dims)
    return fail("a tensor of unknown rank");
  // Evaluate in the value's own index space, then come back.
  IndexSpace saved = space;
  auto savedBools = std::move(boolCache);
  auto savedInts = std::move(intCache);
  boolCache.clear();
  intCache.clear();
  space.sizes.assign(dims->begin(), dims->end());
  SmallVector<AffineExpr, 4> index;
  for (size_t k = 0; k < dims->size(); ++k)
    index.push_back(getAffineDimExpr(k, context));
  FailureOr<bool> zero = [&]() -> FailureOr<bool> {
    FailureOr<Term> term = evalInt(value, index);
    if (failed(term))
      return failure();
    AffineExpr one = getAffineConstantExpr(1, context);
    for (const Term::Piece &piece : term->pieces) {
      Formula nonZero = disjoin(
          Formula::get(Atom{ox::subExprs(piece.value, one), false}),
          Formula::get(Atom{
              ox::subExprs(
                  ox::mulExprs(piece.value, getAffineConstantExpr(-1, context)),
                  one),
              false}));
      FailureOr<bool> empty = isEmpty(conjoin(piece.condition, nonZero));
      if (failed(empty))
        return failure();
      if (!*empty)
        return false;
    }
    return true;
  }();
  space = saved;
  boolCache = std::move(savedBools);
  intCache = std::move(savedInts);
  return zero;
}

FailureOr<Term> MaskProver::evalInt(Value value, ArrayRef<AffineExpr> index) {
  auto key = std::make_pair(value.getAsOpaquePointer(), keyOf(index));
  if (auto it = intCache.find(key); it != intCache.end())
    return it->second;
  if (!isInt(value))
    return fail("expected an integer tensor");

  // What the shape analysis already knows: every element as a function of
  // its index, or the values of a small tensor.
  const ox::TensorFacts &facts = shapes.getFacts(value);
  FailureOr<Term> result = failure();
  if (facts.elementExpr) {
    result =
        Term{{{Formula::getTrue(), ox::remapDims(facts.elementExpr, index)}}};
  } else if (facts.values &&
             llvm::all_of(*facts.values, [](AffineExpr e) { return !!e; }) &&
             facts.ranked) {
    std::optional<SmallVector<int64_t, 4>> dims = ox::getConstantDims(facts);
    if (dims) {
      Term term;
      SmallVector<int64_t, 4> strides(dims->size(), 1);
      for (int64_t k = static_cast<int64_t>(dims->size()) - 2; k >= 0; --k)
        strides[k] = strides[k + 1] * (*dims)[k + 1];
      for (auto [flat, element] : llvm::enumerate(*facts.values)) {
        Formula::Conjunction at;
        for (size_t k = 0; k < dims->size(); ++k)
          at.push_back(
              Atom{ox::subExprs(
                       index[k],
                       getAffineConstantExpr(
                           (int64_t(flat) / strides[k]) % (*dims)[k], context)),
                   true});
        Formula condition = prune(Formula{{at}});
        if (!condition.isFalse())
          term.pieces.push_back({std::move(condition), element});
      }
      result = std::move(term);
    }
  }
  if (failed(result)) {
    Operation *op = value.getDefiningOp();
    if (!op)
      return fail("the mask depends on function argument #" +
                  Twine(cast<BlockArgument>(value).getArgNumber()) +
                  " (runtime data)");
    result = evalIntOp(op, index);
  }
  if (succeeded(result))
    intCache[key] = *result;
  return result;
}

FailureOr<Term> MaskProver::evalIntOp(Operation *op,
                                      ArrayRef<AffineExpr> index) {
  Value result = op->getResult(0);
  auto intOperand = [&](Value operand) -> FailureOr<Term> {
    FailureOr<SmallVector<AffineExpr, 4>> at =
        broadcastIndex(operand, result, index);
    if (failed(at))
      return failure();
    return evalInt(operand, *at);
  };
  auto constantTerm = [&](int64_t value) {
    return Term{{{Formula::getTrue(), getAffineConstantExpr(value, context)}}};
  };

  ElementsAttr constant;
  if (matchPattern(result, m_Constant(&constant))) {
    if (constant.isSplat())
      return constantTerm(constant.getSplatValue<APInt>().getSExtValue());
    return fail(op, "a non-splat integer constant the shape analysis does "
                    "not track");
  }
  if (auto range = dyn_cast<ox::RangeOp>(op)) {
    AffineExpr start = shapes.getFacts(range.getStart()).getScalar();
    AffineExpr delta = shapes.getFacts(range.getDelta()).getScalar();
    if (!start || !delta || !ox::getConstantValue(delta))
      return fail(op, "start or delta is not known");
    return Term{{{Formula::getTrue(),
                  ox::addExprs(start, ox::mulExprs(index[0], delta))}}};
  }
  if (isa<ox::AddOp, ox::SubOp, ox::MulOp>(op)) {
    FailureOr<Term> a = intOperand(op->getOperand(0));
    FailureOr<Term> b = intOperand(op->getOperand(1));
    if (failed(a) || failed(b))
      return failure();
    if (isa<ox::AddOp>(op))
      return combine(*this, *a, *b, ox::addExprs);
    if (isa<ox::SubOp>(op))
      return combine(*this, *a, *b, ox::subExprs);
    return combine(*this, *a, *b, ox::mulExprs);
  }
  if (auto neg = dyn_cast<ox::NegOp>(op)) {
    FailureOr<Term> a = intOperand(neg.getInput());
    if (failed(a))
      return failure();
    for (Term::Piece &piece : a->pieces)
      piece.value =
          ox::mulExprs(piece.value, getAffineConstantExpr(-1, context));
    return a;
  }
  if (isa<ox::MaxOp, ox::MinOp>(op)) {
    bool isMax = isa<ox::MaxOp>(op);
    FailureOr<Term> acc = intOperand(op->getOperand(0));
    if (failed(acc))
      return failure();
    for (Value operand : op->getOperands().drop_front()) {
      FailureOr<Term> next = intOperand(operand);
      if (failed(next))
        return failure();
      Term merged;
      for (const Term::Piece &a : acc->pieces)
        for (const Term::Piece &b : next->pieces) {
          Formula both = conjoin(a.condition, b.condition);
          // a >= b picks a for max, b for min.
          Formula aWins =
              Formula::get(Atom{ox::subExprs(a.value, b.value), false});
          Formula first = conjoin(both, aWins);
          Formula second = conjoin(both, negate(aWins));
          if (!first.isFalse())
            merged.pieces.push_back({first, isMax ? a.value : b.value});
          if (!second.isFalse())
            merged.pieces.push_back({second, isMax ? b.value : a.value});
        }
      acc = std::move(merged);
    }
    return acc;
  }
  if (auto where = dyn_cast<ox::WhereOp>(op)) {
    FailureOr<SmallVector<AffineExpr, 4>> at =
        broadcastIndex(where.getCondition(), result, index);
    if (failed(at))
      return failure();
    FailureOr<Formula> c = evalBool(where.getCondition(), *at);
    FailureOr<Term> x = intOperand(where.getX());
    FailureOr<Term> y = intOperand(where.getY());
    if (failed(c) || failed(x) || failed(y))
      return failure();
    Term term;
    Formula notC = negate(*c);
    for (const Term::Piece &piece : x->pieces)
      if (Formula cond = conjoin(*c, piece.condition); !cond.isFalse())
        term.pieces.push_back({cond, piece.value});
    for (const Term::Piece &piece : y->pieces)
      if (Formula cond = conjoin(notC, piece.condition); !cond.isFalse())
        term.pieces.push_back({cond, piece.value});
    return term;
  }
  if (auto cast = dyn_cast<ox::CastOp>(op)) {
    Value input = cast.getInput();
    if (isInt(input))
      return intOperand(input);
    if (!isBool(input))
      return fail(op, "casts a float to an integer");
    FailureOr<SmallVector<AffineExpr, 4>> at =
        broadcastIndex(input, result, index);
    if (failed(at))
      return failure();
    FailureOr<Formula> f = evalBool(input, *at);
    if (failed(f))
      return failure();
    Term term;
    if (!f->isFalse())
      term.pieces.push_back({*f, getAffineConstantExpr(1, context)});
    Formula notF = negate(*f);
    if (!notF.isFalse())
      term.pieces.push_back({notF, getAffineConstantExpr(0, context)});
    return term;
  }
  if (auto cumsum = dyn_cast<ox::CumSumOp>(op)) {
    // A running sum is understood only when it sums zeros (as the packed-
    // sequence detection of transformers' masks does for ordinary inputs).
    FailureOr<bool> zero = isZeroEverywhere(cumsum.getX());
    if (failed(zero))
      return failure();
    if (!*zero)
      return fail(op, "sums values that are not provably zero");
    return constantTerm(0);
  }
  if (auto fill = dyn_cast<ox::ConstantOfShapeOp>(op)) {
    if (auto value = fill.getValueAttr())
      return constantTerm(value.getSplatValue<APInt>().getSExtValue());
    return constantTerm(0);
  }
  if (isa<ox::ConcatOp, ox::GatherOp, ox::GatherNDOp>(op)) {
    FailureOr<std::vector<Read>> reads = piecewiseReads(op, index);
    if (failed(reads))
      return failure();
    Term term;
    for (const Read &read : *reads) {
      FailureOr<Term> value = evalInt(read.source, read.index);
      if (failed(value))
        return failure();
      for (const Term::Piece &piece : value->pieces)
        if (Formula cond = conjoin(read.condition, piece.condition);
            !cond.isFalse())
          term.pieces.push_back({cond, piece.value});
    }
    return term;
  }
  FailureOr<SmallVector<AffineExpr, 4>> source = sourceIndex(op, index);
  if (failed(source))
    return failure();
  return evalInt(op->getOperand(0), *source);
}

//===----------------------------------------------------------------------===//
// Floats (additive masks)
//===----------------------------------------------------------------------===//

FailureOr<FloatTerm> MaskProver::evalFloat(Value value,
                                           ArrayRef<AffineExpr> index) {
  Operation *op = value.getDefiningOp();
  if (!op)
    return fail("the mask depends on a function argument (runtime data)");
  ElementsAttr constant;
  if (matchPattern(value, m_Constant(&constant))) {
    if (!constant.isSplat())
      return fail(op, "a non-splat float mask constant");
    return FloatTerm{{{Formula::getTrue(),
                       constant.getSplatValue<APFloat>().convertToDouble()}}};
  }
  if (auto where = dyn_cast<ox::WhereOp>(op)) {
    auto at = [&](Value operand) {
      return broadcastIndex(operand, value, index);
    };
    FailureOr<SmallVector<AffineExpr, 4>> cAt = at(where.getCondition());
    FailureOr<SmallVector<AffineExpr, 4>> xAt = at(where.getX());
    FailureOr<SmallVector<AffineExpr, 4>> yAt = at(where.getY());
    if (failed(cAt) || failed(xAt) || failed(yAt))
      return failure();
    FailureOr<Formula> c = evalBool(where.getCondition(), *cAt);
    FailureOr<FloatTerm> x = evalFloat(where.getX(), *xAt);
    FailureOr<FloatTerm> y = evalFloat(where.getY(), *yAt);
    if (failed(c) || failed(x) || failed(y))
      return failure();
    FloatTerm term;
    Formula notC = negate(*c);
    for (const FloatTerm::Piece &piece : x->pieces)
      if (Formula cond = conjoin(*c, piece.condition); !cond.isFalse())
        term.pieces.push_back({cond, piece.value});
    for (const FloatTerm::Piece &piece : y->pieces)
      if (Formula cond = conjoin(notC, piece.condition); !cond.isFalse())
        term.pieces.push_back({cond, piece.value});
    return term;
  }
  FailureOr<SmallVector<AffineExpr, 4>> source = sourceIndex(op, index);
  if (failed(source))
    return failure();
  return evalFloat(op->getOperand(0), *source);
}

//===----------------------------------------------------------------------===//
// The question
//===----------------------------------------------------------------------===//

FailureOr<bool> MaskProver::matches(Value mask, const IndexSpace &indexSpace,
                                    const Formula &rule) {
  space = indexSpace;
  boolCache.clear();
  intCache.clear();
  reason.clear();
  constants.clear();

  // The mask broadcasts from the right against [batch, heads, seq_q, seq_k].
  std::optional<ArrayRef<AffineExpr>> maskDims = shapes.getDims(mask);
  if (!maskDims || maskDims->size() > space.sizes.size())
    return fail("the mask's rank is unknown or above 4");
  SmallVector<AffineExpr, 4> index;
  size_t offset = space.sizes.size() - maskDims->size();
  for (auto [k, dim] : llvm::enumerate(*maskDims)) {
    if (dim == space.sizes[k + offset])
      index.push_back(getAffineDimExpr(k + offset, context));
    else if (ox::getConstantValue(dim) == 1)
      index.push_back(getAffineConstantExpr(0, context));
    else
      return fail("mask dim " + Twine(k) + " (" + shapes.print(dim) +
                  ") does not broadcast to " +
                  shapes.print(space.sizes[k + offset]));
  }

  FailureOr<Formula> visible = failure();
  if (isBool(mask)) {
    visible = evalBool(mask, index);
  } else {
    FailureOr<FloatTerm> additive = evalFloat(mask, index);
    if (failed(additive))
      return failure();
    Formula zero = Formula::getFalse();
    for (const FloatTerm::Piece &piece : additive->pieces) {
      if (piece.value == 0.0) {
        zero = disjoin(zero, piece.condition);
        continue;
      }
      // Only -inf or the lowest floats mask a key out: -inf exactly; the
      // lowest finite value of the mask's type (the exporters' finfo.min:
      // -3.4e38 in f32, -65504 in f16) makes exp() of the masked score
      // underflow to 0 like -inf does.
      double lowest = -1e30;
      if (auto type = dyn_cast<FloatType>(getElementTypeOrSelf(mask.getType())))
        if (type.isF16())
          lowest = -65504.0;
      if (!(piece.value <= lowest))
        return fail("an additive mask value " + std::to_string(piece.value) +
                    " is neither 0, -inf nor the lowest finite value of the "
                    "mask's type");
    }
    visible = zero;
  }
  if (failed(visible))
    return failure();

  for (const Formula::Conjunction &conjunction : visible->disjuncts)
    for (const Atom &atom : conjunction)
      atom.expr.walk([&](AffineExpr e) {
        if (auto c = dyn_cast<AffineConstantExpr>(e))
          constants.push_back(std::abs(c.getValue()));
      });

  FailureOr<bool> extra = isEmpty(conjoin(*visible, negate(rule)));
  if (failed(extra))
    return failure();
  if (!*extra) {
    reason = "the mask shows a key the rule hides";
    return false;
  }
  FailureOr<bool> missing = isEmpty(conjoin(negate(*visible), rule));
  if (failed(missing))
    return failure();
  if (!*missing) {
    reason = "the mask hides a key the rule shows";
    return false;
  }
  return true;
}
