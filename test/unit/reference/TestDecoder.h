//===- TestDecoder.h - A small random decoder for the reference tests -*- C++ -*-//

#ifndef SITS_TEST_UNIT_REFERENCE_TESTDECODER_H
#define SITS_TEST_UNIT_REFERENCE_TESTDECODER_H

#include <cstdint>
#include <random>
#include <string>

namespace sits::reference::test {

constexpr int64_t kDecoderVocab = 40;

/// dense<"0x..."> of `count` random floats (raw little-endian data).
std::string randomDense(std::mt19937 &random, int64_t count, float scale,
                        float offset = 0.0f);

/// `@forward`: a two-layer Llama-style model in sits ops (GQA 4/2 heads of
/// 4, RoPE, SwiGLU, untied head, vocabulary 40), random weights, seeded.
std::string decoderSource();

} // namespace sits::reference::test

#endif // SITS_TEST_UNIT_REFERENCE_TESTDECODER_H
