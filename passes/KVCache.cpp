//===- KVCache.cpp - Prefill and decode steps with a bounded KV cache -----===//
//
// A decoder-only model recomputes nothing of past tokens if each attention
// layer keeps their keys and values. This pass makes that explicit: the
// full-sequence function becomes `@prefill` and `@decode` steps that thread a
// `!sits.kv_cache` state, append the step's keys and values, and attend over
// the cached rows with `past_len`.
//
//===----------------------------------------------------------------------===//

#include "dialects/sits/SitsOps.h"
#include "passes/Audit.h"
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/FormatVariadic.h"

namespace sits {
#define GEN_PASS_DEF_KVCACHE
#include "passes/Passes.h.inc"
} // namespace sits

using namespace mlir;
using namespace sits;

namespace {

constexpr llvm::StringLiteral kPassName = "sits-kv-cache";

/// Ops that compute each sequence position from that position alone (and
/// constants). Between the token ids and an attention's keys and values only
/// these may appear: then a token's keys and values are final once computed,
/// and caching them is exact. Attention itself mixes positions, but only
/// through the causal rule, which the cached form keeps.
bool treatsPositionsIndependently(Operation *op) {
  return isa<WeightOp, arith::ConstantOp, EmbeddingOp, RMSNormOp, LayerNormOp,
             LinearOp, LMHeadOp, AddOp, ActivationOp, GLUOp, SplitHeadsOp,
             MergeHeadsOp, RopeOp, RopeCosSinOp, RopeGatherOp, PositionIdsOp,
             DequantizeOp, AttentionOp, ShardOp, AllReduceOp, AllGatherOp,
             func::ReturnOp>(op);
}

/// Why `attention` cannot read a cache, or an empty string.
std::string whyNotCacheable(AttentionOp attention) {
  if (attention.getMask())
    return "it has a mask operand (the causal mask was not folded into the "
           "attention's causal rule, so cached rows could be read under a "
           "different mask)";
  if (attention.getPastLen())
    return "it already reads a cache (past_len operand)";
  if (attention.getCausal() != CausalMode::bottom_right)
    return "its causal rule is '" +
           stringifyCausalMode(attention.getCausal()).str() +
           "', not bottom_right (only then does a new token see exactly the "
           "cached tokens and itself)";
  return "";
}

struct KVCachePass : public sits::impl::KVCacheBase<KVCachePass> {
  using KVCacheBase::KVCacheBase;

  void runOnOperation() override {
    PassAudit audit(&getContext(), kPassName, {"attention_layers_cached"});
    ModuleOp module = getOperation();
    if (maxSeqLen < 1 || maxBatch < 1) {
      module.emitError() << kPassName
                         << ": max-seq-len and max-batch must be >= 1, got "
                         << maxSeqLen.getValue() << " and "
                         << maxBatch.getValue();
      return signalPassFailure();
    }
    // The full-sequence program: the function with attention layers and no
    // cache yet.
    SmallVector<func::FuncOp> candidates;
    for (auto func : module.getOps<func::FuncOp>()) {
      bool hasAttention = false, hasCache = false;
      func.walk([&](Operation *op) {
        hasAttention |= isa<AttentionOp>(op);
        hasCache |= isa<KVAppendOp, KVReadOp>(op);
      });
      if (hasAttention && !hasCache)
        candidates.push_back(func);
    }
    if (candidates.empty())
      return;
    if (candidates.size() > 1) {
      candidates[1].emitError()
          << kPassName << ": more than one full-sequence function ('"
          << candidates[0].getSymName() << "', '" << candidates[1].getSymName()
          << "'); the KV cache belongs to one model";
      return signalPassFailure();
    }
    if (failed(rewrite(candidates.front(), audit)))
      return signalPassFailure();
  }

  /// Checks that `func` can be cached and returns its attention layers in
  /// program order.
  FailureOr<SmallVector<AttentionOp>> checkCacheable(func::FuncOp func) {
    FunctionType type = func.getFunctionType();
    auto ids = type.getNumInputs() == 1
                   ? dyn_cast<RankedTensorType>(type.getInput(0))
                   : RankedTensorType();
    if (!ids || ids.getRank() != 2 ||
        !ids.getElementType().isSignlessInteger() ||
        ids.getElementType().getIntOrFloatBitWidth() < 32)
      return func.emitError()
             << kPassName << ": '" << func.getSymName()
             << "' must take exactly the token ids ([batch, seq] of i32 or "
                "i64) to become prefill and decode steps, got "
             << type;

    SmallVector<AttentionOp> layers;
    WalkResult result = func.walk([&](Operation *op) {
      if (op == func.getOperation())
        return WalkResult::advance();
      if (!treatsPositionsIndependently(op)) {
        op->emitError() << kPassName << ": '" << op->getName()
                        << "' is not known to compute each position "
                           "independently, so keys and values of past tokens "
                           "could change with new tokens and cannot be cached";
        return WalkResult::interrupt();
      }
      if (auto positions = dyn_cast<PositionIdsOp>(op);
          positions && positions.getPastLen()) {
        op->emitError() << kPassName << ": positions already have a past";
        return WalkResult::interrupt();
      }
      // A table of RoPE rows (an exporter's cos/sin caches) bounds the
      // positions: a cached sequence reaches position max-seq-len - 1.
      if (auto gather = dyn_cast<RopeGatherOp>(op)) {
        int64_t rows =
            cast<ShapedType>(gather.getTable().getType()).getDimSize(0);
        if (!ShapedType::isDynamic(rows) && rows < maxSeqLen) {
          op->emitError() << kPassName << ": max-seq-len "
                          << maxSeqLen.getValue()
                          << " is past the model's RoPE table of " << rows
                          << " positions (its cos/sin caches): compile with "
                             "--max-seq-len="
                          << rows << " or less";
          return WalkResult::interrupt();
        }
      }
      if (auto attention = dyn_cast<AttentionOp>(op)) {
        std::string why = whyNotCacheable(attention);
        if (!why.empty()) {
          op->emitError() << kPassName
                          << ": cannot cache this attention: " << why;
          return WalkResult::interrupt();
        }
        layers.push_back(attention);
      }
      return WalkResult::advance();
    });
    if (result.wasInterrupted())
      return failure();

    auto firstKey = cast<RankedTensorType>(layers.front().getKey().getType());
    for (AttentionOp layer : layers) {
      auto key = cast<RankedTensorType>(layer.getKey().getType());
      auto value = cast<RankedTensorType>(layer.getValue().getType());
      if (key.isDynamicDim(1) || key.isDynamicDim(3) ||
          key.getDimSize(1) != firstKey.getDimSize(1) ||
          key.getDimSize(3) != firstKey.getDimSize(3) || value != key ||
          key.getElementType() != firstKey.getElementType())
        return layer.emitError()
               << kPassName
               << ": every layer's keys and values must have "
                  "the same static kv heads and head_dim as the first layer's ("
               << firstKey << "), got " << key << " and " << value;
    }
    return layers;
  }

  KVCacheType getCacheType(AttentionOp firstLayer, unsigned layers) {
    auto key = cast<RankedTensorType>(firstLayer.getKey().getType());
    return KVCacheType::get(
        &getContext(), layers, static_cast<unsigned>(maxBatch),
        static_cast<unsigned>(key.getDimSize(1)),
        static_cast<unsigned>(maxSeqLen),
        static_cast<unsigned>(key.getDimSize(3)), key.getElementType(),
        KVCacheLayoutAttr::get(&getContext(), KVCacheLayout::contiguous));
  }

  /// Makes `step` (a clone of the full-sequence function) read and write the
  /// cache.
  void addCache(func::FuncOp step, KVCacheType cacheType) {
    OpBuilder builder(step.getContext());
    Block &entry = step.getBody().front();
    Value ids = entry.getArgument(0);
    Location loc = step.getLoc();
    // Through the function interface, so argument attributes stay in step.
    unsigned cacheIndex = step.getNumArguments();
    auto name = builder.getNamedAttr("sits.input_name",
                                     builder.getStringAttr("kv_cache"));
    (void)step.insertArgument(cacheIndex, cacheType,
                              builder.getDictionaryAttr(name), loc);
    Value cache = entry.getArgument(cacheIndex);

    builder.setInsertionPointToStart(&entry);
    auto lengthType = RankedTensorType::get(
        {ShapedType::kDynamic},
        cast<RankedTensorType>(ids.getType()).getElementType());
    Value past = KVLengthOp::create(builder, loc, lengthType, cache);

    SmallVector<Operation *> toErase;
    unsigned layer = 0;
    for (Operation &op : llvm::make_early_inc_range(entry)) {
      if (auto positions = dyn_cast<PositionIdsOp>(op)) {
        builder.setInsertionPoint(positions);
        auto withPast = PositionIdsOp::create(builder, positions.getLoc(),
                                              positions.getType(),
                                              positions.getIds(), past);
        positions.replaceAllUsesWith(withPast.getResult());
        positions.erase();
        continue;
      }
      auto attention = dyn_cast<AttentionOp>(op);
      if (!attention)
        continue;
      builder.setInsertionPoint(attention);
      Location layerLoc = attention.getLoc();
      cache = KVAppendOp::create(builder, layerLoc, cacheType, cache,
                                 attention.getKey(), attention.getValue(), past,
                                 builder.getI64IntegerAttr(layer));
      auto keyType = cast<RankedTensorType>(attention.getKey().getType());
      auto cachedType = RankedTensorType::get(
          {keyType.getDimSize(0), cacheType.getKvHeads(),
           cacheType.getCapacity(), cacheType.getHeadDim()},
          keyType.getElementType());
      auto read = KVReadOp::create(builder, layerLoc, cachedType, cachedType,
                                   cache, builder.getI64IntegerAttr(layer));
      auto cached = AttentionOp::create(
          builder, layerLoc, attention.getType(), attention.getQuery(),
          read.getKey(), read.getValue(), /*mask=*/Value(), past,
          attention.getNumHeadsAttr(), attention.getNumKvHeadsAttr(),
          attention.getScaleAttr(), attention.getCausalAttr(),
          attention.getWindowAttr(), attention.getSoftcapAttr());
      attention.replaceAllUsesWith(cached.getResult());
      attention.erase();
      ++layer;
    }

    auto ret = cast<func::ReturnOp>(entry.getTerminator());
    builder.setInsertionPoint(ret);
    Value advanced = KVAdvanceOp::create(builder, loc, cacheType, cache, ids);
    ret.getOperandsMutable().append(advanced);
    auto resultName = builder.getNamedAttr("sits.output_name",
                                           builder.getStringAttr("kv_cache"));
    (void)step.insertResult(step.getNumResults(), cacheType,
                            builder.getDictionaryAttr(resultName));
  }

  LogicalResult rewrite(func::FuncOp func, PassAudit &audit) {
    FailureOr<SmallVector<AttentionOp>> layers = checkCacheable(func);
    if (failed(layers))
      return failure();
    KVCacheType cacheType = getCacheType(layers->front(), layers->size());

    for (auto [index, layer] : llvm::enumerate(*layers))
      audit.change(
          layer.getLoc(),
          llvm::formatv("layer {0}: sits.attention over the keys and values "
                        "of the whole sequence",
                        index),
          "sits.kv_cache.append at past_len, sits.kv_cache.read, "
          "sits.attention past_len (in @prefill and @decode)",
          "keys and values of a token depend only on that token and its "
          "position (every op before them is position-wise), so cached rows "
          "are exact; bottom-right causal, offset = past_len, bound = "
          "past_len + seq: a new token sees the cached tokens and itself");
    audit.add("attention_layers_cached", layers->size());

    for (llvm::StringRef name : {"prefill", "decode"})
      if (Operation *existing = getOperation().lookupSymbol(name);
          existing && existing != func)
        return existing->emitError() << kPassName << ": a function named '"
                                     << name << "' exists already";

    // Clone before rewriting, so both steps start from the same program.
    OpBuilder builder(func);
    auto prefill = cast<func::FuncOp>(builder.clone(*func));
    auto decode = cast<func::FuncOp>(builder.clone(*func));
    for (auto [step, name] :
         {std::pair{prefill, "prefill"}, std::pair{decode, "decode"}}) {
      step.setSymName(name);
      step->setAttr("sits.step", builder.getStringAttr(name));
      addCache(step, cacheType);
    }
    // Decode feeds one token per sequence.
    Block &decodeEntry = decode.getBody().front();
    auto ids = cast<RankedTensorType>(decodeEntry.getArgument(0).getType());
    decodeEntry.getArgument(0).setType(
        RankedTensorType::get({ids.getDimSize(0), 1}, ids.getElementType()));
    decode.setFunctionType(builder.getFunctionType(
        decodeEntry.getArgumentTypes(), decode.getFunctionType().getResults()));
    func.erase();
    return success();
  }
};

} // namespace
