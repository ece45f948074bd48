//===- MaskFormula.cpp - Formulas of linear constraints, decided exactly -===//
//
// The prover's formulas are in disjunctive normal form over linear
// constraints of the index and the shape symbols. Conjunctions that cannot
// hold are pruned as they are built; emptiness is decided by MLIR's
// Presburger library, exactly over the integers.
//
//===----------------------------------------------------------------------===//

#include "passes/MaskProver.h"

#include "dialects/shapes/SymbolicExpr.h"

#include "mlir/Analysis/Presburger/IntegerRelation.h"

using namespace mlir;
using namespace sits;
namespace ox = sits::onnx;

namespace {

/// Past this many disjuncts a formula is not worth proving things about.
constexpr size_t kMaxDisjuncts = 4096;

/// `expr` as coefficients of dims, then symbols, then the constant; nullopt
/// when it is not linear (products of variables, divisions).
std::optional<SmallVector<int64_t>> linearize(AffineExpr expr, unsigned numDims,
                                              unsigned numSymbols) {
  SmallVector<int64_t> row(numDims + numSymbols + 1, 0);
  std::function<bool(AffineExpr, int64_t)> add = [&](AffineExpr e,
                                                     int64_t scale) -> bool {
    if (auto c = dyn_cast<AffineConstantExpr>(e)) {
      row.back() += scale * c.getValue();
      return true;
    }
    if (auto d = dyn_cast<AffineDimExpr>(e)) {
      if (d.getPosition() >= numDims)
        return false;
      row[d.getPosition()] += scale;
      return true;
    }
    if (auto s = dyn_cast<AffineSymbolExpr>(e)) {
      if (s.getPosition() >= numSymbols)
        return false;
      row[numDims + s.getPosition()] += scale;
      return true;
    }
    auto binary = dyn_cast<AffineBinaryOpExpr>(e);
    if (!binary)
      return false;
    if (binary.getKind() == AffineExprKind::Add)
      return add(binary.getLHS(), scale) && add(binary.getRHS(), scale);
    if (binary.getKind() == AffineExprKind::Mul) {
      if (auto c = dyn_cast<AffineConstantExpr>(binary.getRHS()))
        return add(binary.getLHS(), scale * c.getValue());
      if (auto c = dyn_cast<AffineConstantExpr>(binary.getLHS()))
        return add(binary.getRHS(), scale * c.getValue());
    }
    return false;
  };
  if (!add(expr, 1))
    return std::nullopt;
  return row;
}

/// Largest symbol position in `expr` + 1.
unsigned countSymbols(AffineExpr expr) {
  unsigned count = 0;
  expr.walk([&](AffineExpr e) {
    if (auto s = dyn_cast<AffineSymbolExpr>(e))
      count = std::max(count, s.getPosition() + 1);
  });
  return count;
}

} // namespace

//===----------------------------------------------------------------------===//
// Formulas
//===----------------------------------------------------------------------===//

Formula::Conjunction MaskProver::domain() const {
  Formula::Conjunction result;
  unsigned symbols = 0;
  for (AffineExpr size : space.sizes)
    symbols = std::max(symbols, countSymbols(size));
  for (unsigned s = 0; s < symbols; ++s)
    result.push_back(
        Atom{getAffineSymbolExpr(s, context) - 1, /*equality=*/false});
  for (auto [k, size] : llvm::enumerate(space.sizes)) {
    AffineExpr d = getAffineDimExpr(k, context);
    result.push_back(Atom{d, false});
    result.push_back(Atom{
        ox::subExprs(ox::subExprs(size, d), getAffineConstantExpr(1, context)),
        false});
  }
  return result;
}

/// Builds the polyhedron of `atoms` and the domain; nullopt when an atom is
/// not linear.
static std::optional<bool> isConjunctionEmpty(const Formula::Conjunction &atoms,
                                              unsigned numDims) {
  unsigned numSymbols = 0;
  for (const Atom &atom : atoms)
    numSymbols = std::max(numSymbols, countSymbols(atom.expr));
  presburger::IntegerPolyhedron polyhedron(
      presburger::PresburgerSpace::getSetSpace(numDims + numSymbols));
  for (const Atom &atom : atoms) {
    std::optional<SmallVector<int64_t>> row =
        linearize(atom.expr, numDims, numSymbols);
    if (!row)
      return std::nullopt;
    if (atom.equality)
      polyhedron.addEquality(*row);
    else
      polyhedron.addInequality(*row);
  }
  return polyhedron.isEmpty();
}

bool MaskProver::isFeasible(const Formula::Conjunction &conjunction) const {
  Formula::Conjunction all = domain();
  all.append(conjunction.begin(), conjunction.end());
  std::optional<bool> empty = isConjunctionEmpty(all, space.sizes.size());
  return !empty || !*empty;
}

FailureOr<bool> MaskProver::isEmpty(const Formula &formula) {
  for (const Formula::Conjunction &conjunction : formula.disjuncts) {
    Formula::Conjunction all = domain();
    all.append(conjunction.begin(), conjunction.end());
    std::optional<bool> empty = isConjunctionEmpty(all, space.sizes.size());
    if (!empty)
      return fail("a condition of the mask is not linear in the indices and "
                  "sizes, so Presburger arithmetic cannot decide it");
    if (!*empty)
      return false;
  }
  return true;
}

Formula MaskProver::prune(Formula formula) const {
  Formula result;
  for (Formula::Conjunction &conjunction : formula.disjuncts) {
    // Decide constant atoms here; drop conjunctions that cannot hold.
    Formula::Conjunction kept;
    bool impossible = false;
    for (const Atom &atom : conjunction) {
      if (std::optional<int64_t> c = ox::getConstantValue(atom.expr)) {
        if (atom.equality ? *c != 0 : *c < 0)
          impossible = true;
        continue;
      }
      kept.push_back(atom);
    }
    if (impossible || !isFeasible(kept))
      continue;
    if (kept.empty())
      return Formula::getTrue();
    result.disjuncts.push_back(std::move(kept));
  }
  return result;
}

Formula MaskProver::conjoin(const Formula &lhs, const Formula &rhs) {
  Formula result;
  for (const Formula::Conjunction &a : lhs.disjuncts)
    for (const Formula::Conjunction &b : rhs.disjuncts) {
      Formula::Conjunction both = a;
      both.append(b.begin(), b.end());
      result.disjuncts.push_back(std::move(both));
      if (result.disjuncts.size() > kMaxDisjuncts)
        break;
    }
  return prune(std::move(result));
}

Formula MaskProver::disjoin(const Formula &lhs, const Formula &rhs) {
  Formula result = lhs;
  result.disjuncts.insert(result.disjuncts.end(), rhs.disjuncts.begin(),
                          rhs.disjuncts.end());
  return prune(std::move(result));
}

Formula MaskProver::negate(const Formula &formula) {
  // not (C1 or C2 ...) = (not C1) and (not C2) ...; not C = any atom fails.
  Formula result = Formula::getTrue();
  AffineExpr one = getAffineConstantExpr(1, context);
  for (const Formula::Conjunction &conjunction : formula.disjuncts) {
    Formula notConjunction;
    for (const Atom &atom : conjunction) {
      AffineExpr negated = ox::subExprs(
          ox::mulExprs(atom.expr, getAffineConstantExpr(-1, context)), one);
      notConjunction.disjuncts.push_back({Atom{negated, false}});
      if (atom.equality)
        notConjunction.disjuncts.push_back(
            {Atom{ox::subExprs(atom.expr, one), false}});
    }
    result = conjoin(result, notConjunction);
  }
  return result;
}
