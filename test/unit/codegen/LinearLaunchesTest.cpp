//===- LinearLaunchesTest.cpp - Which decode kernels a launch gets --------===//
//
// The predicates the planner and planLinear share (codegen/Launches.h):
// which quantized decode GEMVs run on tensor cores (a 4-lane chunk of 64
// int8 or 128 int4 inputs inside one group, the scale tables beside the
// ring), which of them read x as f16 operands (rows of whole chunks, so
// interleaved), and how split decode attention divides a sequence's keys,
// by default and as sitsc --decode-split-keys asks.
//
//===----------------------------------------------------------------------===//

#include "backends/cuda/Launches.h"

#include <gtest/gtest.h>

#include <string>

using namespace sits;
using namespace sits::codegen;

namespace {

TEST(QuantGemvTest, TensorCoresNeedAChunkInsideAGroup) {
  // Llama-3-8B: hidden 4096, intermediate 14336, group 128.
  EXPECT_TRUE(quantGemvOnTensorCores(4, 128, 4096, /*gated=*/true));
  EXPECT_TRUE(quantGemvOnTensorCores(4, 128, 14336, /*gated=*/false));
  EXPECT_TRUE(quantGemvOnTensorCores(8, 64, 4096, /*gated=*/true));
  // int4 chunks are 128 inputs: a group of 64 splits them.
  EXPECT_FALSE(quantGemvOnTensorCores(4, 64, 4096, /*gated=*/false));
  EXPECT_FALSE(quantGemvOnTensorCores(8, 32, 4096, /*gated=*/false));
  // Not quantized.
  EXPECT_FALSE(quantGemvOnTensorCores(0, 0, 4096, /*gated=*/false));
}

TEST(QuantGemvTest, ScaleTablesMustFitBesideTheRing) {
  // K = 14336 fits with a gated pair's two tables; K = 2^20 in groups of
  // 128 (8192 scales a row) fits neither way.
  EXPECT_TRUE(quantGemvOnTensorCores(4, 128, 14336, /*gated=*/true));
  EXPECT_FALSE(quantGemvOnTensorCores(4, 128, 1 << 20, /*gated=*/true));
  EXPECT_FALSE(quantGemvOnTensorCores(4, 128, 1 << 20, /*gated=*/false));
}

TEST(QuantGemvTest, HalfOperandsNeedWholeChunks) {
  // The committed models' intermediate (344) is no whole number of chunks;
  // 384 is, of 64 (int8) and 128 (int4).
  EXPECT_FALSE(quantGemvReadsHalfOperands(4, 128, 344));
  EXPECT_FALSE(quantGemvReadsHalfOperands(8, 64, 344));
  EXPECT_TRUE(quantGemvReadsHalfOperands(4, 128, 384));
  EXPECT_TRUE(quantGemvReadsHalfOperands(8, 64, 384));
  EXPECT_FALSE(quantGemvReadsHalfOperands(4, 128, 320)); // 2.5 int4 chunks
  EXPECT_TRUE(quantGemvReadsHalfOperands(8, 64, 320));
  EXPECT_TRUE(quantGemvReadsHalfOperands(4, 128, 14336));
  // Every reader of f16 operands runs on tensor cores.
  EXPECT_FALSE(quantGemvReadsHalfOperands(4, 64, 4096));
  EXPECT_FALSE(quantGemvReadsHalfOperands(0, 0, 4096));
}

AttentionLaunch decodeAttention(int64_t capacity, int64_t splitKeys) {
  AttentionLaunch desc;
  desc.decode = true;
  desc.heads = 32;
  desc.kvHeads = 8;
  desc.headDim = 128;
  desc.capacity = capacity;
  desc.cacheType = format::DType::F16;
  desc.tensorCores = true;
  desc.splitKeys = splitKeys;
  return desc;
}

/// decodeSplitOf at `capacity` with `asked` keys a split (0: its own
/// choice) gives `keys` a split, `splits` of them, and room for every
/// split's partial result of every query head.
void expectSplit(int64_t capacity, int64_t asked, int64_t keys,
                 int64_t splits) {
  SCOPED_TRACE("capacity " + std::to_string(capacity) + ", asked " +
               std::to_string(asked));
  std::optional<DecodeSplit> split =
      decodeSplitOf(decodeAttention(capacity, asked));
  ASSERT_TRUE(split.has_value());
  EXPECT_EQ(split->splitKeys, keys);
  EXPECT_EQ(split->splits, splits);
  EXPECT_EQ(split->partialWidth, 32 * splits * (128 + 4));
}

TEST(DecodeSplitTest, DefaultIs256KeysFewerForSmallCaches) {
  expectSplit(8448, 0, 256, 33);
  expectSplit(128, 0, 32, 4);
}

TEST(DecodeSplitTest, AskedKeysPerSplit) {
  expectSplit(8448, 512, 512, 17);
  // Longer than the cache: one split.
  expectSplit(128, 1024, 1024, 1);
  // No split kernel for an f32 cache, whatever was asked.
  AttentionLaunch f32 = decodeAttention(8448, 512);
  f32.cacheType = format::DType::F32;
  EXPECT_FALSE(decodeSplitOf(f32).has_value());
}

} // namespace
