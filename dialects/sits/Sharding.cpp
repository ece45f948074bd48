//===- Sharding.cpp - The program of one rank -----------------------------===//

#include "dialects/sits/Sharding.h"
#include "dialects/sits/SitsOps.h"
#include "dialects/sits/WeightView.h"

#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace sits;

/// The name of `shard`'s slice of `weight`: the weight's own when nothing
/// else reads it, else one that says which part it is.
static std::string getSliceName(WeightOp weight, ShardAttr shard) {
  std::string name = weight.getName().str();
  if (weight->hasOneUse())
    return name;
  name += ".dim" + std::to_string(shard.getDim()) + ".parts" +
          std::to_string(shard.getParts());
  if (shard.getReplicas() != 1)
    name += ".replicas" + std::to_string(shard.getReplicas());
  return name;
}

/// `shard` must describe the module's `ranks`.
static LogicalResult checkRanks(Operation *op, ShardAttr shard, int64_t ranks) {
  if (shard.getParts() * shard.getReplicas() == ranks)
    return success();
  return op->emitError() << "sits-specialize-rank: " << shard << " describes "
                         << shard.getParts() * shard.getReplicas()
                         << " ranks, but the program has " << ranks << " ("
                         << kTensorParallelAttrName << ")";
}

static LogicalResult specializeShard(ShardOp op, StringRef name, int64_t rank,
                                     int64_t ranks) {
  ShardAttr shard = op.getShard();
  if (failed(checkRanks(op, shard, ranks)))
    return failure();
  auto weight = op.getWeight().getDefiningOp<WeightOp>();
  auto type = cast<ShapedType>(op.getType());
  SmallVector<int64_t> offsets(type.getRank(), 0);
  offsets[shard.getDim()] =
      rank / shard.getReplicas() * type.getDimSize(shard.getDim());
  ElementsAttr slice = getWeightSlice(weight.getValue(), type, offsets);
  if (!slice)
    return op->emitError() << "sits-specialize-rank: cannot read part "
                           << rank / shard.getReplicas() << " of weight '"
                           << weight.getName() << "' ("
                           << weight.getValue().getType() << ") as " << type;
  OpBuilder builder(op);
  auto part = WeightOp::create(builder, op.getLoc(), type,
                               builder.getStringAttr(name), slice);
  op.replaceAllUsesWith(part.getResult());
  op.erase();
  if (weight->use_empty())
    weight.erase();
  return success();
}

static LogicalResult specializeEmbedding(EmbeddingOp op, int64_t rank,
                                         int64_t ranks) {
  ShardAttr shard = op.getVocabShardAttr();
  if (failed(checkRanks(op, shard, ranks)))
    return failure();
  int64_t rows = op.getTable().getType().getDimSize(0);
  if (ShapedType::isDynamic(rows))
    return op->emitError() << "sits-specialize-rank: the table's rows must be "
                              "static to give the rank its row_offset";
  Builder builder(op.getContext());
  op.setRowOffsetAttr(
      builder.getI64IntegerAttr(rank / shard.getReplicas() * rows));
  op.setVocabAttr(builder.getI64IntegerAttr(rows * shard.getParts()));
  op.removeVocabShardAttr();
  return success();
}

LogicalResult sits::specializeForRankInPlace(ModuleOp module, int64_t rank) {
  int64_t ranks = getTensorParallelRanks(module);
  if (rank < 0 || rank >= ranks)
    return module.emitError()
           << "sits-specialize-rank: rank " << rank
           << " is not one of the program's " << ranks << " (ranks 0 .. "
           << ranks - 1 << ", " << kTensorParallelAttrName << ")";
  SmallVector<ShardOp> shards;
  SmallVector<EmbeddingOp> embeddings;
  module.walk([&](Operation *op) {
    if (auto shard = dyn_cast<ShardOp>(op))
      shards.push_back(shard);
    else if (auto embedding = dyn_cast<EmbeddingOp>(op);
             embedding && embedding.getVocabShardAttr())
      embeddings.push_back(embedding);
  });
  // Named before any is rewritten: whether a weight is read another way is
  // a property of the program, not of the order.
  SmallVector<std::string> names;
  for (ShardOp shard : shards)
    names.push_back(getSliceName(shard.getWeight().getDefiningOp<WeightOp>(),
                                 shard.getShard()));
  for (auto [shard, name] : llvm::zip(shards, names))
    if (failed(specializeShard(shard, name, rank, ranks)))
      return failure();
  for (EmbeddingOp embedding : embeddings)
    if (failed(specializeEmbedding(embedding, rank, ranks)))
      return failure();
  return success();
}

FailureOr<OwningOpRef<ModuleOp>> sits::specializeForRank(ModuleOp module,
                                                         int64_t rank) {
  OwningOpRef<ModuleOp> copy = module.clone();
  if (failed(specializeForRankInPlace(*copy, rank)))
    return failure();
  return copy;
}
