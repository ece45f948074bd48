//===- ConfigErrorTest.cpp - tokenizer.json fields that are refused -------===//
//
// Every unsupported or invalid field is an Error(InvalidTokenizer) whose
// message starts with the JSON path of the field.
//
//===----------------------------------------------------------------------===//

#include "TokenizerTestUtil.h"

#include <fstream>

using namespace sits;
using namespace sits::test;

namespace {

TEST(TokenizerConfigTest, ValidShapesLoad) {
  EXPECT_EQ(load(sentencePieceJson())->kind(),
            "SentencePiece-style BPE (byte fallback)");
  EXPECT_EQ(load(byteLevelJson())->kind(), "byte-level BPE");
}

TEST(TokenizerConfigTest, MalformedJson) {
  expectError([] { Tokenizer::fromJson("{\"model\": "); },
              ErrorCode::InvalidTokenizer, "tokenizer.json is not valid JSON");
  expectError([] { Tokenizer::fromJson("[1, 2]"); },
              ErrorCode::InvalidTokenizer,
              "tokenizer.json: expected a JSON object");
  expectError([] { Tokenizer::fromFile("/nonexistent/tokenizer.json"); },
              ErrorCode::InvalidTokenizer,
              "cannot read '/nonexistent/tokenizer.json'");
}

TEST(TokenizerConfigTest, ModelTypes) {
  json config = sentencePieceJson();
  config.erase("model");
  expectInvalid(config, "model: missing");
  for (const char *type : {"Unigram", "WordPiece", "WordLevel"}) {
    config = sentencePieceJson();
    config["model"]["type"] = type;
    expectInvalid(config, std::string("model.type: \"") + type +
                              "\" is not supported (supported: BPE)");
  }
  // Old files leave out the type of a BPE model.
  config = sentencePieceJson();
  config["model"].erase("type");
  EXPECT_NO_THROW(load(config));
}

TEST(TokenizerConfigTest, ModelFields) {
  json config = sentencePieceJson();
  config["model"]["dropout"] = 0.1;
  expectInvalid(config, "model.dropout: BPE dropout is not supported");
  config["model"]["dropout"] = 0.0; // the same as null
  EXPECT_NO_THROW(load(config));

  config = sentencePieceJson();
  config["model"]["vocab"] = json::array();
  expectInvalid(config, "model.vocab: expected an object");
  config = sentencePieceJson();
  config["model"]["vocab"]["zz"] = -1;
  expectInvalid(config, "model.vocab: the id of \"zz\" must be an integer");
  config = sentencePieceJson();
  config["model"]["vocab"]["zz"] = 5;
  expectInvalid(config, "model.vocab: id 5 is given to both");

  config = sentencePieceJson();
  config["model"]["unk_token"] = "<missing>";
  expectInvalid(config, "model.unk_token: \"<missing>\" is not in model.vocab");
  config["model"]["unk_token"] = 3;
  expectInvalid(config, "model.unk_token: expected a string, got an integer");
  config = sentencePieceJson();
  config["model"]["byte_fallback"] = "yes";
  expectInvalid(config, "model.byte_fallback: expected true or false");
}

TEST(TokenizerConfigTest, Merges) {
  json config = sentencePieceJson();
  config["model"]["merges"][1] = "a x";
  expectInvalid(config, "model.merges[1]: token \"x\" is not in model.vocab");
  config["model"]["merges"][1] = "c a";
  expectInvalid(
      config, "model.merges[1]: the merged token \"ca\" is not in model.vocab");
  config["model"]["merges"][1] = "a b c";
  expectInvalid(config, "model.merges[1]: expected two tokens separated by "
                        "one space, got \"a b c\"");
  config["model"]["merges"][1] = "ab";
  expectInvalid(config, "model.merges[1]: expected two tokens");
  config["model"]["merges"][1] = json::array({"a"});
  expectInvalid(config, "model.merges[1]: expected \"a b\" or [\"a\", \"b\"]");
  config["model"]["merges"] = "a b";
  expectInvalid(config, "model.merges: expected an array, got a string");

  // The pair form means the same as the string form.
  json pairs = sentencePieceJson();
  for (auto &merge : pairs["model"]["merges"]) {
    std::string text = merge.get<std::string>();
    size_t space = text.find(' ');
    merge = json::array({text.substr(0, space), text.substr(space + 1)});
  }
  EXPECT_EQ(load(pairs)->encode("ab abc cab"),
            load(sentencePieceJson())->encode("ab abc cab"));
}

TEST(TokenizerConfigTest, VocabularyAndMergeEntries) {
  json config = sentencePieceJson();
  config["model"]["vocab"]["zz"] = 1.5;
  expectInvalid(config, "model.vocab: the id of \"zz\" must be an integer");
  config["model"]["vocab"]["zz"] = json::object();
  expectInvalid(config, "model.vocab: the id of \"zz\" must be an integer");
  config = sentencePieceJson();
  config["model"]["merges"][2] = 7;
  expectInvalid(config, "model.merges[2]: expected \"a b\" or [\"a\", \"b\"]");
  config["model"]["merges"][2] = json::array({"b", "c", "d"});
  expectInvalid(config, "model.merges[2]: expected \"a b\" or [\"a\", \"b\"]");
  // A key given twice (which a JSON object can hold) is refused.
  std::string text = sentencePieceJson().dump();
  size_t at = text.find("\"bc\":265");
  ASSERT_NE(at, std::string::npos);
  text.insert(at, "\"bc\":999,");
  expectError([&] { Tokenizer::fromJson(text); }, ErrorCode::InvalidTokenizer,
              "model.vocab: \"bc\" appears twice");
}

TEST(TokenizerConfigTest, Normalizers) {
  json config = sentencePieceJson();
  config["normalizer"]["normalizers"][1] = {{"type", "BertNormalizer"}};
  expectInvalid(config, "normalizer.normalizers[1].type: \"BertNormalizer\" "
                        "is not supported (supported: Sequence, Replace, "
                        "Prepend, NFC, NFD, NFKC, NFKD, Lowercase, Strip)");
  config["normalizer"]["normalizers"][1] = {{"content", "x"}};
  expectInvalid(config, "normalizer.normalizers[1].type: missing");
  config["normalizer"] = {{"type", "Replace"},
                          {"pattern", {{"Regex", "(unclosed"}}},
                          {"content", "x"}};
  expectInvalid(config, "normalizer.pattern.Regex: the regex does not compile");
  config["normalizer"]["pattern"] = {{"String", ""}};
  expectInvalid(config,
                "normalizer.pattern.String: an empty pattern is not supported");
  config["normalizer"]["pattern"] = {{"Glob", "*"}};
  expectInvalid(config, "normalizer.pattern: expected {\"String\": ...} or "
                        "{\"Regex\": ...}");
  config["normalizer"] = {{"type", "StripAccents"}};
  expectInvalid(config, "normalizer.type: \"StripAccents\" is not supported");
}

TEST(TokenizerConfigTest, PreTokenizers) {
  json config = byteLevelJson();
  config["pre_tokenizer"] = {{"type", "Sequence"},
                             {"pretokenizers",
                              {{{"type", "Split"},
                                {"pattern", {{"Regex", "\\s+"}}},
                                {"behavior", "Sideways"},
                                {"invert", false}}}}};
  expectInvalid(config, "pre_tokenizer.pretokenizers[0].behavior: \"Sideways\" "
                        "is not a split behavior");
  config["pre_tokenizer"]["pretokenizers"][0] = {{"type", "BertPreTokenizer"}};
  expectInvalid(config, "pre_tokenizer.pretokenizers[0].type: "
                        "\"BertPreTokenizer\" is not supported");
  config["pre_tokenizer"] = {{"type", "Metaspace"},
                             {"replacement", "ab"},
                             {"prepend_scheme", "first"}};
  expectInvalid(config, "pre_tokenizer.replacement: expected exactly one "
                        "character, got \"ab\"");
  config["pre_tokenizer"] = {{"type", "Metaspace"},
                             {"replacement", "_"},
                             {"prepend_scheme", "sometimes"}};
  expectInvalid(config, "pre_tokenizer.prepend_scheme: \"sometimes\" is not a "
                        "prepend scheme");
  config["pre_tokenizer"] = {{"type", "UnicodeScripts"}};
  expectInvalid(config, "pre_tokenizer.type: \"UnicodeScripts\" is not "
                        "supported");
}

TEST(TokenizerConfigTest, PostProcessors) {
  json config = sentencePieceJson();
  config["post_processor"]["single"][1]["Sequence"]["id"] = "B";
  expectInvalid(config, "post_processor.single[1].Sequence.id: \"B\": only $A "
                        "is supported");
  config = sentencePieceJson();
  config["post_processor"]["single"][0]["SpecialToken"]["id"] = "<bos>";
  expectInvalid(config, "post_processor.single[0].SpecialToken.id: \"<bos>\" "
                        "is not in post_processor.special_tokens");
  config["post_processor"] = {{"type", "RobertaProcessing"}};
  expectInvalid(config, "post_processor.type: \"RobertaProcessing\" is not "
                        "supported (supported: TemplateProcessing, ByteLevel, "
                        "Sequence)");
  config["post_processor"] = {{"type", "Sequence"},
                              {"processors", {{{"type", "BertProcessing"}}}}};
  expectInvalid(config,
                "post_processor.processors[0].type: \"BertProcessing\"");
}

TEST(TokenizerConfigTest, Decoders) {
  for (const char *type : {"WordPiece", "CTC", "BPEDecoder"}) {
    json config = sentencePieceJson();
    config["decoder"]["decoders"][2] = {{"type", type}};
    expectInvalid(config, std::string("decoder.decoders[2].type: \"") + type +
                              "\" is not supported");
  }
  json config = sentencePieceJson();
  config["decoder"]["decoders"][3]["start"] = -1;
  expectInvalid(config,
                "decoder.decoders[3].start: expected an integer from 0");
}

TEST(TokenizerConfigTest, TruncationPaddingAndAddedTokens) {
  json config = sentencePieceJson();
  config["truncation"] = {{"max_length", 512}};
  expectInvalid(config, "truncation: truncation is not supported");
  config = sentencePieceJson();
  config["padding"] = {{"strategy", {{"Fixed", 16}}}};
  expectInvalid(config, "padding: padding is not supported");
  config["padding"] = {{"strategy", "BatchLongest"},
                       {"pad_to_multiple_of", nullptr}};
  EXPECT_NO_THROW(load(config)); // nothing for one text

  config = sentencePieceJson();
  config["added_tokens"][1].erase("content");
  expectInvalid(config, "added_tokens[1].content: missing");
  config["added_tokens"] = {{"x", 1}};
  expectInvalid(config, "added_tokens: expected an array");
}

} // namespace
