//===- ChooseKVLayout.cpp - How the KV cache is stored
//---------------------===//
//
// A contiguous cache gives every sequence its whole capacity; a paged one
// (sitsc --kv-layout=paged) keeps a pool of fixed-size blocks that the
// runtime hands to sequences as they grow, through a block table, so that
// memory follows the tokens in use and blocks of a shared prompt prefix can
// be shared. Each step function that takes the cache records the choice;
// the append and attention launches address the cache as it says. A
// quantized cache pages its int8/int4 cold rows and their scales (the part
// that grows with the tokens); its FP16 hot ring, a fixed number of rows
// reused as tokens go cold, stays per sequence.
//
//===----------------------------------------------------------------------===//

#include "backends/cuda/KVQuantLaunches.h"
#include "backends/cuda/transforms/FusionUtils.h"
#include "backends/cuda/transforms/Passes.h"
#include "passes/Audit.h"

namespace sits::kernel {
#define GEN_PASS_DEF_CHOOSEKVLAYOUT
#include "backends/cuda/transforms/Passes.h.inc"
} // namespace sits::kernel

using namespace mlir;
using namespace sits;
using namespace sits::kernel;

namespace {

struct ChooseKVLayoutPass
    : public sits::kernel::impl::ChooseKVLayoutBase<ChooseKVLayoutPass> {
  using ChooseKVLayoutBase::ChooseKVLayoutBase;

  void runOnOperation() override {
    PassAudit audit(&getContext(), getArgument(),
                    {"contiguous", "paged", "paged_quantized"});
    getOperation().walk([&](func::FuncOp func) {
      KVCacheType cache = getKVCacheArgType(func);
      if (cache && failed(choose(func, cache, audit)))
        signalPassFailure();
    });
  }

  LogicalResult choose(func::FuncOp func, KVCacheType cache, PassAudit &audit) {
    std::string what = "@" + func.getSymName().str();
    auto given =
        func->getAttrOfType<KVPagesAttr>(KernelDialect::kKVPagesAttrName);
    if (!given && kvLayout == "contiguous") {
      audit.add("contiguous");
      audit.change(func.getLoc(), what, "contiguous",
                   "each sequence owns " + std::to_string(cache.getCapacity()) +
                       " rows (--kv-layout=contiguous)");
      return success();
    }
    if (!given && kvLayout != "paged")
      return func.emitError() << "--kv-layout must be contiguous or paged, "
                                 "got '"
                              << kvLayout << "'";
    const int64_t perSequence =
        (cache.getCapacity() + kvBlockTokens - 1) / kvBlockTokens;
    std::string reason = "given in the input";
    if (!given) {
      const int64_t blocks =
          kvPoolBlocks ? kvPoolBlocks : perSequence * cache.getMaxBatch();
      given = KVPagesAttr::get(&getContext(), kvBlockTokens, blocks);
      reason = "--kv-layout=paged: " + std::to_string(perSequence) +
               " blocks a full sequence, " + std::to_string(blocks) +
               " in the pool (" +
               (kvPoolBlocks ? "--kv-pool-blocks"
                             : "--max-batch full "
                               "sequences") +
               ")";
    }
    if (!format::KVCacheConfig::validBlockTokens(given.getBlockTokens()))
      return func.emitError()
             << "--kv-block-tokens must be a power of two from 16 to 1024, "
                "got "
             << given.getBlockTokens();
    const int64_t needed = (cache.getCapacity() + given.getBlockTokens() - 1) /
                           given.getBlockTokens();
    if (given.getBlocks() < needed)
      return func.emitError()
             << "a paged KV cache of " << given.getBlocks()
             << " blocks cannot hold one sequence of --max-seq-len "
             << cache.getCapacity() << " (" << needed << " blocks of "
             << given.getBlockTokens() << " tokens)";
    // Quantized: a block of per-channel keys shares its scales, so it must
    // lie in one block of the pool.
    KVQuantAttr quant = cache.getQuant();
    if (quant && quant.hasPerChannelKeys() &&
        given.getBlockTokens() % quant.getChannelBlock() != 0)
      return func.emitError()
             << "a paged quantized KV cache needs --kv-block-tokens ("
             << given.getBlockTokens()
             << ") a multiple of the per-channel key block ("
             << quant.getChannelBlock()
             << ", --kv-channel-block): a key block's scales lie in one block";
    if (quant)
      reason += "; quantized: the int" + std::to_string(quant.getBits()) +
                " cold rows and scales in the pool's blocks, the hot ring "
                "of each sequence (hot window " +
                std::to_string(quant.getHotWindow()) + ") its own";
    func->setAttr(KernelDialect::kKVPagesAttrName, given);
    auditChoice(audit, func.getLoc(), what, given,
                quant ? "paged_quantized" : "paged", reason);
    return success();
  }
};

} // namespace
