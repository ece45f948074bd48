//===- FuseNorms.cpp - A decode rms_norm inside the GEMV that reads it ----===//
//
// At decode, the normalized row is read by one GEMV launch: that GEMV can
// normalize x itself as it loads it, saving the norm's launch and a round
// trip of the row through memory. Off by default (sitsc --fuse-norms): on
// the H200 the fused GEMVs ran slower than the plain ones.
//
//===----------------------------------------------------------------------===//

#include "backends/cuda/Launches.h"
#include "backends/cuda/transforms/FusionUtils.h"
#include "backends/cuda/transforms/Passes.h"
#include "passes/Audit.h"

namespace sits::kernel {
#define GEN_PASS_DEF_FUSENORMS
#include "backends/cuda/transforms/Passes.h.inc"
} // namespace sits::kernel

using namespace mlir;
using namespace sits;
using namespace sits::kernel;

namespace {

struct FuseNormsPass : public sits::kernel::impl::FuseNormsBase<FuseNormsPass> {
  using FuseNormsBase::FuseNormsBase;

  void runOnOperation() override {
    PassAudit audit(&getContext(), getArgument(), {"norms"});
    if (!normFusion)
      return;
    for (RMSNormOp norm : getUnfusedDecodeNorms(getOperation()))
      fuse(norm, audit);
  }

  /// The one launch (or lone linear layer or LM head) that reads the norm,
  /// when the norm may join it; null otherwise.
  Operation *getReader(RMSNormOp norm) {
    auto weight = dyn_cast<ShapedType>(norm.getWeight().getType());
    auto input = dyn_cast<RankedTensorType>(norm.getInput().getType());
    if (!weight || weight.getRank() != 1 || !input || input.getRank() != 3 ||
        input.isDynamicDim(2) || input.getDimSize(2) != weight.getDimSize(0) ||
        !codegen::decodeGemvOnTensorCores(parseTargetSmOption(target) >= 80,
                                          parseWeightTypeOption(dtype),
                                          input.getDimSize(2)))
      return nullptr;
    Operation *reader = nullptr;
    for (Operation *user : norm.getResult().getUsers()) {
      Value userWeight;
      if (auto linear = dyn_cast<LinearOp>(user))
        userWeight = linear.getWeight();
      else if (auto head = dyn_cast<LMHeadOp>(user))
        userWeight = head.getWeight();
      else
        return nullptr;
      if (getQuantKey(userWeight) != std::pair<int64_t, int64_t>{0, 0})
        return nullptr;
      Operation *owner = getEnclosingLaunch(user);
      if (!owner)
        owner = user;
      if (isa<LinearOp>(owner) &&
          !isTokenMajor(cast<LinearOp>(owner).getInput()))
        return nullptr;
      if (reader && owner != reader)
        return nullptr;
      reader = owner;
    }
    return reader;
  }

  void fuse(RMSNormOp norm, PassAudit &audit) {
    Operation *reader = getReader(norm);
    if (!reader)
      return;
    std::string with;
    if (auto launch = dyn_cast<LaunchOp>(reader)) {
      norm->moveBefore(&launch.getBody().front().front());
      with = ("kernel.launch <" + stringifyFusionKind(launch.getFusion()) + ">")
                 .str();
    } else {
      SmallVector<Operation *> ops{norm, reader};
      std::string reason;
      if (!canFormLaunchAt(ops, reader, &reason)) {
        audit.change(getLocations(ops), "sits.rms_norm", "kept",
                     "not fused: " + reason);
        return;
      }
      FusionKind kind =
          isa<LMHeadOp>(reader) ? FusionKind::LMHead : FusionKind::LinearGroup;
      formLaunch(kind, ops, reader);
      with = ("kernel.launch <" + stringifyFusionKind(kind) + ">").str();
    }
    audit.add("norms");
    audit.change(norm.getLoc(), "sits.rms_norm", with,
                 "decode, unquantized weights on the tensor-core GEMV, and "
                 "one launch reads the normalized row");
  }
};

} // namespace
