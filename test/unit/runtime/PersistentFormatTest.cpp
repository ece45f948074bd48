//===- PersistentFormatTest.cpp - The persistent decode section -----------===//
//
// The section round trips, each rule has its own error, and the argument
// tables the runtime fills hold each decode launch's arguments where the
// generated kernel reads them.
//
//===----------------------------------------------------------------------===//

#include "TestEngines.h"
#include "format/Codec.h"

#include <gtest/gtest.h>

#include <cstring>

using namespace sits;
using namespace sits::format;

namespace {

class PersistentFormatTest : public ::testing::Test {
protected:
  void SetUp() override {
    contents = test::buildToyEngine(config, test::makeToyWeights(config),
                                    test::placeholderModule(config));
    // The persistent kernels: a module of their own, one kernel a bucket,
    // each decode launch's block packed at 16-byte boundaries.
    ModuleImage module = contents.modules[0];
    module.name = "persistent_decode";
    contents.modules.push_back(module);
    const Program &decode = getDecode();
    contents.persistentDecode.blocks = 4;
    for (uint32_t batch : {1u, 2u, 4u}) {
      PersistentBucket bucket;
      bucket.batch = batch;
      bucket.kernel = static_cast<uint32_t>(contents.kernels.size());
      contents.kernels.push_back({1, "sits_decode_b" + std::to_string(batch)});
      bucket.threads = 1024;
      bucket.sharedBytes = 227 * 1024;
      std::vector<uint32_t> offsets;
      for (const Launch &launch : decode.launches) {
        bucket.argOffsets.push_back(bucket.argBytes);
        uint64_t bytes = getArgumentBlockLayout(launch, &offsets);
        bucket.argBytes += static_cast<uint32_t>((bytes + 15) / 16 * 16);
      }
      contents.persistentDecode.buckets.push_back(bucket);
    }
    contents.formatMinor = kPersistentDecodeMinor;
  }

  const Program &getDecode() const {
    return contents.programs[contents.findProgram(kDecodeProgram)];
  }

  /// Serializes and reads back; the error, or "" with `read` filled.
  std::string roundTrip(EngineContents *read = nullptr) {
    std::vector<uint8_t> bytes;
    std::string error;
    if (!serializeEngine(contents, &bytes, &error))
      return "serialize: " + error;
    auto file = EngineFile::fromBytes(std::move(bytes));
    Header header;
    EngineContents out;
    RuntimeConfig rc;
    if (!readEngine(*file, {}, &header, &out, &rc, &error))
      return error;
    if (read)
      *read = std::move(out);
    return "";
  }

  PersistentBucket &bucket(size_t i) {
    return contents.persistentDecode.buckets[i];
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

TEST_F(PersistentFormatTest, RoundTrips) {
  EngineContents read;
  ASSERT_EQ(roundTrip(&read), "");
  EXPECT_EQ(read.formatMinor, kPersistentDecodeMinor);
  const PersistentDecode &pd = read.persistentDecode;
  ASSERT_EQ(pd.blocks, 4u);
  ASSERT_EQ(pd.buckets.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    const PersistentBucket &a = pd.buckets[i], &b = bucket(i);
    EXPECT_EQ(a.batch, b.batch);
    EXPECT_EQ(a.kernel, b.kernel);
    EXPECT_EQ(a.threads, b.threads);
    EXPECT_EQ(a.sharedBytes, b.sharedBytes);
    EXPECT_EQ(a.argBytes, b.argBytes);
    EXPECT_EQ(a.argOffsets, b.argOffsets);
  }
  EXPECT_EQ(pd.find(2)->batch, 2u);
  EXPECT_EQ(pd.find(3), nullptr);
  std::string text = describeEngine(Header(), read, RuntimeConfig(), false);
  EXPECT_ERROR(text, "persistent decode: 3 kernels of 4 blocks, buckets 1, "
                     "2, 4");
}

TEST_F(PersistentFormatTest, WithoutTheSectionNothingChanges) {
  contents.persistentDecode = PersistentDecode();
  EngineContents read;
  ASSERT_EQ(roundTrip(&read), "");
  EXPECT_TRUE(read.persistentDecode.empty());
}

TEST_F(PersistentFormatTest, EachRuleHasItsOwnError) {
  EngineContents saved = contents;
  auto check = [&](auto change, const char *text) {
    contents = saved;
    change();
    EXPECT_ERROR(roundTrip(), text);
  };
  check([&] { contents.formatMinor = 2; },
        "a persistent decode section needs format 1.3, and the header says "
        "1.2");
  check([&] { contents.persistentDecode.blocks = 2000; },
        "blocks 2000 is outside 1..1024");
  check([&] { bucket(1).batch = 1; },
        "persistent decode bucket 1: batches must increase");
  check([&] { bucket(2).batch = 9; }, "within 1..8");
  check([&] { bucket(0).kernel = 999; }, "refers to kernel 999");
  check([&] { bucket(1).kernel = 0; },
        "the persistent kernels are in more than one module");
  check([&] { bucket(0).threads = 100; },
        "threads 100 is not a multiple of 32");
  check([&] { bucket(0).sharedBytes = 300 * 1024; }, "exceed 227 KiB");
  check([&] { bucket(0).argBytes = 8; }, "an argument table of 8 bytes");
  check([&] { bucket(0).argOffsets.pop_back(); }, "the decode program has");
  check([&] { bucket(0).argOffsets[1] += 4; }, "does not fit its slot");
  check([&] { bucket(0).argOffsets[1] = 0; }, "does not fit its slot");
  check([&] { bucket(0).threads = 32; }, "at most its 32");
  check([&] { contents.kernels[bucket(0).kernel].module = 0; },
        "the persistent kernels are in more than one module");
  check(
      [&] {
        for (PersistentBucket &b : contents.persistentDecode.buckets)
          contents.kernels[b.kernel].module = 0;
      },
      "of the persistent kernels' module \"");
}

TEST_F(PersistentFormatTest, MalformedSectionIsRefused) {
  std::string error;
  EngineContents read;
  std::vector<uint8_t> section = {4, 0, 0, 0, 100, 0, 0, 0};
  EXPECT_FALSE(decodePersistent(section.data(), section.size(), &read, &error));
  EXPECT_ERROR(error, "the number of buckets (100) exceeds the limit of 64");
  // A bucket cut short.
  section = {4, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0};
  read = EngineContents();
  EXPECT_FALSE(decodePersistent(section.data(), section.size(), &read, &error));
  EXPECT_ERROR(error, "persistent decode section:");
  // The encoding round trips, with nothing after it.
  section = encodePersistent(contents);
  read = EngineContents();
  EXPECT_TRUE(decodePersistent(section.data(), section.size(), &read, &error));
  section.push_back(0);
  read = EngineContents();
  EXPECT_FALSE(decodePersistent(section.data(), section.size(), &read, &error));
  EXPECT_ERROR(error, "unexpected bytes after the buckets");
}

TEST_F(PersistentFormatTest, ArgumentTableHoldsTheDecodeLaunches) {
  std::vector<uint64_t> addresses;
  for (size_t i = 0; i < contents.buffers.size(); ++i)
    addresses.push_back(0x700000000000ull + 0x10000 * i);
  const Program &decode = getDecode();
  std::vector<uint8_t> table;
  std::string error;
  for (const PersistentBucket &b : contents.persistentDecode.buckets) {
    ASSERT_TRUE(fillPersistentArguments(contents, b, addresses, &table, &error))
        << error;
    ASSERT_EQ(table.size(), b.argBytes);
    SymbolValues symbols = makeSymbols(b.batch, 1, 4);
    std::vector<uint32_t> offsets;
    size_t pointers = 0, ints = 0;
    for (size_t t = 0; t < decode.launches.size(); ++t) {
      const Launch &launch = decode.launches[t];
      getArgumentBlockLayout(launch, &offsets);
      for (size_t a = 0; a < launch.args.size(); ++a) {
        const LaunchArg &arg = launch.args[a];
        const uint8_t *at = table.data() + b.argOffsets[t] + offsets[a];
        if (arg.kind == ArgKind::BufferAddress) {
          uint64_t value;
          std::memcpy(&value, at, 8);
          EXPECT_EQ(value, addresses[arg.buffer] + arg.offset);
          ++pointers;
        } else if (arg.kind == ArgKind::Int32) {
          int32_t value;
          std::memcpy(&value, at, 4);
          int64_t expected = 0;
          ASSERT_TRUE(evalExpr(arg.expr, symbols, &expected, &error));
          EXPECT_EQ(value, expected) << "task " << t << " argument " << a;
          ++ints;
        }
      }
    }
    EXPECT_GT(pointers, 0u);
    EXPECT_GT(ints, 0u);
  }
  // A value that does not fit its type names the task and argument.
  EngineContents wide = contents;
  Program &program = wide.programs[wide.findProgram(kDecodeProgram)];
  for (Launch &launch : program.launches)
    for (LaunchArg &arg : launch.args)
      if (arg.kind == ArgKind::Int32)
        arg.expr = Expr::constant(int64_t(1) << 40);
  EXPECT_FALSE(
      fillPersistentArguments(wide, bucket(0), addresses, &table, &error));
  EXPECT_ERROR(error, "persistent decode bucket 1, task ");
  EXPECT_ERROR(error, "does not fit an int32");
}

TEST(ArgumentBlockLayout, NaturalAlignment) {
  Launch launch;
  launch.args = {LaunchArg::int32(Expr::constant(1)),
                 LaunchArg::bufferAddress(0),
                 LaunchArg::float32(1.0f),
                 LaunchArg::int32(Expr::constant(2)),
                 LaunchArg::int64(Expr::constant(3)),
                 LaunchArg::float32(2.0f)};
  std::vector<uint32_t> offsets;
  EXPECT_EQ(getArgumentBlockLayout(launch, &offsets), 40u);
  EXPECT_EQ(offsets, (std::vector<uint32_t>{0, 8, 16, 20, 24, 32}));
  launch.args.resize(1);
  EXPECT_EQ(getArgumentBlockLayout(launch, &offsets), 4u);
}

} // namespace
