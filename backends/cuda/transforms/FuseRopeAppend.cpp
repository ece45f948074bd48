//===- FuseRopeAppend.cpp - RoPE inside the KV-cache append ---------------===//
//
// The keys are rotated once and then only stored, and the query is rotated
// once and then only read by attention: the append kernel does both on the
// way, so neither rotated tensor goes through memory on its own.
//
//===----------------------------------------------------------------------===//

#include "backends/cuda/transforms/FusionUtils.h"
#include "backends/cuda/transforms/Passes.h"
#include "passes/Audit.h"

#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace sits::kernel {
#define GEN_PASS_DEF_FUSEROPEAPPEND
#include "backends/cuda/transforms/Passes.h.inc"
} // namespace sits::kernel

using namespace mlir;
using namespace sits;
using namespace sits::kernel;

namespace {

/// The rope that only produces `value`, outside any launch; or null.
RopeOp getSingleUseRope(Value value) {
  auto rope = value.getDefiningOp<RopeOp>();
  if (!rope || getEnclosingLaunch(rope) || !rope.getResult().hasOneUse())
    return nullptr;
  return rope;
}

/// The rope of the query of an attention that reads `append`'s layer
/// through a sits.kv_cache.read of its result.
RopeOp getQueryRope(KVAppendOp append) {
  RopeOp queryRope;
  for (Operation *user : append.getResult().getUsers()) {
    auto read = dyn_cast<KVReadOp>(user);
    if (!read || read.getLayer() != append.getLayer())
      continue;
    for (Operation *reader : read.getKey().getUsers()) {
      auto attention = dyn_cast<AttentionOp>(reader);
      if (!attention || attention.getKey() != read.getKey())
        continue;
      if (RopeOp rope = getSingleUseRope(attention.getQuery()))
        queryRope = rope;
    }
  }
  return queryRope;
}

/// Moves what reads `append`'s cache between it and `anchor` (the cache
/// reads and their views, which launch nothing) to just after `anchor`, in
/// order, so that the append can move down to `anchor`. False, moving
/// nothing, when one of them has effects.
bool sinkCacheReaders(KVAppendOp append, Operation *anchor) {
  llvm::SmallPtrSet<Operation *, 8> dependent{append};
  SmallVector<Operation *> between;
  for (Operation *op = append->getNextNode(); op && op != anchor;
       op = op->getNextNode()) {
    bool reads = llvm::any_of(op->getOperands(), [&](Value operand) {
      return dependent.count(operand.getDefiningOp());
    });
    if (!reads)
      continue;
    if (!isMemoryEffectFree(op))
      return false;
    dependent.insert(op);
    between.push_back(op);
  }
  Operation *after = anchor;
  for (Operation *op : between) {
    op->moveAfter(after);
    after = op;
  }
  return true;
}

struct FuseRopeAppendPass
    : public sits::kernel::impl::FuseRopeAppendBase<FuseRopeAppendPass> {
  void runOnOperation() override {
    PassAudit audit(&getContext(), getArgument(), {"launches", "ropes"});
    SmallVector<KVAppendOp> appends;
    getOperation().walk([&](KVAppendOp append) {
      if (!getEnclosingLaunch(append))
        appends.push_back(append);
    });
    for (KVAppendOp append : appends) {
      RopeOp keyRope = getSingleUseRope(append.getKey());
      if (keyRope && append.getValue() == keyRope.getResult())
        keyRope = nullptr;
      RopeOp queryRope = getQueryRope(append);
      if (!keyRope && !queryRope)
        continue;
      Operation *anchor = append;
      if (queryRope && append->isBeforeInBlock(queryRope))
        anchor = queryRope;
      SmallVector<Operation *> ops;
      if (keyRope)
        ops.push_back(keyRope);
      if (queryRope)
        ops.push_back(queryRope);
      ops.push_back(append);
      std::string reason;
      if ((anchor != append.getOperation() &&
           !sinkCacheReaders(append, anchor)) ||
          !canFormLaunchAt(ops, anchor, &reason)) {
        if (reason.empty())
          reason = "a reader of the cache between them has effects";
        audit.change(getLocations(ops), "sits.rope + sits.kv_cache.append",
                     "kept", "not fused: " + reason);
        continue;
      }
      formLaunch(FusionKind::RopeKVAppend, ops, anchor);
      audit.add("launches");
      audit.add("ropes", static_cast<int64_t>(ops.size() - 1));
      audit.change(getLocations(ops),
                   std::string(keyRope ? "sits.rope (keys) + " : "") +
                       (queryRope ? "sits.rope (query) + " : "") +
                       "sits.kv_cache.append",
                   "kernel.launch <rope_kv_append>",
                   "only the append reads the rotated keys, only the layer's "
                   "attention the rotated query");
    }
  }
};

} // namespace
