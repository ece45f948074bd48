//===- FuseResidualLinears.cpp - The residual add as a GEMV epilogue ------===//
//
// The output projection of attention and of the MLP is added to the
// residual stream right away; the GEMV/GEMM adds it as it writes, so the
// projection is never stored.
//
//===----------------------------------------------------------------------===//

#include "backends/cuda/transforms/FusionUtils.h"
#include "backends/cuda/transforms/Passes.h"
#include "passes/Audit.h"

namespace sits::kernel {
#define GEN_PASS_DEF_FUSERESIDUALLINEARS
#include "backends/cuda/transforms/Passes.h.inc"
} // namespace sits::kernel

using namespace mlir;
using namespace sits;
using namespace sits::kernel;

namespace {

struct FuseResidualLinearsPass
    : public sits::kernel::impl::FuseResidualLinearsBase<
          FuseResidualLinearsPass> {
  void runOnOperation() override {
    PassAudit audit(&getContext(), getArgument(), {"launches"});
    SmallVector<AddOp> adds;
    getOperation().walk([&](AddOp add) {
      if (!getEnclosingLaunch(add))
        adds.push_back(add);
    });
    for (AddOp add : adds) {
      // Exports write residual + projection: the right operand first.
      for (unsigned index : {1u, 0u}) {
        LinearOp linear = getSingleUseLinear(add->getOperand(index));
        Value residual = add->getOperand(1 - index);
        if (!linear || residual == linear.getResult())
          continue;
        SmallVector<Operation *> ops{linear, add};
        std::string reason;
        if (!canFormLaunchAt(ops, add, &reason)) {
          audit.change(getLocations(ops), "sits.linear + sits.add", "kept",
                       "not fused: " + reason);
          break;
        }
        formLaunch(FusionKind::ResidualLinear, ops, add);
        audit.add("launches");
        audit.change(getLocations(ops), "sits.linear + sits.add",
                     "kernel.launch <residual_linear>",
                     "only the add reads the projection");
        break;
      }
    }
  }
};

} // namespace
