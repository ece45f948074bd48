//===- make-engine-seeds.cpp - Writes the engine fuzz target's seeds ------===//
//
//   sits-fuzz-engine-seeds DIR
//
// Small engines (the toy model of the runtime tests, placeholder kernels):
// valid ones with each tokenizer kind, weight type and KV-cache layout, and
// each corruption the --check tests use. fuzz/make_seeds.sh runs it; its
// output is committed in fuzz/corpus/engine.
//
//===----------------------------------------------------------------------===//

#include "TestEngines.h"
#include "sits/Json.h"

#include <cstdio>
#include <fstream>
#include <string>

using namespace sits;

namespace {

void write(const std::string &path, const std::vector<uint8_t> &bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char *>(bytes.data()), bytes.size());
  if (!out) {
    std::fprintf(stderr, "cannot write %s\n", path.c_str());
    std::exit(1);
  }
}

format::EngineContents toy(const test::ToyConfig &config) {
  return test::buildToyEngine(config, test::makeToyWeights(config),
                              test::placeholderModule(config));
}

/// The toy with a Hugging Face tokenizer section (a tiny BPE and a chat
/// template) instead of its byte vocabulary.
format::EngineContents withHuggingFaceTokenizer(test::ToyConfig config) {
  format::EngineContents contents = toy(config);
  json::Value root;
  std::string error;
  if (!json::parse(contents.metadataJson, &root, &error)) {
    std::fprintf(stderr, "toy metadata: %s\n", error.c_str());
    std::exit(1);
  }
  json::Value tokenizer = *root.find("tokenizer");
  tokenizer.set("kind", "huggingface");
  root.set("tokenizer", tokenizer);
  contents.metadataJson = root.write();
  contents.tokenizerFiles = {
      {"tokenizer.json", R"({"version": "1.0", "added_tokens": [
  {"id": 0, "content": "<s>", "special": true, "single_word": false,
   "lstrip": false, "rstrip": false, "normalized": false}],
  "normalizer": null, "pre_tokenizer": {"type": "ByteLevel",
   "add_prefix_space": false, "trim_offsets": true, "use_regex": true},
  "post_processor": null, "decoder": {"type": "ByteLevel"},
  "model": {"type": "BPE", "vocab": {"<s>": 0, "h": 1, "i": 2, "hi": 3},
   "merges": ["h i"]}})"},
      {"tokenizer_config.json",
       R"({"bos_token": "<s>", "eos_token": "<s>", "chat_template":
  "{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}"})"}};
  return contents;
}

} // namespace

int main(int argc, char **argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: sits-fuzz-engine-seeds DIR\n");
    return 1;
  }
  std::string dir = argv[1];
  test::ToyConfig config;
  config.vocab = 256;
  config.hidden = 32;
  std::vector<uint8_t> valid = test::serializeOrDie(toy(config));
  write(dir + "/valid-bytes-f16.sits", valid);
  test::ToyConfig f32 = config;
  f32.weightType = format::DType::F32;
  f32.eosTokenIds = {2};
  write(dir + "/valid-bytes-f32.sits", test::serializeOrDie(toy(f32)));
  write(dir + "/valid-huggingface.sits",
        test::serializeOrDie(withHuggingFaceTokenizer(config)));
  // A paged KV cache (format 1.2: the block size, pool and block table).
  test::ToyConfig paged = config;
  paged.blockTokens = 16;
  paged.poolBlocks = 12;
  write(dir + "/valid-paged.sits", test::serializeOrDie(toy(paged)));
  for (const char *name :
       {"truncated", "wrong-magic", "newer-major", "newer-minor",
        "section-out-of-bounds", "bad-plan"}) {
    test::Corruption corruption;
    if (!test::parseCorruption(name, &corruption))
      return 1;
    std::vector<uint8_t> bytes = valid;
    test::corrupt(bytes, corruption);
    write(dir + "/" + name + ".sits", bytes);
  }
  return 0;
}
