//===- FuzzModelTokenizer.cpp - Fuzzes tokenizer_config.json and friends --===//
//
// Input: `tokenizer_config.json NUL chat_template.jinja NUL
// generation_config.json NUL special_tokens_map.json NUL messages-JSON`
// (an empty part: that file is absent). The tokenizer.json is a fixed small
// BPE, so that the mutations go into the files around it: special tokens,
// the chat template and its precedence, EOS ids. Then the conversation is
// rendered and encoded. Only sits::Error may come out.
//
//===----------------------------------------------------------------------===//

#include "FuzzInput.h"

#include "sits/Error.h"
#include "sits/ModelTokenizer.h"

namespace {

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

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  auto parts = sits::fuzz::splitInput(data, size, 5);
  sits::TokenizerFiles files = {{"tokenizer.json", kTokenizerJson}};
  const char *names[] = {"tokenizer_config.json", "chat_template.jinja",
                         "generation_config.json", "special_tokens_map.json"};
  for (int i = 0; i < 4; ++i)
    if (!parts[i].empty())
      files[names[i]] = std::string(parts[i]);
  std::shared_ptr<const sits::ModelTokenizer> tokenizer;
  try {
    tokenizer = sits::ModelTokenizer::fromFiles(files);
    (void)tokenizer->describe();
  } catch (const sits::Error &) {
    return 0;
  }
  std::string_view messages = parts[4];
  if (messages.empty())
    messages = R"([{"role": "user", "content": "hi!"}])";
  try {
    std::string prompt = tokenizer->applyChatTemplateJson(messages, true);
    (void)tokenizer->encode(prompt);
  } catch (const sits::Error &) {
  }
  return 0;
}
