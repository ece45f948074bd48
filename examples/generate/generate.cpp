//===- generate.cpp - Streaming text generation with the sits C++ API -----===//
//
//   sits-example-generate ENGINE "prompt text" [max_new_tokens]
//
// Loads an engine that holds a tokenizer (the model's tokenizer.json, or a
// byte vocabulary), encodes the prompt with it, and streams the generated
// text as it is sampled (temperature 0.7, top-p 0.9, seed 1), then prints
// why it ended and the decode speed. This is the whole public API a program
// needs: sits::Engine, its tokenizer, sits::Session::generateText and a text
// callback.
//
//===----------------------------------------------------------------------===//

#include "sits/ModelTokenizer.h"
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
    if (!engine->tokenizer()) {
      std::fprintf(stderr, "this engine takes token ids only: compile it "
                           "with the model's tokenizer.json\n");
      return 1;
    }
    sits::Session session(engine);

    std::string text = argv[2];
    std::vector<int32_t> prompt = engine->tokenizer()->encode(text);
    sits::TextGenerateParams params;
    params.generate.maxNewTokens = argc == 4 ? std::atoi(argv[3]) : 32;
    params.generate.sampling.temperature = 0.7f;
    params.generate.sampling.topP = 0.9f;
    params.generate.sampling.seed = 1;

    std::printf("%s", text.c_str());
    sits::TextResult result = session.generateText(
        {prompt}, params, [](uint32_t /*sequence*/, const std::string &piece) {
          // Whole UTF-8 characters only, never part of a stop string.
          std::fwrite(piece.data(), 1, piece.size(), stdout);
          std::fflush(stdout);
          return true; // false would end the generation here
        });
    std::printf("\n[%s] %u tokens, %.3f ms/token, %.0f tokens/s on %s\n",
                sits::finishReasonName(result.finishReasons[0]),
                result.stats.generatedTokens, result.stats.decodeMsPerStep,
                result.stats.tokensPerSecond, engine->deviceName().c_str());
    return 0;
  } catch (const sits::Error &error) {
    std::fprintf(stderr, "error (%s): %s\n", sits::errorCodeName(error.code()),
                 error.what());
    return 1;
  }
}
