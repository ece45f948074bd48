//===- FuseGatedLinears.cpp - Gate and up projections in one launch -------===//
//
// A gated MLP computes act(x W_gate) * (x W_up). One GEMV/GEMM over both
// weights writes that product directly, so x is read once and neither
// projection is stored.
//
//===----------------------------------------------------------------------===//

#include "backends/cuda/transforms/FusionUtils.h"
#include "backends/cuda/transforms/Passes.h"
#include "passes/Audit.h"

namespace sits::kernel {
#define GEN_PASS_DEF_FUSEGATEDLINEARS
#include "backends/cuda/transforms/Passes.h.inc"
} // namespace sits::kernel

using namespace mlir;
using namespace sits;
using namespace sits::kernel;

namespace {

struct FuseGatedLinearsPass
    : public sits::kernel::impl::FuseGatedLinearsBase<FuseGatedLinearsPass> {
  void runOnOperation() override {
    PassAudit audit(&getContext(), getArgument(), {"launches", "linears"});
    SmallVector<GLUOp> glus;
    getOperation().walk([&](GLUOp glu) { glus.push_back(glu); });
    for (GLUOp glu : glus) {
      LinearOp gate = getSingleUseLinear(glu.getGate());
      LinearOp up = getSingleUseLinear(glu.getUp());
      if (!gate || !up || gate == up || gate.getInput() != up.getInput() ||
          gate.getWeight().getType() != up.getWeight().getType() ||
          getQuantKey(gate.getWeight()) != getQuantKey(up.getWeight()))
        continue;
      SmallVector<Operation *> ops{gate, up, glu};
      std::string reason;
      if (!canFormLaunchAt(ops, glu, &reason)) {
        audit.change(getLocations(ops), "sits.linear x2 + sits.glu", "kept",
                     "not fused: " + reason);
        continue;
      }
      formLaunch(FusionKind::GatedLinear, ops, glu);
      audit.add("launches");
      audit.add("linears", 2);
      audit.change(getLocations(ops),
                   "sits.linear (gate) + sits.linear (up) "
                   "+ sits.glu",
                   "kernel.launch <gated_linear>",
                   "the projections read one input with weights of one "
                   "type and quantization, and only the glu reads them");
    }
  }
};

} // namespace
