//===- LayoutTracer.cpp - What layout ops do to a tensor's dims -----------===//

#include "frontends/onnx/raising/LayoutTracer.h"
#include "frontends/onnx/raising/RaisingSupport.h"

#include "dialects/onnx/OnnxOps.h"
#include "dialects/shapes/SymbolicExpr.h"

using namespace mlir;
using namespace sits::onnx;
using namespace sits::onnx::raising;

using Atoms = SmallVector<LayoutAtom, 2>;

bool TracedLayout::dimIs(unsigned index, ArrayRef<int64_t> baseDims) const {
  if (index >= dims.size())
    return false;
  const Atoms &atoms = dims[index];
  size_t next = 0;
  for (int64_t baseDim : baseDims) {
    // Base dims of constant size 1 have no atom.
    bool present = llvm::any_of(dims, [&](const Atoms &d) {
      return llvm::any_of(
          d, [&](const LayoutAtom &a) { return a.baseDim == baseDim; });
    });
    if (!present)
      continue;
    if (next >= atoms.size() || atoms[next].baseDim != baseDim)
      return false;
    ++next;
  }
  return next == atoms.size();
}

static bool isUnit(AffineExpr size) {
  return getConstantValue(size) == std::optional<int64_t>(1);
}

/// Regroups the atoms of `dims`, in order, into `resultDims`.
static LogicalResult regroup(SmallVectorImpl<Atoms> &dims,
                             ArrayRef<AffineExpr> resultDims,
                             MLIRContext *context, std::string &reason) {
  SmallVector<LayoutAtom> flat;
  for (const Atoms &dim : dims)
    flat.append(dim.begin(), dim.end());
  SmallVector<Atoms, 4> result;
  size_t next = 0;
  for (AffineExpr size : resultDims) {
    Atoms group;
    if (!isUnit(size)) {
      AffineExpr product = getAffineConstantExpr(1, context);
      while (product != size) {
        if (next >= flat.size()) {
          reason = "a reshape does not regroup whole dims";
          return failure();
        }
        product = mulExprs(product, flat[next].size);
        group.push_back(flat[next++]);
      }
    }
    result.push_back(std::move(group));
  }
  if (next != flat.size()) {
    reason = "a reshape does not regroup whole dims";
    return failure();
  }
  dims.assign(result.begin(), result.end());
  return success();
}

FailureOr<TracedLayout> sits::onnx::raising::traceLayout(SymbolicShapes &shapes,
                                                         Value value,
                                                         std::string &reason) {
  TracedLayout traced;
  SmallVector<Operation *> chain;
  Value current = value;
  while (Operation *op = current.getDefiningOp()) {
    if (isa<ReshapeOp, TransposeOp, UnsqueezeOp, SqueezeOp, ExpandOp,
            IdentityOp>(op)) {
      chain.push_back(op);
      current = op->getOperand(0);
      continue;
    }
    if (isa<MulOp, DivOp>(op)) {
      Value scalar = op->getOperand(1);
      Value data = op->getOperand(0);
      if (isa<MulOp>(op) && !getScalarConstant(scalar))
        std::swap(scalar, data);
      std::optional<double> factor = getScalarConstant(scalar);
      if (!factor || *factor == 0.0 ||
          op->getResult(0).getType() != data.getType())
        break;
      traced.scale *= isa<MulOp>(op) ? *factor : 1.0 / *factor;
      chain.push_back(op);
      current = data;
      continue;
    }
    break;
  }
  traced.base = current;
  std::optional<ArrayRef<AffineExpr>> baseDims = shapes.getDims(current);
  if (!baseDims) {
    reason = "the rank of the base tensor is unknown";
    return failure();
  }
  for (auto [i, size] : llvm::enumerate(*baseDims)) {
    Atoms dim;
    if (!isUnit(size))
      dim.push_back({static_cast<int64_t>(i), size});
    traced.dims.push_back(dim);
  }

  MLIRContext *context = value.getContext();
  int64_t nextRepetition = -1;
  for (Operation *op : llvm::reverse(chain)) {
    traced.ops.push_back(op);
    if (isa<IdentityOp, MulOp, DivOp>(op))
      continue;
    std::optional<ArrayRef<AffineExpr>> resultDims =
        shapes.getDims(op->getResult(0));
    if (!resultDims) {
      reason = "a layout op has a result of unknown rank";
      return failure();
    }
    if (auto transpose = dyn_cast<TransposeOp>(op)) {
      SmallVector<int64_t> perm = transpose.getPermutation();
      if (perm.size() != traced.dims.size()) {
        reason = "a transpose of unexpected rank";
        return failure();
      }
      SmallVector<Atoms, 4> permuted;
      for (int64_t p : perm)
        permuted.push_back(traced.dims[p]);
      traced.dims.assign(permuted.begin(), permuted.end());
      continue;
    }
    if (isa<ExpandOp>(op)) {
      // Broadcasting: new leading dims, and dims of size 1 repeated.
      size_t rank = resultDims->size();
      if (rank < traced.dims.size()) {
        reason = "an expand of unexpected rank";
        return failure();
      }
      SmallVector<Atoms, 4> expanded(rank - traced.dims.size());
      expanded.append(traced.dims.begin(), traced.dims.end());
      for (size_t i = 0; i < rank; ++i) {
        AffineExpr size = (*resultDims)[i];
        if (expanded[i].empty() && !isUnit(size)) {
          expanded[i].push_back({nextRepetition--, size});
          continue;
        }
        AffineExpr product = getAffineConstantExpr(1, context);
        for (const LayoutAtom &atom : expanded[i])
          product = mulExprs(product, atom.size);
        if (product != size) {
          reason = "an expand changes a dim that is not of size 1";
          return failure();
        }
      }
      traced.dims.assign(expanded.begin(), expanded.end());
      continue;
    }
    // Reshape, Unsqueeze, Squeeze: the same atoms, regrouped.
    if (failed(regroup(traced.dims, *resultDims, context, reason)))
      return failure();
  }
  return traced;
}
