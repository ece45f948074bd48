//===- PhiloxTest.cpp - The sampler's random numbers (host side) ----------===//
//
// The sampling kernel and this host function share one Philox4x32-10
// implementation; these are the published known-answer vectors of the
// algorithm (Random123's kat_vectors).
//
//===----------------------------------------------------------------------===//

#include "src/Sampling.h"

#include <array>

#include <gtest/gtest.h>

namespace {

void expectPhilox(std::array<uint32_t, 4> counter, std::array<uint32_t, 2> key,
                  std::array<uint32_t, 4> expected) {
  uint32_t out[4];
  sits::runtime::philox4x32(counter.data(), key.data(), out);
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(out[i], expected[i]) << "word " << i;
}

TEST(Philox4x32, KnownAnswers) {
  expectPhilox({0, 0, 0, 0}, {0, 0},
               {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8});
  expectPhilox({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
               {0xffffffff, 0xffffffff},
               {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd});
  expectPhilox({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
               {0xa4093822, 0x299f31d0},
               {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1});
}

} // namespace
