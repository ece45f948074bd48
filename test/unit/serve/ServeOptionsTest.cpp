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

TEST(ServeOptions, StepPrefillBudget) {
  ServeOptions options;
  EXPECT_EQ(options.maxStepPrefillTokens,
            SchedulerOptions().maxStepPrefillTokens)
      << "the scheduler's default";
  std::vector<std::string> rest;
  EXPECT_EQ(parse({"tool", "--max-step-prefill-tokens=0"}, options, rest), "");
  EXPECT_EQ(options.maxStepPrefillTokens, 0u) << "0: no limit";
  EXPECT_NE(parse({"tool", "--max-step-prefill-tokens=x"}, options, rest)
                .find("--max-step-prefill-tokens"),
            std::string::npos);
  EXPECT_NE(serveOptionsHelp().find("--max-step-prefill-tokens"),
            std::string::npos);
}

TEST(ServeOptions, BadValuesNameTheOption) {
  ServeOptions options;
  std::vector<std::string> rest;
  EXPECT_NE(parse({"tool", "--port=70000"}, options, rest).find("--port"),
            std::string::npos);
  EXPECT_NE(parse({"tool", "--max-queue=-1"}, options, rest).find("-1"),
            std::string::npos);
  EXPECT_NE(parse({"tool", "--max-prefill-chunk=99999999"}, options, rest)
                .find("--max-prefill-chunk"),
            std::string::npos);
  EXPECT_NE(parse({"tool", "--host"}, options, rest).find("needs a value"),
            std::string::npos);
  EXPECT_NE(parse({"tool", "--model-name="}, options, rest).find("non-empty"),
            std::string::npos);
  EXPECT_NE(serveOptionsHelp().find("--max-queue"), std::string::npos);
}

TEST(ServeOptions, SlaAndPrefixCacheOptions) {
  ServeOptions options;
  EXPECT_EQ(options.slaP99TokenMs, 0) << "off by default";
  EXPECT_EQ(options.prefixCacheBlocks, 0u) << "off by default";
  std::vector<std::string> rest;
  EXPECT_EQ(parse({"tool", "--sla-p99-token-ms=50", "--prefix-cache-blocks",
                   "8", "--prefix-block-tokens=32", "--retry-after=3"},
                  options, rest),
            "");
  EXPECT_EQ(options.slaP99TokenMs, 50);
  EXPECT_EQ(options.prefixCacheBlocks, 8u);
  EXPECT_EQ(options.prefixBlockTokens, 32u);
  EXPECT_EQ(options.retryAfter, 3u);
  EXPECT_NE(parse({"tool", "--prefix-block-tokens=0"}, options, rest)
                .find("--prefix-block-tokens expects an integer from 1"),
            std::string::npos);
  EXPECT_NE(parse({"tool", "--retry-after=0"}, options, rest)
                .find("--retry-after expects an integer from 1"),
            std::string::npos);
  EXPECT_EQ(parse({"tool", "--sla-p99-token-ms=0.25"}, options, rest), "");
  EXPECT_EQ(options.slaP99TokenMs, 0.25);
  for (const char *bad : {"--sla-p99-token-ms=-1", "--sla-p99-token-ms=nan",
                          "--sla-p99-token-ms=5ms", "--sla-p99-token-ms="})
    EXPECT_NE(parse({"tool", bad}, options, rest)
                  .find("--sla-p99-token-ms expects a number of milliseconds"),
              std::string::npos)
        << bad;
  EXPECT_NE(serveOptionsHelp().find("--prefix-cache-blocks"),
            std::string::npos);
}

TEST(ServeOptions, SlaTailShare) {
  ServeOptions options;
  EXPECT_EQ(options.slaTailShare, BatchControlOptions().tailShare)
      << "the controller's default";
  std::vector<std::string> rest;
  EXPECT_EQ(parse({"tool", "--sla-tail-share=0.002"}, options, rest), "");
  EXPECT_EQ(options.slaTailShare, 0.002);
  for (const char *bad :
       {"--sla-tail-share=0", "--sla-tail-share=1", "--sla-tail-share=-0.1",
        "--sla-tail-share=1.5", "--sla-tail-share=nan", "--sla-tail-share=1%",
        "--sla-tail-share="})
    EXPECT_NE(parse({"tool", bad}, options, rest)
                  .find("--sla-tail-share expects a number greater than 0 "
                        "and less than 1"),
              std::string::npos)
        << bad;
  EXPECT_EQ(options.slaTailShare, 0.002) << "a bad value changes nothing";
  EXPECT_NE(serveOptionsHelp().find("--sla-tail-share=<value>"),
            std::string::npos);
  EXPECT_NE(serveOptionsHelp().find("(default: 0.005)"), std::string::npos);
}
