//===- LayoutTracer.h - What layout ops do to a tensor's dims ---*- C++ -*-===//
//
// Follows a value back through Reshape, Transpose, Unsqueeze, Squeeze,
// Expand, Identity and scalar-constant Mul/Div to the value it is a view of
// (its base), and describes each of its dims as the list of base dims
// ("atoms") it is made of, outermost first. Expand adds repeated atoms. So
// K transposed by `Reshape([-1, s, d]) -> Transpose -> Reshape([b, H, d, s])`
// reads `[[b], [heads], [d], [s]]` whatever the node sequence, and GQA
// repetition `Unsqueeze -> Expand -> Reshape` reads `[[b], [kv, rep], ...]`.
// Reshapes must split and merge at atom boundaries; anything else (a reshape
// cutting a dim in pieces) ends the trace with a reason.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_FRONTENDS_ONNX_RAISING_LAYOUTTRACER_H
#define SITS_FRONTENDS_ONNX_RAISING_LAYOUTTRACER_H

#include "dialects/shapes/SymbolicShapes.h"

#include "mlir/IR/Value.h"
#include "llvm/ADT/SmallVector.h"

#include <string>

namespace sits::onnx::raising {

struct LayoutAtom {
  /// A dim of the base (0..rank-1), or a repetition added by Expand.
  int64_t baseDim;
  mlir::AffineExpr size;
  bool isRepetition() const { return baseDim < 0; }
};

struct TracedLayout {
  mlir::Value base;
  /// For each dim of the traced value, the atoms it is made of. Atoms of
  /// constant size 1 are left out (a dim of size 1 has no atoms).
  llvm::SmallVector<llvm::SmallVector<LayoutAtom, 2>, 4> dims;
  /// Product of the scalar constants multiplied in on the way.
  double scale = 1.0;
  llvm::SmallVector<mlir::Operation *, 8> ops;

  /// Whether dim `index` is made of exactly the base dims `baseDims` (in
  /// order; base dims of constant size 1 are skipped).
  bool dimIs(unsigned index, llvm::ArrayRef<int64_t> baseDims) const;
};

/// Traces `value`; fails with `reason` when a layout op does something the
/// trace cannot describe.
mlir::FailureOr<TracedLayout>
traceLayout(SymbolicShapes &shapes, mlir::Value value, std::string &reason);

} // namespace sits::onnx::raising

#endif // SITS_FRONTENDS_ONNX_RAISING_LAYOUTTRACER_H
