//===- ParallelOps.cpp - Verifiers of the tensor-parallel ops -------------===//
//
// sits.shard, sits.all_reduce and sits.all_gather, and the #sits.shard
// attribute: a rank's part of a weight and the collectives between ranks.
//
//===----------------------------------------------------------------------===//

#include "dialects/sits/Sharding.h"
#include "dialects/sits/SitsOps.h"

using namespace mlir;
using namespace sits;

int64_t sits::getTensorParallelRanks(ModuleOp module) {
  auto ranks = module->getAttrOfType<IntegerAttr>(kTensorParallelAttrName);
  return ranks ? ranks.getInt() : 1;
}

LogicalResult SitsDialect::verifyOperationAttribute(Operation *op,
                                                    NamedAttribute attribute) {
  // Other sits.* attributes (sits.input_name, sits.step, ...) are names the
  // tools read; only the ranks have rules.
  if (attribute.getName() != kTensorParallelAttrName)
    return success();
  auto ranks = dyn_cast<IntegerAttr>(attribute.getValue());
  if (!isa<ModuleOp>(op) || !ranks || ranks.getInt() < 1)
    return op->emitError() << kTensorParallelAttrName
                           << " is the ranks of a module: an integer >= 1 on "
                              "a builtin.module";
  return success();
}

std::optional<int64_t> EmbeddingOp::getVocabularySize() {
  if (std::optional<int64_t> vocab = getVocab())
    return *vocab;
  int64_t rows = getTable().getType().getDimSize(0);
  if (ShapedType::isDynamic(rows))
    return std::nullopt;
  if (ShardAttr shard = getVocabShardAttr())
    return rows * shard.getParts();
  return getRowOffset() + rows;
}

LogicalResult EmbeddingOp::verifyVocabularyPart() {
  int64_t rows = getTable().getType().getDimSize(0);
  int64_t offset = getRowOffset();
  if (offset < 0)
    return emitOpError() << "row_offset must be >= 0, got " << offset;
  if (ShardAttr shard = getVocabShardAttr()) {
    if (shard.getDim() != 0)
      return emitOpError() << "vocab_shard splits the vocabulary (dimension "
                              "0 of the table), got dimension "
                           << shard.getDim();
    if (offset != 0)
      return emitOpError()
             << "vocab_shard and row_offset exclude each other (every rank's "
                "offset follows from vocab_shard; sits-specialize-rank makes "
                "it a row_offset)";
  }
  std::optional<int64_t> vocab = getVocab();
  if (!vocab || ShapedType::isDynamic(rows))
    return success();
  if (ShardAttr shard = getVocabShardAttr()) {
    if (*vocab != rows * shard.getParts())
      return emitOpError() << "vocab " << *vocab << " must be the "
                           << shard.getParts() << " parts of " << rows
                           << " rows (" << rows * shard.getParts() << ")";
  } else if (*vocab < offset + rows) {
    return emitOpError() << "vocab " << *vocab << " ends before the table's "
                         << "rows (" << offset << " .. " << offset + rows - 1
                         << ")";
  }
  return success();
}

LogicalResult ShardAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                int64_t dim, int64_t parts, int64_t replicas) {
  if (dim < 0)
    return emitError() << "shard dimension must be >= 0, got " << dim;
  if (parts < 1 || replicas < 1)
    return emitError() << "shard parts and replicas must be >= 1, got " << parts
                       << " and " << replicas;
  return success();
}

LogicalResult ShardOp::verify() {
  if (!getWeight().getDefiningOp<WeightOp>())
    return emitOpError() << "shards a sits.weight, not another value";
  auto input = cast<RankedTensorType>(getWeight().getType());
  auto result = cast<RankedTensorType>(getResult().getType());
  ShardAttr shard = getShard();
  const int64_t dim = shard.getDim(), parts = shard.getParts();
  if (dim >= input.getRank())
    return emitOpError() << "shard dimension " << dim
                         << " is not a dimension of " << input;
  if (input.getElementType() != result.getElementType() ||
      input.getRank() != result.getRank())
    return emitOpError() << "result " << result
                         << " must have the weight's rank and element type";
  for (int64_t d = 0; d < input.getRank(); ++d) {
    const int64_t size = input.getDimSize(d);
    if (ShapedType::isDynamic(size))
      return emitOpError() << "shards a weight of static shape, got " << input;
    if (d == dim && size % parts != 0)
      return emitOpError() << "weight dimension " << d << " (" << size
                           << ") is not a multiple of the " << parts
                           << " parts";
    const int64_t expected = d == dim ? size / parts : size;
    if (result.getDimSize(d) != expected)
      return emitOpError() << "result dimension " << d << " is "
                           << result.getDimSize(d) << ", but this rank's part "
                           << "of " << input << " has " << expected;
  }
  return success();
}

LogicalResult AllReduceOp::verify() {
  Value bias = getBias();
  if (!bias)
    return success();
  auto input = cast<RankedTensorType>(getInput().getType());
  auto biasType = cast<RankedTensorType>(bias.getType());
  if (biasType.getRank() != 1 ||
      biasType.getDimSize(0) != input.getDimSize(input.getRank() - 1) ||
      biasType.getElementType() != input.getElementType())
    return emitOpError() << "bias " << biasType
                         << " must be one row of the input's last dimension "
                            "and element type ("
                         << input << ")";
  return success();
}

LogicalResult AllGatherOp::verify() {
  auto input = cast<RankedTensorType>(getInput().getType());
  auto result = cast<RankedTensorType>(getResult().getType());
  if (input.getRank() == 0 || input.getRank() != result.getRank() ||
      input.getElementType() != result.getElementType())
    return emitOpError() << "result " << result
                         << " must have the input's rank (>= 1) and element "
                            "type ("
                         << input << ")";
  const int64_t last = input.getRank() - 1;
  for (int64_t d = 0; d <= last; ++d) {
    int64_t size = input.getDimSize(d);
    if (d == last && !ShapedType::isDynamic(size))
      size *= getRanks();
    if (!ShapedType::isDynamic(size) &&
        !ShapedType::isDynamic(result.getDimSize(d)) &&
        result.getDimSize(d) != size)
      return emitOpError() << "result dimension " << d << " is "
                           << result.getDimSize(d) << ", but the " << getRanks()
                           << " ranks' parts make " << size;
  }
  return success();
}
