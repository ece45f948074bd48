//===- TensorParallel.cpp - Split a program over ranks --------------------===//
//
// Tensor parallelism (Megatron-style): every rank runs one program over its
// part of the weights. The pass finds the blocks whose work splits without
// changing the result, by their structure (never by names):
//
// * attention: q/k/v projections -> split_heads (-> head-wise norm, rope)
//   -> sits.attention -> merge_heads -> output projection. Heads are
//   independent, so each rank takes whole heads: the q/k/v weights by rows
//   (column-parallel), the output projection by columns (row-parallel),
//   whose per-rank partial sums a sits.all_reduce adds;
// * MLP: gate/up -> GLU -> down, or up -> activation -> down: the
//   activation is elementwise over the intermediate columns, which split
//   the same way;
// * the LM head by vocabulary rows (then sits.all_gather), the embedding by
//   vocabulary rows (each rank gives zeros for ids it does not hold, then
//   sits.all_reduce).
//
// Everything else stays replicated, and a layout check over the whole
// function (ShardLayout.h) proves each op reads only layouts it can.
//
//===----------------------------------------------------------------------===//

#include "dialects/sits/Sharding.h"
#include "dialects/sits/SitsOps.h"
#include "passes/Audit.h"
#include "passes/Passes.h"
#include "passes/ShardLayout.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/Support/FormatVariadic.h"

#include <map>
#include <tuple>

namespace sits {
#define GEN_PASS_DEF_TENSORPARALLEL
#include "passes/Passes.h.inc"
} // namespace sits

using namespace mlir;
using namespace sits;

namespace {

constexpr llvm::StringLiteral kPassName = "sits-tensor-parallel";

/// One attention layer: the ops between its projections.
struct AttentionBlock {
  AttentionOp attention;
  LinearOp query;
  /// The key and value projections (one when both read one linear).
  SmallVector<LinearOp, 2> keyValue;
  /// split_heads, head-wise norms and ropes, from the projections on.
  llvm::SmallSetVector<Operation *, 8> queryChain, keyValueChain;
  MergeHeadsOp merge;
  LinearOp output;
  /// How the kv heads are cut: `kvParts` parts, each held by `kvReplicas`
  /// ranks.
  int64_t kvParts = 1, kvReplicas = 1;
};

/// One MLP: gate and up (or up alone) -> GLU or activation -> down.
struct MLPBlock {
  SmallVector<LinearOp, 2> up;
  Operation *activation = nullptr;
  LinearOp down;
};

RankedTensorType withDim(Type type, int64_t dim, int64_t size) {
  auto ranked = cast<RankedTensorType>(type);
  SmallVector<int64_t> shape(ranked.getShape());
  shape[dim < 0 ? dim + shape.size() : dim] = size;
  return RankedTensorType::get(shape, ranked.getElementType());
}

void setDim(Value value, int64_t dim, int64_t size) {
  value.setType(withDim(value.getType(), dim, size));
}

int64_t dimOf(Value value, int64_t dim) {
  auto type = cast<RankedTensorType>(value.getType());
  return type.getDimSize(dim < 0 ? dim + type.getRank() : dim);
}

/// `value` comes from a sits.weight of static shape (a bias may be absent).
bool isWeight(Value value) {
  auto weight = value ? value.getDefiningOp<WeightOp>() : WeightOp();
  return weight && cast<ShapedType>(weight.getType()).hasStaticShape();
}

bool hasWeights(LinearOp linear) {
  return isWeight(linear.getWeight()) &&
         (!linear.getBias() || isWeight(linear.getBias()));
}

struct TensorParallelPass
    : public sits::impl::TensorParallelBase<TensorParallelPass> {
  using TensorParallelBase::TensorParallelBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    PassAudit audit(&getContext(), kPassName,
                    {"attention_blocks_sharded", "mlp_blocks_sharded",
                     "linears_column_parallel", "linears_row_parallel",
                     "linears_replicated", "weights_sharded",
                     "weights_replicated", "kv_heads_replicated",
                     "embeddings_sharded", "lm_heads_sharded",
                     "all_reduces_inserted", "all_gathers_inserted"});
    if (tensorParallel < 1 || tensorParallel > kMaxTensorParallelRanks) {
      module.emitError() << kPassName
                         << ": tensor-parallel must be between 1 and "
                         << kMaxTensorParallelRanks << ", got "
                         << tensorParallel.getValue();
      return signalPassFailure();
    }
    ranks = tensorParallel;
    if (ranks == 1)
      return;
    if (auto existing =
            module->getAttrOfType<IntegerAttr>(kTensorParallelAttrName)) {
      module.emitError() << kPassName
                         << ": the program is tensor-parallel already ("
                         << kTensorParallelAttrName << " = "
                         << existing.getInt() << ")";
      return signalPassFailure();
    }
    if (failed(refuseLaterPasses(module)))
      return signalPassFailure();
    for (auto func : module.getOps<func::FuncOp>())
      if (failed(shardFunction(func, audit)))
        return signalPassFailure();
    module->setAttr(
        kTensorParallelAttrName,
        IntegerAttr::get(IntegerType::get(&getContext(), 64), ranks));
  }

  /// The KV cache, quantization and TVC passes run after this one: their
  /// ops mean the program is not the full-sequence one it expects.
  LogicalResult refuseLaterPasses(ModuleOp module) {
    WalkResult result = module.walk([&](Operation *op) {
      if (!isa<KVCacheInitOp, KVLengthOp, KVAppendOp, KVReadOp, KVAdvanceOp,
               QuantizeOp, DequantizeOp, TVCLMHeadOp>(op))
        return WalkResult::advance();
      op->emitError() << kPassName << ": '" << op->getName()
                      << "' comes from a pass that runs after this one (the "
                         "KV cache, quantization, TVC); shard the "
                         "full-sequence program before them";
      return WalkResult::interrupt();
    });
    return failure(result.wasInterrupted());
  }

  //===--------------------------------------------------------------------===//
  // Matching
  //===--------------------------------------------------------------------===//

  /// Follows q, k or v back through head-wise ops to its projection.
  FailureOr<LinearOp> traceHeads(AttentionOp attention, Value value,
                                 StringRef what,
                                 llvm::SmallSetVector<Operation *, 8> &chain,
                                 int64_t heads) {
    auto fail = [&](const Twine &why) {
      return attention.emitError()
             << kPassName << ": cannot shard this attention: its " << what
             << " " << why;
    };
    Operation *op = value.getDefiningOp();
    SmallVector<Operation *> reversed;
    while (
        op &&
        (isa<RopeOp>(op) ||
         (isa<RMSNormOp, LayerNormOp>(op) &&
          cast<RankedTensorType>(op->getResult(0).getType()).getRank() == 4))) {
      reversed.push_back(op);
      op = op->getOperand(0).getDefiningOp();
    }
    auto split = dyn_cast_or_null<SplitHeadsOp>(op);
    if (!split)
      return fail("does not come from sits.split_heads (through head-wise "
                  "norms and sits.rope)");
    if (split.getNumHeads() != heads)
      return fail("is split into " + Twine(split.getNumHeads()) +
                  " heads, but the attention reads " + Twine(heads));
    reversed.push_back(split);
    auto linear = split.getInput().getDefiningOp<LinearOp>();
    if (!linear)
      return fail("heads do not come from a sits.linear");
    if (!hasWeights(linear))
      return fail("projection's weight is not a sits.weight of static shape");
    for (Operation *inner : llvm::reverse(reversed))
      chain.insert(inner);
    return linear;
  }

  FailureOr<AttentionBlock> matchAttention(AttentionOp attention) {
    AttentionBlock block;
    block.attention = attention;
    auto fail = [&](const Twine &why) {
      return attention.emitError()
             << kPassName << ": cannot shard this attention: " << why;
    };
    if (attention.getPastLen() || attention.getColdKey())
      return fail("it reads a KV cache already");
    if (Value mask = attention.getMask()) {
      auto type = cast<RankedTensorType>(mask.getType());
      if (type.getRank() == 4 && type.getDimSize(1) != 1)
        return fail("its mask has a row per head (" +
                    Twine(type.getDimSize(1)) +
                    "), which would have to be split with the heads");
    }
    int64_t heads = attention.getNumHeads(),
            kvHeads = attention.getNumKvHeads();
    FailureOr<LinearOp> query = traceHeads(attention, attention.getQuery(),
                                           "query", block.queryChain, heads);
    if (failed(query))
      return failure();
    block.query = *query;
    for (auto [value, what] : {std::pair{attention.getKey(), "key"},
                               std::pair{attention.getValue(), "value"}}) {
      FailureOr<LinearOp> linear =
          traceHeads(attention, value, what, block.keyValueChain, kvHeads);
      if (failed(linear))
        return failure();
      if (*linear == block.query)
        return fail(Twine("the query and the ") + what +
                    " come from one sits.linear");
      if (!llvm::is_contained(block.keyValue, *linear))
        block.keyValue.push_back(*linear);
    }
    for (Operation *op : block.queryChain)
      if (block.keyValueChain.contains(op))
        return fail("the query and the keys share '" +
                    op->getName().getStringRef() + "'");
    Value result = attention.getResult();
    block.merge = result.hasOneUse()
                      ? dyn_cast<MergeHeadsOp>(*result.getUsers().begin())
                      : MergeHeadsOp();
    Value merged = block.merge ? block.merge.getResult() : Value();
    block.output = merged && merged.hasOneUse()
                       ? dyn_cast<LinearOp>(*merged.getUsers().begin())
                       : LinearOp();
    if (!block.output || block.output.getInput() != merged)
      return fail("its result does not go through one sits.merge_heads into "
                  "one sits.linear (the output projection)");
    if (!hasWeights(block.output))
      return fail("its output projection's weight is not a sits.weight of "
                  "static shape");
    if (ShapedType::isDynamic(dimOf(attention.getQuery(), 3)))
      return fail("its head dimension is dynamic");
    if (heads % ranks != 0)
      return fail(Twine(heads) + " heads do not split over " + Twine(ranks) +
                  " ranks (num_heads % " + Twine(ranks) + " != 0)");
    if (kvHeads % ranks == 0) {
      block.kvParts = ranks;
    } else if (ranks % kvHeads == 0) {
      block.kvParts = kvHeads;
      block.kvReplicas = ranks / kvHeads;
    } else {
      return fail(Twine(kvHeads) + " kv heads neither split over " +
                  Twine(ranks) + " ranks nor divide them (num_kv_heads % " +
                  Twine(ranks) + " != 0 and " + Twine(ranks) +
                  " % num_kv_heads != 0): a rank's query heads must read "
                  "whole kv heads");
    }
    if (failed(checkContained(block)))
      return failure();
    return block;
  }

  /// Each rank holds only its part of the values inside a block: nothing
  /// but the block's own ops may read them.
  LogicalResult checkContained(const AttentionBlock &block) {
    llvm::SmallPtrSet<Operation *, 16> inside;
    inside.insert(block.queryChain.begin(), block.queryChain.end());
    inside.insert(block.keyValueChain.begin(), block.keyValueChain.end());
    inside.insert(block.attention);
    SmallVector<Operation *> producers(block.queryChain.begin(),
                                       block.queryChain.end());
    producers.append(block.keyValueChain.begin(), block.keyValueChain.end());
    producers.push_back(block.query);
    producers.append(block.keyValue.begin(), block.keyValue.end());
    for (Operation *producer : producers)
      for (Operation *user : producer->getUsers())
        if (!inside.contains(user))
          return escapes(user, producer, block.attention, "attention");
    return success();
  }

  LogicalResult escapes(Operation *user, Operation *producer, Operation *block,
                        StringRef what) {
    InFlightDiagnostic diag =
        user->emitError()
        << kPassName << ": '" << user->getName()
        << "' reads a value from inside an " << what
        << " block (the result of '" << producer->getName()
        << "'), which each rank would hold only a part of; only the block's "
           "output projection may leave it";
    diag.attachNote(block->getLoc()) << "the " << what << " block";
    return failure();
  }

  /// gate/up -> GLU -> down.
  FailureOr<MLPBlock> matchGLU(GLUOp glu) {
    MLPBlock block;
    block.activation = glu;
    auto fail = [&](const Twine &why) {
      return glu.emitError() << kPassName << ": cannot shard this MLP: " << why;
    };
    for (auto [value, what] :
         {std::pair{glu.getGate(), "gate"}, std::pair{glu.getUp(), "up"}}) {
      auto linear = value.getDefiningOp<LinearOp>();
      if (!linear || !hasWeights(linear))
        return fail(Twine("its ") + what +
                    " does not come from a sits.linear of a sits.weight");
      if (!llvm::is_contained(block.up, linear))
        block.up.push_back(linear);
    }
    return matchDown(block, fail);
  }

  /// The down projection after `block.activation`, and the block's values
  /// staying inside it.
  template <typename Fail>
  FailureOr<MLPBlock> matchDown(MLPBlock &block, Fail fail) {
    Value hidden = block.activation->getResult(0);
    for (Operation *user : hidden.getUsers())
      if (auto linear = dyn_cast<LinearOp>(user);
          linear && linear.getInput() == hidden) {
        block.down = linear;
        break;
      }
    if (!block.down)
      return fail("its result does not go into a sits.linear (the down "
                  "projection)");
    for (OpOperand &use : hidden.getUses())
      if (use.getOwner() != block.down || use.getOperandNumber() != 0)
        return escapes(use.getOwner(), block.activation, block.activation,
                       "MLP");
    if (!hasWeights(block.down))
      return fail("its down projection's weight is not a sits.weight of "
                  "static shape");
    for (LinearOp up : block.up)
      for (Operation *user : up->getUsers())
        if (user != block.activation)
          return escapes(user, up, block.activation, "MLP");
    int64_t columns = dimOf(block.up[0].getWeight(), 0);
    if (columns % ranks != 0)
      return fail("its intermediate size " + Twine(columns) +
                  " does not split over " + Twine(ranks) + " ranks (" +
                  Twine(columns) + " % " + Twine(ranks) + " != 0)");
    return block;
  }

  /// up -> activation -> down, when the activation's result goes into a
  /// projection; nullopt for an activation that is not an MLP's.
  FailureOr<std::optional<MLPBlock>> matchActivation(ActivationOp op) {
    auto up = op.getInput().getDefiningOp<LinearOp>();
    bool feedsLinear = llvm::any_of(op->getUsers(), [&](Operation *user) {
      auto linear = dyn_cast<LinearOp>(user);
      return linear && linear.getInput() == op.getResult();
    });
    if (!up || !feedsLinear || !hasWeights(up))
      return std::optional<MLPBlock>();
    MLPBlock block;
    block.activation = op;
    block.up.push_back(up);
    auto fail = [&](const Twine &why) {
      return op.emitError() << kPassName << ": cannot shard this MLP: " << why;
    };
    FailureOr<MLPBlock> matched = matchDown(block, fail);
    if (failed(matched))
      return failure();
    return std::optional<MLPBlock>(*matched);
  }

  //===--------------------------------------------------------------------===//
  // Rewriting
  //===--------------------------------------------------------------------===//

  /// `weight`'s part (one sits.shard per weight and cut, so that a tied
  /// table's two readers share it).
  Value shard(Value weight, int64_t dim, int64_t parts, int64_t replicas) {
    auto op = weight.getDefiningOp<WeightOp>();
    auto key = std::make_tuple(op.getOperation(), dim, parts, replicas);
    auto it = shards.find(key);
    if (it != shards.end())
      return it->second;
    OpBuilder builder(op->getContext());
    builder.setInsertionPointAfter(op);
    auto part = ShardOp::create(
        builder, op.getLoc(),
        withDim(weight.getType(), dim, dimOf(weight, dim) / parts), weight,
        ShardAttr::get(op->getContext(), dim, parts, replicas));
    shards[key] = part.getResult();
    return part.getResult();
  }

  /// Rows of the weight (and bias): the result's columns are split.
  void columnParallel(LinearOp linear, int64_t parts, int64_t replicas) {
    linear.getWeightMutable().assign(
        shard(linear.getWeight(), 0, parts, replicas));
    if (Value bias = linear.getBias())
      linear.getBiasMutable().assign(shard(bias, 0, parts, replicas));
    setDim(linear.getResult(), -1, dimOf(linear.getWeight(), 0));
    ++columnLinears;
  }

  /// Columns of the weight: each rank's product is a term of the sum, which
  /// a sits.all_reduce adds (with the bias, once).
  void rowParallel(LinearOp linear) {
    linear.getWeightMutable().assign(shard(linear.getWeight(), 1, ranks, 1));
    Value bias = linear.getBias();
    linear.getBiasMutable().clear();
    sumOverRanks(linear.getResult(), bias);
    ++rowLinears;
  }

  void sumOverRanks(Value partial, Value bias) {
    OpBuilder builder(partial.getContext());
    builder.setInsertionPointAfterValue(partial);
    auto sum =
        AllReduceOp::create(builder, partial.getLoc(), partial.getType(),
                            partial, bias, builder.getI64IntegerAttr(ranks));
    partial.replaceAllUsesExcept(sum.getResult(), sum);
    ++allReduces;
  }

  void shardAttention(AttentionBlock &block) {
    columnParallel(block.query, ranks, 1);
    for (LinearOp linear : block.keyValue)
      columnParallel(linear, block.kvParts, block.kvReplicas);
    // Heads along the chains, from the projections on.
    for (auto [chain, parts] :
         {std::pair{&block.queryChain, ranks},
          std::pair{&block.keyValueChain, block.kvParts}}) {
      for (Operation *op : *chain) {
        Value input = op->getOperand(0);
        if (auto split = dyn_cast<SplitHeadsOp>(op)) {
          int64_t heads = split.getNumHeads() / parts;
          split.setNumHeads(heads);
          setDim(split.getResult(), 1, heads);
        } else {
          setDim(op->getResult(0), 1, dimOf(input, 1));
        }
      }
    }
    AttentionOp attention = block.attention;
    attention.setNumHeads(attention.getNumHeads() / ranks);
    attention.setNumKvHeads(attention.getNumKvHeads() / block.kvParts);
    setDim(attention.getResult(), 1, attention.getNumHeads());
    setDim(block.merge.getResult(), -1,
           attention.getNumHeads() * dimOf(attention.getResult(), 3));
    rowParallel(block.output);
  }

  void shardMLP(MLPBlock &block) {
    for (LinearOp up : block.up)
      columnParallel(up, ranks, 1);
    setDim(block.activation->getResult(0), -1,
           dimOf(block.up[0].getResult(), -1));
    rowParallel(block.down);
  }

  LogicalResult checkVocabulary(Operation *op, Value table, StringRef what) {
    if (!isWeight(table))
      return op->emitError() << kPassName << ": cannot shard this " << what
                             << ": its table is not a sits.weight of static "
                                "shape";
    int64_t vocab = dimOf(table, 0);
    if (vocab % ranks != 0)
      return op->emitError()
             << kPassName << ": cannot shard this " << what
             << ": the vocabulary of " << vocab << " rows does not split over "
             << ranks << " ranks (" << vocab << " % " << ranks << " != 0)";
    return success();
  }

  //===--------------------------------------------------------------------===//
  // The function
  //===--------------------------------------------------------------------===//

  LogicalResult shardFunction(func::FuncOp func, PassAudit &audit) {
    // Match everything before changing anything.
    SmallVector<AttentionBlock, 4> attentions;
    SmallVector<MLPBlock, 4> mlps;
    SmallVector<LMHeadOp> heads;
    SmallVector<EmbeddingOp> embeddings;
    llvm::DenseMap<Operation *, Operation *> owner; // linear -> its block
    auto claim = [&](LinearOp linear, Operation *block) -> LogicalResult {
      auto [it, inserted] = owner.try_emplace(linear, block);
      if (inserted || it->second == block)
        return success();
      InFlightDiagnostic diag = linear.emitError()
                                << kPassName
                                << ": this sits.linear belongs to two blocks, "
                                   "which would split it two ways";
      diag.attachNote(it->second->getLoc()) << "one block";
      diag.attachNote(block->getLoc()) << "the other";
      return failure();
    };
    WalkResult walk = func.walk([&](Operation *op) -> WalkResult {
      if (auto attention = dyn_cast<AttentionOp>(op)) {
        FailureOr<AttentionBlock> block = matchAttention(attention);
        if (failed(block))
          return WalkResult::interrupt();
        attentions.push_back(*block);
      } else if (auto glu = dyn_cast<GLUOp>(op)) {
        FailureOr<MLPBlock> block = matchGLU(glu);
        if (failed(block))
          return WalkResult::interrupt();
        mlps.push_back(*block);
      } else if (auto activation = dyn_cast<ActivationOp>(op)) {
        FailureOr<std::optional<MLPBlock>> block = matchActivation(activation);
        if (failed(block))
          return WalkResult::interrupt();
        if (*block)
          mlps.push_back(**block);
      } else if (auto head = dyn_cast<LMHeadOp>(op)) {
        if (failed(checkVocabulary(op, head.getWeight(), "LM head")))
          return WalkResult::interrupt();
        if (head.getBias() && !isWeight(head.getBias())) {
          head.emitError() << kPassName
                           << ": cannot shard this LM head: its bias is not "
                              "a sits.weight of static shape";
          return WalkResult::interrupt();
        }
        heads.push_back(head);
      } else if (auto embedding = dyn_cast<EmbeddingOp>(op)) {
        if (embedding.getVocabShardAttr() || embedding.getRowOffset() != 0 ||
            embedding.getVocab()) {
          embedding.emitError() << kPassName
                                << ": this embedding holds part of the "
                                   "vocabulary already";
          return WalkResult::interrupt();
        }
        if (failed(checkVocabulary(op, embedding.getTable(), "embedding")))
          return WalkResult::interrupt();
        embeddings.push_back(embedding);
      }
      return WalkResult::advance();
    });
    if (walk.wasInterrupted())
      return failure();
    for (AttentionBlock &block : attentions) {
      SmallVector<LinearOp> linears = {block.query, block.output};
      linears.append(block.keyValue.begin(), block.keyValue.end());
      for (LinearOp linear : linears)
        if (failed(claim(linear, block.attention)))
          return failure();
    }
    for (MLPBlock &block : mlps) {
      SmallVector<LinearOp> linears(block.up.begin(), block.up.end());
      linears.push_back(block.down);
      for (LinearOp linear : linears)
        if (failed(claim(linear, block.activation)))
          return failure();
    }

    for (auto [index, block] : llvm::enumerate(attentions)) {
      audit.change(
          {block.query.getLoc(), block.attention.getLoc(),
           block.output.getLoc()},
          llvm::formatv("attention {0}: {1} heads, {2} kv heads on every rank",
                        index, block.attention.getNumHeads(),
                        block.attention.getNumKvHeads()),
          llvm::formatv(
              "{0} heads per rank; {1}; q/k/v column-parallel, "
              "output projection row-parallel + sits.all_reduce",
              block.attention.getNumHeads() / ranks,
              block.kvReplicas == 1
                  ? llvm::formatv("{0} kv heads per rank",
                                  block.attention.getNumKvHeads() / ranks)
                        .str()
                  : llvm::formatv("each kv head on {0} ranks", block.kvReplicas)
                        .str()),
          "heads are independent: a rank's query heads read only its q/k/v "
          "rows and the kv heads of their group; the output projection sums "
          "over all heads, so each rank's columns give a term and "
          "sits.all_reduce adds the terms (in rank order, in f32)");
      if (block.kvReplicas != 1)
        audit.add("kv_heads_replicated");
      shardAttention(block);
    }
    for (auto [index, block] : llvm::enumerate(mlps)) {
      audit.change(
          {block.up[0].getLoc(), block.activation->getLoc(),
           block.down.getLoc()},
          llvm::formatv("MLP {0}: {1} intermediate columns on every rank",
                        index, dimOf(block.up[0].getWeight(), 0)),
          llvm::formatv("{0} columns per rank; up column-parallel, down "
                        "row-parallel + sits.all_reduce",
                        dimOf(block.up[0].getWeight(), 0) / ranks),
          "'" + block.activation->getName().getStringRef().str() +
              "' is elementwise over the intermediate columns, so each rank "
              "computes its own; the down projection sums over them, so "
              "each rank's columns give a term that sits.all_reduce adds");
      shardMLP(block);
    }
    for (LMHeadOp head : heads) {
      audit.change(head.getLoc(), "sits.lm_head over the whole vocabulary",
                   llvm::formatv("{0} vocabulary rows per rank + "
                                 "sits.all_gather",
                                 dimOf(head.getWeight(), 0) / ranks),
                   "each logit depends on its vocabulary row alone; the "
                   "gather puts the ranks' rows side by side in rank order");
      head.getWeightMutable().assign(shard(head.getWeight(), 0, ranks, 1));
      if (Value bias = head.getBias())
        head.getBiasMutable().assign(shard(bias, 0, ranks, 1));
      Value logits = head.getResult();
      Type whole = logits.getType();
      setDim(logits, -1, dimOf(head.getWeight(), 0));
      OpBuilder builder(head);
      builder.setInsertionPointAfter(head);
      auto gather = AllGatherOp::create(builder, head.getLoc(), whole, logits,
                                        builder.getI64IntegerAttr(ranks));
      logits.replaceAllUsesExcept(gather.getResult(), gather);
      audit.add("lm_heads_sharded");
      audit.add("all_gathers_inserted");
    }
    for (EmbeddingOp embedding : embeddings) {
      audit.change(embedding.getLoc(), "sits.embedding of the whole table",
                   llvm::formatv("{0} vocabulary rows per rank "
                                 "(vocab_shard) + sits.all_reduce",
                                 dimOf(embedding.getTable(), 0) / ranks),
                   "an id is in exactly one rank's rows; the others give "
                   "zeros, so the sum over the ranks is its row");
      embedding.getTableMutable().assign(
          shard(embedding.getTable(), 0, ranks, 1));
      embedding.setVocabShardAttr(
          ShardAttr::get(&getContext(), /*dim=*/0, ranks, /*replicas=*/1));
      sumOverRanks(embedding.getResult(), Value());
      audit.add("embeddings_sharded");
    }

    if (failed(checkShardLayouts(func, ranks, kPassName)))
      return failure();

    audit.add("attention_blocks_sharded", attentions.size());
    audit.add("mlp_blocks_sharded", mlps.size());
    audit.add("linears_column_parallel", columnLinears);
    audit.add("linears_row_parallel", rowLinears);
    audit.add("all_reduces_inserted", allReduces);
    audit.add("weights_sharded", shards.size());
    int64_t replicatedLinears = 0, replicatedWeights = 0;
    func.walk([&](Operation *op) {
      if (auto linear = dyn_cast<LinearOp>(op))
        replicatedLinears += !owner.contains(linear);
      if (isa<WeightOp>(op))
        replicatedWeights += llvm::any_of(op->getUsers(), [](Operation *user) {
          return !isa<ShardOp>(user);
        });
    });
    audit.add("linears_replicated", replicatedLinears);
    audit.add("weights_replicated", replicatedWeights);
    columnLinears = rowLinears = allReduces = 0;
    shards.clear();
    return success();
  }

  int64_t ranks = 1;
  int64_t columnLinears = 0, rowLinears = 0, allReduces = 0;
  std::map<std::tuple<Operation *, int64_t, int64_t, int64_t>, Value> shards;
};

} // namespace
