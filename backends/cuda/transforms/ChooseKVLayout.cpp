//===- ChooseKVLayout.cpp - How the KV cache is stored
//---------------------===//
//
// A contiguous cache gives every sequence its whole capacity; a paged one
// (sitsc --kv-layout=paged) keeps a pool of fixed-size blocks that the
// runtime hands to sequences as they grow, through a block table, so that
// memory follows the tokens in use and blocks of a shared prompt prefix can
// be shared. Each step function that takes the cache records the choice;
// the append and attention launches address the cache as it says.
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
    PassAudit audit(&getContext(), getArgument(), {"contiguous", "paged"});
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
    // A quantized cache keeps a hot ring and cold rows per sequence: not
    // blocks a table could point at.
    if (cache.getQuant())
      return func.emitError() << codegen::kPagedQuantError;
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
    func->setAttr(KernelDialect::kKVPagesAttrName, given);
    auditChoice(audit, func.getLoc(), what, given, "paged", reason);
    return success();
  }
};

} // namespace
