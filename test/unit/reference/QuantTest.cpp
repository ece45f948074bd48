//===- QuantTest.cpp - Quantization rounding, the quantized KV cache ------===//
//
// The rounding rules of sits.quantize/sits.dequantize (dialects/sits/
// QuantMath.h) on values computed by hand, their edge cases (ties, all-zero
// and non-finite groups, saturated scales, partial groups, int4 packing), the
// kernels of the reference executor, and the quantized KV cache: a prefill
// step must read exactly what the same tokens decoded one at a time read.
//
//===----------------------------------------------------------------------===//

#include "compiler/reference/Verification.h"
#include "compiler/registration/Registration.h"
#include "dialects/sits/QuantMath.h"
#include "dialects/sits/SitsOps.h"
#include "test/unit/reference/TestDecoder.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "llvm/ADT/APFloat.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <thread>

using namespace sits;
using namespace sits::reference;

namespace {

float halfByAPFloat(float value) {
  llvm::APFloat converted(value);
  bool lost;
  converted.convert(llvm::APFloat::IEEEhalf(),
                    llvm::APFloat::rmNearestTiesToEven, &lost);
  converted.convert(llvm::APFloat::IEEEsingle(),
                    llvm::APFloat::rmNearestTiesToEven, &lost);
  return converted.convertToFloat();
}

bool sameFloat(float a, float b) {
  if (std::isnan(a) || std::isnan(b))
    return std::isnan(a) && std::isnan(b);
  return std::memcmp(&a, &b, 4) == 0; // -0 and +0 differ
}

TEST(QuantMath, RoundToHalfMatchesAPFloat) {
  const float edges[] = {
      0.0f,     -0.0f,    65504.0f,   65519.996f, 65520.0f, -65520.0f,
      0x1p-24f, 0x1p-25f, 0x1.8p-25f, 0x1.8p-24f, 0x1p-14f, 0x1.ffcp-15f,
      1e-30f,   3.0e38f,  INFINITY,   -INFINITY,  NAN,      0.142857149f};
  for (float value : edges)
    EXPECT_TRUE(sameFloat(quant::roundToHalf(value), halfByAPFloat(value)))
        << value;
  // A stride through every exponent and many mantissas, both signs.
  for (uint64_t bits = 0; bits < (1ull << 32); bits += 4099) {
    uint32_t raw = static_cast<uint32_t>(bits);
    float value;
    std::memcpy(&value, &raw, 4);
    ASSERT_TRUE(sameFloat(quant::roundToHalf(value), halfByAPFloat(value)))
        << "bits 0x" << std::hex << raw;
  }
}

/// Quantizes one row of `values` in groups of `group`.
struct Row {
  std::vector<int8_t> data;
  std::vector<float> scales;
  quant::QuantStats stats;
  quant::GroupLayout layout;
};
Row quantizeRow(std::vector<float> values, int64_t group, unsigned bits,
                int64_t padding = 0, bool half = true) {
  Row row;
  row.layout.shape = {1, static_cast<int64_t>(values.size())};
  row.layout.axis = 1;
  row.layout.groupSize = group;
  row.layout.bits = bits;
  row.layout.rowBytes =
      quant::GroupLayout::packedRowBytes(values.size(), bits) + padding;
  EXPECT_FALSE(row.layout.check());
  row.data.assign(row.layout.numDataBytes(), 0x55);
  row.scales.resize(row.layout.numScales());
  quant::quantize(values.data(), row.layout, half, row.data.data(),
                  row.scales.data(), &row.stats);
  return row;
}

TEST(QuantMath, Int4ByHand) {
  // Group 0: absmax 7 -> scale 1: ties go to even (0.5 -> 0, 1.5 -> 2,
  // 2.5 -> 2, -2.5 -> -2). Group 1: all ones -> scale f16(1/7) = 1170 *
  // 2^-13, and 1 / scale = 7.0017 -> 7.
  std::vector<float> values = {7.0f,  0.5f, 1.5f, 2.5f, -2.5f, -7.0f,
                               3.49f, 0.0f, 1,    1,    1,     1,
                               1,     1,    1,    1};
  Row row = quantizeRow(values, 8, 4, /*padding=*/8);
  ASSERT_EQ(row.scales.size(), 2u);
  EXPECT_EQ(row.scales[0], 1.0f);
  EXPECT_EQ(row.scales[1], 1170.0f * 0x1p-13f);
  std::vector<int8_t> expected = {
      // (7, 0), (2, 2), (-2, -7), (3, 0): low nibble first.
      0x07, 0x22, static_cast<int8_t>(0x9E), 0x03, 0x77, 0x77, 0x77, 0x77,
      // 8 bytes of padding, zero.
      0, 0, 0, 0, 0, 0, 0, 0};
  EXPECT_EQ(row.data, expected);
  EXPECT_EQ(row.stats.clipped, 0);
  EXPECT_EQ(quant::unpackNibble(row.data.data(), 4), -2);
  EXPECT_EQ(quant::unpackNibble(row.data.data(), 5), -7);
  std::vector<float> back(values.size());
  quant::dequantize(row.data.data(), row.scales.data(), row.layout,
                    back.data());
  EXPECT_EQ(back[2], 2.0f);
  EXPECT_EQ(back[4], -2.0f);
  EXPECT_EQ(back[9], 7 * 1170.0f * 0x1p-13f);
}

TEST(QuantMath, Int8PartialGroupAndF32Scales) {
  // 5 values in groups of 2: the last group holds one value.
  std::vector<float> values = {127.0f, -63.5f, 1.0f, 0.25f, -3.0f};
  Row row = quantizeRow(values, 2, 8, 0, /*half=*/false);
  ASSERT_EQ(row.scales.size(), 3u);
  EXPECT_EQ(row.scales[0], 1.0f);
  EXPECT_EQ(row.scales[1], 1.0f / 127.0f);
  EXPECT_EQ(row.scales[2], 3.0f / 127.0f);
  // -63.5 is a tie: -64 is even.
  EXPECT_EQ(row.data, (std::vector<int8_t>{127, -64, 127, 32, -127}));
}

TEST(QuantMath, SpecialGroups) {
  float nan = std::numeric_limits<float>::quiet_NaN();
  // Zero group, a group with NaN, one with infinity, one whose scale
  // saturates at 65504 (and clips), one whose f16 scale underflows to 0.
  std::vector<float> values = {0,        0,   1,   nan,   2,
                               INFINITY, 1e6, 5e5, 1e-9f, -1e-9f};
  Row row = quantizeRow(values, 2, 4);
  EXPECT_EQ(row.scales[0], 0.0f);
  EXPECT_TRUE(std::isnan(row.scales[1]));
  EXPECT_TRUE(std::isnan(row.scales[2]));
  EXPECT_EQ(row.scales[3], 65504.0f);
  EXPECT_EQ(row.scales[4], 0.0f);
  std::vector<float> back(values.size());
  quant::dequantize(row.data.data(), row.scales.data(), row.layout,
                    back.data());
  EXPECT_EQ(back[0], 0.0f);
  EXPECT_TRUE(std::isnan(back[2]) && std::isnan(back[3]));
  EXPECT_TRUE(std::isnan(back[4]) && std::isnan(back[5]));
  // 1e6 / 65504 = 15.3 -> clipped to 7; 5e5 / 65504 = 7.6 -> clipped too.
  EXPECT_EQ(back[6], 7 * 65504.0f);
  EXPECT_EQ(back[7], 7 * 65504.0f);
  EXPECT_EQ(row.stats.clipped, 2);
  EXPECT_EQ(back[8], 0.0f);
  EXPECT_EQ(row.stats.groups, 5);
  EXPECT_EQ(row.stats.finiteScales, 3);
}

TEST(QuantMath, ErrorIsAtMostHalfAScale) {
  std::mt19937 random(3);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  for (unsigned bits : {4u, 8u}) {
    std::vector<float> values(1000);
    for (float &v : values)
      v = normal(random);
    Row row = quantizeRow(values, 64, bits);
    std::vector<float> back(values.size());
    quant::dequantize(row.data.data(), row.scales.data(), row.layout,
                      back.data());
    for (size_t i = 0; i < values.size(); ++i) {
      float scale = row.scales[i / 64];
      EXPECT_LE(std::fabs(values[i] - back[i]), scale * 0.5f * (1 + 1e-6f))
          << "bits " << bits << ", element " << i;
    }
  }
}

TEST(QuantMath, PartsQuantizedConcurrentlyEqualTheWhole) {
  // sitsc quantizes a weight in blocks of rows on several threads
  // (quantizeOuter, mergeStats): the bytes, scales and statistics must be
  // those of one pass over the whole tensor, int4 nibbles of neighbouring
  // rows included.
  for (unsigned bits : {4u, 8u}) {
    quant::GroupLayout layout;
    layout.shape = {37, 70}; // odd rows, a partial group, padded rows
    layout.axis = 1;
    layout.groupSize = 32;
    layout.bits = bits;
    layout.rowBytes =
        (quant::GroupLayout::packedRowBytes(70, bits) + 15) / 16 * 16;
    ASSERT_FALSE(layout.check());
    std::mt19937 random(7);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> values(layout.numElements());
    for (float &value : values)
      value = normal(random);
    values[5] = 40.0f; // an outlier: scales far apart
    const std::vector<float> ratios = {1.0f, 0.9f, 0.8f};

    std::vector<int8_t> wholeData(layout.numDataBytes(), 0x55);
    std::vector<float> wholeScales(layout.numScales());
    quant::QuantStats wholeStats;
    quant::quantize(values.data(), layout, true, wholeData.data(),
                    wholeScales.data(), &wholeStats, ratios);

    ASSERT_EQ(quant::outerSlices(layout), 37);
    std::vector<int8_t> data(layout.numDataBytes(), 0x55);
    std::vector<float> scales(layout.numScales());
    const int64_t bounds[] = {0, 5, 6, 20, 37};
    std::vector<quant::QuantStats> parts(4);
    std::vector<std::thread> threads;
    for (int part = 0; part < 4; ++part)
      threads.emplace_back([&, part] {
        quant::quantizeOuter(values.data() + bounds[part] * 70, layout,
                             bounds[part], bounds[part + 1], true, data.data(),
                             scales.data(), &parts[part], ratios);
      });
    for (std::thread &thread : threads)
      thread.join();
    quant::QuantStats stats;
    for (const quant::QuantStats &part : parts)
      quant::mergeStats(stats, part);

    EXPECT_EQ(data, wholeData) << bits;
    EXPECT_EQ(scales, wholeScales) << bits;
    EXPECT_EQ(stats.groups, wholeStats.groups);
    EXPECT_EQ(stats.values, wholeStats.values);
    EXPECT_EQ(stats.clipped, wholeStats.clipped);
    EXPECT_EQ(stats.finiteScales, wholeStats.finiteScales);
    EXPECT_EQ(stats.scaleMin, wholeStats.scaleMin);
    EXPECT_EQ(stats.scaleMax, wholeStats.scaleMax);
    EXPECT_EQ(stats.maxAbsError, wholeStats.maxAbsError);
    EXPECT_NEAR(stats.scaleSum, wholeStats.scaleSum,
                1e-12 * wholeStats.scaleSum);
    EXPECT_NEAR(stats.squaredError, wholeStats.squaredError,
                1e-12 * wholeStats.squaredError);
    EXPECT_GT(stats.squaredError, 0.0);
    EXPECT_EQ(stats.groups, 37 * 3);
  }
}

TEST(QuantMath, GroupsAlongAnInnerAxis) {
  // [2, 3, 2] grouped along axis 1 in groups of 2: groups {0,1} and {2}.
  quant::GroupLayout layout;
  layout.shape = {2, 3, 2};
  layout.axis = 1;
  layout.groupSize = 2;
  layout.bits = 8;
  layout.rowBytes = 2;
  ASSERT_FALSE(layout.check());
  EXPECT_EQ(layout.scaleShape(), (llvm::SmallVector<int64_t, 6>{2, 2, 2}));
  std::vector<float> values = {1, 10, 2, 20, 127, 40, -4, 0, 8, 0, 12, 0};
  std::vector<int8_t> data(layout.numDataBytes());
  std::vector<float> scales(layout.numScales());
  quant::quantize(values.data(), layout, false, data.data(), scales.data());
  // scale[o][g][i]: (0,0,0) = max(1, 2)/127, (0,0,1) = 20/127,
  // (0,1,0) = 127/127, (0,1,1) = 40/127.
  EXPECT_EQ(scales[0], 2.0f / 127);
  EXPECT_EQ(scales[1], 20.0f / 127);
  EXPECT_EQ(scales[2], 1.0f);
  EXPECT_EQ(scales[3], 40.0f / 127);
  EXPECT_EQ(data[4], 127);
  EXPECT_EQ(data[5], 127);
}

TEST(QuantMath, LayoutChecks) {
  quant::GroupLayout layout;
  layout.shape = {4, 32};
  layout.axis = 1;
  layout.groupSize = 32;
  layout.bits = 4;
  layout.rowBytes = 32;
  ASSERT_TRUE(layout.check());
  EXPECT_NE(layout.check()->find("need 16"), std::string::npos);
  layout.rowBytes = 16;
  layout.bits = 5;
  EXPECT_TRUE(layout.check());
  layout.bits = 4;
  layout.axis = 2;
  EXPECT_TRUE(layout.check());
}

//===----------------------------------------------------------------------===//
// Kernels and the quantized KV cache
//===----------------------------------------------------------------------===//

class QuantExecution : public ::testing::Test {
protected:
  QuantExecution() {
    mlir::DialectRegistry registry;
    sits::registerAllDialects(registry);
    sits::registerAllPasses();
    context.appendDialectRegistry(registry);
    context.loadAllAvailableDialects();
  }

  mlir::OwningOpRef<mlir::ModuleOp> compile(const std::string &pipeline) {
    auto module = mlir::parseSourceString<mlir::ModuleOp>(test::decoderSource(),
                                                          &context);
    EXPECT_TRUE(module);
    mlir::PassManager pm(&context);
    EXPECT_TRUE(mlir::succeeded(mlir::parsePassPipeline(pipeline, pm)));
    EXPECT_TRUE(mlir::succeeded(pm.run(*module)));
    return module;
  }

  mlir::MLIRContext context;
};

TEST_F(QuantExecution, KernelsMatchQuantMath) {
  auto module = mlir::parseSourceString<mlir::ModuleOp>(R"mlir(
    func.func @main(%x: tensor<?x6xf32>) -> (tensor<?x3xi8>, tensor<?x2xf16>, tensor<?x6xf32>) {
      %q, %s = sits.quantize %x {bits = 4, axis = 1, group_size = 4} : tensor<?x6xf32> -> tensor<?x3xi8>, tensor<?x2xf16>
      %d = sits.dequantize %q, %s {bits = 4, axis = 1, group_size = 4} : tensor<?x3xi8>, tensor<?x2xf16> -> tensor<?x6xf32>
      return %q, %s, %d : tensor<?x3xi8>, tensor<?x2xf16>, tensor<?x6xf32>
    })mlir",
                                                        &context);
  ASSERT_TRUE(module);
  std::vector<float> values = {7, 0.5f, 1.5f, -2.5f, 0.3f, -0.9f,
                               1, 2,    3,    4,     5,    6};
  Executor executor(*module);
  auto results = executor.run(
      "main", {Tensor::fromFloats(ElementType::F32, {2, 6}, values)});
  ASSERT_TRUE(bool(results)) << llvm::toString(results.takeError());
  quant::GroupLayout layout;
  layout.shape = {2, 6};
  layout.axis = 1;
  layout.groupSize = 4;
  layout.bits = 4;
  layout.rowBytes = 3;
  std::vector<int8_t> data(6);
  std::vector<float> scales(4), back(12);
  quant::quantize(values.data(), layout, true, data.data(), scales.data());
  quant::dequantize(data.data(), scales.data(), layout, back.data());
  const Tensor &q = (*results)[0].getTensor();
  const Tensor &s = (*results)[1].getTensor();
  const Tensor &d = (*results)[2].getTensor();
  for (int i = 0; i < 6; ++i)
    EXPECT_EQ(q.ints()[i], data[i]) << i;
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(s.floats()[i], scales[i]) << i;
  for (int i = 0; i < 12; ++i)
    EXPECT_EQ(d.floats()[i], back[i]) << i;
  EXPECT_EQ(d.floats()[1], 0.0f); // 0.5 ties to 0
}

/// Prefill of a whole sequence and token-by-token decoding read the same hot
/// and cold values at every position, so their logits are bit-identical.
void expectPrefillEqualsDecode(mlir::ModuleOp module, int64_t length) {
  Executor executor(module);
  llvm::Expected<Program> program = findProgram(module);
  ASSERT_TRUE(bool(program)) << llvm::toString(program.takeError());
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < length; ++i)
    ids.push_back((i * 11 + 5) % test::kDecoderVocab);
  llvm::Expected<Tensor> prefill =
      runLogits(executor, module, program->prefill,
                Tensor::fromInts(ElementType::I64, {1, length}, ids));
  ASSERT_TRUE(bool(prefill)) << llvm::toString(prefill.takeError());
  // Decode: prefill the first token, then one token per step; the logits of
  // step t are those of position t.
  std::shared_ptr<KVCacheState> cache;
  int64_t vocab = test::kDecoderVocab;
  for (int64_t t = 0; t < length; ++t) {
    llvm::StringRef name = t == 0 ? program->prefill : program->decode;
    auto function = module.lookupSymbol<mlir::func::FuncOp>(name);
    std::vector<RuntimeValue> args = {
        Tensor::fromInts(ElementType::I64, {1, 1}, {ids[t]})};
    if (!cache) {
      auto config = KVCacheConfig::fromType(
          mlir::cast<sits::KVCacheType>(function.getArgumentTypes()[1]));
      ASSERT_TRUE(bool(config));
      cache = std::make_shared<KVCacheState>(*config);
    }
    args.push_back(cache);
    auto results = executor.run(name, std::move(args));
    ASSERT_TRUE(bool(results)) << llvm::toString(results.takeError());
    cache = (*results)[1].getKVCache();
    const Tensor &logits = (*results)[0].getTensor();
    for (int64_t v = 0; v < vocab; ++v)
      ASSERT_EQ(logits.floats()[v], prefill->floats()[t * vocab + v])
          << "position " << t << ", token " << v;
  }
}

TEST_F(QuantExecution, PrefillReadsWhatDecodingReads) {
  // Per-channel int4 keys in blocks of 2 tokens, a hot window of 3.
  auto channel = compile("sits-kv-cache{max-seq-len=24 max-batch=2},"
                         "sits-insert-qdq{kv-cache=int4 kv-hot-window=3 "
                         "kv-keys=per-channel kv-channel-block=2}");
  expectPrefillEqualsDecode(*channel, 14);
  auto token = compile("sits-kv-cache{max-seq-len=24 max-batch=2},"
                       "sits-insert-qdq{kv-cache=int8 kv-hot-window=2 "
                       "kv-keys=per-token}");
  expectPrefillEqualsDecode(*token, 14);
}

TEST_F(QuantExecution, ColdTokensAreReadQuantized) {
  auto plain = compile("sits-kv-cache{max-seq-len=24 max-batch=2}");
  Tensor ids = Tensor::fromInts(ElementType::I64, {1, 12},
                                {1, 5, 9, 2, 33, 0, 7, 39, 4, 4, 8, 12});
  auto logitsOf = [&](mlir::ModuleOp module) {
    Executor executor(module);
    llvm::Expected<Tensor> logits = runLogits(executor, module, "prefill", ids);
    EXPECT_TRUE(bool(logits)) << llvm::toString(logits.takeError());
    return logits ? *logits : Tensor();
  };
  Tensor reference = logitsOf(*plain);
  // A window longer than the sequence: nothing is cold, only the FP16
  // rounding of the hot part changes the logits (slightly).
  auto hotOnly = compile("sits-kv-cache{max-seq-len=24 max-batch=2},"
                         "sits-insert-qdq{kv-cache=int4 kv-hot-window=24}");
  // A window of 1: every earlier token is read through int4.
  auto cold = compile("sits-kv-cache{max-seq-len=24 max-batch=2},"
                      "sits-insert-qdq{kv-cache=int4 kv-hot-window=1 "
                      "kv-keys=per-token}");
  Tensor hot = logitsOf(*hotOnly), quantized = logitsOf(*cold);
  auto hotDiff = compareTensors(hot, reference);
  auto coldDiff = compareTensors(quantized, reference);
  ASSERT_TRUE(bool(hotDiff) && bool(coldDiff));
  // Position 0 sees only itself (always hot): identical up to FP16.
  for (int64_t v = 0; v < test::kDecoderVocab; ++v)
    EXPECT_EQ(quantized.floats()[v], hot.floats()[v]);
  EXPECT_LT(hotDiff->maxAbsError, 2e-2);
  EXPECT_GT(coldDiff->maxAbsError, hotDiff->maxAbsError);
}

} // namespace
