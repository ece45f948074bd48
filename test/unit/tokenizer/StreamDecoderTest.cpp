//===- StreamDecoderTest.cpp - TokenStreamDecoder -------------------------===//
//
// The pieces a TokenStreamDecoder returns add up to decode() of all the ids,
// for random id sequences too; no piece ends in half a character; position-
// dependent decoders (Strip of the first space, of the joined text's ends)
// and byte-fallback runs come out as decode() has them.
//
//===----------------------------------------------------------------------===//

#include "TokenizerTestUtil.h"

#include <random>
#include <utility>

using namespace sits;
using namespace sits::test;

namespace {

using Ids = std::vector<int32_t>;

int32_t byteId(unsigned char b) { return 3 + b; }

std::vector<std::string> streamPieces(std::shared_ptr<const Tokenizer> tok,
                                      const Ids &ids, bool skipSpecial) {
  TokenStreamDecoder stream(std::move(tok), skipSpecial);
  std::vector<std::string> pieces;
  for (int32_t id : ids)
    pieces.push_back(stream.push(id));
  pieces.push_back(stream.finish());
  return pieces;
}

std::string join(const std::vector<std::string> &pieces) {
  std::string text;
  for (const std::string &piece : pieces)
    text += piece;
  return text;
}

/// Whether `text` ends inside a UTF-8 character.
bool endsMidCharacter(const std::string &text) {
  size_t i = text.size();
  size_t continuation = 0;
  while (i > 0 && (static_cast<unsigned char>(text[i - 1]) & 0xC0) == 0x80) {
    --i;
    ++continuation;
  }
  if (i == 0)
    return continuation > 0;
  auto lead = static_cast<unsigned char>(text[i - 1]);
  size_t expected = lead < 0x80 ? 0 : lead < 0xE0 ? 1 : lead < 0xF0 ? 2 : 3;
  return continuation < expected;
}

TEST(TokenStreamDecoderTest, PiecesAddUpToDecodeOnRandomIds) {
  for (json config : {sentencePieceJson(), byteLevelJson()}) {
    auto tok = load(config);
    std::mt19937 rng(42);
    std::uniform_int_distribution<int32_t> anyId(
        0, static_cast<int32_t>(tok->vocabSize()) - 1);
    std::uniform_int_distribution<int> length(1, 30), coin(0, 3);
    for (int trial = 0; trial < 3000; ++trial) {
      Ids ids;
      for (int i = length(rng); i > 0; --i) {
        // Often special tokens and multi-byte pieces of characters.
        int kind = coin(rng);
        ids.push_back(
            kind == 0 ? std::uniform_int_distribution<int32_t>(0, 2)(rng)
            : kind == 1
                ? static_cast<int32_t>(
                      std::uniform_int_distribution<int>(0xC0, 0xFF)(rng))
                : anyId(rng));
      }
      for (bool skip : {true, false}) {
        auto pieces = streamPieces(tok, ids, skip);
        ASSERT_EQ(join(pieces), tok->decode(ids, skip))
            << tok->kind() << ", trial " << trial;
        for (size_t i = 0; i + 1 < pieces.size(); ++i)
          ASSERT_FALSE(endsMidCharacter(join(std::vector<std::string>(
              pieces.begin(), pieces.begin() + i + 1))));
      }
    }
  }
}

TEST(TokenStreamDecoderTest, ByteLevelHoldsIncompleteCharacters) {
  auto tok = load(byteLevelJson());
  TokenStreamDecoder stream(tok);
  EXPECT_EQ(stream.push('a'), "a");
  EXPECT_EQ(stream.push(0xE4), "");
  EXPECT_EQ(stream.push(0xBD), "");
  EXPECT_EQ(stream.push(0xA0), "\xE4\xBD\xA0");
  EXPECT_EQ(stream.push(0xF0), "");
  // A character that never completes comes out as decode() writes it.
  EXPECT_EQ(stream.finish(), "\xEF\xBF\xBD");
  EXPECT_EQ(stream.push('b'), "b"); // the decoder starts afresh
}

TEST(TokenStreamDecoderTest, FirstTokenSpaceAndSpecialTokens) {
  auto tok = load(sentencePieceJson());
  constexpr int32_t kS = 1, kSpaceA = 263, kSpaceAB = 266;
  // Strip removes the space of the first token only.
  EXPECT_EQ(streamPieces(tok, {kS, kSpaceAB, kSpaceA, kSpaceA}, true),
            (std::vector<std::string>{"", "ab", " a", " a", ""}));
  EXPECT_EQ(streamPieces(tok, {kS, kSpaceAB, kSpaceA}, false),
            (std::vector<std::string>{"<s>", " ab", " a", ""}));
}

TEST(TokenStreamDecoderTest, StripsOfTheJoinedTextsEndsKeepInnerSpaces) {
  // A Strip after the Fuse strips the ends of the joined text, and a
  // window's ends are not the sequence's: a window starts only where the
  // ids already emitted decode to some text, and runs of space tokens
  // inside the text keep every space (with any window, each space token of
  // a run lost some; found by the fuzz target). Long runs reach the 64
  // tokens a new window's start is looked for.
  constexpr int32_t kSpace = 259, kA = 260;
  // With `twice`, a second Strip after it, of 'a' (the id kA).
  struct Strip {
    const char *content;
    int start, stop;
    bool twice = false;
  };
  for (Strip strip : {Strip{" ", 1, 5}, Strip{" ", 3, 0}, Strip{" ", 0, 2},
                      Strip{" ", 1, 0}, Strip{" ", 2, 2}, Strip{" ", 90, 70},
                      Strip{"a", 2, 1}, Strip{" ", 1, 2, true}}) {
    json config = sentencePieceJson();
    json &decoders = config["decoder"]["decoders"];
    decoders[3]["content"] = strip.content;
    decoders[3]["start"] = strip.start;
    decoders[3]["stop"] = strip.stop;
    if (strip.twice) {
      decoders.push_back(decoders[3]);
      decoders[4]["content"] = "a";
    }
    auto tok = load(config);
    std::string name = "'" + std::string(strip.content) + "' start " +
                       std::to_string(strip.start) + ", stop " +
                       std::to_string(strip.stop) +
                       (strip.twice ? ", twice" : "");
    for (int run : {12, 100}) {
      Ids ids = {kA};
      ids.insert(ids.end(), run, kSpace);
      ids.push_back(kA);
      ids.insert(ids.end(), run / 2 + 1, kSpace);
      EXPECT_EQ(join(streamPieces(tok, ids, true)), tok->decode(ids, true))
          << name << ", runs of " << run;
    }
    std::mt19937 rng(7);
    std::uniform_int_distribution<int32_t> anyId(
        0, static_cast<int32_t>(tok->vocabSize()) - 1);
    std::uniform_int_distribution<int> length(1, 30), coin(0, 1);
    for (int trial = 0; trial < 500; ++trial) {
      Ids random;
      for (int i = length(rng); i > 0; --i)
        random.push_back(coin(rng) ? kSpace : anyId(rng));
      for (bool skip : {true, false})
        ASSERT_EQ(join(streamPieces(tok, random, skip)),
                  tok->decode(random, skip))
            << name << ", trial " << trial;
    }
  }
}

TEST(TokenStreamDecoderTest, ByteFallbackRunsComeOutWhole) {
  auto tok = load(sentencePieceJson());
  constexpr int32_t kA = 260, kSpaceA = 263;
  // A run of byte tokens is held until it ends: a later byte could make
  // the whole run invalid (one U+FFFD per byte).
  EXPECT_EQ(streamPieces(tok, {byteId('A'), byteId(0x80), kA}, true),
            (std::vector<std::string>{"", "",
                                      "\xEF\xBF\xBD\xEF\xBF\xBD"
                                      "a",
                                      ""}));
  EXPECT_EQ(streamPieces(
                tok, {byteId(0xE4), byteId(0xBD), byteId(0xA0), kSpaceA}, true),
            (std::vector<std::string>{"", "", "", "\xE4\xBD\xA0 a", ""}));
  // A skipped special token does not end a run.
  EXPECT_EQ(join(streamPieces(
                tok, {byteId(0xE4), 2, byteId(0xBD), byteId(0xA0)}, true)),
            "\xE4\xBD\xA0");
}

TEST(TokenStreamDecoderTest, NegativeIdsAreRefusedIdsPastTheVocabSkipped) {
  auto tok = load(byteLevelJson());
  TokenStreamDecoder stream(tok);
  EXPECT_EQ(stream.push('x'), "x");
  expectError([&] { stream.push(-3); }, ErrorCode::TokenOutOfVocab,
              "token id -3");
  EXPECT_EQ(stream.push(static_cast<int32_t>(tok->vocabSize())), "");
  EXPECT_EQ(stream.push('y'), "y");
  TokenStreamDecoder moved = std::move(stream);
  EXPECT_EQ(moved.push('z'), "z");
  EXPECT_EQ(moved.finish(), "");
}

} // namespace
