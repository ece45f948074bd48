//===- CollectiveKernels.cpp - Kernels of the tensor-parallel ops ---------===//
//
// One executor runs one rank. Where it is one of a tensor-parallel
// program's ranks (TensorParallel.h), the collectives meet the other ranks'
// executors through their RankGroup. Otherwise a program of one rank
// (sits.all_reduce and sits.all_gather over 1 rank, sits.shard of 1 part
// and 1 replica) runs as its ops' descriptions say, and one of more is
// refused, never run as if the other ranks held zeros.
//
//===----------------------------------------------------------------------===//

#include "compiler/reference/Kernels.h"
#include "compiler/reference/RankGroup.h"

#include "dialects/sits/SitsOps.h"

using namespace mlir;
using namespace sits;
using namespace sits::reference;

static llvm::Error needsOneRank(const KernelContext &context, int64_t ranks) {
  return context.error("the program is tensor-parallel over " +
                       std::to_string(ranks) +
                       " ranks; the reference executor runs one");
}

/// Whether the op's collective has a group to meet: an error when it needs
/// ranks the executor does not run.
static llvm::Expected<bool> meetsOtherRanks(const KernelContext &context,
                                            int64_t ranks) {
  RankGroup *group = context.getRankGroup();
  if (!group)
    return ranks == 1 ? llvm::Expected<bool>(false)
                      : llvm::Expected<bool>(needsOneRank(context, ranks));
  if (group->getSize() != ranks)
    return context.error("the collective is over " + std::to_string(ranks) +
                         " ranks, but the program runs on " +
                         std::to_string(group->getSize()));
  return true;
}

static llvm::Error runShard(KernelContext &context) {
  auto op = cast<ShardOp>(context.getOp());
  ShardAttr shard = op.getShard();
  const int64_t ranks = shard.getParts() * shard.getReplicas();
  if (ranks == 1) {
    context.setResult(0, context.value(op.getWeight())); // passed through
    return llvm::Error::success();
  }
  if (context.getRankGroup())
    return context.error("a rank's program still holds sits.shard: it must "
                         "be specialized for the rank first");
  return needsOneRank(context, ranks);
}

static llvm::Error runAllReduce(KernelContext &context) {
  auto op = cast<AllReduceOp>(context.getOp());
  llvm::Expected<bool> meets = meetsOtherRanks(context, op.getRanks());
  if (!meets)
    return meets.takeError();
  Value biasValue = op.getBias();
  if (!*meets && !biasValue) {
    context.setResult(0, context.value(op.getInput())); // passed through
    return llvm::Error::success();
  }
  const Tensor &input = context.tensor(op.getInput());
  std::vector<float> sum(input.floats().begin(), input.floats().end());
  if (*meets) {
    if (std::string error =
            context.getRankGroup()->allReduce(context.getRank(), sum);
        !error.empty())
      return context.error(error);
  }
  const int64_t width = input.getDim(input.getRank() - 1);
  const float *bias = nullptr;
  if (biasValue) {
    const Tensor &biasTensor = context.tensor(biasValue);
    if (biasTensor.getRank() != 1 || biasTensor.getDim(0) != width)
      return context.error("bias has shape " +
                           formatShape(biasTensor.getShape()) + ", expected [" +
                           std::to_string(width) + "]");
    bias = biasTensor.floats().data();
  }
  // The sum in f32, the bias added once, then rounded to the result type.
  Tensor result = context.makeResult(0, input.getShape());
  for (int64_t i = 0; i < input.getNumElements(); ++i)
    result.floats()[i] = sum[i] + (bias ? bias[i % width] : 0.0f);
  context.setResult(0, std::move(result));
  return llvm::Error::success();
}

static llvm::Error runAllGather(KernelContext &context) {
  auto op = cast<AllGatherOp>(context.getOp());
  llvm::Expected<bool> meets = meetsOtherRanks(context, op.getRanks());
  if (!meets)
    return meets.takeError();
  if (!*meets) {
    context.setResult(0, context.value(op.getInput())); // passed through
    return llvm::Error::success();
  }
  const Tensor &input = context.tensor(op.getInput());
  Shape shape(input.getShape().begin(), input.getShape().end());
  const int64_t width = shape.back();
  const int64_t rows = width == 0 ? 0 : input.getNumElements() / width;
  if (rows == 0)
    return context.error("the gathered value " + formatShape(shape) +
                         " is empty");
  std::vector<float> gathered(input.floats().begin(), input.floats().end());
  if (std::string error =
          context.getRankGroup()->allGather(context.getRank(), rows, gathered);
      !error.empty())
    return context.error(error);
  shape.back() = width * op.getRanks();
  Tensor result = context.makeResult(0, shape);
  std::copy(gathered.begin(), gathered.end(), result.floats().begin());
  context.setResult(0, std::move(result));
  return llvm::Error::success();
}

void sits::reference::attachCollectiveKernels(MLIRContext *context) {
  attachKernel<runShard, ShardOp>(context);
  attachKernel<runAllReduce, AllReduceOp>(context);
  attachKernel<runAllGather, AllGatherOp>(context);
}
