//===- EncodeDecodeTest.cpp - Tokenizer behavior on hand-made vocabularies ===//
//
// Small vocabularies whose ids can be worked out by hand: merge ranks, byte
// fallback, unknown tokens, ignore_merges, added-token ids, invalid text and
// out-of-range ids. (test/runtime/tokenizer compares real-sized tokenizers
// with the `tokenizers` package.)
//
//===----------------------------------------------------------------------===//

#include "TokenizerTestUtil.h"

#include <thread>

using namespace sits;
using namespace sits::test;

namespace {

using Ids = std::vector<int32_t>;

// Ids of the SentencePiece-style vocabulary of sentencePieceJson().
constexpr int32_t kS = 1, kUnk = 0, kSpace = 259, kA = 260, kB = 261, kC = 262,
                  kSpaceA = 263, kAB = 264, kBC = 265, kSpaceAB = 266;
int32_t byteId(unsigned char b) { return 3 + b; }

TEST(TokenizerEncodeTest, MergesApplyInRankOrder) {
  auto tok = load(sentencePieceJson());
  // "▁ab": (▁,a) has rank 0, then (▁a,b) rank 3.
  EXPECT_EQ(tok->encode("ab"), (Ids{kS, kSpaceAB}));
  // "▁abc": (▁,a) first, then (b,c) at rank 2 before (▁a,b) at rank 3.
  EXPECT_EQ(tok->encode("abc"), (Ids{kS, kSpaceA, kBC}));
  EXPECT_EQ(tok->encode("cab", false), (Ids{kSpace, kC, kAB}));

  // The same pairs with the opposite ranks merge the other way.
  json config =
      tokenizerJson(bpeModel({"a", "b", "c", "ab", "bc"}, {"a b", "b c"}));
  EXPECT_EQ(load(config)->encode("abc"), (Ids{3, 2}));
  config["model"]["merges"] = {"b c", "a b"};
  EXPECT_EQ(load(config)->encode("abc"), (Ids{0, 4}));
  // Equal ranks (the same pair twice): leftmost first.
  config = tokenizerJson(bpeModel({"a", "aa"}, {"a a"}));
  EXPECT_EQ(load(config)->encode("aaa"), (Ids{1, 0}));
}

TEST(TokenizerEncodeTest, ByteFallbackAndUnknown) {
  auto tok = load(sentencePieceJson());
  EXPECT_EQ(tok->encode("x", false), (Ids{kSpace, byteId('x')}));
  EXPECT_EQ(tok->encode("\xC3\xA9\xC3\xBC", false),
            (Ids{kSpace, 267, byteId(0xC3), byteId(0xBC)}));
  EXPECT_EQ(tok->encode("", true), (Ids{kS}));
  EXPECT_EQ(tok->encode("", false), Ids{});

  // Without byte fallback: the unknown token, fused or not.
  json config = sentencePieceJson();
  config["model"]["byte_fallback"] = false;
  EXPECT_EQ(load(config)->encode("xyz a", false), (Ids{kSpace, kUnk, kSpaceA}));
  config["model"]["fuse_unk"] = false;
  EXPECT_EQ(load(config)->encode("xyz a", false),
            (Ids{kSpace, kUnk, kUnk, kUnk, kSpaceA}));
  // Without an unknown token, unknown characters are dropped.
  config["model"]["unk_token"] = nullptr;
  EXPECT_EQ(load(config)->encode("xyz a", false), (Ids{kSpace, kSpaceA}));
}

TEST(TokenizerEncodeTest, IgnoreMerges) {
  json config = tokenizerJson(bpeModel({"a", "b", "c", "ab", "abc"}, {"a b"}));
  EXPECT_EQ(load(config)->encode("abc"), (Ids{3, 2}));
  config["model"]["ignore_merges"] = true; // a whole-word entry wins
  EXPECT_EQ(load(config)->encode("abc"), (Ids{4}));
  EXPECT_EQ(load(config)->encode("abcab"), (Ids{3, 2, 3}));
}

TEST(TokenizerEncodeTest, ByteLevel) {
  auto tok = load(byteLevelJson());
  // GPT-2's regex cuts "the" and " the"; a space is "Ġ".
  EXPECT_EQ(tok->encode("the the"), (Ids{'t', 257, 258}));
  EXPECT_EQ(tok->encode("<|endoftext|>x"), (Ids{259, 'x'}));
  EXPECT_EQ(tok->encode("\xE4\xBD\xA0"), (Ids{0xE4, 0xBD, 0xA0}));
  EXPECT_EQ(tok->decode({0xE4, 0xBD, 0xA0}), "\xE4\xBD\xA0");
  // An incomplete character is one U+FFFD, as Rust's from_utf8_lossy.
  EXPECT_EQ(tok->decode({'a', 0xE4, 0xBD}), "a\xEF\xBF\xBD");
  EXPECT_EQ(tok->decode({0xE0, 0x80}), "\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(tok->decode({259, 't'}, true), "t");
  EXPECT_EQ(tok->decode({259, 't'}, false), "<|endoftext|>t");
}

TEST(TokenizerDecodeTest, SentencePiece) {
  auto tok = load(sentencePieceJson());
  EXPECT_EQ(tok->decode({kS, kSpaceAB, kSpaceA}), "ab a");
  EXPECT_EQ(tok->decode({kS, kSpaceAB}, false), "<s> ab");
  // A run of byte tokens decodes as a whole: valid, or U+FFFD per byte.
  EXPECT_EQ(tok->decode({byteId(0xE4), byteId(0xBD), byteId(0xA0), kA}),
            "\xE4\xBD\xA0"
            "a");
  EXPECT_EQ(tok->decode({byteId('A'), byteId(0x80), kA}),
            "\xEF\xBF\xBD\xEF\xBF\xBD"
            "a");
  EXPECT_EQ(tok->decode({byteId(0xE4), byteId(0xBD)}),
            "\xEF\xBF\xBD\xEF\xBF\xBD");
}

TEST(TokenizerDecodeTest, IdsOutsideTheVocabulary) {
  auto tok = load(sentencePieceJson());
  EXPECT_EQ(tok->vocabSize(), 268u);
  expectError(
      [&] {
        tok->decode({kA, -1});
      },
      ErrorCode::TokenOutOfVocab,
      "token id -1 is outside the vocabulary [0, 268)");
  // Ids past the vocabulary (a model's padded rows) decode to nothing, as
  // in `tokenizers`.
  EXPECT_EQ(tok->decode({kA, 268, 1 << 30, kA}), tok->decode({kA, kA}));
  // An id inside the range that names no token is dropped, as in
  // `tokenizers`.
  json config = tokenizerJson(bpeModel({"a", "b"}, {}));
  config["model"]["vocab"] = {{"a", 0}, {"b", 3}};
  auto holes = load(config);
  EXPECT_EQ(holes->vocabSize(), 4u);
  EXPECT_EQ(holes->decode({0, 1, 3}), "a b"); // no decoder: joined by spaces
  EXPECT_EQ(holes->idToToken(1), "");
}

TEST(TokenizerEncodeTest, InvalidUtf8) {
  auto tok = load(byteLevelJson());
  struct Case {
    const char *text;
    size_t offset;
  } cases[] = {{"ab\xC0\xAF", 2},     {"\xE0\x80\xAF", 0},
               {"x\xED\xA0\x80", 1},  {"\xF4\x90\x80\x80", 0},
               {"hello \xE4\xBD", 6}, {"\xE4\xBDx", 0},
               {"abc\x80", 3},        {"\xFF", 0}};
  for (const Case &c : cases)
    expectError([&] { tok->encode(c.text); }, ErrorCode::InvalidText,
                "text is not valid UTF-8 at byte offset " +
                    std::to_string(c.offset));
  EXPECT_NO_THROW(tok->encode("\xF4\x8F\xBF\xBF \xEF\xBF\xBD"));
}

TEST(TokenizerAddedTokensTest, IdsAsTokenizersGivesThem) {
  json config = tokenizerJson(bpeModel({"a", "b", "ab"}, {"a b"}));
  // The id in the file does not decide: the vocabulary's id of the
  // content does, else the next id after the vocabulary.
  config["added_tokens"] = {addedToken(7, "<x>", true),
                            addedToken(0, "ab", false),
                            addedToken(42, "<y>", true)};
  auto tok = load(config);
  EXPECT_EQ(tok->tokenToId("<x>"), 3);
  EXPECT_EQ(tok->tokenToId("ab"), 2);
  EXPECT_EQ(tok->tokenToId("<y>"), 4);
  EXPECT_EQ(tok->vocabSize(), 5u);
  ASSERT_EQ(tok->addedTokens().size(), 3u);
  EXPECT_EQ(tok->addedTokens()[0].id, 2);
  EXPECT_EQ(tok->addedTokens()[0].content, "ab");
  EXPECT_EQ(tok->encode("<y>ab<x>"), (Ids{4, 2, 3}));
  EXPECT_EQ(tok->idToToken(3), "<x>");
  EXPECT_EQ(tok->tokenToId("zz"), std::nullopt);
}

TEST(TokenizerAddedTokensTest, LongestMatchAndOptions) {
  json config = tokenizerJson(bpeModel({"a", "b", " "}, {}));
  json lstrip = addedToken(4, "<m>", false);
  lstrip["lstrip"] = true;
  lstrip["rstrip"] = true;
  json word = addedToken(5, "ab", false);
  word["single_word"] = true;
  config["added_tokens"] = {addedToken(3, "<|a|>", true), lstrip, word,
                            addedToken(6, "<|a|>b", true)};
  auto tok = load(config);
  // Longest first: "<|a|>b" over "<|a|>".
  EXPECT_EQ(tok->encode("<|a|>b<|a|>"), (Ids{6, 3}));
  // lstrip/rstrip take the spaces around.
  EXPECT_EQ(tok->encode("a  <m>  b"), (Ids{0, 4, 1}));
  // single_word: only where no word character touches it.
  EXPECT_EQ(tok->encode("ab aab ab"), (Ids{5, 2, 0, 0, 1, 2, 5}));
}

TEST(TokenizerEncodeTest, ConcurrentEncodes) {
  auto tok = load(byteLevelJson());
  std::string text;
  for (int i = 0; i < 200; ++i)
    text += "the the " + std::to_string(i * 7919) + " \xE4\xBD\xA0 ";
  Ids expected = tok->encode(text);
  auto work = [&] {
    for (int i = 0; i < 20; ++i)
      EXPECT_EQ(tok->encode(text), expected);
  };
  std::thread first(work), second(work);
  first.join();
  second.join();
}

} // namespace
