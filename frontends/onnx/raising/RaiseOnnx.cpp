//===- RaiseOnnx.cpp - The --sits-raise-onnx pass -------------------------===//
//
// Runs the pattern families in order (each family sees what the earlier ones
// raised: attention finds q after RoPE, RoPE finds heads already split),
// removes what became dead after each, raises residual adds last, and warns
// about float compute left in the onnx dialect with the reason a pattern
// noted when it looked at it.
//
//===----------------------------------------------------------------------===//

#include "frontends/onnx/Passes.h"
#include "frontends/onnx/raising/RaisingSupport.h"

#include "dialects/shapes/SymbolicExpr.h"

#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/MapVector.h"

namespace sits {
#define GEN_PASS_DEF_RAISEONNX
#define GEN_PASS_DEF_PRINTSYMBOLICSHAPES
#include "frontends/onnx/Passes.h.inc"
} // namespace sits

using namespace mlir;
using namespace sits;
using namespace sits::onnx;
using namespace sits::onnx::raising;

void sits::onnx::raising::removeIdentities(RaiseContext &rc) {
  func::FuncOp function = rc.getFunction();
  for (IdentityOp identity : collectOps<IdentityOp>(function)) {
    if (identity.getInput().getType() != identity.getOutput().getType())
      continue;
    identity.getOutput().replaceAllUsesWith(identity.getInput());
    rc.recordRaise("identities_removed", {identity}, "its input",
                   "Identity returns its input");
  }
  // Casts to the type they read (the TorchScript exporter's `.float()` of
  // f32 values).
  for (CastOp cast : collectOps<CastOp>(function)) {
    if (cast.getInput().getType() != cast.getOutput().getType())
      continue;
    cast.getOutput().replaceAllUsesWith(cast.getInput());
    rc.recordRaise("identities_removed", {cast}, "its input",
                   "a Cast to the element type it reads returns its input");
  }
  // Float products with a one-element constant 1 (attention_scaling = 1 of
  // RoPE): x * 1 is x exactly.
  for (MulOp mul : collectOps<MulOp>(function)) {
    for (Value side : {mul.getA(), mul.getB()}) {
      Value other = otherOperand(mul, side);
      if (!getFloatElementType(other) ||
          other.getType() != mul.getC().getType() ||
          !isScalarConstant(side, 1.0, 0.0))
        continue;
      mul.getC().replaceAllUsesWith(other);
      rc.recordRaise("identities_removed", {mul}, "its other operand",
                     "multiplying floats by the constant 1 (of one element, "
                     "so it broadcasts to nothing new) returns them exactly");
      break;
    }
  }
  // Dropout at inference: without training_mode (or with a constant false
  // one) its output is its input.
  for (DropoutOp dropout : collectOps<DropoutOp>(function)) {
    Value training = dropout.getTrainingMode();
    std::optional<double> mode =
        training ? getScalarConstant(training) : std::optional<double>(0.0);
    if (!mode || *mode != 0.0 ||
        (dropout.getMask() && !dropout.getMask().use_empty()) ||
        dropout.getData().getType() != dropout.getOutput().getType()) {
      rc.noteNotRaised(dropout, "Dropout in training mode, or its mask is "
                                "used");
      continue;
    }
    dropout.getOutput().replaceAllUsesWith(dropout.getData());
    rc.recordRaise("identities_removed", {dropout}, "its input",
                   "Dropout without training_mode (inference) returns its "
                   "input");
  }
}

void sits::onnx::raising::raiseResidualAdds(RaiseContext &rc) {
  for (onnx::AddOp add : collectOps<onnx::AddOp>(rc.getFunction())) {
    Value lhs = add.getA(), rhs = add.getB();
    if (!getFloatElementType(lhs) || lhs.getType() != rhs.getType() ||
        add.getC().getType() != lhs.getType() ||
        !rc.getShapes().haveSameDims(lhs, rhs))
      continue;
    OpBuilder &b = rc.getBuilder();
    b.setInsertionPoint(add);
    auto sum =
        sits::AddOp::create(b, add.getLoc(), add.getC().getType(), lhs, rhs);
    add.getC().replaceAllUsesWith(sum.getResult());
    rc.recordRaise("residual_adds_raised", {add}, "sits.add",
                   "an Add of two float tensors whose dims are proven equal "
                   "(no broadcasting) is sits.add");
  }
}

namespace {

/// Whether `op` computes on floats (what a decode engine would run) rather
/// than on shapes, indices and masks, which later passes fold.
bool isFloatCompute(Operation *op) {
  if (isa<ConstantOp>(op))
    return false;
  return llvm::any_of(op->getResultTypes(), [](Type type) {
    auto shaped = dyn_cast<ShapedType>(type);
    return shaped && isa<FloatType>(shaped.getElementType()) &&
           (!shaped.hasRank() || shaped.getRank() >= 2);
  });
}

/// Whether only the shapes of `op`'s results are read (through Shape, or
/// through onnx ops of which only the shape is read): then it computes no
/// float an engine runs (the empty past of a cached export, the GQA repeat
/// of keys whose length a mask slice reads).
bool onlyShapeRead(Operation *op, llvm::DenseMap<Operation *, bool> &memo) {
  auto [it, inserted] = memo.try_emplace(op, false);
  if (!inserted)
    return it->second;
  bool result = !op->use_empty();
  for (Operation *user : op->getUsers())
    result &= isa<ShapeOp>(user) ||
              (isa<OnnxDialect>(user->getDialect()) && !isa<ConstantOp>(user) &&
               onlyShapeRead(user, memo));
  memo[op] = result;
  return result;
}

/// Counts the float compute left in the onnx dialect; with
/// `report-unraised`, warns once per op a pattern gave a reason for, and
/// once for all the others (by kind, with the first node names).
void reportUnraisedOps(RaiseContext &rc, PassAudit &audit, bool warn) {
  llvm::MapVector<StringRef, SmallVector<Operation *>> others;
  llvm::DenseMap<Operation *, bool> shapeOnly;
  rc.getFunction().walk([&](Operation *op) {
    if (!isa<OnnxDialect>(op->getDialect()) || !isFloatCompute(op) ||
        onlyShapeRead(op, shapeOnly))
      return;
    audit.add("onnx_ops_left");
    if (!warn)
      return;
    StringRef reason = rc.getReason(op);
    if (reason.empty()) {
      others[op->getName().stripDialect()].push_back(op);
      return;
    }
    emitWarning(op->getLoc())
        << op->getName() << " was not raised into sits: " << reason;
  });
  if (others.empty())
    return;
  size_t count = 0;
  for (auto &[name, ops] : others)
    count += ops.size();
  InFlightDiagnostic diag =
      emitWarning(others.front().second.front()->getLoc());
  diag << count << " more onnx ops computing floats were not raised:";
  for (auto &[name, ops] : others) {
    diag << " " << name << " x" << ops.size() << " (";
    for (auto [i, op] : llvm::enumerate(ArrayRef(ops).take_front(3))) {
      std::vector<std::string> names = getSourceNames(op->getLoc());
      diag << (i ? ", " : "") << (names.empty() ? "?" : names.front());
    }
    diag << (ops.size() > 3 ? ", ...)" : ")");
    diag << (name == others.back().first ? "" : ";");
  }
}

struct RaiseOnnxPass : public sits::impl::RaiseOnnxBase<RaiseOnnxPass> {
  using RaiseOnnxBase::RaiseOnnxBase;

  void runOnOperation() override {
    PassAudit audit(&getContext(), getArgument(),
                    ArrayRef<StringRef>(kRaiseCounters, kNumRaiseCounters));
    for (auto function : getOperation().getOps<func::FuncOp>()) {
      if (function.isExternal())
        continue;
      RaiseContext rc(function, audit);
      for (auto phase :
           {removeIdentities, raisePastKeyValues, raiseContribOps,
            raiseGroupQueryAttention, foldWeightCasts, raiseNorms,
            raiseProjections, raiseActivations, raiseGatedUnits, raiseHeads,
            raiseRope, raiseAttention, raiseResidualAdds}) {
        phase(rc);
        rc.finishPhase();
      }
      checkPositionInputs(rc);
      reportUnraisedOps(rc, audit, reportUnraised);
      if (rc.hasFailed())
        signalPassFailure();
    }
  }
};

struct PrintSymbolicShapesPass
    : public sits::impl::PrintSymbolicShapesBase<PrintSymbolicShapesPass> {
  void runOnOperation() override {
    SymbolicShapes shapes(&getContext());
    getOperation().walk([&](Operation *op) {
      for (Value result : op->getResults()) {
        if (!isa<ShapedType>(result.getType()))
          continue;
        const TensorFacts &facts = shapes.getFacts(result);
        InFlightDiagnostic diag = emitRemark(op->getLoc());
        if (op->getNumResults() > 1)
          diag << "result " << cast<OpResult>(result).getResultNumber() << ": ";
        diag << "dims " << (facts.ranked ? shapes.print(facts.dims) : "?");
        if (facts.values) {
          diag << " values [";
          for (auto [i, value] : llvm::enumerate(*facts.values))
            diag << (i ? ", " : "") << (value ? shapes.print(value) : "?");
          diag << "]";
        }
        if (facts.elementExpr)
          diag << " element " << shapes.print(facts.elementExpr);
      }
    });
    markAllAnalysesPreserved();
  }
};

} // namespace
