//===- generate.cpp - Streaming generation with the sits C++ API ----------===//
//
//   sits-example-generate ENGINE "prompt text" [max_new_tokens]
//
// Loads an engine with a byte vocabulary, creates a session and streams the
// generated text as it is sampled (temperature 0.7, top-p 0.9, seed 1), then
// prints the decode speed. This is the whole public API a program needs:
// sits::Engine, sits::Session, sits::GenerateParams and a token callback.
//
//===----------------------------------------------------------------------===//

#include "sits/Runtime.h"

#include <cstdio>
#include <cstdlib>
#include <string>

int main(int argc, char **argv) {
  if (argc < 3 || argc > 4) {
    std::fprintf(stderr, "usage: %s ENGINE \"prompt text\" [max_new_tokens]\n",
                 argv[0]);
    return 2;
  }
  try {
    std::shared_ptr<sits::Engine> engine = sits::Engine::load(argv[1]);
    if (engine->config().tokenizer != sits::format::TokenizerKind::Bytes) {
      std::fprintf(stderr, "this example needs an engine with a byte "
                           "vocabulary\n");
      return 1;
    }
    sits::Session session(engine);

    std::string text = argv[2];
    std::vector<int32_t> prompt(text.begin(), text.end());
    sits::GenerateParams params;
    params.maxNewTokens = argc == 4 ? std::atoi(argv[3]) : 32;
    params.sampling.temperature = 0.7f;
    params.sampling.topP = 0.9f;
    params.sampling.seed = 1;

    std::printf("%s", text.c_str());
    sits::GenerateResult result = session.generate(
        prompt, params, [](uint32_t /*sequence*/, int32_t token) {
          std::putchar(token >= 0x20 && token < 0x7f ? token : '?');
          std::fflush(stdout);
          return true; // false would stop the generation here
        });
    std::printf("\n%u tokens, %.3f ms/token, %.0f tokens/s on %s\n",
                result.stats.generatedTokens, result.stats.decodeMsPerStep,
                result.stats.tokensPerSecond, engine->deviceName().c_str());
    return 0;
  } catch (const sits::Error &error) {
    std::fprintf(stderr, "error (%s): %s\n", sits::errorCodeName(error.code()),
                 error.what());
    return 1;
  }
}
