//===- TensorTest.cpp - Rounding, conversions and .npy files --------------===//
//
// The fp16/bf16 rule of the reference executor: values are rounded to the
// nearest representable number, ties to even, overflowing to infinity. The
// expectations come from llvm::APFloat, an independent implementation.
//
//===----------------------------------------------------------------------===//

#include "compiler/reference/Tensor.h"
#include "compiler/reference/Npy.h"

#include "llvm/ADT/APFloat.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

using namespace sits::reference;

namespace {

float viaAPFloat(float value, const llvm::fltSemantics &semantics) {
  llvm::APFloat converted(value);
  bool lost;
  converted.convert(semantics, llvm::APFloat::rmNearestTiesToEven, &lost);
  converted.convert(llvm::APFloat::IEEEsingle(),
                    llvm::APFloat::rmNearestTiesToEven, &lost);
  return converted.convertToFloat();
}

float fromBits(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, 4);
  return value;
}

bool sameFloat(float a, float b) {
  if (std::isnan(a) || std::isnan(b))
    return std::isnan(a) && std::isnan(b);
  return std::memcmp(&a, &b, 4) == 0; // distinguishes -0 from +0
}

/// Float bit patterns that stress rounding: random ones, every pattern near
/// the f16/bf16 rounding boundaries, the subnormal ranges and overflow.
std::vector<float> interestingFloats() {
  std::vector<float> values;
  std::mt19937 random(1234);
  for (int i = 0; i < 200000; ++i)
    values.push_back(fromBits(random()));
  // Around ties: low mantissa bits 0x0fff..0x1001 (f16 keeps 10 of 23 bits)
  // and 0x7fff..0x8001 (bf16 keeps 7), for many exponents.
  for (uint32_t exponent = 0; exponent < 255; ++exponent)
    for (uint32_t high : {0u, 0x155u, 0x3ffu})
      for (int delta = -2; delta <= 2; ++delta) {
        uint32_t base = exponent << 23;
        values.push_back(fromBits(base | (high << 13) | (0x1000 + delta)));
        values.push_back(
            fromBits(base | ((high & 0x7f) << 16) | (0x8000 + delta)));
        values.push_back(
            fromBits(0x80000000u | base | (high << 13) | (0x1000 + delta)));
      }
  for (float special :
       {0.0f, -0.0f, 65504.0f, 65519.99f, 65520.0f, 1e9f, -70000.0f, 5.96e-8f,
        2.98e-8f, 2.99e-8f, 1e-10f, 3.4e38f, -3.39e38f, 1e-40f,
        std::numeric_limits<float>::infinity(),
        -std::numeric_limits<float>::infinity(),
        std::numeric_limits<float>::quiet_NaN()})
    values.push_back(special);
  return values;
}

TEST(Rounding, F16MatchesAPFloat) {
  for (float value : interestingFloats()) {
    float expected = viaAPFloat(value, llvm::APFloat::IEEEhalf());
    ASSERT_TRUE(sameFloat(roundToF16(value), expected))
        << "value " << value << " rounds to " << roundToF16(value)
        << ", APFloat says " << expected;
  }
}

TEST(Rounding, BF16MatchesAPFloat) {
  for (float value : interestingFloats()) {
    float expected = viaAPFloat(value, llvm::APFloat::BFloat());
    ASSERT_TRUE(sameFloat(roundToBF16(value), expected))
        << "value " << value << " rounds to " << roundToBF16(value)
        << ", APFloat says " << expected;
  }
}

TEST(Rounding, TiesGoToEven) {
  // 1 + 2^-11 lies halfway between 1 and the next f16 (1 + 2^-10).
  EXPECT_EQ(roundToF16(1.0f + 0x1p-11f), 1.0f);
  EXPECT_EQ(roundToF16(1.0f + 3 * 0x1p-11f), 1.0f + 2 * 0x1p-10f);
  EXPECT_EQ(roundToBF16(1.0f + 0x1p-8f), 1.0f);
  EXPECT_EQ(roundToBF16(1.0f + 3 * 0x1p-8f), 1.0f + 2 * 0x1p-7f);
  EXPECT_TRUE(std::isinf(roundToF16(65520.0f)));
  EXPECT_EQ(roundToF16(65519.0f), 65504.0f);
}

TEST(Tensor, ResultsRoundToTheirType) {
  Tensor tensor = Tensor::fromFloats(ElementType::F16, {3},
                                     {0.1f, 1.0f + 0x1p-11f, 70000.0f});
  EXPECT_EQ(tensor.floats()[0], roundToF16(0.1f));
  EXPECT_EQ(tensor.floats()[1], 1.0f);
  EXPECT_TRUE(std::isinf(tensor.floats()[2]));
  Tensor wrapped =
      Tensor::fromInts(ElementType::I32, {2}, {int64_t(1) << 32 | 5, -1});
  EXPECT_EQ(wrapped.ints()[0], 5);
  EXPECT_EQ(wrapped.ints()[1], -1);
}

TEST(Tensor, CastFollowsOnnx) {
  Tensor floats = Tensor::fromFloats(ElementType::F32, {5},
                                     {-2.7f, 2.7f, 0.0f, -0.0f, 0.5f});
  Tensor asInt = floats.castTo(ElementType::I64);
  EXPECT_EQ(std::vector<int64_t>(asInt.ints().begin(), asInt.ints().end()),
            (std::vector<int64_t>{-2, 2, 0, 0, 0}));
  Tensor asBool = floats.castTo(ElementType::I1);
  EXPECT_EQ(std::vector<int64_t>(asBool.ints().begin(), asBool.ints().end()),
            (std::vector<int64_t>{1, 1, 0, 0, 1}));
  Tensor back = asBool.castTo(ElementType::F16);
  EXPECT_EQ(back.floats()[0], 1.0f);
  EXPECT_EQ(back.getElementType(), ElementType::F16);
}

TEST(Npy, RoundTripsEveryType) {
  for (ElementType type :
       {ElementType::F32, ElementType::F16, ElementType::F64, ElementType::I64,
        ElementType::I32, ElementType::U32, ElementType::I16, ElementType::U16,
        ElementType::I8, ElementType::U8, ElementType::I1}) {
    Tensor tensor(type, {2, 3});
    for (int64_t i = 0; i < 6; ++i) {
      if (tensor.isFloat())
        tensor.floats()[i] = roundToF16(0.37f * i - 1.0f);
      else
        tensor.ints()[i] = type == ElementType::I1 ? i % 2 : i * 7 - 3;
    }
    tensor.setElementTypeAndRound(type);
    llvm::Expected<Tensor> parsed = parseNpy(serializeNpy(tensor));
    ASSERT_TRUE(bool(parsed)) << llvm::toString(parsed.takeError());
    EXPECT_EQ(parsed->getElementType(), type) << toString(type).str();
    EXPECT_EQ(parsed->getShape(), tensor.getShape());
    for (int64_t i = 0; i < 6; ++i)
      EXPECT_EQ(parsed->getAsDouble(i), tensor.getAsDouble(i));
  }
  // Rank 0 and 1 shapes print as () and (n,).
  for (Shape shape : {Shape{}, Shape{4}}) {
    Tensor tensor(ElementType::F32, shape);
    llvm::Expected<Tensor> parsed = parseNpy(serializeNpy(tensor));
    ASSERT_TRUE(bool(parsed)) << llvm::toString(parsed.takeError());
    EXPECT_EQ(parsed->getShape(), llvm::ArrayRef<int64_t>(shape));
  }
}

TEST(Npy, RejectsBadFiles) {
  auto message = [](llvm::StringRef bytes) {
    llvm::Expected<Tensor> parsed = parseNpy(bytes);
    return parsed ? std::string("parsed") : llvm::toString(parsed.takeError());
  };
  EXPECT_NE(message("not numpy").find("bad magic"), std::string::npos);
  std::string header =
      "{'descr': '<c8', 'fortran_order': False, 'shape': (2,), }";
  std::string file = std::string("\x93NUMPY\x01\x00", 8) + char(header.size()) +
                     '\0' + header + std::string(16, '\0');
  EXPECT_NE(message(file).find("unsupported dtype '<c8'"), std::string::npos);
  std::string truncated = serializeNpy(Tensor(ElementType::F32, {4}));
  truncated.resize(truncated.size() - 4);
  EXPECT_NE(message(truncated).find("data bytes"), std::string::npos);
}

} // namespace
