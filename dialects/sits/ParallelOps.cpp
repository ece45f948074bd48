//===- ParallelOps.cpp - Verifiers of the tensor-parallel ops -------------===//
//
// sits.shard, sits.all_reduce and sits.all_gather, and the #sits.shard
// attribute: a rank's part of a weight and the collectives between ranks.
//
//===----------------------------------------------------------------------===//

#include "dialects/sits/SitsOps.h"

using namespace mlir;
using namespace sits;

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
