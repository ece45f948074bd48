//===- SymbolicExpr.h - Canonical symbolic dimension expressions -*- C++
//-*-===//
//
// Dims and small integer values are mlir::AffineExprs over symbols (one per
// named dynamic dim of the graph inputs) and, for per-element values, dims
// (the element's index along each axis). MLIR keeps products of symbols as
// written, so `batch * seq` and `seq * batch` would differ; these helpers keep
// every expression in one canonical polynomial form so that equal sizes are
// the same (uniqued) AffineExpr and can be compared with `==`.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_DIALECT_SHAPES_SYMBOLICEXPR_H
#define SITS_DIALECT_SHAPES_SYMBOLICEXPR_H

#include "mlir/IR/AffineExpr.h"

#include <optional>

namespace sits::onnx {

/// The canonical form of `expr`: a sum of integer multiples of products of
/// atoms (dims, symbols, and floordiv/ceildiv/mod terms that do not divide
/// exactly), ordered deterministically. Returns `expr` unchanged when the
/// coefficients would overflow int64.
mlir::AffineExpr canonicalize(mlir::AffineExpr expr);

/// Sum, difference and product, canonical; null when an operand is null or
/// a coefficient would overflow int64 (callers treat null as unknown).
mlir::AffineExpr addExprs(mlir::AffineExpr lhs, mlir::AffineExpr rhs);
mlir::AffineExpr subExprs(mlir::AffineExpr lhs, mlir::AffineExpr rhs);
mlir::AffineExpr mulExprs(mlir::AffineExpr lhs, mlir::AffineExpr rhs);

/// `numerator / denominator` when the division is exact as polynomials:
/// the denominator is a nonzero constant or a single monomial dividing every
/// term, or the numerator is an integer multiple of the denominator.
std::optional<mlir::AffineExpr> divideExactly(mlir::AffineExpr numerator,
                                              mlir::AffineExpr denominator);

/// ceil(numerator / divisor) for a positive constant divisor, canonical;
/// null for a null numerator.
mlir::AffineExpr ceilDivExpr(mlir::AffineExpr numerator, int64_t divisor);

/// The value of `expr` when it is a constant.
std::optional<int64_t> getConstantValue(mlir::AffineExpr expr);

} // namespace sits::onnx

#endif // SITS_DIALECT_SHAPES_SYMBOLICEXPR_H
