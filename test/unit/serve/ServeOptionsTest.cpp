//===- ServeOptionsTest.cpp - The serving options' parser -----------------===//

#include "Server.h"

#include <gtest/gtest.h>

using namespace sits::serve;

namespace {
std::string parse(std::vector<std::string> args, ServeOptions &options,
                  std::vector<std::string> &rest) {
  std::vector<char *> argv;
  for (std::string &arg : args)
    argv.push_back(arg.data());
  std::vector<char *> left;
  std::string error =
      parseServeOptions(int(argv.size()), argv.data(), options, left);
  rest.assign(left.begin(), left.end());
  return error;
}
} // namespace

TEST(ServeOptions, TakesItsOwnAndLeavesTheRest) {
  ServeOptions options;
  std::vector<std::string> rest;
  EXPECT_EQ(parse({"tool", "model.onnx", "--port=0", "--max-batch=4", "--host",
                   "0.0.0.0", "--max-queue=3", "--max-prefill-chunk", "16",
                   "--model-name=m"},
                  options, rest),
            "");
  EXPECT_EQ(rest,
            (std::vector<std::string>{"tool", "model.onnx", "--max-batch=4"}));
  EXPECT_EQ(options.port, 0u);
  EXPECT_EQ(options.host, "0.0.0.0");
  EXPECT_EQ(options.maxQueue, 3u);
  EXPECT_EQ(options.maxPrefillChunk, 16u);
  EXPECT_EQ(options.modelName, "m");
}

TEST(ServeOptions, BadValuesNameTheOption) {
  ServeOptions options;
  std::vector<std::string> rest;
  EXPECT_NE(parse({"tool", "--port=70000"}, options, rest).find("--port"),
            std::string::npos);
  EXPECT_NE(parse({"tool", "--max-queue=-1"}, options, rest).find("-1"),
            std::string::npos);
  EXPECT_NE(parse({"tool", "--max-prefill-chunk=0"}, options, rest)
                .find("--max-prefill-chunk"),
            std::string::npos);
  EXPECT_NE(parse({"tool", "--host"}, options, rest).find("needs a value"),
            std::string::npos);
  EXPECT_NE(parse({"tool", "--model-name="}, options, rest).find("non-empty"),
            std::string::npos);
  EXPECT_NE(serveOptionsHelp().find("--max-queue"), std::string::npos);
}
