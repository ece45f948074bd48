//===- TokenizerTestUtil.h - Small tokenizer.json files for tests -*- C++ -*-=//
//
// Builders of tiny tokenizer.json documents: a SentencePiece-style BPE with
// byte fallback and a byte-level BPE, each small enough to reason about by
// hand, and helpers to expect an error with its code and message.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_TEST_UNIT_TOKENIZER_TOKENIZERTESTUTIL_H
#define SITS_TEST_UNIT_TOKENIZER_TOKENIZERTESTUTIL_H

#include "sits/Tokenizer.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <string>
#include <vector>

namespace sits::test {

using nlohmann::json;

/// A BPE model over `tokens` (ids in order) with `merges` ("a b").
inline json bpeModel(const std::vector<std::string> &tokens,
                     const std::vector<std::string> &merges) {
  json vocab = json::object();
  for (size_t i = 0; i < tokens.size(); ++i)
    vocab[tokens[i]] = i;
  return {{"type", "BPE"},
          {"dropout", nullptr},
          {"unk_token", nullptr},
          {"continuing_subword_prefix", nullptr},
          {"end_of_word_suffix", nullptr},
          {"fuse_unk", false},
          {"byte_fallback", false},
          {"ignore_merges", false},
          {"vocab", vocab},
          {"merges", merges}};
}

inline json addedToken(int id, const std::string &content, bool special,
                       bool normalized = false) {
  return {{"id", id},          {"content", content}, {"single_word", false},
          {"lstrip", false},   {"rstrip", false},    {"normalized", normalized},
          {"special", special}};
}

/// A whole tokenizer.json around `model`.
inline json tokenizerJson(json model) {
  return {{"version", "1.0"},          {"truncation", nullptr},
          {"padding", nullptr},        {"added_tokens", json::array()},
          {"normalizer", nullptr},     {"pre_tokenizer", nullptr},
          {"post_processor", nullptr}, {"decoder", nullptr},
          {"model", std::move(model)}};
}

/// Llama-2 style: <unk> <s> </s>, the 256 byte tokens (ids 3..258), then
/// "▁", "a", "b", "c", "▁a", "ab", "bc", "▁ab", "é".
inline json sentencePieceJson() {
  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    tokens.push_back(name);
  }
  for (const char *t : {"\xE2\x96\x81", "a", "b", "c",
                        "\xE2\x96\x81"
                        "a",
                        "ab", "bc",
                        "\xE2\x96\x81"
                        "ab",
                        "\xC3\xA9"})
    tokens.push_back(t);
  json model = bpeModel(tokens, {"\xE2\x96\x81 a", "a b", "b c",
                                 "\xE2\x96\x81"
                                 "a b"});
  model["unk_token"] = "<unk>";
  model["fuse_unk"] = true;
  model["byte_fallback"] = true;
  json config = tokenizerJson(model);
  config["added_tokens"] = {addedToken(0, "<unk>", true),
                            addedToken(1, "<s>", true),
                            addedToken(2, "</s>", true)};
  config["normalizer"] = {{"type", "Sequence"},
                          {"normalizers",
                           {{{"type", "Prepend"}, {"prepend", "\xE2\x96\x81"}},
                            {{"type", "Replace"},
                             {"pattern", {{"String", " "}}},
                             {"content", "\xE2\x96\x81"}}}}};
  config["decoder"] = {
      {"type", "Sequence"},
      {"decoders",
       {{{"type", "Replace"},
         {"pattern", {{"String", "\xE2\x96\x81"}}},
         {"content", " "}},
        {{"type", "ByteFallback"}},
        {{"type", "Fuse"}},
        {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}}}};
  config["post_processor"] = {
      {"type", "TemplateProcessing"},
      {"single",
       {{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
        {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
      {"pair", json::array()},
      {"special_tokens",
       {{"<s>", {{"id", "<s>"}, {"ids", {1}}, {"tokens", {"<s>"}}}}}}};
  return config;
}

/// GPT-2 style: the 256 byte-level characters (ids in byte order, so id b is
/// byte b), "Ġt", "he", "Ġthe", then <|endoftext|> as a special added token.
inline json byteLevelJson() {
  std::vector<std::string> tokens;
  auto printable = [](int b) {
    return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) ||
           (b >= 0xAE && b <= 0xFF);
  };
  int next = 256;
  for (int b = 0; b < 256; ++b) {
    int cp = printable(b) ? b : next++;
    std::string utf8;
    if (cp < 0x80) {
      utf8.push_back(static_cast<char>(cp));
    } else {
      utf8.push_back(static_cast<char>(0xC0 | (cp >> 6)));
      utf8.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
    tokens.push_back(utf8);
  }
  tokens.push_back("\xC4\xA0t"); // "Ġt"
  tokens.push_back("he");
  tokens.push_back("\xC4\xA0the");
  json config =
      tokenizerJson(bpeModel(tokens, {"\xC4\xA0 t", "h e", "\xC4\xA0t he"}));
  config["added_tokens"] = {addedToken(259, "<|endoftext|>", true)};
  config["pre_tokenizer"] = {{"type", "ByteLevel"},
                             {"add_prefix_space", false},
                             {"trim_offsets", true},
                             {"use_regex", true}};
  config["decoder"] = {{"type", "ByteLevel"},
                       {"add_prefix_space", true},
                       {"trim_offsets", true},
                       {"use_regex", true}};
  return config;
}

inline std::shared_ptr<const Tokenizer> load(const json &config) {
  return Tokenizer::fromJson(config.dump());
}

/// Runs `body`, expecting an Error with `code` whose message contains
/// `expected`.
template <typename Body>
void expectError(Body body, ErrorCode code, const std::string &expected) {
  try {
    body();
    ADD_FAILURE() << "expected an error containing: " << expected;
  } catch (const Error &error) {
    EXPECT_EQ(error.code(), code) << error.what();
    EXPECT_NE(std::string(error.what()).find(expected), std::string::npos)
        << "message: " << error.what() << "\nexpected to contain: " << expected;
  }
}

inline void expectInvalid(const json &config, const std::string &expected) {
  expectError([&] { load(config); }, ErrorCode::InvalidTokenizer, expected);
}

} // namespace sits::test

#endif // SITS_TEST_UNIT_TOKENIZER_TOKENIZERTESTUTIL_H
