//===- SelectLinearKernels.cpp - The kernel of each linear launch ---------===//
//
// Every launch that runs linear layers (a linear kernel.launch, a lone
// sits.linear, the LM head) gets a #kernel.config: the GEMV or GEMM kernel
// that runs it, on tensor cores or not, quantized or not, its tiles per
// block, and the bytes of weights it reads. The choice itself is
// codegen::selectLinearKernel, which the planner's check shares.
//
//===----------------------------------------------------------------------===//

#include "backends/cuda/Launches.h"
#include "backends/cuda/transforms/FusionUtils.h"
#include "backends/cuda/transforms/Passes.h"
#include "passes/Audit.h"

namespace sits::kernel {
#define GEN_PASS_DEF_SELECTLINEARKERNELS
#include "backends/cuda/transforms/Passes.h.inc"
} // namespace sits::kernel

using namespace mlir;
using namespace sits;
using namespace sits::kernel;

namespace {

/// A linear layer's weight, bias and input, whatever op it is.
struct LinearParts {
  Value input, weight, bias;
};

std::optional<LinearParts> getLinearParts(Operation *op) {
  if (auto linear = dyn_cast<LinearOp>(op))
    return LinearParts{linear.getInput(), linear.getWeight(), linear.getBias()};
  if (auto head = dyn_cast<LMHeadOp>(op))
    return LinearParts{head.getInput(), head.getWeight(), head.getBias()};
  if (auto head = dyn_cast<TVCLMHeadOp>(op))
    return LinearParts{head.getInput(), head.getWeight(), Value()};
  return std::nullopt;
}

int64_t getStoredBytes(Value value) {
  auto type = dyn_cast<ShapedType>(value.getType());
  if (!type || !type.hasStaticShape())
    return 0;
  return type.getNumElements() *
         std::max<int64_t>(1, type.getElementTypeBitWidth() / 8);
}

struct SelectLinearKernelsPass
    : public sits::kernel::impl::SelectLinearKernelsBase<
          SelectLinearKernelsPass> {
  using SelectLinearKernelsBase::SelectLinearKernelsBase;

  void runOnOperation() override {
    PassAudit audit(&getContext(), getArgument(),
                    {"gemv", "gemv_tc", "gemv_quant", "gemv_quant_tc", "gemm",
                     "gemm_tc", "gemm_split_k", "decode_weight_bytes"});
    weightType = parseWeightTypeOption(dtype);
    tensorCores = parseTargetSmOption(target) >= 80;
    getOperation().walk([&](func::FuncOp func) {
      const int64_t fewRows = getFewRowTokens(func);
      maxBatch = getMaxBatch(func);
      maxFewRows = fewRows;
      for (Operation &op : func.getBody().getOps()) {
        auto launch = dyn_cast<LaunchOp>(op);
        if (launch ? launch.getFusion() != FusionKind::RopeKVAppend &&
                         launch.getFusion() != FusionKind::Norm
                   : getLinearParts(&op).has_value())
          select(&op, isDecodeProgram(func), fewRows != 0, audit);
      }
    });
  }

  /// The sequences a step of `func` runs at most (its KV cache's), which is
  /// the most rows its GEMVs multiply at decode: a step's tokens, an LM
  /// head's last tokens; 0 without a cache.
  static int64_t getMaxBatch(func::FuncOp func) {
    KVCacheType cache = getKVCacheArgType(func);
    return cache ? cache.getMaxBatch() : 0;
  }

  /// The linear layers `owner` launches.
  SmallVector<Operation *> getLinears(Operation *owner) {
    SmallVector<Operation *> linears;
    if (auto launch = dyn_cast<LaunchOp>(owner)) {
      for (Operation &op : launch.getBody().front())
        if (getLinearParts(&op))
          linears.push_back(&op);
    } else {
      linears.push_back(owner);
    }
    return linears;
  }

  /// Chooses the kernel of `owner`'s linear layers: GEMVs in a `decode`
  /// step and a few-row prefill (`fewRows`), the GEMM in other prefills.
  void select(Operation *owner, bool decode, bool fewRows, PassAudit &audit) {
    SmallVector<Operation *> linears = getLinears(owner);
    if (linears.empty())
      return;
    codegen::LinearShape shape;
    const bool head = isa<LMHeadOp, TVCLMHeadOp>(linears.front());
    // An LM head is a GEMV in every step.
    shape.decode = decode || fewRows || head;
    shape.fewRowPrefill = fewRows && !head;
    shape.gatherLast = head;
    auto fused = dyn_cast<LaunchOp>(owner);
    shape.gated = fused && fused.getFusion() == FusionKind::GatedLinear;
    shape.tensorCores = tensorCores;
    shape.weightType = weightType;
    shape.quantTilesAsked = gemvQuantTiles;
    // A few-row prefill's linear layers multiply its rows; an LM head
    // only each sequence's last.
    shape.maxTokens = fewRows && !head ? maxFewRows : maxBatch;
    shape.tokenGroupsAsked = gemvTokenGroups;
    shape.kSplitsAsked = gemmKSplits;
    int64_t weightBytes = 0;
    for (Operation *op : linears) {
      LinearParts parts = *getLinearParts(op);
      auto input = dyn_cast<RankedTensorType>(parts.input.getType());
      auto weight = dyn_cast<RankedTensorType>(parts.weight.getType());
      if (!input || input.getRank() != 3 || input.isDynamicDim(2) || !weight ||
          weight.getRank() != 2 || !weight.hasStaticShape()) {
        // The planner reports what it cannot compile; nothing to choose.
        return;
      }
      shape.k = input.getDimSize(2);
      shape.segmentRows.push_back(weight.getDimSize(0));
      auto [bits, group] = getQuantKey(parts.weight);
      shape.quantBits = static_cast<int>(bits);
      shape.quantGroup = group;
      if (auto dequantize = parts.weight.getDefiningOp<DequantizeOp>())
        weightBytes += getStoredBytes(dequantize.getData()) +
                       getStoredBytes(dequantize.getScales());
      else
        weightBytes += weight.getNumElements() *
                       static_cast<int64_t>(format::dtypeBytes(weightType));
      if (parts.bias)
        weightBytes += getStoredBytes(parts.bias);
    }
    // A configuration given in the input is kept (the code generator
    // checks that its kernel can run the launch).
    auto config =
        owner->getAttrOfType<ConfigAttr>(KernelDialect::kConfigAttrName);
    std::string reason = "given in the input";
    if (!config) {
      codegen::LinearKernelChoice choice = codegen::selectLinearKernel(shape);
      config = ConfigAttr::get(&getContext(), choice.kernel, choice.tiles,
                               /*split_keys=*/0, /*threads=*/0, weightBytes,
                               choice.tokenGroups, choice.kSplits);
      owner->setAttr(KernelDialect::kConfigAttrName, config);
      reason = choice.reason;
    }
    if (decode)
      audit.add("decode_weight_bytes", config.getWeightBytes());
    if (config.getKSplits() > 1)
      audit.add("gemm_split_k");
    auto launch = dyn_cast<LaunchOp>(owner);
    std::string what = launch ? ("kernel.launch <" +
                                 stringifyFusionKind(launch.getFusion()) + ">")
                                    .str()
                              : owner->getName().getStringRef().str();
    auditChoice(audit, owner->getLoc(), what, config,
                stringifyKernelKind(config.getKernel()), reason);
  }

  format::DType weightType = format::DType::F16;
  bool tensorCores = true;
  /// Of the function being walked: its KV cache's sequences, and the
  /// rows of a few-row prefill's steps (0 for another function).
  int64_t maxBatch = 0, maxFewRows = 0;
};

} // namespace
