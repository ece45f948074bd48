//===- LinearLaunchesTest.cpp - Which decode kernels a launch gets --------===//
//
// The predicates the planner and planLinear share (codegen/Launches.h):
// which quantized decode GEMVs run on tensor cores (a 4-lane chunk of 64
// int8 or 128 int4 inputs inside one group, the scale tables beside the
// ring), which of them read x as f16 operands (rows of whole chunks, so
// interleaved), how split decode attention divides a sequence's keys,
// by default and as sitsc --decode-split-keys asks, and the prefill
// tensor-core GEMM's launch.
//
//===----------------------------------------------------------------------===//

#include "backends/cuda/KVQuantLaunches.h"

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

LinearShape decodeShape(int64_t k, std::vector<int64_t> rows, int bits = 0,
                        int64_t group = 0) {
  LinearShape shape;
  shape.decode = true;
  shape.tensorCores = true;
  shape.weightType = format::DType::F16;
  shape.k = k;
  shape.segmentRows = std::move(rows);
  shape.quantBits = bits;
  shape.quantGroup = group;
  return shape;
}

TEST(LinearKernelTest, SelectionFollowsWeightsTargetAndStep) {
  using kernel::KernelKind;
  // Llama-3-8B's QKV at decode: the tensor-core GEMV, one tile a block.
  LinearShape qkv = decodeShape(4096, {4096, 1024, 1024});
  EXPECT_EQ(selectLinearKernel(qkv).kernel, KernelKind::GemvTensorCore);
  EXPECT_EQ(selectLinearKernel(qkv).tiles, 1);
  // Its LM head (128256 rows, 8016 tiles): two tiles a block.
  LinearShape head = decodeShape(4096, {128256});
  head.gatherLast = true;
  EXPECT_EQ(selectLinearKernel(head).tiles, 2);
  // fp32 weights, sm_75, or K not a multiple of 8: no tensor cores.
  LinearShape f32 = qkv;
  f32.weightType = format::DType::F32;
  EXPECT_EQ(selectLinearKernel(f32).kernel, KernelKind::Gemv);
  LinearShape old = qkv;
  old.tensorCores = false;
  EXPECT_EQ(selectLinearKernel(old).kernel, KernelKind::Gemv);
  EXPECT_EQ(selectLinearKernel(decodeShape(4100, {64})).kernel,
            KernelKind::Gemv);
  // Prefill: the GEMM, over dequantized int4 weights too.
  LinearShape prefill = decodeShape(4096, {14336}, 4, 128);
  prefill.decode = false;
  EXPECT_EQ(selectLinearKernel(prefill).kernel, KernelKind::GemmTensorCore);
  // int4 at decode: groups of 128 on tensor cores, 64 not.
  EXPECT_EQ(selectLinearKernel(decodeShape(4096, {14336}, 4, 128)).kernel,
            KernelKind::GemvQuantTensorCore);
  EXPECT_EQ(selectLinearKernel(decodeShape(4096, {14336}, 4, 64)).kernel,
            KernelKind::GemvQuant);
  // Tiles asked for: at most 4 / matrices, as far as they fit.
  LinearShape gated = decodeShape(4096, {14336, 14336}, 4, 128);
  gated.gated = true;
  gated.quantTilesAsked = 4;
  EXPECT_EQ(selectLinearKernel(gated).tiles, 2);
  LinearShape down = decodeShape(14336, {4096}, 4, 128);
  down.quantTilesAsked = 4;
  EXPECT_EQ(selectLinearKernel(down).tiles, 4);
}

TEST(LinearKernelTest, TokenGroupsFollowMaxBatch) {
  using kernel::KernelKind;
  LinearShape qkv = decodeShape(4096, {4096, 1024, 1024});
  // Up to 8 tokens a step: one group; 9 to 16: two; 32 and more: four.
  for (auto [tokens, groups] : std::vector<std::pair<int64_t, int64_t>>{
           {0, 1}, {8, 1}, {9, 2}, {16, 2}, {24, 3}, {32, 4}, {64, 4}}) {
    qkv.maxTokens = tokens;
    EXPECT_EQ(selectLinearKernel(qkv).tokenGroups, groups) << tokens;
  }
  // The gate/up pair and the LM head with two tiles a block take them too.
  LinearShape gated = decodeShape(4096, {14336, 14336});
  gated.gated = true;
  gated.maxTokens = 32;
  EXPECT_EQ(selectLinearKernel(gated).tokenGroups, 4);
  LinearShape head = decodeShape(4096, {128256});
  head.gatherLast = true;
  head.maxTokens = 32;
  EXPECT_EQ(selectLinearKernel(head).tiles, 2);
  EXPECT_EQ(selectLinearKernel(head).tokenGroups, 4);
  // Asked for: that many, whatever max_batch says.
  qkv.tokenGroupsAsked = 1;
  EXPECT_EQ(selectLinearKernel(qkv).tokenGroups, 1);
  qkv.maxTokens = 2;
  qkv.tokenGroupsAsked = 3;
  EXPECT_EQ(selectLinearKernel(qkv).tokenGroups, 3);
  // Quantized and fp32 GEMVs keep one.
  LinearShape int4 = decodeShape(4096, {14336}, 4, 128);
  int4.maxTokens = 32;
  EXPECT_EQ(selectLinearKernel(int4).tokenGroups, 1);
  LinearShape f32 = decodeShape(4096, {4096});
  f32.weightType = format::DType::F32;
  f32.maxTokens = 32;
  EXPECT_EQ(selectLinearKernel(f32).tokenGroups, 1);
  // The ring: one group keeps the measured unroll and stages; more groups
  // take smaller steps in a deeper ring, 16 pieces in flight per lane.
  EXPECT_EQ(gemvTensorCoreRing(1, 1, 1).unroll, 4);
  EXPECT_EQ(gemvTensorCoreRing(1, 1, 1).stages, 3);
  EXPECT_EQ(gemvTensorCoreRing(2, 1, 1).unroll, 2);
  EXPECT_EQ(gemvTensorCoreRing(1, 1, 4).unroll, 1);
  EXPECT_EQ(gemvTensorCoreRing(1, 1, 4).stages, 9);
  EXPECT_EQ(gemvTensorCoreRing(2, 1, 4).unroll, 1);
  EXPECT_EQ(gemvTensorCoreRing(2, 1, 4).stages, 5);
  EXPECT_EQ(gemvTensorCoreRing(1, 2, 2).unroll, 1);
  EXPECT_EQ(gemvTensorCoreRing(1, 2, 2).stages, 5);
}

TEST(LinearKernelTest, CheckRefusesWhatAKernelCannotRun) {
  using kernel::KernelKind;
  LinearShape qkv = decodeShape(4096, {4096, 1024, 1024});
  EXPECT_EQ(checkLinearKernel(qkv, KernelKind::GemvTensorCore, 1, 1), "");
  EXPECT_EQ(checkLinearKernel(qkv, KernelKind::Gemv, 1, 1), "");
  EXPECT_NE(checkLinearKernel(qkv, KernelKind::GemmTensorCore, 1, 1), "");
  EXPECT_NE(checkLinearKernel(qkv, KernelKind::GemvQuant, 1, 1), "");
  EXPECT_NE(checkLinearKernel(qkv, KernelKind::Gemv, 2, 1), "");
  LinearShape f32 = qkv;
  f32.weightType = format::DType::F32;
  EXPECT_NE(checkLinearKernel(f32, KernelKind::GemvTensorCore, 1, 1), "");
  LinearShape int4 = decodeShape(4096, {14336}, 4, 64);
  EXPECT_NE(checkLinearKernel(int4, KernelKind::GemvQuantTensorCore, 1, 1), "");
  EXPECT_NE(checkLinearKernel(int4, KernelKind::Gemv, 1, 1), "");
  // Token groups: the 16-bit tensor-core GEMV only.
  EXPECT_EQ(checkLinearKernel(qkv, KernelKind::GemvTensorCore, 1, 4), "");
  EXPECT_NE(checkLinearKernel(qkv, KernelKind::Gemv, 1, 2), "");
  LinearShape int4tc = decodeShape(4096, {14336}, 4, 128);
  EXPECT_NE(checkLinearKernel(int4tc, KernelKind::GemvQuantTensorCore, 1, 2),
            "");
  // Every choice selectLinearKernel makes passes the check.
  LinearShape many = qkv;
  many.maxTokens = 32;
  LinearShape head = decodeShape(8, {33792});
  head.gatherLast = true;
  head.maxTokens = 24;
  for (LinearShape shape :
       {qkv, f32, int4, decodeShape(8, {33792}), many, head}) {
    LinearKernelChoice choice = selectLinearKernel(shape);
    EXPECT_EQ(checkLinearKernel(shape, choice.kernel, choice.tiles,
                                choice.tokenGroups),
              "")
        << choice.reason;
  }
}

/// A prefill GEMM of the Llama-3-8B shape (or another `k` and rows).
LinearShape prefillShape(int64_t k, std::vector<int64_t> rows,
                         bool gated = false) {
  LinearShape shape = decodeShape(k, std::move(rows));
  shape.decode = false;
  shape.gated = gated;
  return shape;
}

TEST(LinearKernelTest, GemmSplitsKWhereATokenTileHasFewBlocks) {
  using kernel::KernelKind;
  // Two blocks an SM of a 132-SM GPU wanted (264), at most 8 ways, each
  // split 8 steps of 32 inputs or more.
  LinearShape out = prefillShape(4096, {4096});             // 32 column tiles
  LinearShape qkv = prefillShape(4096, {4096, 1024, 1024}); // 48
  LinearShape gateUp = prefillShape(4096, {14336, 14336}, true); // 224
  LinearShape down = prefillShape(14336, {4096});                // 32
  LinearShape wide = prefillShape(4096, {128256});               // 1002
  LinearShape shortK = prefillShape(64, {64});                   // 2 steps of K
  LinearShape fewSteps = prefillShape(384, {64});                // 12 steps
  EXPECT_EQ(selectLinearKernel(out).kSplits, 8);
  EXPECT_EQ(selectLinearKernel(qkv).kSplits, 6);
  EXPECT_EQ(selectLinearKernel(gateUp).kSplits, 2);
  EXPECT_EQ(selectLinearKernel(down).kSplits, 8);
  EXPECT_EQ(selectLinearKernel(wide).kSplits, 1);
  EXPECT_EQ(selectLinearKernel(shortK).kSplits, 1);
  EXPECT_EQ(selectLinearKernel(fewSteps).kSplits, 1);
  EXPECT_NE(selectLinearKernel(out).reason.find("K split up to 8 ways"),
            std::string::npos)
      << selectLinearKernel(out).reason;
  // Asked for (--gemm-k-splits): at most one split a step of K.
  shortK.kSplitsAsked = 4;
  EXPECT_EQ(selectLinearKernel(shortK).kSplits, 2);
  out.kSplitsAsked = 1;
  EXPECT_EQ(selectLinearKernel(out).kSplits, 1);
  // The GEMV and the CUDA-core GEMM never split.
  EXPECT_EQ(selectLinearKernel(decodeShape(4096, {4096})).kSplits, 1);
  LinearShape f32 = prefillShape(4096, {4096});
  f32.weightType = format::DType::F32;
  EXPECT_EQ(selectLinearKernel(f32).kSplits, 1);
  // The check: gemm_tc only, 1 to 8, no split without a step.
  EXPECT_EQ(checkLinearKernel(qkv, KernelKind::GemmTensorCore, 1, 1, 8), "");
  EXPECT_NE(checkLinearKernel(qkv, KernelKind::GemmTensorCore, 1, 1, 9), "");
  EXPECT_NE(checkLinearKernel(qkv, KernelKind::GemmTensorCore, 1, 1, 0), "");
  EXPECT_NE(checkLinearKernel(f32, KernelKind::Gemm, 1, 1, 2), "");
  EXPECT_NE(checkLinearKernel(decodeShape(4096, {4096}),
                              KernelKind::GemvTensorCore, 1, 1, 2),
            "");
  EXPECT_NE(checkLinearKernel(prefillShape(64, {64}),
                              KernelKind::GemmTensorCore, 1, 1, 3),
            "");
  for (const LinearShape &shape : {qkv, gateUp, down, wide, fewSteps}) {
    LinearKernelChoice choice = selectLinearKernel(shape);
    EXPECT_EQ(checkLinearKernel(shape, choice.kernel, choice.tiles,
                                choice.tokenGroups, choice.kSplits),
              "")
        << choice.reason;
  }
}

TEST(GemmTensorCoreTest, SplitsFollowTokensAndMultiprocessors) {
  // The 8B shape's o_proj (32 column tiles) split up to 8 ways: grid.z is
  // what fills two blocks an SM, at most 8 slabs of partial sums in all.
  LinearLaunch desc;
  desc.tensorCores = true;
  desc.k = 4096;
  desc.weightType = format::DType::F16;
  desc.kernel = kernel::KernelKind::GemmTensorCore;
  desc.kSplits = 8;
  desc.partial = ArgBinding::bufferArg(BufferKind::Workspace, 0);
  desc.counters = ArgBinding::bufferArg(BufferKind::Counters);
  LinearSegment segment;
  segment.rows = 4096;
  desc.segments.push_back(segment);
  const PlannedLaunch planned = planLinear(desc);
  auto splits = [&](int64_t tokens, int64_t multiprocessors) {
    int64_t z = -1;
    std::string error;
    EXPECT_TRUE(format::evalExpr(
        planned.launch.grid[2],
        format::makePackedSymbols(1, tokens, tokens, multiprocessors), &z,
        &error))
        << error;
    return z;
  };
  EXPECT_EQ(splits(1, 132), 8); // 32 blocks: 8 ways gives 256
  EXPECT_EQ(splits(128, 132), 8);
  EXPECT_EQ(splits(129, 132), 4); // two token tiles: 4 slabs each
  EXPECT_EQ(splits(384, 132), 2); // three: floor(264 / 96)
  EXPECT_EQ(splits(512, 132), 2);
  EXPECT_EQ(splits(640, 132), 1); // five: enough blocks
  EXPECT_EQ(splits(4096, 132), 1);
  EXPECT_EQ(splits(128, 16), 1); // a small GPU: 32 blocks are enough
  EXPECT_EQ(splits(128, 40), 2);
  // Unsplit, grid.z is 1.
  desc.kSplits = 1;
  const PlannedLaunch plain = planLinear(desc);
  int64_t z = -1;
  std::string error;
  EXPECT_TRUE(format::evalExpr(plain.launch.grid[2],
                               format::makeSymbols(1, 1, 132), &z, &error));
  EXPECT_EQ(z, 1);
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

TEST(GemmTensorCoreTest, LaunchHasTheRingAndTwoBlocksFitAnSM) {
  // The Llama-3-8B gate/up pair at prefill.
  LinearLaunch desc;
  desc.tensorCores = true;
  desc.k = 4096;
  desc.weightType = format::DType::BF16;
  desc.epilogue = LinearEpilogue::Glu;
  desc.kernel = kernel::KernelKind::GemmTensorCore;
  for (unsigned w = 0; w < 2; ++w) {
    LinearSegment segment;
    segment.weight = w;
    segment.rows = 14336;
    desc.segments.push_back(segment);
  }
  const PlannedLaunch planned = planLinear(desc);
  EXPECT_EQ(planned.spec.family, "gemm_glu");
  EXPECT_EQ(planned.spec.threads, kGemmTensorCoreThreads);
  EXPECT_EQ(planned.spec.minBlocks, 2);
  int64_t bytes = -1;
  std::string error;
  EXPECT_TRUE(format::evalExpr(planned.launch.sharedBytes,
                               format::makeSymbols(1, 1, 132), &bytes, &error))
      << error;
  // Three stages of 128 f32 token rows and 128 16-bit weight rows, each
  // padded from 32 to 40 elements: 90 KiB, two blocks in an H100 SM's
  // 228 KiB (1 KiB of it reserved per block).
  EXPECT_EQ(bytes, gemmTensorCoreSharedBytes(kGemmTensorCoreStages, false));
  EXPECT_EQ(bytes, 3 * 128 * 40 * (4 + 2));
  EXPECT_LE(2 * (bytes + 1024), 228 * 1024);
  auto hasMember = [](const PlannedLaunch &launch, const std::string &text) {
    for (const std::string &member : launch.spec.config)
      if (member.find(text) != std::string::npos)
        return true;
    return false;
  };
  EXPECT_TRUE(hasMember(planned, "kHalfX = false"));
  EXPECT_TRUE(hasMember(planned, "kOutOperandBits = 0"));

  // Its input as 16-bit operand rows (an rms_norm's), its output too (for
  // the down projection's GEMM): the x rows of a stage take half the bytes.
  desc.inputOperandBits = 16;
  desc.outputOperandBits = 16;
  const PlannedLaunch halves = planLinear(desc);
  EXPECT_TRUE(format::evalExpr(halves.launch.sharedBytes,
                               format::makeSymbols(1, 1, 132), &bytes, &error))
      << error;
  EXPECT_EQ(bytes, gemmTensorCoreSharedBytes(kGemmTensorCoreStages, true));
  EXPECT_EQ(bytes, 3 * 128 * 40 * (2 + 2));
  EXPECT_TRUE(hasMember(halves, "kHalfX = true"));
  EXPECT_TRUE(hasMember(halves, "kOutOperandBits = 16"));
  EXPECT_EQ(halves.spec.params.front().type, "const unsigned short *");
  bool halfOut = false;
  for (const KernelParam &param : halves.spec.params)
    halfOut |= param.name == "out0" && param.type == "unsigned short *";
  EXPECT_TRUE(halfOut);
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

TEST(AttentionKernelTest, SelectionByStepShapeAndCache) {
  using kernel::KernelKind;
  format::KVCacheConfig plain;
  plain.headDim = 128;
  // Llama-3-8B at decode: split, 256 keys a block; at prefill: flash.
  AttentionLaunch decode = decodeAttention(8448, 0);
  decode.sixteenBitMath = true;
  AttentionKernelChoice choice = selectAttentionKernel(decode, plain);
  EXPECT_EQ(choice.kernel, KernelKind::AttentionSplit);
  EXPECT_EQ(choice.splitKeys, 256);
  AttentionLaunch prefill = decode;
  prefill.decode = false;
  EXPECT_EQ(selectAttentionKernel(prefill, plain).kernel,
            KernelKind::AttentionFlash);
  // 16 query heads per KV head: the tiled kernel at decode.
  AttentionLaunch wide = decode;
  wide.heads = 128;
  EXPECT_EQ(selectAttentionKernel(wide, plain).kernel, KernelKind::Attention);
  // A quantized cache (int4 in groups of 32): on tensor cores in an fp16
  // engine, not in bf16; tiled at prefill.
  format::KVCacheConfig int4;
  int4.headDim = 128;
  int4.coldBits = 4;
  int4.groupSize = 32;
  int4.dtype = format::DType::F16;
  EXPECT_EQ(selectAttentionKernel(decode, int4).kernel,
            KernelKind::AttentionKVQMma);
  format::KVCacheConfig bf16 = int4;
  bf16.dtype = format::DType::BF16;
  AttentionLaunch decodeBf16 = decode;
  decodeBf16.cacheType = format::DType::BF16;
  EXPECT_EQ(selectAttentionKernel(decodeBf16, bf16).kernel,
            KernelKind::AttentionKVQSplit);
  EXPECT_EQ(selectAttentionKernel(prefill, int4).kernel,
            KernelKind::AttentionKVQ);
}

TEST(AttentionKernelTest, CheckRefusesWhatAKernelCannotRun) {
  using kernel::KernelKind;
  format::KVCacheConfig plain;
  plain.headDim = 128;
  AttentionLaunch decode = decodeAttention(8448, 0);
  decode.sixteenBitMath = true;
  EXPECT_EQ(
      checkAttentionKernel(decode, plain, KernelKind::AttentionSplit, 512), "");
  EXPECT_EQ(checkAttentionKernel(decode, plain, KernelKind::Attention, 0), "");
  EXPECT_NE(checkAttentionKernel(decode, plain, KernelKind::AttentionFlash, 0),
            "");
  EXPECT_NE(checkAttentionKernel(decode, plain, KernelKind::AttentionKVQ, 0),
            "");
  EXPECT_NE(checkAttentionKernel(decode, plain, KernelKind::AttentionSplit, 0),
            "");
  EXPECT_NE(checkAttentionKernel(decode, plain, KernelKind::Attention, 256),
            "");
  AttentionLaunch f32 = decode;
  f32.cacheType = format::DType::F32;
  EXPECT_NE(checkAttentionKernel(f32, plain, KernelKind::AttentionSplit, 256),
            "");
  // Every choice selectAttentionKernel makes passes the check.
  AttentionLaunch prefill = decode;
  prefill.decode = false;
  for (const AttentionLaunch &desc : {decode, prefill, f32}) {
    AttentionKernelChoice choice = selectAttentionKernel(desc, plain);
    EXPECT_EQ(
        checkAttentionKernel(desc, plain, choice.kernel, choice.splitKeys), "")
        << choice.reason;
  }
}

} // namespace
