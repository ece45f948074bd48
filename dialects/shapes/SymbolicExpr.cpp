//===- SymbolicExpr.cpp - Canonical symbolic dimension expressions --------===//

#include "dialects/shapes/SymbolicExpr.h"

#include "mlir/IR/AffineExprVisitor.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/raw_ostream.h"

#include <map>

using namespace mlir;
using namespace sits::onnx;

namespace {

/// Orders atoms: dims by position, then symbols by position, then other
/// atoms (divisions that did not simplify) by their printed form, so that
/// the canonical form does not depend on pointer values.
struct AtomKey {
  int kind;
  unsigned position;
  std::string text;
  AffineExpr expr;

  explicit AtomKey(AffineExpr e) : kind(2), position(0), expr(e) {
    if (auto dim = dyn_cast<AffineDimExpr>(e)) {
      kind = 0;
      position = dim.getPosition();
    } else if (auto sym = dyn_cast<AffineSymbolExpr>(e)) {
      kind = 1;
      position = sym.getPosition();
    } else {
      llvm::raw_string_ostream os(text);
      e.print(os);
    }
  }
  bool operator<(const AtomKey &other) const {
    return std::tie(kind, position, text) <
           std::tie(other.kind, other.position, other.text);
  }
  bool operator==(const AtomKey &other) const {
    return kind == other.kind && position == other.position &&
           text == other.text;
  }
};

using Monomial = std::vector<AtomKey>;

struct MonomialLess {
  bool operator()(const Monomial &a, const Monomial &b) const {
    if (a.size() != b.size())
      return a.size() > b.size(); // Higher degree first, constant last.
    return std::lexicographical_compare(a.begin(), a.end(), b.begin(), b.end());
  }
};

/// A polynomial with int64 coefficients over atoms.
struct Poly {
  std::map<Monomial, int64_t, MonomialLess> terms;

  static Poly constant(int64_t c) {
    Poly p;
    if (c != 0)
      p.terms[{}] = c;
    return p;
  }
  static Poly atom(AffineExpr e) {
    Poly p;
    p.terms[{AtomKey(e)}] = 1;
    return p;
  }
  std::optional<int64_t> getConstant() const {
    if (terms.empty())
      return 0;
    if (terms.size() == 1 && terms.begin()->first.empty())
      return terms.begin()->second;
    return std::nullopt;
  }
};

bool addInto(Poly &acc, const Poly &rhs, int64_t scale) {
  for (const auto &[mono, coeff] : rhs.terms) {
    int64_t scaled, sum;
    if (__builtin_mul_overflow(coeff, scale, &scaled))
      return false;
    int64_t &slot = acc.terms[mono];
    if (__builtin_add_overflow(slot, scaled, &sum))
      return false;
    slot = sum;
    if (slot == 0)
      acc.terms.erase(mono);
  }
  return true;
}

std::optional<Poly> multiply(const Poly &a, const Poly &b) {
  Poly result;
  for (const auto &[ma, ca] : a.terms) {
    for (const auto &[mb, cb] : b.terms) {
      Monomial m = ma;
      m.insert(m.end(), mb.begin(), mb.end());
      llvm::sort(m, [](const AtomKey &x, const AtomKey &y) { return x < y; });
      int64_t coeff;
      if (__builtin_mul_overflow(ca, cb, &coeff))
        return std::nullopt;
      Poly term;
      term.terms[m] = coeff;
      if (!addInto(result, term, 1))
        return std::nullopt;
    }
  }
  return result;
}

/// Divides every coefficient by `divisor` when all are multiples of it.
std::optional<Poly> divideCoefficients(const Poly &p, int64_t divisor) {
  if (divisor == 0)
    return std::nullopt;
  Poly result;
  for (const auto &[mono, coeff] : p.terms) {
    if (coeff % divisor != 0)
      return std::nullopt;
    result.terms[mono] = coeff / divisor;
  }
  return result;
}

AffineExpr fromPoly(const Poly &p, MLIRContext *context) {
  AffineExpr sum = getAffineConstantExpr(0, context);
  bool first = true;
  for (const auto &[mono, coeff] : p.terms) {
    AffineExpr term;
    for (const AtomKey &atom : mono)
      term = term ? term * atom.expr : atom.expr;
    if (!term)
      term = getAffineConstantExpr(coeff, context);
    else if (coeff != 1)
      term = term * coeff;
    sum = first ? term : sum + term;
    first = false;
  }
  return sum;
}

std::optional<Poly> toPoly(AffineExpr expr);

/// floordiv / ceildiv / mod: exact when the divisor is a constant dividing
/// every coefficient, otherwise an atom over canonical operands.
std::optional<Poly> divisionToPoly(AffineBinaryOpExpr bin) {
  std::optional<Poly> lhs = toPoly(bin.getLHS());
  std::optional<Poly> rhs = toPoly(bin.getRHS());
  if (!lhs || !rhs)
    return std::nullopt;
  std::optional<int64_t> divisor = rhs->getConstant();
  std::optional<int64_t> dividend = lhs->getConstant();
  if (divisor && *divisor > 0) {
    if (dividend) {
      int64_t q = *dividend / *divisor, r = *dividend % *divisor;
      if (r != 0 && (*dividend < 0))
        q -= 1, r += *divisor; // floor semantics
      switch (bin.getKind()) {
      case AffineExprKind::FloorDiv:
        return Poly::constant(q);
      case AffineExprKind::CeilDiv:
        return Poly::constant(r == 0 ? q : q + 1);
      case AffineExprKind::Mod:
        return Poly::constant(r);
      default:
        break;
      }
    }
    if (std::optional<Poly> exact = divideCoefficients(*lhs, *divisor)) {
      if (bin.getKind() == AffineExprKind::Mod)
        return Poly();
      return exact;
    }
  }
  MLIRContext *context = bin.getContext();
  AffineExpr canonical = getAffineBinaryOpExpr(
      bin.getKind(), fromPoly(*lhs, context), fromPoly(*rhs, context));
  return Poly::atom(canonical);
}

std::optional<Poly> toPoly(AffineExpr expr) {
  switch (expr.getKind()) {
  case AffineExprKind::Constant:
    return Poly::constant(cast<AffineConstantExpr>(expr).getValue());
  case AffineExprKind::DimId:
  case AffineExprKind::SymbolId:
    return Poly::atom(expr);
  case AffineExprKind::Add: {
    auto bin = cast<AffineBinaryOpExpr>(expr);
    std::optional<Poly> lhs = toPoly(bin.getLHS());
    std::optional<Poly> rhs = toPoly(bin.getRHS());
    if (!lhs || !rhs || !addInto(*lhs, *rhs, 1))
      return std::nullopt;
    return lhs;
  }
  case AffineExprKind::Mul: {
    auto bin = cast<AffineBinaryOpExpr>(expr);
    std::optional<Poly> lhs = toPoly(bin.getLHS());
    std::optional<Poly> rhs = toPoly(bin.getRHS());
    if (!lhs || !rhs)
      return std::nullopt;
    return multiply(*lhs, *rhs);
  }
  case AffineExprKind::FloorDiv:
  case AffineExprKind::CeilDiv:
  case AffineExprKind::Mod:
    return divisionToPoly(cast<AffineBinaryOpExpr>(expr));
  }
  return std::nullopt;
}

} // namespace

AffineExpr sits::onnx::canonicalize(AffineExpr expr) {
  if (!expr)
    return expr;
  std::optional<Poly> poly = toPoly(expr);
  return poly ? fromPoly(*poly, expr.getContext()) : expr;
}

/// lhs + scale * rhs, or lhs * rhs, on polynomials with checked
/// coefficients; null when an operand is null or a coefficient overflows.
/// (AffineExpr's own operators fold constants without overflow checks.)
static AffineExpr combine(AffineExpr lhs, AffineExpr rhs, int64_t scale,
                          bool isProduct) {
  if (!lhs || !rhs)
    return nullptr;
  std::optional<Poly> a = toPoly(lhs);
  std::optional<Poly> b = toPoly(rhs);
  if (!a || !b)
    return nullptr;
  if (isProduct) {
    std::optional<Poly> product = multiply(*a, *b);
    return product ? fromPoly(*product, lhs.getContext()) : AffineExpr();
  }
  if (!addInto(*a, *b, scale))
    return nullptr;
  return fromPoly(*a, lhs.getContext());
}

AffineExpr sits::onnx::addExprs(AffineExpr lhs, AffineExpr rhs) {
  return combine(lhs, rhs, 1, false);
}

AffineExpr sits::onnx::subExprs(AffineExpr lhs, AffineExpr rhs) {
  return combine(lhs, rhs, -1, false);
}

AffineExpr sits::onnx::mulExprs(AffineExpr lhs, AffineExpr rhs) {
  return combine(lhs, rhs, 1, true);
}

std::optional<AffineExpr> sits::onnx::divideExactly(AffineExpr numerator,
                                                    AffineExpr denominator) {
  if (!numerator || !denominator)
    return std::nullopt;
  std::optional<Poly> num = toPoly(numerator);
  std::optional<Poly> den = toPoly(denominator);
  if (!num || !den || den->terms.empty())
    return std::nullopt;
  MLIRContext *context = numerator.getContext();
  if (den->terms.size() == 1) {
    // A single monomial c * m: every term of the numerator must contain m
    // and have a coefficient divisible by c.
    const auto &[denMono, denCoeff] = *den->terms.begin();
    Poly result;
    for (const auto &[mono, coeff] : num->terms) {
      if (coeff % denCoeff != 0)
        return std::nullopt;
      Monomial rest = mono;
      for (const AtomKey &atom : denMono) {
        auto it = llvm::find(rest, atom);
        if (it == rest.end())
          return std::nullopt;
        rest.erase(it);
      }
      result.terms[rest] = coeff / denCoeff;
    }
    return fromPoly(result, context);
  }
  // A polynomial denominator: only integer multiples of it divide exactly.
  const auto &[firstMono, firstCoeff] = *den->terms.begin();
  auto it = num->terms.find(firstMono);
  if (it == num->terms.end() || it->second % firstCoeff != 0)
    return std::nullopt;
  int64_t factor = it->second / firstCoeff;
  Poly check = *num;
  if (!addInto(check, *den, -factor) || !check.terms.empty())
    return std::nullopt;
  return getAffineConstantExpr(factor, context);
}

AffineExpr sits::onnx::ceilDivExpr(AffineExpr numerator, int64_t divisor) {
  if (!numerator || divisor <= 0)
    return nullptr;
  if (divisor == 1)
    return canonicalize(numerator);
  return canonicalize(numerator.ceilDiv(divisor));
}

std::optional<int64_t> sits::onnx::getConstantValue(AffineExpr expr) {
  if (auto constant = dyn_cast_or_null<AffineConstantExpr>(expr))
    return constant.getValue();
  return std::nullopt;
}
