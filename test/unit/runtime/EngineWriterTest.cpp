//===- EngineWriterTest.cpp - Parallel engine writing and SHA-NI ----------===//

#include "format/EngineWriter.h"
#include "TempDirTest.h"
#include "TestEngines.h"
#include "format/Hash.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <dirent.h>
#include <mutex>
#include <random>
#include <unistd.h>

using namespace sits;
using namespace sits::format;

namespace {

class EngineWriterTest : public test::TempDirTest {
protected:
  void SetUp() override {
    TempDirTest::SetUp();
    test::ToyConfig config;
    contents = test::buildToyEngine(config, test::makeToyWeights(config),
                                    test::placeholderModule(config));
    // Unused bytes after the toy's weights make the file span several
    // hash chunks, with a partial last one.
    std::mt19937 rng(7);
    size_t used = contents.weights.size();
    contents.weights.resize(used + 2 * kHashChunkBytes + 12345);
    for (size_t i = used; i < contents.weights.size(); ++i)
      contents.weights[i] = static_cast<uint8_t>(rng());
  }
  std::vector<uint8_t> readFile(const std::string &path) {
    std::string error;
    auto file = EngineFile::open(path, &error);
    EXPECT_TRUE(file) << error;
    if (!file)
      return {};
    return std::vector<uint8_t>(file->data(), file->data() + file->size());
  }
  WeightSectionFill copyFill() {
    const uint8_t *weights = contents.weights.data();
    return
        [weights](uint64_t offset, uint8_t *out, uint64_t size, std::string *) {
          std::memcpy(out, weights + offset, size);
          return true;
        };
  }
  EngineContents contents;
};

TEST_F(EngineWriterTest, ParallelWritingGivesTheSerializedBytes) {
  std::vector<uint8_t> expected = test::serializeOrDie(contents);
  for (unsigned threads : {1u, 3u, 8u}) {
    std::string path = dir + "/t" + std::to_string(threads) + ".sits";
    std::string error;
    ASSERT_TRUE(writeEngineWithFill(contents, contents.weights.size(),
                                    copyFill(), path, {}, threads, &error))
        << error;
    std::vector<uint8_t> bytes = readFile(path);
    ASSERT_EQ(bytes, expected) << threads << " threads";
    // The header's hash, from digests of chunks written in any order, is
    // the streaming hash of the file and the readers' parallel one.
    Hash stored;
    std::memcpy(stored.data(), bytes.data() + kContentHashOffset, kHashBytes);
    ContentHasher streaming;
    streaming.update(bytes.data(), bytes.size());
    EXPECT_EQ(stored, streaming.finish());
    EXPECT_EQ(stored, computeContentHash(bytes.data(), bytes.size(), 5));
    auto file = EngineFile::open(path, &error);
    Header header;
    EngineContents read;
    RuntimeConfig config;
    EXPECT_TRUE(readEngine(*file, {}, &header, &read, &config, &error))
        << error;
  }
}

TEST_F(EngineWriterTest, FillsEveryWeightByteOnce) {
  std::mutex mutex;
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  WeightSectionFill copy = copyFill();
  WeightSectionFill recording = [&](uint64_t offset, uint8_t *out,
                                    uint64_t size, std::string *error) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      ranges.push_back({offset, size});
    }
    return copy(offset, out, size, error);
  };
  std::string error;
  ASSERT_TRUE(writeEngineWithFill(contents, contents.weights.size(), recording,
                                  dir + "/e.sits", {}, 4, &error))
      << error;
  std::sort(ranges.begin(), ranges.end());
  uint64_t covered = 0;
  for (auto [offset, size] : ranges) {
    EXPECT_EQ(offset, covered);
    EXPECT_LE(size, kHashChunkBytes);
    covered = offset + size;
  }
  EXPECT_EQ(covered, contents.weights.size());
}

TEST_F(EngineWriterTest, AFailedFillLeavesNothingBehind) {
  std::string path = dir + "/e.sits";
  WeightSectionFill copy = copyFill();
  WeightSectionFill failing = [&](uint64_t offset, uint8_t *out, uint64_t size,
                                  std::string *error) {
    if (offset + size > kHashChunkBytes) {
      *error = "weight 'w' cannot be read";
      return false;
    }
    return copy(offset, out, size, error);
  };
  std::string error;
  EXPECT_FALSE(writeEngineWithFill(contents, contents.weights.size(), failing,
                                   path, {}, 3, &error));
  EXPECT_EQ(error, "weight 'w' cannot be read");
  EXPECT_TRUE(listDir().empty());

  // With --force an existing engine stays as it was.
  ASSERT_TRUE(writeEngine(contents, path, {}, &error)) << error;
  std::vector<uint8_t> before = readFile(path);
  WriteOptions force;
  force.force = true;
  EXPECT_FALSE(writeEngineWithFill(contents, contents.weights.size(), failing,
                                   path, force, 2, &error));
  EXPECT_EQ(readFile(path), before);
  EXPECT_EQ(listDir(), std::vector<std::string>{"e.sits"});
}

TEST_F(EngineWriterTest, ValidatesStreamedEnginesAgainstTheirSize) {
  StreamedEngine engine;
  engine.contents = contents;
  engine.weightBytes = contents.weights.size();
  engine.contents.weights.clear();
  RuntimeConfig config;
  std::string error;
  ASSERT_TRUE(parseRuntimeConfig(contents.metadataJson, &config, &error))
      << error;
  EXPECT_TRUE(validateStreamedEngine(engine, config, &error)) << error;
  EXPECT_EQ(engine.contents.weightsData, nullptr);
  engine.weightBytes = 256;
  EXPECT_FALSE(validateStreamedEngine(engine, config, &error));
  EXPECT_NE(error.find("lies outside the weights section"), std::string::npos)
      << error;
}

TEST(Sha256, HardwareEqualsPortable) {
  if (!sha256HardwareAvailable())
    GTEST_SKIP() << "no SHA extensions on this CPU";
  std::vector<uint8_t> data((1 << 20) + 77);
  std::mt19937 rng(11);
  for (auto &b : data)
    b = static_cast<uint8_t>(rng());
  auto both = [&](const uint8_t *p, uint64_t n) {
    setSha256Hardware(false);
    Hash portable = sha256(p, n);
    Hash portableContent = computeContentHash(p, n, 2);
    setSha256Hardware(true);
    EXPECT_EQ(sha256(p, n), portable) << n << " bytes";
    EXPECT_EQ(computeContentHash(p, n, 2), portableContent) << n << " bytes";
  };
  for (uint64_t n = 0; n < 300; ++n)
    both(data.data() + n % 3, n);
  both(data.data(), data.size());
  // Pieces that split blocks: the buffered and the direct path mix.
  setSha256Hardware(true);
  Sha256 pieces;
  for (size_t at = 0; at < data.size();) {
    size_t n = std::min<size_t>(data.size() - at, 1 + at % 997);
    pieces.update(data.data() + at, n);
    at += n;
  }
  setSha256Hardware(false);
  EXPECT_EQ(pieces.finish(), sha256(data.data(), data.size()));
  setSha256Hardware(true);
}

} // namespace
