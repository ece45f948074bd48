//===- KVQuantLaunchesTest.cpp - Decode attention over a quantized cache --===//
//
// Which split decode kernel selectAttentionKernel gives a quantized cache
// (and planAttentionKVQ launches): the
// tensor-core one (attention_decode_kvq_mma.cuh) only for f16 engines with
// at most 8 query heads per KV head and head_dim at most 128 made of whole
// scale groups of a multiple of 32 channels (each lane's share of a group is
// whole words); other split shapes the f32 kernel (attention_decode_kvq.cuh),
// and shapes no split kernel takes the tiled one (attention_kvq.cuh). And
// the tensor-core kernel's block and shared memory: 8 warps, their merge
// [warp][head][head_dim + 3] floats and a ring of two tiles' value copies.
//
//===----------------------------------------------------------------------===//

#include "backends/cuda/KVQuantLaunches.h"

#include <gtest/gtest.h>

using namespace sits;
using namespace sits::codegen;

namespace {

struct Shape {
  int64_t heads = 32, kvHeads = 8, headDim = 128, group = 64;
  bool sixteenBitMath = true;
  format::DType hot = format::DType::F16;
};

PlannedLaunch planDecode(const Shape &shape) {
  format::KVCacheConfig kv;
  kv.layers = 1;
  kv.maxBatch = 1;
  kv.kvHeads = static_cast<uint32_t>(shape.kvHeads);
  kv.capacity = 8448;
  kv.headDim = static_cast<uint32_t>(shape.headDim);
  kv.dtype = shape.hot;
  kv.coldBits = 4;
  kv.hotWindow = 512;
  kv.hotRows = 512 + 63 + 256;
  kv.groupSize = static_cast<uint32_t>(shape.group);
  kv.perChannelKeys = true;
  kv.channelBlock = 64;
  AttentionLaunch desc;
  desc.decode = true;
  desc.heads = shape.heads;
  desc.kvHeads = shape.kvHeads;
  desc.headDim = shape.headDim;
  desc.capacity = kv.capacity;
  desc.cacheType = shape.hot;
  desc.scale = 0.125f;
  desc.tensorCores = true;
  desc.sixteenBitMath = shape.sixteenBitMath;
  AttentionKernelChoice choice = selectAttentionKernel(desc, kv);
  EXPECT_EQ(checkAttentionKernel(desc, kv, choice.kernel, choice.splitKeys),
            "");
  desc.kernel = choice.kernel;
  desc.splitKeys = choice.splitKeys;
  desc.partial = ArgBinding::bufferArg(BufferKind::Workspace, 0, 0);
  std::string error;
  std::optional<PlannedLaunch> planned = planAttentionKVQ(desc, kv, &error);
  EXPECT_TRUE(planned.has_value()) << error;
  return planned ? *planned : PlannedLaunch();
}

int64_t sharedBytes(const PlannedLaunch &planned) {
  int64_t bytes = -1;
  std::string error;
  EXPECT_TRUE(evalExpr(planned.launch.sharedBytes,
                       format::makeSymbols(1, 1, 132), &bytes, &error))
      << error;
  return bytes;
}

TEST(KVQuantLaunchesTest, TheEightBShapeTakesTheTensorCoreKernel) {
  const PlannedLaunch planned = planDecode(Shape());
  EXPECT_EQ(planned.spec.family, "attention_decode_kvq_mma");
  EXPECT_EQ(planned.spec.threads, 256);
  EXPECT_EQ(planned.spec.minBlocks, 2);
  // 8 warps' merge states, then two tiles' value copies per lane (4 keys
  // of 2 groups of 4 bytes, 2 key slots' 2 scales).
  EXPECT_EQ(sharedBytes(planned),
            4 * 8 * 4 * (128 + 3) + 2 * 256 * (4 * 2 * 4 + 2 * 4));
}

TEST(KVQuantLaunchesTest, WholeGroupsOfThirtyTwoChannelsTakeIt) {
  Shape small;
  small.heads = 4;
  small.kvHeads = 2;
  small.headDim = 32;
  small.group = 32;
  EXPECT_EQ(planDecode(small).spec.family, "attention_decode_kvq_mma");
}

TEST(KVQuantLaunchesTest, OtherShapesTakeTheF32Kernel) {
  Shape groupsOf16;
  groupsOf16.headDim = 32;
  groupsOf16.group = 16;
  Shape wideHeads;
  wideHeads.headDim = 256;
  Shape f32Math;
  f32Math.sixteenBitMath = false;
  Shape bf16Hot;
  bf16Hot.hot = format::DType::BF16;
  for (const Shape &shape : {groupsOf16, wideHeads, f32Math, bf16Hot}) {
    const PlannedLaunch planned = planDecode(shape);
    EXPECT_EQ(planned.spec.header, "sits/attention_decode_kvq.cuh")
        << "head_dim " << shape.headDim << ", group " << shape.group;
    EXPECT_EQ(planned.spec.threads, 128);
  }
}

TEST(KVQuantLaunchesTest, ShapesNoSplitKernelTakesTakeTheTiledKernel) {
  // No split kernel takes 16 query heads per KV head or a head_dim that is
  // not a power of two (decodeSplitOf), so partial results given anyway are
  // not used.
  Shape manyHeads;
  manyHeads.heads = 64;
  manyHeads.kvHeads = 4;
  Shape partialGroup; // 96 channels: a group of 64 and one of 32
  partialGroup.headDim = 96;
  for (const Shape &shape : {manyHeads, partialGroup}) {
    const PlannedLaunch planned = planDecode(shape);
    EXPECT_EQ(planned.spec.header, "sits/attention_kvq.cuh")
        << "head_dim " << shape.headDim << ", " << shape.heads / shape.kvHeads
        << " heads per KV head";
    EXPECT_EQ(planned.spec.family, "attention_decode_kvq");
  }
}

} // namespace
