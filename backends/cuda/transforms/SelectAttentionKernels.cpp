//===- SelectAttentionKernels.cpp - The kernel of each attention ----------===//
//
// Every sits.attention over the KV cache gets a #kernel.config: split over
// the keys at decode (and how many keys a split), on tensor cores or not,
// over a plain or a quantized cache. The choice itself is
// codegen::selectAttentionKernel, which the planner's check shares.
//
//===----------------------------------------------------------------------===//

#include "backends/cuda/KVQuantLaunches.h"
#include "backends/cuda/transforms/FusionUtils.h"
#include "backends/cuda/transforms/Passes.h"
#include "passes/Audit.h"

namespace sits::kernel {
#define GEN_PASS_DEF_SELECTATTENTIONKERNELS
#include "backends/cuda/transforms/Passes.h.inc"
} // namespace sits::kernel

using namespace mlir;
using namespace sits;
using namespace sits::kernel;

namespace {

/// The KV cache a step function takes, or null.
KVCacheType getCacheType(func::FuncOp func) {
  for (Type type : func.getArgumentTypes())
    if (auto cache = dyn_cast<KVCacheType>(type))
      return cache;
  return nullptr;
}

struct SelectAttentionKernelsPass
    : public sits::kernel::impl::SelectAttentionKernelsBase<
          SelectAttentionKernelsPass> {
  using SelectAttentionKernelsBase::SelectAttentionKernelsBase;

  void runOnOperation() override {
    PassAudit audit(&getContext(), getArgument(),
                    {"attention", "attention_split", "attention_flash",
                     "attention_kvq", "attention_kvq_split",
                     "attention_kvq_mma"});
    getOperation().walk([&](func::FuncOp func) {
      KVCacheType cache = getCacheType(func);
      if (!cache)
        return;
      for (AttentionOp attention : func.getBody().getOps<AttentionOp>())
        select(attention, cache, isDecodeProgram(func), audit);
    });
  }

  void select(AttentionOp attention, KVCacheType cache, bool decode,
              PassAudit &audit) {
    format::DType type = parseWeightTypeOption(dtype);
    // The hot rows of a quantized cache, the same as codegen's; the
    // prefill chunk only sizes the ring, which no choice depends on.
    format::KVCacheConfig kv =
        codegen::kvCacheConfigOf(cache, type, /*maxPrefillTokens=*/1);
    codegen::AttentionLaunch desc;
    desc.decode = decode;
    desc.heads = attention.getNumHeads();
    desc.kvHeads = attention.getNumKvHeads();
    desc.headDim = cache.getHeadDim();
    desc.capacity = cache.getCapacity();
    desc.cacheType = kv.coldBits ? kv.dtype : type;
    desc.tensorCores = parseTargetSmOption(target) >= 80;
    desc.sixteenBitMath = type != format::DType::F32;
    desc.splitKeys = decodeSplitKeys;
    if (desc.kvHeads <= 0 || desc.heads % desc.kvHeads != 0)
      return; // the planner reports it at the op

    auto config =
        attention->getAttrOfType<ConfigAttr>(KernelDialect::kConfigAttrName);
    std::string reason = "given in the input";
    if (!config) {
      codegen::AttentionKernelChoice choice =
          codegen::selectAttentionKernel(desc, kv);
      config = ConfigAttr::get(&getContext(), choice.kernel, /*tiles=*/1,
                               choice.splitKeys, /*threads=*/0,
                               /*weight_bytes=*/0, /*token_groups=*/1,
                               /*k_splits=*/1);
      attention->setAttr(KernelDialect::kConfigAttrName, config);
      reason = choice.reason;
    }
    auditChoice(audit, attention.getLoc(), "sits.attention", config,
                stringifyKernelKind(config.getKernel()), reason);
  }
};

} // namespace
