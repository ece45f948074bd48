//===- OpenAIRequestTest.cpp - Request bodies the server refuses ----------===//
//
// Most request checks are tested end to end (test/serve/test_serve.py) and
// fuzzed (fuzz/FuzzServeRequest.cpp); here what needs bodies too large for
// either.
//
//===----------------------------------------------------------------------===//

#include "OpenAI.h"

#include <gtest/gtest.h>

using namespace sits;
using namespace sits::serve;

namespace {

ModelInfo toyModel() {
  ModelInfo model;
  model.name = "toy";
  model.tokenizer = ModelTokenizer::fromFiles({{"tokenizer.json", R"({
    "version": "1.0", "added_tokens": [], "normalizer": null,
    "pre_tokenizer": null, "post_processor": null, "decoder": null,
    "model": {"type": "BPE", "vocab": {"h": 0, "i": 1, "hi": 2},
              "merges": ["h i"]}})"}});
  model.maxSequenceLength = 64;
  return model;
}

/// The ApiError `body` gets from the completions endpoint.
ApiError refusal(const std::string &body) {
  try {
    parseRequest(Endpoint::Completions, body, toyModel());
  } catch (const ApiError &error) {
    return error;
  }
  return ApiError(0, "accepted");
}

TEST(OpenAIRequest, DeepNestingIsRefusedBeforeParsing) {
  // A million levels overflowed the stack when the value was copied.
  for (size_t depth : {size_t(65), size_t(1000000)}) {
    std::string stop = std::string(depth, '[') + std::string(depth, ']');
    ApiError error =
        refusal(R"({"model": "toy", "prompt": "hi", "stop": )" + stop + "}");
    EXPECT_EQ(error.status, 400);
    EXPECT_EQ(error.code, "invalid_json");
    EXPECT_STREQ(error.what(), "the request body nests arrays and objects "
                               "more than 64 levels deep");
  }
  // Brackets in strings do not count; 64 levels are parsed as usual.
  std::string brackets(1000, '[');
  EXPECT_EQ(refusal(R"({"model": "toy", "prompt": "hi", "stop": ")" + brackets +
                    R"(\"["})")
                .status,
            0);
  std::string deep = std::string(63, '[') + std::string(63, ']');
  ApiError error =
      refusal(R"({"model": "toy", "prompt": "hi", "stop": )" + deep + "}");
  EXPECT_EQ(error.status, 422);
  EXPECT_EQ(error.param, "stop");
}

} // namespace
