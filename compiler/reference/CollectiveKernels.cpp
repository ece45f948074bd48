//===- CollectiveKernels.cpp - Kernels of the tensor-parallel ops ---------===//
//
// One executor runs one rank. A program of one rank (sits.all_reduce and
// sits.all_gather over 1 rank, sits.shard of 1 part and 1 replica) runs as
// its ops' descriptions say; one of more ranks is refused with the number
// of ranks it needs, never run as if the other ranks held zeros.
//
//===----------------------------------------------------------------------===//

#include "compiler/reference/Kernels.h"

#include "dialects/sits/SitsOps.h"

using namespace mlir;
using namespace sits;
using namespace sits::reference;

static llvm::Error needsOneRank(const KernelContext &context, int64_t ranks) {
  return context.error("the program is tensor-parallel over " +
                       std::to_string(ranks) +
                       " ranks; the reference executor runs one");
}

static llvm::Error runShard(KernelContext &context) {
  auto op = cast<ShardOp>(context.getOp());
  ShardAttr shard = op.getShard();
  if (shard.getParts() * shard.getReplicas() != 1)
    return needsOneRank(context, shard.getParts() * shard.getReplicas());
  context.setResult(0, context.value(op.getWeight())); // passed through
  return llvm::Error::success();
}

static llvm::Error runAllReduce(KernelContext &context) {
  auto op = cast<AllReduceOp>(context.getOp());
  if (op.getRanks() != 1)
    return needsOneRank(context, op.getRanks());
  Value biasValue = op.getBias();
  if (!biasValue) {
    context.setResult(0, context.value(op.getInput())); // passed through
    return llvm::Error::success();
  }
  const Tensor &input = context.tensor(op.getInput());
  const Tensor &bias = context.tensor(biasValue);
  const int64_t width = input.getDim(input.getRank() - 1);
  if (bias.getRank() != 1 || bias.getDim(0) != width)
    return context.error("bias has shape " + formatShape(bias.getShape()) +
                         ", expected [" + std::to_string(width) + "]");
  Tensor result = context.makeResult(0, input.getShape());
  for (int64_t i = 0; i < input.getNumElements(); ++i)
    result.floats()[i] = input.floats()[i] + bias.floats()[i % width];
  context.setResult(0, std::move(result));
  return llvm::Error::success();
}

static llvm::Error runAllGather(KernelContext &context) {
  auto op = cast<AllGatherOp>(context.getOp());
  if (op.getRanks() != 1)
    return needsOneRank(context, op.getRanks());
  context.setResult(0, context.value(op.getInput())); // passed through
  return llvm::Error::success();
}

void sits::reference::attachCollectiveKernels(MLIRContext *context) {
  attachKernel<runShard, ShardOp>(context);
  attachKernel<runAllReduce, AllReduceOp>(context);
  attachKernel<runAllGather, AllGatherOp>(context);
}
