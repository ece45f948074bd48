//===- ValidateTest.cpp - Every way an engine is rejected -----------------===//

#include "TestEngines.h"
#include "sits/Json.h"

#include <gtest/gtest.h>

#include <random>

using namespace sits;
using namespace sits::format;

namespace {

class ValidateTest : public ::testing::Test {
protected:
  void SetUp() override {
    contents = test::buildToyEngine(config, test::makeToyWeights(config),
                                    test::placeholderModule(config));
  }

  /// Reads `bytes`; returns the error ("" when valid).
  static std::string readError(std::vector<uint8_t> bytes) {
    auto file = EngineFile::fromBytes(std::move(bytes));
    Header header;
    EngineContents read;
    RuntimeConfig rc;
    std::string error;
    return readEngine(*file, {}, &header, &read, &rc, &error) ? "" : error;
  }
  std::string corruptedError(test::Corruption corruption) {
    std::vector<uint8_t> bytes = test::serializeOrDie(contents);
    test::corrupt(bytes, corruption);
    return readError(bytes);
  }
  /// Serializes `contents` (after a change) and reads it back.
  std::string changedError() {
    std::vector<uint8_t> bytes;
    std::string error;
    if (!serializeEngine(contents, &bytes, &error))
      return "serialize: " + error;
    return readError(bytes);
  }

  test::ToyConfig config;
  EngineContents contents;
};

#define EXPECT_ERROR(expr, text)                                               \
  do {                                                                         \
    std::string message_ = (expr);                                             \
    EXPECT_NE(message_.find(text), std::string::npos)                          \
        << "expected \"" << (text) << "\" in \"" << message_ << "\"";          \
  } while (0)

TEST_F(ValidateTest, ValidEngineIsAccepted) {
  EXPECT_EQ(corruptedError(test::Corruption::None), "");
}

TEST_F(ValidateTest, EachCorruptionHasItsOwnMessage) {
  EXPECT_ERROR(corruptedError(test::Corruption::Truncated),
               "engine is truncated");
  EXPECT_ERROR(corruptedError(test::Corruption::FlippedByte),
               "content hash mismatch");
  EXPECT_ERROR(corruptedError(test::Corruption::WrongMagic), "wrong magic");
  EXPECT_ERROR(corruptedError(test::Corruption::NewerMajor),
               "has major version 2, this runtime reads 1.x only (update the "
               "runtime)");
  EXPECT_ERROR(corruptedError(test::Corruption::NewerMinor),
               "engine format 1." + std::to_string(kFormatMinor + 1) +
                   " is newer than this runtime's 1." +
                   std::to_string(kFormatMinor));
  EXPECT_ERROR(corruptedError(test::Corruption::SectionOutOfBounds),
               "section 3 (weights) is out of bounds");
  EXPECT_ERROR(corruptedError(test::Corruption::BadPlan),
               "plan section: the number of buffers");
}

TEST_F(ValidateTest, TinyAndEmptyFiles) {
  EXPECT_ERROR(readError({}), "engine file is empty");
  std::vector<uint8_t> bytes = test::serializeOrDie(contents);
  bytes.resize(60);
  EXPECT_ERROR(readError(bytes), "less than its 128-byte header");
  bytes.resize(3);
  EXPECT_ERROR(readError(bytes), "wrong magic");
  bytes = test::serializeOrDie(contents);
  bytes.push_back(0);
  EXPECT_ERROR(readError(bytes), "1 unexpected bytes after its end");
}

TEST_F(ValidateTest, TargetSmRule) {
  bool usePtx = true;
  std::string error;
  EXPECT_TRUE(checkTargetSm(90, 90, false, &usePtx, &error));
  EXPECT_FALSE(usePtx);
  EXPECT_TRUE(checkTargetSm(80, 86, false, &usePtx, &error)); // same major
  EXPECT_FALSE(usePtx);
  EXPECT_FALSE(checkTargetSm(86, 80, true, &usePtx, &error));
  EXPECT_ERROR(error, "compiled for sm_86 but this GPU is sm_80");
  EXPECT_FALSE(checkTargetSm(80, 90, false, &usePtx, &error));
  EXPECT_ERROR(error, "no PTX to JIT-compile");
  EXPECT_TRUE(checkTargetSm(80, 90, true, &usePtx, &error));
  EXPECT_TRUE(usePtx);
  EXPECT_FALSE(checkTargetSm(100, 90, true, &usePtx, &error));
  EXPECT_ERROR(error, "compiled for sm_100 but this GPU is sm_90");
}

TEST_F(ValidateTest, ModulesAndKernels) {
  contents.modules[0].sm = 80;
  EXPECT_ERROR(changedError(),
               "holds a cubin for sm_80 in an engine for sm_90");
  SetUp();
  contents.modules[0].cubin.clear();
  EXPECT_ERROR(changedError(), "has neither a cubin nor PTX");
  SetUp();
  contents.kernels[1].module = 3;
  EXPECT_ERROR(changedError(), "refers to module 3 of 1");
  SetUp();
  contents.programs[1].launches[0].kernel = 9;
  EXPECT_ERROR(changedError(),
               "launch 0 of program \"prefill\" refers to kernel 9");
}

TEST_F(ValidateTest, Buffers) {
  contents.buffers[0].offset = 4;
  EXPECT_ERROR(changedError(), "not a multiple of 256");
  SetUp();
  contents.buffers[4].bytes += 1024 * 1024;
  EXPECT_ERROR(changedError(), "lies outside the weights section");
  SetUp();
  contents.buffers[4].offset = UINT64_MAX - 255; // offset + bytes overflows
  EXPECT_ERROR(changedError(), "lies outside the weights section");
  SetUp();
  contents.buffers[8].bytes -= 4; // logits
  EXPECT_ERROR(changedError(), "(logits) has 8188 bytes, needs at least 8192");
  SetUp();
  contents.buffers[9].bytes *= 2; // key cache
  EXPECT_ERROR(changedError(), "the metadata needs exactly");
  SetUp();
  contents.buffers[5].dtype = DType::I64; // token ids
  EXPECT_ERROR(changedError(), "must have element type i32");
  SetUp();
  contents.buffers[8].role = BufferRole::Activation; // no logits buffer
  EXPECT_ERROR(changedError(), "exactly one \"logits\" buffer, it has 0");
  SetUp();
  contents.buffers[11].role = static_cast<BufferRole>(42);
  EXPECT_ERROR(changedError(), "unknown role 42");
  SetUp();
  contents.programs[1].launches[0].args[0].buffer = 99;
  EXPECT_ERROR(changedError(), "argument 0 refers to buffer 99");
  SetUp();
  contents.programs[1].launches[0].args[0].offset = 1u << 20;
  EXPECT_ERROR(changedError(), "bytes into buffer \"input_ids\"");
}

TEST_F(ValidateTest, ShapesMatchBytes) {
  // Weights and caches: exactly their bytes; the rest: at most.
  ASSERT_EQ(contents.buffers[0].role, BufferRole::Weight);
  uint64_t dims = contents.buffers[0].shape[1];
  contents.buffers[0].shape = {UINT64_MAX, dims};
  EXPECT_ERROR(changedError(), "whose element count overflows 64 bits");
  SetUp();
  contents.buffers[0].shape = {0, dims};
  EXPECT_ERROR(changedError(), "with a zero dimension, but holds");
  SetUp();
  contents.buffers[0].shape = {1, dims};
  EXPECT_ERROR(changedError(), "which does not match its");
  SetUp();
  contents.buffers[0].shape = {uint64_t(1) << 62, 2}; // x 4 bytes overflows
  EXPECT_ERROR(changedError(), "which does not match its");
  SetUp();
  contents.buffers[9].shape[0] = 2; // key cache
  EXPECT_ERROR(changedError(), "which does not match its");
  SetUp();
  ASSERT_EQ(contents.buffers[14].name, "consts");
  contents.buffers[14].shape = {UINT64_MAX};
  EXPECT_ERROR(changedError(), "of f32, which does not fit in its 16 bytes");
  SetUp();
  contents.buffers[14].shape = {2}; // smaller than the bytes: allowed
  EXPECT_EQ(changedError(), "");
  contents.buffers[14].shape = {};
  EXPECT_EQ(changedError(), "");
}

TEST_F(ValidateTest, DeviceBuffersAreBounded) {
  ASSERT_EQ(contents.buffers[14].name, "consts");
  contents.buffers[14].bytes = uint64_t(1) << 62;
  EXPECT_ERROR(changedError(), "(\"consts\") has 4611686018427387904 bytes, "
                               "more than the 2^48 a GPU can address");
  SetUp();
  contents.buffers[14].bytes = uint64_t(1) << 48; // alone: allowed
  EXPECT_ERROR(changedError(), "brings the device buffers to");
  SetUp();
  contents.buffers[14].bytes = (uint64_t(1) << 47) + 4;
  contents.buffers[13].bytes = uint64_t(1) << 47;
  EXPECT_ERROR(changedError(), "(\"consts\") brings the device buffers to");
  // Weights are bounded by the file instead.
  SetUp();
  contents.buffers[0].bytes = uint64_t(1) << 50;
  EXPECT_ERROR(changedError(), "lies outside the weights section");
}

TEST_F(ValidateTest, NamesAndMetadataAreUtf8) {
  contents.buffers[12].name = "q\xff";
  EXPECT_ERROR(changedError(), "the name of buffer 12 is not valid UTF-8 "
                               "(byte 1)");
  SetUp();
  contents.kernels[1].function = "toy_\xc0\x80"; // overlong NUL
  EXPECT_ERROR(changedError(), "the function name of kernel 1 is not valid");
  SetUp();
  contents.programs[1].name = "\xed\xa0\x80"; // a surrogate
  EXPECT_ERROR(changedError(), "the name of program 1 is not valid UTF-8");
  SetUp();
  contents.modules[0].name = "m\xf4\x90\x80\x80"; // past U+10FFFF
  EXPECT_ERROR(changedError(), "the name of module 0 is not valid UTF-8");
  SetUp();
  std::string good = contents.metadataJson;
  contents.metadataJson = good;
  contents.metadataJson.insert(1, "\"x\": \"\xe2\x82\", ");
  EXPECT_ERROR(changedError(), "metadata is not valid UTF-8 (byte 7)");
  SetUp();
  contents.buffers[12].name = "q\xe2\x82\xac\xf0\x9f\x98\x80"; // euro, emoji
  EXPECT_EQ(changedError(), "");
}

TEST_F(ValidateTest, QuantizedWeightBuffers) {
  // int8 levels and packed int4 levels: [rows, row bytes], row bytes a
  // multiple of 16, exactly rows x row bytes bytes, weights only.
  ASSERT_EQ(contents.buffers[0].role, BufferRole::Weight);
  uint64_t bytes = contents.buffers[0].bytes;
  for (DType type : {DType::I8, DType::I4X2}) {
    SetUp();
    contents.buffers[0].dtype = type;
    contents.buffers[0].shape = {bytes / 64, 64};
    EXPECT_EQ(changedError(), "");
    contents.buffers[0].shape = {bytes / 32 / 2, 32, 2};
    EXPECT_ERROR(changedError(), "must be [rows, row bytes] with row bytes a "
                                 "multiple of 16");
    contents.buffers[0].shape = {bytes / 64 / 2, 64};
    EXPECT_ERROR(changedError(), "levels) must be [rows, row bytes]");
    contents.buffers[0].shape = {bytes / 8, 8};
    EXPECT_ERROR(changedError(), "row bytes a multiple of 16");
  }
  SetUp();
  for (BufferDesc &buffer : contents.buffers)
    if (buffer.role == BufferRole::Activation) {
      buffer.dtype = DType::I8;
      break;
    }
  EXPECT_ERROR(changedError(), "holds quantized levels but is not a weight");
  DType parsed;
  EXPECT_TRUE(parseDType("i4x2", &parsed));
  EXPECT_EQ(parsed, DType::I4X2);
  EXPECT_STREQ(dtypeName(DType::I8), "i8");
  EXPECT_EQ(dtypeBytes(DType::I4X2), 1u);
}

TEST_F(ValidateTest, ProgramsAndLaunchShapes) {
  contents.programs.pop_back(); // decode
  EXPECT_ERROR(changedError(), "the plan has no \"decode\" program");
  SetUp();
  contents.programs.push_back(contents.programs[1]);
  EXPECT_ERROR(changedError(), "program \"prefill\" appears twice");
  SetUp();
  contents.programs[2].launches[2].block[0] = Expr::constant(2048);
  EXPECT_ERROR(changedError(), "block.x = 2048 is outside 1..1024");
  SetUp();
  contents.programs[1].launches[0].block[1] = Expr::constant(64);
  EXPECT_ERROR(changedError(), "a block of 2048 threads exceeds 1024");
  SetUp();
  // Zero blocks at the smallest step (B = 1, S = 1).
  contents.programs[1].launches[1].grid[0] = Expr::tokens() - Expr::constant(1);
  EXPECT_ERROR(changedError(), "grid.x = 0 is outside");
  SetUp();
  contents.programs[1].launches[1].sharedBytes =
      Expr::tokens() * Expr::constant(4096);
  EXPECT_ERROR(changedError(), "bytes of shared memory is outside");
  SetUp();
  contents.programs[1].launches[0].args[3] =
      LaunchArg::int32(Expr::tokens() * Expr::constant(1LL << 30));
  EXPECT_ERROR(changedError(), "does not fit an int32");
  SetUp();
  contents.programs[1].launches[0].grid[0].terms.push_back({ExprOp::Mul, 0});
  EXPECT_ERROR(changedError(), "operation without two operands");
}

TEST_F(ValidateTest, Metadata) {
  auto withMeta = [&](const std::string &json) {
    contents.metadataJson = json;
    return changedError();
  };
  std::string good = contents.metadataJson;
  EXPECT_ERROR(withMeta("{"), "metadata is not valid JSON");
  EXPECT_ERROR(withMeta("[]"), "metadata is not a JSON object");
  EXPECT_ERROR(withMeta("{}"), "metadata lacks the object \"model\"");
  json::Value meta;
  std::string error;
  ASSERT_TRUE(json::parse(good, &meta, &error));
  auto edit = [&](const char *object, const char *key, json::Value value) {
    json::Value copy = meta;
    const_cast<json::Value *>(copy.find(object))->set(key, std::move(value));
    return withMeta(copy.write());
  };
  EXPECT_ERROR(edit("model", "vocab_size", 0),
               "\"model.vocab_size\" must be an integer from 1");
  EXPECT_ERROR(edit("model", "vocab_size", "256"), "must be an integer");
  EXPECT_ERROR(edit("kv_cache", "max_batch", 4),
               "\"kv_cache.max_batch\" (4) differs from \"limits.max_batch\"");
  EXPECT_ERROR(edit("kv_cache", "capacity", 32),
               "\"kv_cache.capacity\" (32) differs");
  EXPECT_ERROR(edit("kv_cache", "dtype", "f8"), "\"kv_cache.dtype\" must be");
  EXPECT_ERROR(edit("kv_cache", "layout", "ring"),
               "\"kv_cache.layout\" must be \"contiguous\" or \"paged\"");
  EXPECT_ERROR(edit("kv_cache", "layout", "paged"),
               "metadata lacks \"kv_cache.block_tokens\"");
  EXPECT_ERROR(edit("kv_cache", "block_tokens", 16),
               "\"kv_cache.block_tokens\" belongs to a paged cache, and the "
               "layout is \"contiguous\"");
  EXPECT_ERROR(edit("limits", "max_prefill_tokens", 65),
               "\"limits.max_prefill_tokens\" exceeds");
  json::Value eos = json::Value::array();
  eos.push(256);
  EXPECT_ERROR(edit("tokenizer", "eos_token_ids", eos),
               "id outside the vocabulary");
  EXPECT_ERROR(edit("tokenizer", "kind", "bpe"), "\"tokenizer.kind\" must be");
}

/// A paged KV cache: the toy in blocks of 16 rows (4 a sequence of 64), a
/// pool of 10 blocks.
TEST_F(ValidateTest, PagedKVCache) {
  test::ToyConfig paged = config;
  paged.blockTokens = 16;
  paged.poolBlocks = 10;
  auto build = [&]() {
    contents = test::buildToyEngine(paged, test::makeToyWeights(paged),
                                    test::placeholderModule(paged));
  };
  build();
  EXPECT_EQ(contents.formatMinor, kPagedKVCacheMinor);
  ASSERT_EQ(changedError(), "");
  {
    auto file = EngineFile::fromBytes(test::serializeOrDie(contents));
    Header header;
    EngineContents read;
    RuntimeConfig rc;
    std::string error;
    ASSERT_TRUE(readEngine(*file, {}, &header, &read, &rc, &error)) << error;
    EXPECT_EQ(header.formatMinor, 2u);
    EXPECT_TRUE(rc.kvCache.paged());
    EXPECT_EQ(rc.kvCache.blockTokens, 16u);
    EXPECT_EQ(rc.kvCache.blocks, 10u);
    EXPECT_EQ(rc.kvCache.maxBlocksPerSeq(), 4u);
    EXPECT_EQ(rc.kvCache.blockTable, "kv.block_table");
    // Pool-sized cache buffers: 10 blocks x 16 rows x 32 halves.
    EXPECT_EQ(rc.kvCache.bufferBytes(true), 10u * 16 * 32 * 2);
  }

  // A 1.1 header cannot hold a paged cache.
  contents.formatMinor = 1;
  EXPECT_ERROR(changedError(), "a paged KV cache needs format 1.2, and the "
                               "header says 1.1");
  build();

  json::Value meta;
  std::string error;
  ASSERT_TRUE(json::parse(contents.metadataJson, &meta, &error));
  const std::string good = contents.metadataJson;
  auto edit = [&](const char *key, json::Value value) {
    json::Value copy = meta;
    const_cast<json::Value *>(copy.find("kv_cache"))
        ->set(key, std::move(value));
    contents.metadataJson = copy.write();
    std::string why = changedError();
    contents.metadataJson = good;
    return why;
  };
  EXPECT_ERROR(edit("block_tokens", 24),
               "\"kv_cache.block_tokens\" must be a power of two from 16 to "
               "1024, got 24");
  EXPECT_ERROR(edit("block_tokens", 8),
               "\"kv_cache.block_tokens\" must be an integer from 16 to 1024");
  EXPECT_ERROR(edit("blocks", 3), "\"kv_cache.blocks\" (3) cannot hold one "
                                  "sequence of the capacity (4 blocks)");
  EXPECT_ERROR(edit("block_table", ""),
               "\"kv_cache.block_table\" must name the block table's buffer");
  EXPECT_ERROR(edit("block_table", "x"),
               "the paged KV cache's block table \"x\" must be one i32 "
               "activation buffer of 128 bytes ([max_batch, 4])");
  json::Value quant = json::Value::object();
  quant.set("bits", 8);
  quant.set("hot_window", 4);
  quant.set("hot_rows", 20);
  quant.set("group_size", 32);
  quant.set("keys", "per_token");
  quant.set("channel_block", 1);
  // Quantized with per-token keys: valid metadata, but the toy's cache
  // buffers are the fp16 pool's, not the quantized layout's.
  EXPECT_ERROR(edit("quant", quant), "the metadata needs exactly");
  // Per-channel key blocks of 32 do not fit blocks of 16.
  quant.set("keys", "per_channel");
  quant.set("channel_block", 32);
  quant.set("hot_rows", 64);
  EXPECT_ERROR(edit("quant", quant),
               "is paged with blocks of 16 tokens, not a multiple of "
               "\"quant.channel_block\" (32)");
  // Cache buffers of the contiguous size: the pool's is the one wanted.
  EXPECT_ERROR(edit("blocks", 32), "the metadata needs exactly");

  // A table of the wrong size or type.
  for (BufferDesc &buffer : contents.buffers)
    if (buffer.name == "kv.block_table")
      buffer.bytes += 4;
  EXPECT_ERROR(changedError(), "must be one i32 activation buffer of 128 "
                               "bytes");
}

TEST_F(ValidateTest, BatchBuckets) {
  json::Value meta;
  std::string error;
  ASSERT_TRUE(json::parse(contents.metadataJson, &meta, &error));
  RuntimeConfig rc;
  const_cast<json::Value *>(meta.find("limits"))->set("max_batch", 6);
  const_cast<json::Value *>(meta.find("kv_cache"))->set("max_batch", 6);
  ASSERT_TRUE(parseRuntimeConfig(meta.write(), &rc, &error)) << error;
  EXPECT_EQ(rc.batchBuckets, (std::vector<uint32_t>{1, 2, 4, 6}));
  // Without a list, the default: groups of 8 past 8, then max_batch.
  const_cast<json::Value *>(meta.find("limits"))->set("max_batch", 20);
  const_cast<json::Value *>(meta.find("kv_cache"))->set("max_batch", 20);
  ASSERT_TRUE(parseRuntimeConfig(meta.write(), &rc, &error)) << error;
  EXPECT_EQ(rc.batchBuckets, (std::vector<uint32_t>{1, 2, 4, 8, 16, 20}));
  const_cast<json::Value *>(meta.find("limits"))->set("max_batch", 6);
  const_cast<json::Value *>(meta.find("kv_cache"))->set("max_batch", 6);
  json::Value &decode = meta.set("decode", json::Value::object());
  json::Value &list = decode.set("batch_buckets", json::Value::array());
  list.push(3);
  list.push(1);
  ASSERT_TRUE(parseRuntimeConfig(meta.write(), &rc, &error)) << error;
  EXPECT_EQ(rc.batchBuckets, (std::vector<uint32_t>{1, 3, 6}));
  list.push(7);
  EXPECT_FALSE(parseRuntimeConfig(meta.write(), &rc, &error));
  EXPECT_ERROR(error, "holds a size outside 1..6");
}

TEST_F(ValidateTest, ProgrammaticLaunch) {
  json::Value meta;
  std::string error;
  ASSERT_TRUE(json::parse(contents.metadataJson, &meta, &error));
  RuntimeConfig rc;
  // The toy engine's kernels wait for their predecessors, and say so.
  ASSERT_TRUE(parseRuntimeConfig(meta.write(), &rc, &error)) << error;
  EXPECT_TRUE(rc.programmaticLaunch);
  json::Value &launch = meta.set("launch", json::Value::object());
  ASSERT_TRUE(parseRuntimeConfig(meta.write(), &rc, &error)) << error;
  EXPECT_FALSE(rc.programmaticLaunch); // absent: launched one after another
  launch.set("programmatic_dependent", false);
  ASSERT_TRUE(parseRuntimeConfig(meta.write(), &rc, &error)) << error;
  EXPECT_FALSE(rc.programmaticLaunch);
  launch.set("programmatic_dependent", 1);
  EXPECT_FALSE(parseRuntimeConfig(meta.write(), &rc, &error));
  EXPECT_ERROR(error, "\"launch.programmatic_dependent\" must be a boolean");
}

TEST_F(ValidateTest, PackedSteps) {
  json::Value meta;
  std::string error;
  ASSERT_TRUE(json::parse(contents.metadataJson, &meta, &error));
  RuntimeConfig rc;
  ASSERT_TRUE(parseRuntimeConfig(meta.write(), &rc, &error)) << error;
  EXPECT_TRUE(rc.packedSteps); // the toy's kernels take StepRows
  json::Value &launch = meta.set("launch", json::Value::object());
  ASSERT_TRUE(parseRuntimeConfig(meta.write(), &rc, &error)) << error;
  EXPECT_FALSE(rc.packedSteps); // absent: padded steps
  launch.set("packed_steps", 1);
  EXPECT_FALSE(parseRuntimeConfig(meta.write(), &rc, &error));
  EXPECT_ERROR(error, "\"launch.packed_steps\" must be a boolean");

  // A prefill grid that is fine at B = S = T = 1 and at the largest padded
  // step but empty at a packed step of one token among max_batch
  // sequences: refused only where the engine takes packed steps.
  contents.programs[1].launches[1].grid[0] =
      Expr::tokens() - Expr::batch() + Expr::constant(1);
  EXPECT_ERROR(changedError(), "grid.x = ");
  test::ToyConfig padded = config;
  padded.packedSteps = false;
  contents = test::buildToyEngine(padded, test::makeToyWeights(padded),
                                  test::placeholderModule(padded));
  contents.programs[1].launches[1].grid[0] =
      Expr::tokens() - Expr::batch() + Expr::constant(1);
  EXPECT_EQ(changedError(), "");
}

// launch.few_rows_max_tokens and the program prefill_few come together;
// the limit is at most a prefill step's rows and needs packed steps.
TEST_F(ValidateTest, FewRowPrefill) {
  json::Value meta;
  std::string error;
  ASSERT_TRUE(json::parse(contents.metadataJson, &meta, &error));
  RuntimeConfig rc;
  ASSERT_TRUE(parseRuntimeConfig(meta.write(), &rc, &error)) << error;
  EXPECT_EQ(rc.fewRowsMaxTokens, 0u); // absent: every step on prefill
  EXPECT_STREQ(rc.prefillProgramFor(1), kPrefillProgram);
  json::Value &launch = meta.set("launch", json::Value::object());
  launch.set("packed_steps", true);
  launch.set("few_rows_max_tokens", 8);
  ASSERT_TRUE(parseRuntimeConfig(meta.write(), &rc, &error)) << error;
  EXPECT_EQ(rc.fewRowsMaxTokens, 8u);
  EXPECT_STREQ(rc.prefillProgramFor(8), kFewRowPrefillProgram);
  EXPECT_STREQ(rc.prefillProgramFor(9), kPrefillProgram);
  const uint64_t maxRows = uint64_t(rc.maxBatch) * rc.maxPrefillTokens;
  for (int64_t bad : {int64_t{0}, static_cast<int64_t>(maxRows + 1)}) {
    launch.set("few_rows_max_tokens", bad);
    EXPECT_FALSE(parseRuntimeConfig(meta.write(), &rc, &error));
    EXPECT_ERROR(error, "\"launch.few_rows_max_tokens\" must be an integer "
                        "from 1 to " +
                            std::to_string(maxRows));
  }
  launch.set("few_rows_max_tokens", 8);
  launch.set("packed_steps", false);
  EXPECT_FALSE(parseRuntimeConfig(meta.write(), &rc, &error));
  EXPECT_ERROR(error, "needs \"launch.packed_steps\"");
  launch.set("packed_steps", true);

  // The key without the program, the program without the key, both.
  const std::string withKey = meta.write();
  const std::string withoutKey = contents.metadataJson;
  contents.metadataJson = withKey;
  EXPECT_ERROR(changedError(), "names a program the plan lacks");
  const int prefill = contents.findProgram(kPrefillProgram);
  ASSERT_GE(prefill, 0);
  Program few = contents.programs[prefill];
  few.name = kFewRowPrefillProgram;
  contents.programs.push_back(few);
  EXPECT_EQ(changedError(), "");
  contents.metadataJson = withoutKey;
  EXPECT_ERROR(changedError(), "the plan has a \"prefill_few\" program, but "
                               "the metadata no");
}

// Hostile input: random edits to a valid engine, re-hashed so that they reach
// the section decoders and the validator, must be rejected or accepted but
// never crash, hang or allocate without bound.
TEST_F(ValidateTest, RandomEditsNeverCrash) {
  std::vector<uint8_t> valid = test::serializeOrDie(contents);
  std::mt19937_64 rng(11);
  uint64_t planBegin = test::sectionOffset(valid, SectionKind::Plan);
  uint64_t weightsBegin = test::sectionOffset(valid, SectionKind::Weights);
  int rejected = 0;
  for (int round = 0; round < 1500; ++round) {
    std::vector<uint8_t> bytes = valid;
    int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      // Mostly the structured parts (header, table, metadata, kernels, plan).
      uint64_t at = rng() % 4 ? rng() % weightsBegin : rng() % bytes.size();
      if (at >= format::kContentHashOffset &&
          at < format::kContentHashOffset + format::kHashBytes)
        continue;
      bytes[at] =
          static_cast<uint8_t>(rng() % 3 ? rng() : (rng() % 2 ? 0 : 0xff));
    }
    if (rng() % 8 == 0)
      bytes.resize(planBegin + rng() % (bytes.size() - planBegin));
    test::rehash(bytes);
    if (!readError(bytes).empty())
      ++rejected;
  }
  EXPECT_GT(rejected, 500);
}

} // namespace
