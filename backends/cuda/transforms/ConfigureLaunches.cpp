//===- ConfigureLaunches.cpp - The block of every one-kernel launch -------===//
//
// The embedding, norms, RoPE, the KV-cache append and the elementwise ops
// run one kernel each; this pass records which, and its block size
// (codegen::selectRowThreads, which the planner's default shares), so that
// every launch of the program names its kernel in the IR.
//
//===----------------------------------------------------------------------===//

#include "backends/cuda/Launches.h"
#include "backends/cuda/transforms/FusionUtils.h"
#include "backends/cuda/transforms/Passes.h"
#include "passes/Audit.h"

namespace sits::kernel {
#define GEN_PASS_DEF_CONFIGURELAUNCHES
#include "backends/cuda/transforms/Passes.h.inc"
} // namespace sits::kernel

using namespace mlir;
using namespace sits;
using namespace sits::kernel;

namespace {

/// Elements per row of a [batch, heads, seq, head_dim] value (heads x
/// head_dim), or 0 when its type does not say.
int64_t getHeadsWidth(Value value) {
  auto type = dyn_cast<RankedTensorType>(value.getType());
  if (!type || type.getRank() != 4 || type.isDynamicDim(1) ||
      type.isDynamicDim(3))
    return 0;
  return type.getDimSize(1) * type.getDimSize(3);
}

/// Elements of a 1-D weight, or 0.
int64_t getVectorLength(Value weight) {
  auto type = dyn_cast<RankedTensorType>(weight.getType());
  return type && type.getRank() == 1 && !type.isDynamicDim(0)
             ? type.getDimSize(0)
             : 0;
}

struct ConfigureLaunchesPass
    : public sits::kernel::impl::ConfigureLaunchesBase<ConfigureLaunchesPass> {
  using ConfigureLaunchesBase::ConfigureLaunchesBase;

  void runOnOperation() override {
    PassAudit audit(&getContext(), getArgument(),
                    {"embedding", "rms_norm", "layer_norm", "rope", "append_kv",
                     "elementwise"});
    getOperation().walk([&](func::FuncOp func) {
      for (Operation &op : func.getBody().getOps())
        configure(&op, audit);
    });
  }

  /// The one-kernel launch `op` becomes, with the width of its rows; or
  /// none.
  std::optional<std::pair<KernelKind, int64_t>> getRowKernel(Operation *op) {
    if (auto launch = dyn_cast<LaunchOp>(op)) {
      if (launch.getFusion() == FusionKind::Norm)
        return getRowKernel(&launch.getBody().front().front());
      if (launch.getFusion() != FusionKind::RopeKVAppend)
        return std::nullopt;
      // The block covers the keys' row and the fused query's.
      int64_t width = 0;
      for (KVAppendOp append : launch.getOpsOfType<KVAppendOp>())
        width = std::max(width, getHeadsWidth(append.getKey()));
      for (RopeOp rope : launch.getOpsOfType<RopeOp>())
        width = std::max(width, getHeadsWidth(rope.getResult()));
      return std::pair{KernelKind::AppendKV, width};
    }
    if (auto embedding = dyn_cast<EmbeddingOp>(op)) {
      auto table = dyn_cast<RankedTensorType>(embedding.getTable().getType());
      if (!table || table.getRank() != 2 || table.isDynamicDim(1))
        return std::nullopt; // the planner reports it at the op
      int64_t hidden = table.getDimSize(1);
      return std::pair{
          KernelKind::Embedding,
          hidden / codegen::vectorWidth(hidden, parseWeightTypeOption(dtype))};
    }
    if (auto norm = dyn_cast<RMSNormOp>(op))
      return std::pair{KernelKind::RMSNorm, getVectorLength(norm.getWeight())};
    if (auto norm = dyn_cast<LayerNormOp>(op))
      return std::pair{KernelKind::LayerNorm,
                       getVectorLength(norm.getWeight())};
    if (auto rope = dyn_cast<RopeOp>(op))
      return std::pair{KernelKind::Rope, getHeadsWidth(rope.getResult())};
    if (auto append = dyn_cast<KVAppendOp>(op))
      return std::pair{KernelKind::AppendKV, getHeadsWidth(append.getKey())};
    if (isa<AddOp, ActivationOp, GLUOp>(op))
      return std::pair{KernelKind::Elementwise, int64_t(0)};
    return std::nullopt;
  }

  void configure(Operation *op, PassAudit &audit) {
    std::optional<std::pair<KernelKind, int64_t>> row = getRowKernel(op);
    if (!row || (row->first != KernelKind::Elementwise && row->second <= 0))
      return;
    auto config = op->getAttrOfType<ConfigAttr>(KernelDialect::kConfigAttrName);
    std::string reason = "given in the input";
    if (!config) {
      codegen::RowKernelChoice choice =
          codegen::selectRowThreads(row->first, row->second);
      config = ConfigAttr::get(&getContext(), row->first, /*tiles=*/1,
                               /*split_keys=*/0, choice.threads,
                               /*weight_bytes=*/0, /*token_groups=*/1,
                               /*k_splits=*/1);
      op->setAttr(KernelDialect::kConfigAttrName, config);
      reason = choice.reason;
    }
    auditChoice(audit, op->getLoc(), op->getName().getStringRef(), config,
                stringifyKernelKind(config.getKernel()), reason);
  }
};

} // namespace
