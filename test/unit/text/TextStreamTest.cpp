//===- TextStreamTest.cpp - Streamed text and stop strings ----------------===//
//
// Through a byte vocabulary, where one token is one byte, so that every way
// a character or a stop string can be split over tokens is reachable.
//
//===----------------------------------------------------------------------===//

#include "sits/TextStream.h"
#include "sits/ModelTokenizer.h"

#include <gtest/gtest.h>

using namespace sits;

namespace {

std::shared_ptr<const Tokenizer> bytes() {
  return ModelTokenizer::bytes(256)->tokenizer();
}

/// Pushes every byte of `text`, then finishes; returns the pieces.
std::vector<std::string> streamPieces(TextStream &stream,
                                      const std::string &text) {
  std::vector<std::string> pieces;
  for (unsigned char c : text)
    pieces.push_back(stream.push(c));
  pieces.push_back(stream.finish());
  return pieces;
}

std::string concat(const std::vector<std::string> &pieces) {
  std::string out;
  for (const std::string &piece : pieces)
    out += piece;
  return out;
}

TEST(TextStream, NeverEmitsHalfACharacter) {
  TextStream stream(bytes());
  // "é" is C3 A9, "€" E2 82 AC, "😀" F0 9F 98 80.
  std::vector<std::string> pieces = streamPieces(stream, "a\xc3\xa9\xe2\x82\xac"
                                                         "\xf0\x9f\x98\x80");
  std::vector<std::string> expected = {
      "a", "", "\xc3\xa9",         "", "", "\xe2\x82\xac", "",
      "",  "", "\xf0\x9f\x98\x80", ""};
  EXPECT_EQ(pieces, expected);
  EXPECT_FALSE(stream.stopped());
  EXPECT_EQ(stream.text(), concat(pieces));
}

TEST(TextStream, IncompleteCharacterAtTheEndIsReplaced) {
  TextStream stream(bytes());
  EXPECT_EQ(stream.push(0xe2), "");
  EXPECT_EQ(stream.push(0x82), "");
  EXPECT_EQ(stream.finish(), "\xef\xbf\xbd");
}

TEST(TextStream, StopsBeforeTheStopString) {
  TextStream stream(bytes(), {"STOP"});
  std::vector<std::string> pieces = streamPieces(stream, "Hello STOP and more");
  EXPECT_TRUE(stream.stopped());
  EXPECT_EQ(stream.text(), "Hello ");
  EXPECT_EQ(concat(pieces), "Hello ");
  // Nothing after the stop.
  EXPECT_EQ(stream.push('x'), "");
}

TEST(TextStream, HoldsBackWhatCouldStartAStopString) {
  TextStream stream(bytes(), {"abc"});
  EXPECT_EQ(stream.push('x'), "x");
  EXPECT_EQ(stream.push('a'), "");
  EXPECT_EQ(stream.push('b'), "");
  // "abd" is not the stop string: all of it comes out.
  EXPECT_EQ(stream.push('d'), "abd");
  EXPECT_EQ(stream.push('a'), "");
  // At the end, held text is text.
  EXPECT_EQ(stream.finish(), "a");
  EXPECT_EQ(stream.text(), "xabda");
  EXPECT_FALSE(stream.stopped());
}

TEST(TextStream, OverlappingPrefixesAndTheEarliestStop) {
  // "aab": after "aa" the held tail must be "a" -> "aa" then "b" completes.
  TextStream overlap(bytes(), {"ab"});
  EXPECT_EQ(concat(streamPieces(overlap, "xaab")), "xa");
  EXPECT_TRUE(overlap.stopped());
  // Of two stop strings, the one that starts first wins.
  TextStream earliest(bytes(), {"world", "lo w"});
  streamPieces(earliest, "hello world");
  EXPECT_EQ(earliest.text(), "hel");
}

TEST(TextStream, StopStringInsideOneToken) {
  // A multi-byte character completes in one push together with a stop
  // string that follows it in the same decoded piece.
  TextStream stream(bytes(), {"\xc3\xa9!"});
  streamPieces(stream, "caf\xc3\xa9!!");
  EXPECT_EQ(stream.text(), "caf");
  EXPECT_TRUE(stream.stopped());
}

TEST(TextStream, EmptyStopStringIsRefused) {
  try {
    TextStream stream(bytes(), {"ok", ""});
    FAIL() << "expected an error";
  } catch (const Error &error) {
    EXPECT_EQ(error.code(), ErrorCode::InvalidArgument);
    EXPECT_STREQ(error.what(), "a stop string is empty");
  }
}

TEST(ByteVocabulary, DecodeReplacesInvalidUtf8LikePython) {
  auto tokenizer = ModelTokenizer::bytes(260, {257});
  auto decode = [&](std::vector<int32_t> ids) {
    return tokenizer->decode(ids);
  };
  const std::string r = "\xef\xbf\xbd";
  // bytes(...).decode("utf-8", "replace") in Python gives these.
  EXPECT_EQ(decode({'a', 0xc3}), "a" + r);
  EXPECT_EQ(decode({0xe2, 0x82, 'x'}), r + "x");
  EXPECT_EQ(decode({0xed, 0xa0, 0x80}), r + r + r); // a surrogate
  EXPECT_EQ(decode({0xc0, 0xaf}), r + r);           // overlong
  EXPECT_EQ(decode({0xf0, 0x9f, 0x98}), r);
  EXPECT_EQ(decode({0xf4, 0x90, 0x80, 0x80}), r + r + r + r); // > U+10FFFF
  EXPECT_EQ(decode({0x80, 'b'}), r + "b");
  // Ids past the bytes carry no text (kept visible when asked).
  EXPECT_EQ(decode({'o', 257, 'k'}), "ok");
  EXPECT_EQ(tokenizer->decode({'o', 257}, /*skipSpecialTokens=*/false),
            "o<257>");
  EXPECT_EQ(tokenizer->encode("h\xc3\xa9"),
            (std::vector<int32_t>{'h', 0xc3, 0xa9}));
  EXPECT_EQ(tokenizer->eosTokenIds(), (std::vector<int32_t>{257}));
  EXPECT_EQ(tokenizer->kind(), "bytes");
  EXPECT_FALSE(tokenizer->hasChatTemplate());
  try {
    decode({260});
    FAIL() << "expected an error";
  } catch (const Error &error) {
    EXPECT_EQ(error.code(), ErrorCode::TokenOutOfVocab);
  }
  try {
    ModelTokenizer::bytes(255);
    FAIL() << "expected an error";
  } catch (const Error &error) {
    EXPECT_EQ(error.code(), ErrorCode::InvalidTokenizer);
  }
}

} // namespace
