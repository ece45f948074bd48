//===- ModelTokenizerTest.cpp - tokenizer_config, generation_config -------===//
//
// What ModelTokenizer adds to tokenizer.json: special tokens, EOS ids, the
// chat template and its precedence, and an error naming the file and field
// for each way the files can be wrong. The tokenizer itself is tested
// against the `tokenizers` package in test/runtime/tokenizer.
//
//===----------------------------------------------------------------------===//

#include "sits/ModelTokenizer.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <unistd.h>

using namespace sits;

namespace {

/// A tiny BPE: "hi" is one token; <s> is added in front by its post-
/// processor; <|eot|> is a special token matched in text.
const char *kTokenizerJson = R"({
  "version": "1.0", "truncation": null, "padding": null,
  "added_tokens": [
    {"id": 0, "content": "<s>", "single_word": false, "lstrip": false,
     "rstrip": false, "normalized": false, "special": true},
    {"id": 1, "content": "</s>", "single_word": false, "lstrip": false,
     "rstrip": false, "normalized": false, "special": true},
    {"id": 7, "content": "<|eot|>", "single_word": false, "lstrip": false,
     "rstrip": false, "normalized": false, "special": true}],
  "normalizer": null, "pre_tokenizer": null, "decoder": null,
  "post_processor": {"type": "TemplateProcessing",
    "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
               {"Sequence": {"id": "A", "type_id": 0}}],
    "pair": [{"Sequence": {"id": "A", "type_id": 0}},
             {"Sequence": {"id": "B", "type_id": 1}}],
    "special_tokens": {"<s>": {"id": "<s>", "ids": [0], "tokens": ["<s>"]}}},
  "model": {"type": "BPE", "dropout": null, "unk_token": null,
    "continuing_subword_prefix": null, "end_of_word_suffix": null,
    "fuse_unk": false, "byte_fallback": false, "ignore_merges": false,
    "vocab": {"<s>": 0, "</s>": 1, "h": 2, "i": 3, "hi": 4, "!": 5, "<": 6},
    "merges": ["h i"]}
})";

const char *kTemplate =
    "{{ bos_token }}{% for m in messages %}<{{ m.role }}>{{ m.content }}"
    "{% endfor %}{% if add_generation_prompt %}<assistant>{% endif %}";

TokenizerFiles baseFiles() {
  return {{"tokenizer.json", kTokenizerJson},
          {"tokenizer_config.json", std::string(R"({"bos_token": "<s>",
                           "eos_token": {"content": "</s>", "lstrip": false},
                           "unk_token": null, "chat_template": )") +
                                        "\"" + kTemplate + "\"}"}};
}

/// The error `files` give, or "".
std::string errorOf(const TokenizerFiles &files, ErrorCode *code = nullptr) {
  try {
    ModelTokenizer::fromFiles(files);
  } catch (const Error &error) {
    if (code)
      *code = error.code();
    return error.what();
  }
  return "";
}

TEST(ModelTokenizer, SpecialTokensAndChatTemplate) {
  auto t = ModelTokenizer::fromFiles(baseFiles());
  EXPECT_EQ(t->bosToken(), "<s>");
  EXPECT_EQ(t->bosTokenId(), 0);
  EXPECT_EQ(t->eosToken(), "</s>");
  EXPECT_EQ(t->eosTokenIds(), (std::vector<int32_t>{1}));
  EXPECT_EQ(t->encode("hi!"), (std::vector<int32_t>{0, 4, 5}));
  ASSERT_TRUE(t->hasChatTemplate());
  std::vector<ChatMessage> messages = {{"user", "hi"}};
  EXPECT_EQ(t->applyChatTemplate(messages), "<s><user>hi<assistant>");
  EXPECT_EQ(t->applyChatTemplate(messages, false), "<s><user>hi");
  // The template writes <s>: encoding adds no second one.
  std::vector<int32_t> ids = t->encodeChat(messages, false);
  EXPECT_EQ(ids.front(), 0);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 0), 1);
  // Extra variables and tools reach the template.
  auto withTools = ModelTokenizer::fromFiles(
      {{"tokenizer.json", kTokenizerJson},
       {"chat_template.jinja",
        "{{ tools | length }} {{ flavor }} {{ messages[0]['content'] }}"}});
  EXPECT_EQ(withTools->applyChatTemplateJson(
                R"([{"role": "user", "content": "x"}])", true,
                R"([{"type": "function"}, {"type": "function"}])",
                R"({"flavor": "plain"})"),
            "2 plain x");
  EXPECT_NE(t->describe().find("chat template: yes"), std::string::npos)
      << t->describe();
}

TEST(ModelTokenizer, ChatTemplateFilePrecedesTheConfig) {
  TokenizerFiles files = baseFiles();
  files["chat_template.jinja"] = "from the file";
  auto t = ModelTokenizer::fromFiles(files);
  EXPECT_EQ(t->applyChatTemplate({{"user", "x"}}), "from the file");
}

TEST(ModelTokenizer, NamedTemplatesPickDefault) {
  TokenizerFiles files = baseFiles();
  files["tokenizer_config.json"] =
      R"({"chat_template": [{"name": "tool_use", "template": "tools"},
                            {"name": "default", "template": "plain"}]})";
  EXPECT_EQ(ModelTokenizer::fromFiles(files)->applyChatTemplate({}), "plain");
  files["tokenizer_config.json"] =
      R"({"chat_template": [{"name": "tool_use", "template": "tools"}]})";
  EXPECT_EQ(errorOf(files),
            "tokenizer_config.json: \"chat_template\" lists templates "
            "(tool_use) but none named \"default\"");
}

TEST(ModelTokenizer, EosIdsFromGenerationConfig) {
  TokenizerFiles files = baseFiles();
  files["generation_config.json"] = R"({"eos_token_id": [7, 1]})";
  EXPECT_EQ(ModelTokenizer::fromFiles(files)->eosTokenIds(),
            (std::vector<int32_t>{1, 7}));
  files["generation_config.json"] = R"({"eos_token_id": 7})";
  EXPECT_EQ(ModelTokenizer::fromFiles(files)->eosTokenIds(),
            (std::vector<int32_t>{1, 7}));
  files["generation_config.json"] = R"({"eos_token_id": 8})";
  EXPECT_EQ(errorOf(files),
            "generation_config.json: \"eos_token_id\" holds 8, not a token id "
            "of tokenizer.json (0..7)");
}

TEST(ModelTokenizer, SpecialTokensMapIsTheFallback) {
  TokenizerFiles files = {
      {"tokenizer.json", kTokenizerJson},
      {"special_tokens_map.json",
       R"({"bos_token": {"content": "<s>"}, "eos_token": "<|eot|>"})"}};
  auto t = ModelTokenizer::fromFiles(files);
  EXPECT_EQ(t->bosTokenId(), 0);
  EXPECT_EQ(t->eosTokenIds(), (std::vector<int32_t>{7}));
  EXPECT_FALSE(t->hasChatTemplate());
  try {
    t->applyChatTemplate({{"user", "x"}});
    FAIL() << "expected an error";
  } catch (const Error &error) {
    EXPECT_EQ(error.code(), ErrorCode::NoTokenizer);
  }
}

TEST(ModelTokenizer, EveryBadFileIsNamed) {
  TokenizerFiles files = baseFiles();
  ErrorCode code{};
  files["tokenizer_config.json"] = "{not json";
  EXPECT_EQ(errorOf(files, &code), "tokenizer_config.json: not valid JSON");
  EXPECT_EQ(code, ErrorCode::InvalidTokenizer);
  files["tokenizer_config.json"] = "[1]";
  EXPECT_EQ(errorOf(files), "tokenizer_config.json: not a JSON object");
  files["tokenizer_config.json"] = R"({"bos_token": "<bos>"})";
  EXPECT_EQ(errorOf(files), "tokenizer_config.json: \"bos_token\" is "
                            "\"<bos>\", which is not a token of "
                            "tokenizer.json");
  files["tokenizer_config.json"] = R"({"eos_token": 3})";
  EXPECT_EQ(errorOf(files),
            "tokenizer_config.json: \"eos_token\" must be a string or an "
            "object with a string \"content\"");
  files["tokenizer_config.json"] = R"({"chat_template": 5})";
  EXPECT_EQ(errorOf(files), "tokenizer_config.json: \"chat_template\" must be "
                            "a string or a list of named templates");
  files["tokenizer_config.json"] = R"({"chat_template": "{% if %}"})";
  EXPECT_NE(errorOf(files, &code).find("chat template syntax error at 1:"),
            std::string::npos);
  EXPECT_EQ(code, ErrorCode::TemplateError);

  files = baseFiles();
  files["vocab.txt"] = "";
  EXPECT_EQ(errorOf(files), "unknown tokenizer file 'vocab.txt'");
  files = {{"tokenizer_config.json", "{}"}};
  EXPECT_EQ(errorOf(files), "no tokenizer.json");
  files = {{"tokenizer.json", "{\"model\": 1}"}};
  EXPECT_EQ(errorOf(files, &code).rfind("tokenizer.json: ", 0), 0u)
      << errorOf(files);
  EXPECT_EQ(code, ErrorCode::InvalidTokenizer);
}

TEST(ModelTokenizer, ReadFolderTakesTheKnownFiles) {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() /
                 ("sits-model-tokenizer-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  for (const auto &file : baseFiles())
    std::ofstream(dir / file.first) << file.second;
  std::ofstream(dir / "model.onnx") << "not read";
  TokenizerFiles files = ModelTokenizer::readFolder(dir.string());
  EXPECT_EQ(files, baseFiles());
  fs::remove(dir / "tokenizer.json");
  try {
    ModelTokenizer::readFolder(dir.string());
    FAIL() << "expected an error";
  } catch (const Error &error) {
    EXPECT_NE(std::string(error.what()).find("holds no tokenizer.json"),
              std::string::npos);
  }
  fs::remove_all(dir);
  try {
    ModelTokenizer::readFolder(dir.string());
    FAIL() << "expected an error";
  } catch (const Error &error) {
    EXPECT_NE(std::string(error.what()).find("is not a directory"),
              std::string::npos);
  }
}

} // namespace
