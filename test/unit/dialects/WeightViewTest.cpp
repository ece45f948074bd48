//===- WeightViewTest.cpp - Reading weights where they are ----------------===//

#include "dialects/sits/WeightView.h"
#include "dialects/sits/SitsDialect.h"
#include "sits/EngineFormat.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <random>
#include <sys/mman.h>
#include <unistd.h>

using namespace mlir;
using namespace sits;
using format::halfToFloat;

namespace {

class WeightViewTest : public ::testing::Test {
protected:
  WeightViewTest() { context.loadDialect<SitsDialect>(); }

  RankedTensorType type(ArrayRef<int64_t> shape, Type element) {
    return RankedTensorType::get(shape, element);
  }
  Type f32() { return Float32Type::get(&context); }
  Type f16() { return Float16Type::get(&context); }
  Type bf16() { return BFloat16Type::get(&context); }

  /// A dense [rows, cols] f16 constant of random halves (|x| < 1).
  DenseElementsAttr randomHalves(int64_t rows, int64_t cols,
                                 std::vector<uint16_t> &bits) {
    std::mt19937 rng(5);
    bits.resize(rows * cols);
    for (uint16_t &b : bits)
      b = static_cast<uint16_t>(rng()) & 0xBBFF;
    return DenseElementsAttr::getFromRawBuffer(
        type({rows, cols}, f16()),
        ArrayRef<char>(reinterpret_cast<const char *>(bits.data()),
                       bits.size() * 2));
  }

  MLIRContext context;
};

TEST_F(WeightViewTest, TransposedRangesEqualTheTranspose) {
  int64_t rows = 45, cols = 70; // source [45, 70], view [70, 45]
  std::vector<uint16_t> bits;
  DenseElementsAttr source = randomHalves(rows, cols, bits);
  ElementsAttr view =
      getWeightView(source, type({cols, rows}, f16()), /*transposed=*/true);
  ASSERT_TRUE(isa_and_nonnull<WeightViewAttr>(view));
  FailureOr<WeightStorage> storage = getWeightStorage(view);
  ASSERT_TRUE(succeeded(storage));
  std::vector<uint16_t> expected(bits.size());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      expected[c * rows + r] = bits[r * cols + c];
  // Ranges that start and end inside rows, span rows, or are whole.
  std::mt19937 rng(9);
  int64_t count = rows * cols;
  for (int trial = 0; trial < 200; ++trial) {
    int64_t a = rng() % (count + 1), b = rng() % (count + 1);
    if (trial == 0)
      a = 0, b = count;
    int64_t begin = std::min(a, b), end = std::max(a, b);
    std::vector<uint16_t> out(end - begin);
    ASSERT_TRUE(
        succeeded(copyWeightValues(*storage, begin, end, WeightElement::F16,
                                   reinterpret_cast<char *>(out.data()))));
    ASSERT_TRUE(std::equal(out.begin(), out.end(), expected.begin() + begin))
        << "values [" << begin << ", " << end << ")";
  }
  EXPECT_TRUE(failed(
      copyWeightValues(*storage, 0, count + 1, WeightElement::F16, nullptr)));
}

TEST_F(WeightViewTest, TransposesWideElements) {
  // 32-bit elements (4 x 4 register blocks) and bytes (scalar), with rows
  // and columns that are not multiples of the blocks or tiles.
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{67, 130}, {5, 3}}) {
    std::vector<float> values(rows * cols);
    for (size_t i = 0; i < values.size(); ++i)
      values[i] = static_cast<float>(i);
    auto source =
        DenseElementsAttr::get(type({rows, cols}, f32()), ArrayRef(values));
    FailureOr<WeightStorage> storage = getWeightStorage(
        getWeightView(source, type({cols, rows}, f32()), true));
    ASSERT_TRUE(succeeded(storage));
    int64_t begin = 3, end = rows * cols - 2;
    std::vector<float> out(end - begin);
    ASSERT_TRUE(
        succeeded(copyWeightValues(*storage, begin, end, WeightElement::F32,
                                   reinterpret_cast<char *>(out.data()))));
    for (int64_t i = begin; i < end; ++i)
      ASSERT_EQ(out[i - begin], values[(i % rows) * cols + i / rows]) << i;
  }
  std::vector<int8_t> bytes(9 * 11);
  for (size_t i = 0; i < bytes.size(); ++i)
    bytes[i] = static_cast<int8_t>(i);
  auto source = DenseElementsAttr::get(
      type({9, 11}, IntegerType::get(&context, 8)), ArrayRef(bytes));
  ElementsAttr view =
      getWeightView(source, type({11, 9}, IntegerType::get(&context, 8)), true);
  FailureOr<std::vector<char>> read = readWeightValues(view);
  ASSERT_TRUE(succeeded(read));
  for (int64_t i = 0; i < 99; ++i)
    ASSERT_EQ((*read)[i], bytes[(i % 9) * 11 + i / 9]) << i;
}

TEST_F(WeightViewTest, ConversionsRoundThroughTheViewType) {
  // 1 + 2^-11 is halfway between 1 and the next half: to even, 1.
  // 1 + 3 * 2^-11 is halfway between 1 + 2^-10 and 1 + 2^-9: to even, the
  // latter.
  std::vector<float> values = {1.0f + 1.0f / 2048, 1.0f + 3.0f / 2048, -2.5f,
                               65520.0f};
  auto source = DenseElementsAttr::get(type({4}, f32()), ArrayRef(values));
  ElementsAttr half = getWeightView(source, type({4}, f16()), false);
  FailureOr<WeightStorage> storage = getWeightStorage(half);
  ASSERT_TRUE(succeeded(storage));
  std::vector<float> read(4);
  ASSERT_TRUE(
      succeeded(copyWeightValues(*storage, 0, 4, WeightElement::F32,
                                 reinterpret_cast<char *>(read.data()))));
  EXPECT_EQ(read[0], 1.0f);
  EXPECT_EQ(read[1], 1.0f + 4.0f / 2048);
  EXPECT_EQ(read[2], -2.5f);
  EXPECT_TRUE(std::isinf(read[3])); // past the largest half
  std::vector<uint16_t> bits(4);
  ASSERT_TRUE(
      succeeded(copyWeightValues(*storage, 0, 4, WeightElement::BF16,
                                 reinterpret_cast<char *>(bits.data()))));
  EXPECT_EQ(bits[0], 0x3f80); // 1.0
  EXPECT_EQ(bits[2], 0xc020); // -2.5
  // The reader gives the view's own values.
  FailureOr<std::vector<char>> raw = readWeightValues(half);
  ASSERT_TRUE(succeeded(raw));
  uint16_t first;
  std::memcpy(&first, raw->data(), 2);
  EXPECT_EQ(first, 0x3c00);
}

TEST_F(WeightViewTest, HalvesRoundToNearestEvenInEveryPath) {
  // Random bit patterns and the edges (zeros, subnormals, the largest half
  // and what rounds past it, infinities, NaNs with payloads), converted
  // transposed and not: IEEE round to nearest even (APFloat), NaN to a
  // quiet NaN without payload. Vectorized groups of 8 meet NaNs too.
  std::vector<uint32_t> bits = {
      0x00000000, 0x80000000, 0x00000001, 0x33000000, 0x33000001, 0x38800000,
      0x387fc000, 0x477fe000, 0x477fefff, 0x477ff000, 0x7f7fffff, 0x7f800000,
      0xff800000, 0x7fc00000, 0xffc00001, 0x7f800001, 0x7fffffff, 0x3f800fff};
  std::mt19937 rng(21);
  while (bits.size() < 64 * 1024)
    bits.push_back(static_cast<uint32_t>(rng()));
  int64_t rows = 256, cols = 256;
  auto source = DenseElementsAttr::getFromRawBuffer(
      type({rows, cols}, f32()),
      ArrayRef<char>(reinterpret_cast<const char *>(bits.data()),
                     bits.size() * 4));
  auto expected = [&](uint32_t b) -> uint16_t {
    float x;
    std::memcpy(&x, &b, 4);
    if (std::isnan(x))
      return static_cast<uint16_t>(((b >> 16) & 0x8000) | 0x7e00);
    APFloat value(x);
    bool lost;
    value.convert(APFloat::IEEEhalf(), APFloat::rmNearestTiesToEven, &lost);
    return static_cast<uint16_t>(value.bitcastToAPInt().getZExtValue());
  };
  for (bool transposed : {false, true}) {
    ElementsAttr attr =
        transposed ? getWeightView(source, type({cols, rows}, f32()), true)
                   : ElementsAttr(source);
    FailureOr<WeightStorage> storage = getWeightStorage(attr);
    ASSERT_TRUE(succeeded(storage));
    std::vector<uint16_t> halves(bits.size());
    ASSERT_TRUE(
        succeeded(copyWeightValues(*storage, 0, rows * cols, WeightElement::F16,
                                   reinterpret_cast<char *>(halves.data()))));
    for (int64_t i = 0; i < rows * cols; ++i) {
      int64_t from = transposed ? (i % rows) * cols + i / rows : i;
      ASSERT_EQ(halves[i], expected(bits[from]))
          << std::hex << "f32 0x" << bits[from];
    }
  }
}

TEST_F(WeightViewTest, ViewsOfViewsFold) {
  std::vector<uint16_t> bits;
  DenseElementsAttr source = randomHalves(4, 6, bits);
  // f16 -> f32 (exact), then transposed: one view of the f16 source.
  ElementsAttr wide = getWeightView(source, type({4, 6}, f32()), false);
  auto both =
      dyn_cast<WeightViewAttr>(getWeightView(wide, type({6, 4}, f32()), true));
  ASSERT_TRUE(both);
  EXPECT_EQ(both.getSource(), ElementsAttr(source));
  EXPECT_TRUE(both.getTransposed());
  // Transposed twice, same type: the source itself.
  ElementsAttr flipped = getWeightView(source, type({6, 4}, f16()), true);
  EXPECT_EQ(getWeightView(flipped, type({4, 6}, f16()), true),
            ElementsAttr(source));
  // A narrowing view is not folded (its rounding matters): the next view
  // reads a copy of its values.
  ElementsAttr narrow = getWeightView(wide, type({4, 6}, bf16()), false);
  auto over = dyn_cast<WeightViewAttr>(
      getWeightView(narrow, type({6, 4}, f32()), true));
  ASSERT_TRUE(over);
  EXPECT_TRUE(isa<DenseElementsAttr>(over.getSource()));
  EXPECT_EQ(over.getSource().getElementType(), bf16());
  // What a view cannot be.
  EXPECT_FALSE(getWeightView(source, type({4, 6}, f16()), true));
  EXPECT_FALSE(getWeightView(source, type({24}, f16()), false));
}

TEST_F(WeightViewTest, MaterializesAndReadsResources) {
  std::vector<float> values = {1, 2, 3, 4, 5, 6};
  AsmResourceBlob blob =
      UnmanagedAsmResourceBlob::allocateInferAlign(ArrayRef<float>(values));
  auto resource =
      DenseResourceElementsAttr::get(type({2, 3}, f32()), "w", std::move(blob));
  ElementsAttr view = getWeightView(resource, type({3, 2}, f32()), true);
  DenseElementsAttr dense = materializeWeight(view);
  ASSERT_TRUE(dense);
  SmallVector<float> read(dense.getValues<float>());
  EXPECT_EQ(read, (SmallVector<float>{1, 4, 2, 5, 3, 6}));
  EXPECT_EQ(getWeightBytes(view), 24);
  // A resource whose blob is shorter than its type is not read.
  AsmResourceBlob shortBlob = UnmanagedAsmResourceBlob::allocateInferAlign(
      ArrayRef<float>(values).take_front(5));
  auto truncated = DenseResourceElementsAttr::get(type({2, 3}, f32()), "short",
                                                  std::move(shortBlob));
  EXPECT_TRUE(failed(getWeightStorage(truncated)));
  EXPECT_FALSE(materializeWeight(truncated));
}

TEST_F(WeightViewTest, SlicesReadTheirBlock) {
  // Blocks of a [45, 70] f16 source, read as stored and transposed, in f16
  // (copied as stored) and f32 (converted), over ranges that start and end
  // inside rows: each value is the source's at the block's offsets.
  int64_t rows = 45, cols = 70;
  std::vector<uint16_t> bits;
  DenseElementsAttr source = randomHalves(rows, cols, bits);
  std::mt19937 rng(17);
  for (bool transposed : {false, true}) {
    ElementsAttr whole =
        transposed ? getWeightView(source, type({cols, rows}, f16()), true)
                   : ElementsAttr(source);
    int64_t viewRows = transposed ? cols : rows;
    int64_t viewCols = transposed ? rows : cols;
    for (auto [r0, c0, n, m] :
         {std::array<int64_t, 4>{0, 0, viewRows / 2, viewCols},
          {viewRows / 2, 0, viewRows / 2, viewCols},
          {0, viewCols / 2, viewRows, viewCols / 2},
          {3, 5, 17, 33}}) {
      for (Type element : {f16(), f32()}) {
        ElementsAttr slice =
            getWeightSlice(whole, type({n, m}, f16()), {r0, c0});
        ASSERT_TRUE(isa_and_nonnull<WeightViewAttr>(slice));
        if (element != f16())
          slice = getWeightView(slice, type({n, m}, element), false);
        ASSERT_TRUE(slice);
        FailureOr<WeightStorage> storage = getWeightStorage(slice);
        ASSERT_TRUE(succeeded(storage));
        auto expected = [&](int64_t i) {
          int64_t r = r0 + i / m, c = c0 + i % m;
          uint16_t b = transposed ? bits[c * cols + r] : bits[r * cols + c];
          return halfToFloat(b);
        };
        for (int trial = 0; trial < 20; ++trial) {
          int64_t a = rng() % (n * m + 1), b = rng() % (n * m + 1);
          if (trial == 0)
            a = 0, b = n * m;
          int64_t begin = std::min(a, b), end = std::max(a, b);
          std::vector<float> out(end - begin);
          ASSERT_TRUE(succeeded(
              copyWeightValues(*storage, begin, end, WeightElement::F32,
                               reinterpret_cast<char *>(out.data()))));
          for (int64_t i = begin; i < end; ++i)
            ASSERT_EQ(out[i - begin], expected(i))
                << "slice at " << r0 << ", " << c0 << (transposed ? " (t)" : "")
                << ": value " << i;
        }
        if (element == f16()) {
          std::vector<uint16_t> out(n * m);
          ASSERT_TRUE(succeeded(
              copyWeightValues(*storage, 0, n * m, WeightElement::F16,
                               reinterpret_cast<char *>(out.data()))));
          for (int64_t i = 0; i < n * m; ++i)
            ASSERT_EQ(halfToFloat(out[i]), expected(i)) << i;
        }
      }
    }
  }
}

TEST_F(WeightViewTest, SlicesCompose) {
  std::vector<uint16_t> bits;
  DenseElementsAttr source = randomHalves(4, 6, bits);
  // The whole is the source; a block outside is nothing.
  EXPECT_EQ(getWeightSlice(source, type({4, 6}, f16()), {0, 0}),
            ElementsAttr(source));
  EXPECT_FALSE(getWeightSlice(source, type({4, 4}, f16()), {0, 3}));
  EXPECT_FALSE(getWeightSlice(source, type({4, 6}, f32()), {0, 0}));
  // A block of a block is one view of the source.
  ElementsAttr outer = getWeightSlice(source, type({2, 6}, f16()), {2, 0});
  auto inner = dyn_cast_or_null<WeightViewAttr>(
      getWeightSlice(outer, type({2, 3}, f16()), {0, 3}));
  ASSERT_TRUE(inner);
  EXPECT_EQ(inner.getSource(), ElementsAttr(source));
  EXPECT_EQ(inner.getOffsets(), ArrayRef<int64_t>({2, 3}));
  // The transpose of a block is the transposed block.
  auto flipped = dyn_cast_or_null<WeightViewAttr>(
      getWeightView(inner, type({3, 2}, f16()), true));
  ASSERT_TRUE(flipped);
  EXPECT_TRUE(flipped.getTransposed());
  EXPECT_EQ(flipped.getOffsets(), ArrayRef<int64_t>({3, 2}));
  FailureOr<std::vector<char>> values = readWeightValues(flipped);
  ASSERT_TRUE(succeeded(values));
  for (int64_t r = 0; r < 3; ++r)
    for (int64_t c = 0; c < 2; ++c) {
      uint16_t b;
      std::memcpy(&b, values->data() + 2 * (r * 2 + c), 2);
      EXPECT_EQ(b, bits[(2 + c) * 6 + 3 + r]) << r << ", " << c;
    }
  // A block of a splat is a splat.
  auto splat = DenseElementsAttr::get(type({8, 4}, f32()), 1.5f);
  auto part = dyn_cast_or_null<DenseElementsAttr>(
      getWeightSlice(splat, type({4, 4}, f32()), {4, 0}));
  ASSERT_TRUE(part && part.isSplat());
  EXPECT_EQ(part.getSplatValue<float>(), 1.5f);
}

TEST_F(WeightViewTest, SliceStorageSpansItsRows) {
  std::vector<uint16_t> bits;
  DenseElementsAttr source = randomHalves(8, 10, bits);
  // Rows 2..4, columns 3..6: 3 rows of 4, 10 apart, from element 23.
  FailureOr<WeightStorage> storage =
      getWeightStorage(getWeightSlice(source, type({3, 4}, f16()), {2, 3}));
  ASSERT_TRUE(succeeded(storage));
  EXPECT_FALSE(storage->isContiguous());
  EXPECT_EQ(storage->storedRowStride(), 10);
  EXPECT_EQ(storage->data, source.getRawData().data() + 2 * 23);
  EXPECT_EQ(storage->storedSpan(), 2 * 10 + 4);
  // Whole rows follow each other.
  storage =
      getWeightStorage(getWeightSlice(source, type({4, 10}, f16()), {4, 0}));
  ASSERT_TRUE(succeeded(storage));
  EXPECT_TRUE(storage->isContiguous());
  EXPECT_EQ(storage->storedSpan(), 40);
}

TEST(MappedPages, ReleasesOnlyRegisteredMappings) {
  // A file mapping: its pages are dropped and read again when touched.
  char name[] = "/tmp/sits-mapped-XXXXXX";
  int fd = mkstemp(name);
  ASSERT_GE(fd, 0);
  size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  std::vector<char> bytes(8 * page);
  for (size_t i = 0; i < bytes.size(); ++i)
    bytes[i] = static_cast<char>(i * 13);
  ASSERT_EQ(write(fd, bytes.data(), bytes.size()),
            static_cast<ssize_t>(bytes.size()));
  void *base = mmap(nullptr, bytes.size(), PROT_READ, MAP_PRIVATE, fd, 0);
  ASSERT_NE(base, MAP_FAILED);
  const char *mapped = static_cast<const char *>(base);
  EXPECT_EQ(std::memcmp(mapped, bytes.data(), bytes.size()), 0);
  registerMappedRange(base, bytes.size());
  releaseMappedPages(mapped + 100, 5 * page); // whole pages 1..4
  EXPECT_EQ(std::memcmp(mapped, bytes.data(), bytes.size()), 0);
  unregisterMappedRange(base);
  munmap(base, bytes.size());
  close(fd);
  std::remove(name);

  // Other memory is left as it is.
  std::vector<char> heap(bytes);
  releaseMappedPages(heap.data(), heap.size());
  EXPECT_EQ(heap, bytes);
}

} // namespace
