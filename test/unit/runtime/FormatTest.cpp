//===- FormatTest.cpp - Engine writer/reader round trip and helpers -------===//

#include "TempDirTest.h"
#include "TestEngines.h"
#include "format/Hash.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <dirent.h>
#include <fstream>
#include <random>
#include <unistd.h>

using namespace sits;
using namespace sits::format;

namespace {

std::string hex(const std::string &text) {
  return hashToHex(sha256(text.data(), text.size()));
}

TEST(Sha256, KnownAnswers) {
  EXPECT_EQ(hex(""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(hex("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(hex(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(ContentHash, StreamingEqualsParallelAndIgnoresHashField) {
  std::vector<uint8_t> data(kHashChunkBytes * 2 + 12345);
  std::mt19937 rng(3);
  for (auto &b : data)
    b = static_cast<uint8_t>(rng());
  Hash parallel = computeContentHash(data.data(), data.size(), 4);
  Hash serial = computeContentHash(data.data(), data.size(), 1);
  ContentHasher streaming;
  // Odd piece sizes cross the hash field and the chunk boundaries.
  for (size_t at = 0; at < data.size();) {
    size_t n = std::min<size_t>(data.size() - at, 77 + at % 1000003);
    streaming.update(data.data() + at, n);
    at += n;
  }
  EXPECT_EQ(parallel, serial);
  EXPECT_EQ(parallel, streaming.finish());
  data[kContentHashOffset + 5] ^= 1; // inside the hash field: ignored
  EXPECT_EQ(parallel, computeContentHash(data.data(), data.size()));
  data[kContentHashOffset + kHashBytes] ^= 1; // just after it: counts
  EXPECT_NE(parallel, computeContentHash(data.data(), data.size()));
  data[data.size() - 1] ^= 1;
  EXPECT_NE(parallel, computeContentHash(data.data(), data.size()));
}

TEST(HalfFloat, Conversions) {
  EXPECT_EQ(floatToHalf(1.0f), 0x3c00);
  EXPECT_EQ(floatToHalf(-2.0f), 0xc000);
  EXPECT_EQ(floatToHalf(65504.0f), 0x7bff);
  EXPECT_EQ(floatToHalf(65520.0f), 0x7c00);           // rounds to infinity
  EXPECT_EQ(floatToHalf(5.9604645e-8f), 0x0001);      // smallest subnormal
  EXPECT_EQ(floatToHalf(1.0f + 1.0f / 2048), 0x3c00); // tie: to even
  EXPECT_EQ(floatToHalf(1.0f + 3.0f / 2048), 0x3c02); // tie: to even
  EXPECT_EQ(floatToHalf(0.0f), 0x0000);
  EXPECT_NE(floatToHalf(std::nanf("")) & 0x3ff, 0);
  for (uint32_t bits = 0; bits < 0x7c00; bits += 7)
    EXPECT_EQ(floatToHalf(halfToFloat(static_cast<uint16_t>(bits))), bits);
  EXPECT_EQ(floatToBFloat16(1.0f), 0x3f80);
  EXPECT_EQ(floatToBFloat16(-1.5f), 0xbfc0);
  EXPECT_EQ(bfloat16ToFloat(0x4049), 3.140625f);
  EXPECT_EQ(floatToBFloat16(1.00390625f), 0x3f80); // tie: to even
  EXPECT_EQ(floatToBFloat16(1.01171875f), 0x3f82); // tie: to even
}

TEST(Expr, EvaluatesWithSymbols) {
  Expr grid = ceilDiv(Expr::tokens() * Expr::constant(3), Expr::constant(128));
  int64_t v;
  std::string error;
  ASSERT_TRUE(checkExpr(grid, &error)) << error;
  ASSERT_TRUE(evalExpr(grid, makeSymbols(4, 100, 132), &v, &error)) << error;
  EXPECT_EQ(v, 10); // ceil(1200 / 128)
  EXPECT_EQ(grid.toString(), "ceil_div((T*3), 128)");
  Expr m = max(min(Expr::batch(), Expr::constant(2)),
               Expr::seq() - Expr::constant(9));
  ASSERT_TRUE(evalExpr(m, makeSymbols(8, 5, 132), &v, &error));
  EXPECT_EQ(v, 2);
  Expr persistent =
      min(Expr::constant(500), Expr::multiprocessors() * Expr::constant(2));
  ASSERT_TRUE(evalExpr(persistent, makeSymbols(1, 1, 132), &v, &error));
  EXPECT_EQ(v, 264);
  ASSERT_TRUE(evalExpr(persistent, makeSymbols(1, 1, 1024), &v, &error));
  EXPECT_EQ(v, 500);
  EXPECT_EQ(persistent.toString(), "min(500, (M*2))");
  ASSERT_TRUE(evalExpr(floorDiv(Expr::constant(-7), Expr::constant(2)),
                       makeSymbols(1, 1, 132), &v, &error));
  EXPECT_EQ(v, -4);
  ASSERT_TRUE(evalExpr(ceilDiv(Expr::constant(-7), Expr::constant(2)),
                       makeSymbols(1, 1, 132), &v, &error));
  EXPECT_EQ(v, -3);
}

TEST(Expr, RejectsOverflowDivisionByZeroAndMalformed) {
  int64_t v;
  std::string error;
  Expr big = Expr::constant(INT64_MAX) + Expr::batch();
  EXPECT_FALSE(evalExpr(big, makeSymbols(1, 1, 132), &v, &error));
  EXPECT_NE(error.find("overflows"), std::string::npos) << error;
  Expr div = ceilDiv(Expr::tokens(), Expr::seq() - Expr::seq());
  EXPECT_FALSE(evalExpr(div, makeSymbols(2, 3, 132), &v, &error));
  EXPECT_NE(error.find("divides by 0"), std::string::npos) << error;
  Expr bad;
  bad.terms = {{ExprOp::Const, 1}, {ExprOp::Add, 0}};
  EXPECT_FALSE(checkExpr(bad, &error));
  bad.terms = {{ExprOp::Symbol, 7}};
  EXPECT_FALSE(checkExpr(bad, &error));
  EXPECT_NE(error.find("unknown symbol"), std::string::npos);
  bad.terms = {{ExprOp::Const, 1}, {ExprOp::Const, 2}};
  EXPECT_FALSE(checkExpr(bad, &error));
  bad.terms = {{static_cast<ExprOp>(99), 0}};
  EXPECT_FALSE(checkExpr(bad, &error));
  EXPECT_FALSE(checkExpr(Expr(), &error));
}

void expectSameExpr(const Expr &a, const Expr &b) {
  ASSERT_EQ(a.terms.size(), b.terms.size());
  for (size_t i = 0; i < a.terms.size(); ++i) {
    EXPECT_EQ(a.terms[i].op, b.terms[i].op);
    EXPECT_EQ(a.terms[i].value, b.terms[i].value);
  }
}

TEST(EngineFormat, RoundTripPreservesEverything) {
  test::ToyConfig config;
  config.eosTokenIds = {0, 10};
  EngineContents written = test::buildToyEngine(
      config, test::makeToyWeights(config), test::placeholderModule(config));
  written.modules[0].ptx = ".version 8.0\n.target sm_90\n";
  std::vector<uint8_t> bytes = test::serializeOrDie(written);
  auto file = EngineFile::fromBytes(bytes);
  Header header;
  EngineContents read;
  RuntimeConfig rc;
  std::string error;
  ASSERT_TRUE(readEngine(*file, {}, &header, &read, &rc, &error)) << error;

  EXPECT_EQ(header.formatMajor, kFormatMajor);
  // An engine without a paged KV cache stays 1.1.
  EXPECT_EQ(header.formatMinor, 1u);
  EXPECT_EQ(read.formatMinor, 1u);
  EXPECT_EQ(header.targetSm, 90u);
  EXPECT_EQ(header.cudaVersion, 13000u);
  EXPECT_EQ(header.fileBytes, bytes.size());
  EXPECT_EQ(header.sourceModelHash, written.sourceModelHash);
  EXPECT_EQ(header.sections.size(), 4u);
  for (const SectionEntry &s : header.sections)
    EXPECT_EQ(s.offset % kSectionAlignment, 0u);

  EXPECT_EQ(read.metadataJson, written.metadataJson);
  ASSERT_EQ(read.modules.size(), 1u);
  EXPECT_EQ(read.modules[0].name, "toy");
  EXPECT_EQ(read.modules[0].sm, 90u);
  EXPECT_EQ(read.modules[0].cubin, written.modules[0].cubin);
  EXPECT_EQ(read.modules[0].ptx, written.modules[0].ptx);
  ASSERT_EQ(read.kernels.size(), written.kernels.size());
  for (size_t i = 0; i < read.kernels.size(); ++i) {
    EXPECT_EQ(read.kernels[i].module, written.kernels[i].module);
    EXPECT_EQ(read.kernels[i].function, written.kernels[i].function);
  }
  ASSERT_EQ(read.buffers.size(), written.buffers.size());
  for (size_t i = 0; i < read.buffers.size(); ++i) {
    const BufferDesc &a = read.buffers[i], &b = written.buffers[i];
    EXPECT_EQ(a.name, b.name);
    EXPECT_EQ(a.role, b.role);
    EXPECT_EQ(a.dtype, b.dtype);
    EXPECT_EQ(a.offset, b.offset);
    EXPECT_EQ(a.bytes, b.bytes);
    EXPECT_EQ(a.shape, b.shape);
    if (a.role == BufferRole::Weight) {
      EXPECT_EQ(a.offset % kWeightAlignment, 0u);
    }
  }
  ASSERT_EQ(read.programs.size(), written.programs.size());
  for (size_t p = 0; p < read.programs.size(); ++p) {
    const Program &a = read.programs[p], &b = written.programs[p];
    EXPECT_EQ(a.name, b.name);
    ASSERT_EQ(a.launches.size(), b.launches.size());
    for (size_t l = 0; l < a.launches.size(); ++l) {
      const Launch &x = a.launches[l], &y = b.launches[l];
      EXPECT_EQ(x.kernel, y.kernel);
      for (int d = 0; d < 3; ++d) {
        expectSameExpr(x.grid[d], y.grid[d]);
        expectSameExpr(x.block[d], y.block[d]);
      }
      expectSameExpr(x.sharedBytes, y.sharedBytes);
      ASSERT_EQ(x.args.size(), y.args.size());
      for (size_t i = 0; i < x.args.size(); ++i) {
        EXPECT_EQ(x.args[i].kind, y.args[i].kind);
        EXPECT_EQ(x.args[i].buffer, y.args[i].buffer);
        EXPECT_EQ(x.args[i].offset, y.args[i].offset);
        EXPECT_EQ(x.args[i].f32, y.args[i].f32);
        expectSameExpr(x.args[i].expr, y.args[i].expr);
      }
    }
  }
  ASSERT_EQ(read.weightSize(), written.weightSize());
  EXPECT_EQ(0, std::memcmp(read.weightBytes(), written.weightBytes(),
                           written.weightSize()));
  EXPECT_EQ(uintptr_t(read.weightBytes()) % kSectionAlignment,
            uintptr_t(file->data()) % kSectionAlignment);

  EXPECT_EQ(rc.modelName, "toy-attention");
  EXPECT_EQ(rc.vocabSize, 256u);
  EXPECT_EQ(rc.maxBatch, 8u);
  EXPECT_EQ(rc.maxPrefillTokens, 16u);
  EXPECT_EQ(rc.maxSeqLen, 64u);
  EXPECT_EQ(rc.kvCache.layers, 1u);
  EXPECT_EQ(rc.kvCache.headDim, 32u);
  EXPECT_EQ(rc.kvCache.dtype, DType::F16);
  EXPECT_EQ(rc.tokenizer, TokenizerKind::Bytes);
  EXPECT_EQ(rc.eosTokenIds, (std::vector<int32_t>{0, 10}));
  EXPECT_EQ(rc.batchBuckets, (std::vector<uint32_t>{1, 2, 4, 8}));

  // Serializing what was read gives the same bytes.
  std::vector<uint8_t> again = test::serializeOrDie(read);
  EXPECT_EQ(again, bytes);
}

TEST(EngineFormat, DefaultBatchBucketsAreGroupsOfEight) {
  using Buckets = std::vector<uint32_t>;
  EXPECT_EQ(getDefaultBatchBuckets(1), (Buckets{1}));
  EXPECT_EQ(getDefaultBatchBuckets(3), (Buckets{1, 2, 3}));
  EXPECT_EQ(getDefaultBatchBuckets(8), (Buckets{1, 2, 4, 8}));
  EXPECT_EQ(getDefaultBatchBuckets(12), (Buckets{1, 2, 4, 8, 12}));
  EXPECT_EQ(getDefaultBatchBuckets(64),
            (Buckets{1, 2, 4, 8, 16, 24, 32, 40, 48, 56, 64}));
}

TEST(EngineFormat, DescribeSummarizes) {
  test::ToyConfig config;
  EngineContents e = test::buildToyEngine(config, test::makeToyWeights(config),
                                          test::placeholderModule(config));
  auto file = EngineFile::fromBytes(test::serializeOrDie(e));
  Header header;
  EngineContents read;
  RuntimeConfig rc;
  std::string error;
  ASSERT_TRUE(readEngine(*file, {}, &header, &read, &rc, &error)) << error;
  std::string text = describeEngine(header, read, rc, true);
  EXPECT_NE(text.find("engine format 1." + std::to_string(header.formatMinor) +
                      ", target sm_90, CUDA 13.0"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("kv cache: 1 layers x 8 seqs x 1 kv heads x 64 tokens"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("program decode: 3 launches"), std::string::npos);
  EXPECT_NE(text.find("toy_embed_qkv grid(T, 1, 1) block(32, 1, 1)"),
            std::string::npos)
      << text;
}

class WriteEngineTest : public test::TempDirTest {
protected:
  void SetUp() override {
    TempDirTest::SetUp();
    test::ToyConfig config;
    contents = test::buildToyEngine(config, test::makeToyWeights(config),
                                    test::placeholderModule(config));
  }
  EngineContents contents;
};

TEST_F(WriteEngineTest, WritesAtomicallyAndNeverOverwritesWithoutForce) {
  std::string path = dir + "/model.sits";
  std::string error;
  ASSERT_TRUE(writeEngine(contents, path, {}, &error)) << error;
  auto file = EngineFile::open(path, &error);
  ASSERT_TRUE(file) << error;
  EXPECT_EQ(std::vector<uint8_t>(file->data(), file->data() + file->size()),
            test::serializeOrDie(contents));

  EngineContents other = contents;
  other.metadataJson.insert(1, " ");
  EXPECT_FALSE(writeEngine(other, path, {}, &error));
  EXPECT_NE(error.find("already exists (use --force"), std::string::npos)
      << error;
  auto unchanged = EngineFile::open(path, &error);
  EXPECT_EQ(unchanged->size(), file->size());

  WriteOptions force;
  force.force = true;
  ASSERT_TRUE(writeEngine(other, path, force, &error)) << error;
  auto replaced = EngineFile::open(path, &error);
  Header header;
  EngineContents read;
  RuntimeConfig rc;
  ASSERT_TRUE(readEngine(*replaced, {}, &header, &read, &rc, &error)) << error;
  EXPECT_EQ(read.metadataJson, other.metadataJson);
  EXPECT_EQ(listDir(), std::vector<std::string>{"model.sits"}); // no temp left
}

TEST_F(WriteEngineTest, FailsCleanlyInAMissingFolder) {
  std::string error;
  EXPECT_FALSE(writeEngine(contents, dir + "/missing/model.sits", {}, &error));
  EXPECT_NE(error.find("cannot create a temporary file"), std::string::npos)
      << error;
  EXPECT_TRUE(listDir().empty());
}

TEST(EngineFile, OpenErrorsNameTheCause) {
  std::string error;
  EXPECT_FALSE(EngineFile::open("/nonexistent/x.sits", &error));
  EXPECT_NE(error.find("No such file"), std::string::npos) << error;
  EXPECT_FALSE(EngineFile::open("/tmp", &error));
  EXPECT_NE(error.find("not a regular file"), std::string::npos) << error;
}

} // namespace
