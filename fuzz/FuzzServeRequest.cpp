//===- FuzzServeRequest.cpp - Fuzzes the server's request parsing ---------===//
//
// Input: a request body, parsed for both endpoints (/v1/completions and
// /v1/chat/completions) by serve::parseRequest, as the server does, for a
// model with a small BPE tokenizer, a chat template and a 64-token context.
// The server answers ApiError with its status and sits::Error (the
// tokenizer or the template refused the text) with 400: those are the
// outcomes for bad input, and each error body is serialized as the server
// sends it. Anything else is a finding, and so is an accepted request that
// breaks what the scheduler relies on (a prompt of vocabulary ids that,
// with max_tokens, fits the context; sampling values in range; no empty
// stop string).
//
//===----------------------------------------------------------------------===//

#include "OpenAI.h"

#include "sits/Error.h"
#include "sits/ModelTokenizer.h"

#include <cstdio>
#include <cstdlib>

using namespace sits;
using namespace sits::serve;

namespace {

const char *kTokenizerJson = R"({
  "version": "1.0", "truncation": null, "padding": null,
  "added_tokens": [
    {"id": 0, "content": "<s>", "single_word": false, "lstrip": false,
     "rstrip": false, "normalized": false, "special": true},
    {"id": 1, "content": "</s>", "single_word": false, "lstrip": false,
     "rstrip": false, "normalized": false, "special": true}],
  "normalizer": null, "pre_tokenizer": null, "decoder": null,
  "post_processor": null,
  "model": {"type": "BPE", "dropout": null, "unk_token": null,
    "continuing_subword_prefix": null, "end_of_word_suffix": null,
    "fuse_unk": false, "byte_fallback": false, "ignore_merges": false,
    "vocab": {"<s>": 0, "</s>": 1, "h": 2, "i": 3, "hi": 4, "!": 5, " ": 6,
              "<": 7, ">": 8},
    "merges": ["h i"]}
})";

const char *kTokenizerConfig = R"({"bos_token": "<s>", "eos_token": "</s>",
    "chat_template": "{{ bos_token }}{% for m in messages %}<{{ m.content }}>{% endfor %}{% if add_generation_prompt %}!{% endif %}"})";

constexpr int32_t kVocabSize = 9;

const ModelInfo &model() {
  static const ModelInfo info = [] {
    ModelInfo m;
    m.name = "toy";
    m.tokenizer = ModelTokenizer::fromFiles(
        {{"tokenizer.json", kTokenizerJson},
         {"tokenizer_config.json", kTokenizerConfig}});
    m.maxSequenceLength = 64;
    return m;
  }();
  return info;
}

[[noreturn]] void broken(const char *what) {
  std::fprintf(stderr, "an accepted request breaks the scheduler's rules: %s\n",
               what);
  std::abort();
}

void checkAccepted(const ParsedRequest &parsed) {
  const Request &r = parsed.request;
  if (r.prompt.empty())
    broken("an empty prompt");
  for (int32_t id : r.prompt)
    if (id < 0 || id >= kVocabSize)
      broken("a prompt id outside the vocabulary");
  if (r.maxTokens < 1 ||
      uint64_t(r.prompt.size()) + r.maxTokens > model().maxSequenceLength)
    broken("max_tokens outside 1 .. the context left by the prompt");
  if (!(r.sampling.temperature >= 0 && r.sampling.temperature <= 2) ||
      !(r.sampling.topP > 0 && r.sampling.topP <= 1))
    broken("temperature or top_p out of range");
  for (const std::string &stop : r.stop)
    if (stop.empty())
      broken("an empty stop string");
  if (parsed.includeUsage && !parsed.stream)
    broken("stream_options without stream");
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string body(reinterpret_cast<const char *>(data), size);
  for (Endpoint endpoint : {Endpoint::Completions, Endpoint::ChatCompletions}) {
    try {
      checkAccepted(parseRequest(endpoint, body, model()));
    } catch (const ApiError &error) {
      if (error.status < 400 || error.status > 499 || !*error.what())
        broken("an ApiError that is not a 4xx with a message");
      // What the server sends (invalid UTF-8 replaced, never thrown).
      (void)errorBody(error).dump(-1, ' ', false,
                                  nlohmann::json::error_handler_t::replace);
    } catch (const Error &) {
    }
  }
  return 0;
}
