//===- MaskProver.h - Prove what an attention mask computes -----*- C++ -*-===//
//
// Exporters compute attention masks with dozens of ops from the input's shape
// (Range, comparisons, CumSum, GatherND, Where, ...). To replace such a mask
// by the attention's causal rule, the rule must hold for every element and
// every input size, not just for the sizes a test tried.
//
// The prover evaluates a mask symbolically at an index (b, h, i, j) whose
// coordinates are variables: integer elements become piecewise affine
// expressions of the index and the shape symbols (batch, seq), boolean
// elements become formulas of linear constraints. Whether two formulas agree
// for every index and every size is then a question of Presburger
// arithmetic, which MLIR's Presburger library decides exactly: the set where
// they differ must be empty.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_PASSES_MASKPROVER_H
#define SITS_PASSES_MASKPROVER_H

#include "dialects/shapes/SymbolicShapes.h"

#include "mlir/IR/AffineExpr.h"
#include "mlir/IR/Value.h"
#include "llvm/ADT/SmallVector.h"

#include <map>
#include <string>
#include <vector>

namespace sits {

/// `expr >= 0`, or `expr == 0` when `equality` is set. Dims of `expr` are the
/// coordinates of the index space being evaluated; symbols are the shape
/// symbols of SymbolicShapes.
struct Atom {
  mlir::AffineExpr expr;
  bool equality = false;
};

/// A formula in disjunctive normal form: no disjunct is false, one empty
/// conjunction is true.
struct Formula {
  using Conjunction = llvm::SmallVector<Atom, 4>;
  std::vector<Conjunction> disjuncts;

  static Formula getTrue() { return Formula{{Conjunction{}}}; }
  static Formula getFalse() { return Formula{}; }
  static Formula get(Atom atom) { return Formula{{Conjunction{atom}}}; }
  bool isFalse() const { return disjuncts.empty(); }
};

/// A piecewise affine integer: `value` wherever `condition` holds. The
/// conditions of a term's pieces are disjoint and cover the index space.
struct Term {
  struct Piece {
    Formula condition;
    mlir::AffineExpr value;
  };
  std::vector<Piece> pieces;
};

/// A piecewise constant float (additive masks: 0 where visible, -inf or the
/// lowest float elsewhere).
struct FloatTerm {
  struct Piece {
    Formula condition;
    double value;
  };
  std::vector<Piece> pieces;
};

/// The index space an evaluation happens in: its dims' sizes (affine in the
/// shape symbols).
struct IndexSpace {
  llvm::SmallVector<mlir::AffineExpr, 4> sizes;
};

class MaskProver {
public:
  explicit MaskProver(onnx::SymbolicShapes &shapes);

  /// Whether `mask` (boolean: true = visible; or float: added to the scores)
  /// broadcast to `[batch, heads, seq_q, seq_k]` (the sizes in `space`)
  /// equals `rule` at every index, for every value of the shape symbols.
  /// On failure, `getReason()` says which op or which index breaks it.
  mlir::FailureOr<bool> matches(mlir::Value mask, const IndexSpace &space,
                                const Formula &rule);

  /// Why the last evaluation failed (an op the prover does not understand,
  /// or a fact it could not prove).
  const std::string &getReason() const { return reason; }

  /// Integer constants that appear in the mask's formula, as candidate
  /// window sizes (after `matches` evaluated it).
  const std::vector<int64_t> &getConstants() const { return constants; }

  /// Formula helpers, exposed for the rules the fold pass builds.
  Formula conjoin(const Formula &lhs, const Formula &rhs);
  Formula disjoin(const Formula &lhs, const Formula &rhs);
  Formula negate(const Formula &formula);
  /// `lhs >= rhs` etc. as atoms over the current space.
  static Atom greaterOrEqual(mlir::AffineExpr lhs, mlir::AffineExpr rhs);

private:
  mlir::FailureOr<Formula> evalBool(mlir::Value value,
                                    llvm::ArrayRef<mlir::AffineExpr> index);
  mlir::FailureOr<Term> evalInt(mlir::Value value,
                                llvm::ArrayRef<mlir::AffineExpr> index);
  mlir::FailureOr<FloatTerm> evalFloat(mlir::Value value,
                                       llvm::ArrayRef<mlir::AffineExpr> index);
  mlir::FailureOr<Formula> evalBoolOp(mlir::Operation *op,
                                      llvm::ArrayRef<mlir::AffineExpr> index);
  mlir::FailureOr<Term> evalIntOp(mlir::Operation *op,
                                  llvm::ArrayRef<mlir::AffineExpr> index);

  /// The index of `operand` that element `index` of `result` reads: the same
  /// coordinates for equal dims, 0 for broadcast dims of size 1.
  mlir::FailureOr<llvm::SmallVector<mlir::AffineExpr, 4>>
  broadcastIndex(mlir::Value operand, mlir::Value result,
                 llvm::ArrayRef<mlir::AffineExpr> index);
  /// For data-movement ops (Unsqueeze, Slice, Transpose, ...): the index of
  /// the op's data operand that `index` of its result reads.
  mlir::FailureOr<llvm::SmallVector<mlir::AffineExpr, 4>>
  sourceIndex(mlir::Operation *op, llvm::ArrayRef<mlir::AffineExpr> index);
  /// Gather/GatherND/Concat read different operands or coordinates per
  /// piece; these return the pieces of (condition, operand, index).
  struct Read {
    Formula condition;
    mlir::Value source;
    llvm::SmallVector<mlir::AffineExpr, 4> index;
  };
  mlir::FailureOr<std::vector<Read>>
  piecewiseReads(mlir::Operation *op, llvm::ArrayRef<mlir::AffineExpr> index);
  /// Whether `term` is zero everywhere in its value's own index space.
  mlir::FailureOr<bool> isZeroEverywhere(mlir::Value value);

  /// Constant elements, when the value is a constant of known contents.
  mlir::FailureOr<Formula> constantBool(mlir::ElementsAttr attr,
                                        llvm::ArrayRef<mlir::AffineExpr> index);

  /// Conditions that hold in the current space: every symbol >= 1 and
  /// 0 <= d_k < size_k.
  Formula::Conjunction domain() const;
  /// Whether `conjunction` (with the domain) has an integer solution; true
  /// when undecidable here (non-linear), so that pruning stays sound.
  bool isFeasible(const Formula::Conjunction &conjunction) const;
  /// Whether `formula` is empty in the current space; failure when an atom
  /// is not linear.
  mlir::FailureOr<bool> isEmpty(const Formula &formula);
  Formula prune(Formula formula) const;

  mlir::LogicalResult fail(mlir::Operation *op, const llvm::Twine &why);
  mlir::LogicalResult fail(const llvm::Twine &why);

  onnx::SymbolicShapes &shapes;
  mlir::MLIRContext *context;
  IndexSpace space;
  std::string reason;
  std::vector<int64_t> constants;
  std::map<std::pair<const void *, std::vector<const void *>>, Formula>
      boolCache;
  std::map<std::pair<const void *, std::vector<const void *>>, Term> intCache;
};

} // namespace sits

#endif // SITS_PASSES_MASKPROVER_H
