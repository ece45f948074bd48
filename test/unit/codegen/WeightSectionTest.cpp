//===- WeightSectionTest.cpp - The weights section, made in ranges --------===//

#include "backends/cuda/WeightSection.h"
#include "backends/cuda/QuantLayout.h"
#include "dialects/sits/SitsDialect.h"

#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

#include <random>

using namespace mlir;
using namespace sits;
using namespace sits::codegen;
using format::DType;

namespace {

class WeightSectionTest : public ::testing::Test {
protected:
  WeightSectionTest() {
    context.loadDialect<SitsDialect>();
    std::mt19937 rng(3);
    // A [37, 29] f32 matrix read transposed, stored as f16.
    matrix.resize(37 * 29);
    for (float &v : matrix)
      v = std::uniform_real_distribution<float>(-2, 2)(rng);
    auto f32 = Float32Type::get(&context);
    auto source = DenseElementsAttr::get(RankedTensorType::get({37, 29}, f32),
                                         ArrayRef(matrix));
    add("w.T", DType::F16, {29, 37},
        getWeightView(source, RankedTensorType::get({29, 37}, f32), true));
    // Quantized levels, stored as they are.
    levels.resize(3 * 16);
    for (int8_t &v : levels)
      v = static_cast<int8_t>(rng());
    add("levels", DType::I8, {3, 16},
        DenseElementsAttr::get(
            RankedTensorType::get({3, 16}, IntegerType::get(&context, 8)),
            ArrayRef(levels)));
    // A splat, stored as bf16; a vector kept in f32.
    add("ones", DType::BF16, {7},
        DenseElementsAttr::get(RankedTensorType::get({7}, f32), 1.0f));
    add("bias", DType::F32, {5},
        DenseElementsAttr::get(RankedTensorType::get({5}, f32),
                               ArrayRef(matrix).take_front(5)));
  }

  void add(const std::string &name, DType type, std::vector<int64_t> shape,
           ElementsAttr values) {
    WeightPlan plan;
    plan.name = name;
    plan.type = type;
    plan.shape = shape;
    plan.values = values;
    uint64_t count = 1;
    for (int64_t d : shape)
      count *= d;
    plan.bytes = count * format::dtypeBytes(type);
    weights.push_back(plan);
  }

  MLIRContext context;
  std::vector<float> matrix;
  std::vector<int8_t> levels;
  std::vector<WeightPlan> weights;
};

TEST_F(WeightSectionTest, LaysOutAndEncodesEveryWeight) {
  llvm::Expected<WeightSection> section = WeightSection::create(weights);
  ASSERT_TRUE(static_cast<bool>(section)) << toString(section.takeError());
  ASSERT_EQ(section->offsetOf(0), 0u);
  EXPECT_EQ(section->offsetOf(1), 2304u); // 29 * 37 * 2 = 2146, aligned
  EXPECT_EQ(section->offsetOf(2), 2560u);
  EXPECT_EQ(section->offsetOf(3), 2816u);
  EXPECT_EQ(section->size(), 2816u + 20);
  std::vector<uint8_t> bytes(section->size(), 0xAA);
  std::string error;
  ASSERT_TRUE(section->fill(0, bytes.data(), bytes.size(), &error)) << error;
  for (int64_t n = 0; n < 29; ++n)
    for (int64_t k = 0; k < 37; ++k) {
      uint16_t half;
      std::memcpy(&half, &bytes[2 * (n * 37 + k)], 2);
      ASSERT_EQ(half, format::floatToHalf(matrix[k * 29 + n]));
    }
  for (size_t i = 2146; i < 2304; ++i)
    ASSERT_EQ(bytes[i], 0) << "padding at " << i;
  EXPECT_EQ(std::memcmp(&bytes[2304], levels.data(), 48), 0);
  for (int i = 0; i < 7; ++i) {
    uint16_t bf;
    std::memcpy(&bf, &bytes[2560 + 2 * i], 2);
    EXPECT_EQ(bf, 0x3f80);
  }
  EXPECT_EQ(std::memcmp(&bytes[2816], matrix.data(), 20), 0);

  // Any split into ranges, cut anywhere (even inside elements), from
  // several threads' worth of calls, gives the same bytes.
  std::mt19937 rng(4);
  for (int trial = 0; trial < 100; ++trial) {
    std::vector<uint8_t> pieces(bytes.size(), 0x55);
    for (uint64_t at = 0; at < pieces.size();) {
      uint64_t n = std::min<uint64_t>(pieces.size() - at, 1 + rng() % 700);
      ASSERT_TRUE(section->fill(at, pieces.data() + at, n, &error)) << error;
      at += n;
    }
    ASSERT_EQ(pieces, bytes) << "trial " << trial;
  }
}

TEST_F(WeightSectionTest, RefusesWeightsOfTheWrongType) {
  weights[1].type = DType::F16; // i8 values stored as floats
  llvm::Expected<WeightSection> section = WeightSection::create(weights);
  ASSERT_FALSE(static_cast<bool>(section));
  EXPECT_EQ(toString(section.takeError()),
            "weight 'levels' is not a float tensor");
  weights[1].type = DType::I8;
  weights[0].type = DType::I4X2; // floats stored as levels
  section = WeightSection::create(weights);
  ASSERT_FALSE(static_cast<bool>(section));
  EXPECT_EQ(toString(section.takeError()),
            "quantized weight 'w.T' is not an i8 tensor");
}

TEST(QuantLayoutTest, InterleavedChunksArePermutations) {
  for (int bits : {8, 4}) {
    std::vector<int> seen(kQuantChunkBytes, 0);
    for (int n = 0; n < kQuantChunkBytes; ++n)
      ++seen[interleavedSourceByte(bits, n)];
    for (int n = 0; n < kQuantChunkBytes; ++n)
      EXPECT_EQ(seen[n], 1) << "int" << bits << " byte " << n;
  }
  // int8: piece 1 (bytes 16..31) starts with inputs 4..7 (the lane's first
  // run); its second word holds inputs 20..23.
  EXPECT_EQ(interleavedSourceByte(8, 16), 4);
  EXPECT_EQ(interleavedSourceByte(8, 20), 20);
  // int4: piece 1's first word holds inputs 4..7 (bytes 2, 3 in input
  // order) and 20..23 (bytes 10, 11).
  EXPECT_EQ(interleavedSourceByte(4, 16), 2);
  EXPECT_EQ(interleavedSourceByte(4, 17), 3);
  EXPECT_EQ(interleavedSourceByte(4, 18), 10);
  EXPECT_EQ(interleavedSourceByte(4, 19), 11);
}

TEST_F(WeightSectionTest, StoresInterleavedChunks) {
  // Two rows of 128 bytes (two chunks each) of int4 levels.
  std::vector<int8_t> rows(2 * 128);
  std::mt19937 rng(5);
  for (int8_t &v : rows)
    v = static_cast<int8_t>(rng());
  weights.clear();
  add("q4", DType::I4X2, {2, 128},
      DenseElementsAttr::get(
          RankedTensorType::get({2, 128}, IntegerType::get(&context, 8)),
          ArrayRef(rows)));
  weights[0].interleavedBits = 4;
  llvm::Expected<WeightSection> section = WeightSection::create(weights);
  ASSERT_TRUE(static_cast<bool>(section)) << toString(section.takeError());
  std::vector<uint8_t> bytes(section->size());
  std::string error;
  ASSERT_TRUE(section->fill(0, bytes.data(), bytes.size(), &error)) << error;
  for (int chunk = 0; chunk < 4; ++chunk)
    for (int n = 0; n < kQuantChunkBytes; ++n)
      ASSERT_EQ(
          bytes[64 * chunk + n],
          static_cast<uint8_t>(rows[64 * chunk + interleavedSourceByte(4, n)]))
          << "chunk " << chunk << " byte " << n;
  // Ranges cut inside chunks give the same bytes.
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<uint8_t> pieces(bytes.size(), 0x55);
    for (uint64_t at = 0; at < pieces.size();) {
      uint64_t n = std::min<uint64_t>(pieces.size() - at, 1 + rng() % 90);
      ASSERT_TRUE(section->fill(at, pieces.data() + at, n, &error)) << error;
      at += n;
    }
    ASSERT_EQ(pieces, bytes) << "trial " << trial;
  }
  // Rows that are not whole chunks cannot be interleaved.
  add("short", DType::I8, {3, 16},
      DenseElementsAttr::get(
          RankedTensorType::get({3, 16}, IntegerType::get(&context, 8)),
          ArrayRef(levels)));
  weights[1].interleavedBits = 8;
  section = WeightSection::create(weights);
  ASSERT_FALSE(static_cast<bool>(section));
  EXPECT_EQ(toString(section.takeError()),
            "quantized weight 'short' cannot be stored in interleaved chunks: "
            "its rows are not whole chunks of 64 bytes");
}

} // namespace
