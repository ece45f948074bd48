//===- RuntimeGpuTest.cpp - The whole runtime on a GPU, with the toy ------===//
//
// Builds the toy engine with NVRTC for the GPU at hand, loads it, and checks
// prefill, decode, sampling, CUDA-graph replay and the request errors against
// a CPU reference. Skips without a GPU (label `gpu`).
//
//===----------------------------------------------------------------------===//

#include "ToyEngineTest.h"

using namespace sits;

namespace {

using test::greedy;
using test::sampled;
using test::ToyEngineTest;

TEST_F(ToyEngineTest, GreedyMatchesCpuReference) {
  test::ToyConfig config = toyConfig();
  auto engine = Engine::load(writeToy(config));
  EXPECT_FALSE(engine->usesPtx());
  Session session(engine);
  std::vector<int32_t> streamed;
  GenerateResult r = session.generate(bytes("Hello"), greedy(24),
                                      [&](uint32_t seq, int32_t token) {
                                        EXPECT_EQ(seq, 0u);
                                        streamed.push_back(token);
                                        return true;
                                      });
  ASSERT_EQ(r.tokens.size(), 1u);
  ASSERT_EQ(r.tokens[0].size(), 24u);
  EXPECT_EQ(streamed, r.tokens[0]);
  expectGreedyMatchesReference(config, bytes("Hello"), r.tokens[0]);
  EXPECT_EQ(r.stats.prefillChunks, 1u);
  EXPECT_EQ(r.stats.decodeSteps, 23u);
  EXPECT_EQ(r.stats.generatedTokens, 24u);
  EXPECT_EQ(session.capturedGraphs(), 1u);
  EXPECT_EQ(r.stats.sessionBytes, session.deviceBytes());
  EXPECT_GE(session.deviceBytes(), 2 * uint64_t(8 * 64 * 32 * 2)); // K and V
  EXPECT_GT(r.stats.tokensPerSecond, 0.0);
}

TEST_F(ToyEngineTest, WeightTypesMatchReference) {
  for (format::DType type : {format::DType::F32, format::DType::BF16}) {
    test::ToyConfig config = toyConfig();
    config.weightType = type;
    auto engine = Engine::load(writeToy(config));
    Session session(engine);
    GenerateResult r = session.generate(bytes("weights"), greedy(12));
    expectGreedyMatchesReference(config, bytes("weights"), r.tokens[0]);
  }
}

TEST_F(ToyEngineTest, ChunkedPrefillMatchesReference) {
  test::ToyConfig config = toyConfig();
  auto engine = Engine::load(writeToy(config));
  Session session(engine);
  std::vector<int32_t> prompt =
      bytes("a prompt longer than one prefill chunk of 16!");
  GenerateResult r = session.generate(prompt, greedy(10));
  EXPECT_EQ(r.stats.prefillChunks, 3u);
  expectGreedyMatchesReference(config, prompt, r.tokens[0]);
}

TEST_F(ToyEngineTest, BatchOfDifferentLengthsMatchesSingleRuns) {
  test::ToyConfig config = toyConfig();
  auto engine = Engine::load(writeToy(config));
  Session session(engine);
  std::vector<std::vector<int32_t>> prompts = {
      bytes("abc"), bytes("a longer prompt: two chunks"), bytes("seven!!")};
  GenerateResult batch = session.generate(prompts, greedy(15));
  EXPECT_EQ(batch.stats.bucket, 4u);
  ASSERT_EQ(batch.tokens.size(), 3u);
  for (size_t s = 0; s < prompts.size(); ++s) {
    GenerateResult single = session.generate(prompts[s], greedy(15));
    EXPECT_EQ(batch.tokens[s], single.tokens[0]) << "sequence " << s;
    expectGreedyMatchesReference(config, prompts[s], batch.tokens[s]);
  }
  EXPECT_EQ(session.capturedGraphs(), 2u); // buckets 4 and 1
}

TEST_F(ToyEngineTest, CallbackFalseEndsOnlyItsSequence) {
  Session session(Engine::load(writeToy(toyConfig())));
  std::vector<std::vector<int32_t>> prompts = {bytes("abc"), bytes("xyz")};
  GenerateResult full = session.generate(prompts, greedy(12));
  std::vector<size_t> seen(2, 0);
  GenerateResult cut =
      session.generate(prompts, greedy(12), [&](uint32_t sequence, int32_t) {
        return ++seen[sequence] < 4 || sequence != 0;
      });
  // Sequence 0 ends at the token its callback refused; sequence 1 runs on.
  EXPECT_EQ(cut.tokens[0], std::vector<int32_t>(full.tokens[0].begin(),
                                                full.tokens[0].begin() + 4));
  EXPECT_EQ(cut.tokens[1], full.tokens[1]);
  EXPECT_EQ(seen[0], 4u);
  EXPECT_EQ(seen[1], 12u);
}

TEST_F(ToyEngineTest, CudaGraphAndDirectLaunchesGiveIdenticalTokens) {
  auto engine = Engine::load(writeToy(toyConfig()));
  SessionOptions direct;
  direct.useCudaGraphs = false;
  Session graphed(engine), plain(engine, direct);
  std::vector<std::vector<int32_t>> prompts = {bytes("one"), bytes("two two"),
                                               bytes("three")};
  for (const GenerateParams &params : {greedy(30), sampled(30, 5)}) {
    for (size_t batch : {size_t(1), size_t(3)}) {
      std::vector<std::vector<int32_t>> some(prompts.begin(),
                                             prompts.begin() + batch);
      GenerateResult a = graphed.generate(some, params);
      GenerateResult b = plain.generate(some, params);
      EXPECT_TRUE(a.stats.cudaGraph);
      EXPECT_FALSE(b.stats.cudaGraph);
      EXPECT_EQ(a.tokens, b.tokens) << "batch " << batch << ", temperature "
                                    << params.sampling.temperature;
    }
  }
  EXPECT_EQ(graphed.capturedGraphs(), 2u);
  EXPECT_EQ(plain.capturedGraphs(), 0u);
}

TEST_F(ToyEngineTest, GraphsCapturedUpFrontGiveTheSameTokens) {
  // Every bucket captured before any step (as sits-serve does at startup):
  // nothing ran while capturing, and the replays give the tokens of graphs
  // captured at their first step; no step captures another.
  auto engine = Engine::load(writeToy(toyConfig()));
  Session upFront(engine), lazy(engine);
  const uint32_t buckets =
      static_cast<uint32_t>(engine->config().batchBuckets.size());
  EXPECT_EQ(upFront.captureDecodeGraphs(), buckets);
  std::vector<std::vector<int32_t>> prompts = {bytes("one"), bytes("two two"),
                                               bytes("three")};
  for (size_t batch : {size_t(1), size_t(3)}) {
    std::vector<std::vector<int32_t>> some(prompts.begin(),
                                           prompts.begin() + batch);
    EXPECT_EQ(upFront.generate(some, greedy(30)).tokens,
              lazy.generate(some, greedy(30)).tokens)
        << "batch " << batch;
  }
  EXPECT_EQ(upFront.capturedGraphs(), buckets);
  SessionOptions direct;
  direct.useCudaGraphs = false;
  Session plain(engine, direct);
  EXPECT_EQ(plain.captureDecodeGraphs(), 0u);
}

TEST_F(ToyEngineTest, SeededSamplingIsReproducible) {
  test::ToyConfig config = toyConfig();
  auto engine = Engine::load(writeToy(config));
  Session session(engine);
  GenerateParams p;
  p.maxNewTokens = 40;
  p.sampling.temperature = 1.0f;
  p.sampling.seed = 42;
  GenerateResult first = session.generate(bytes("seed"), p);
  GenerateResult again = session.generate(bytes("seed"), p);
  EXPECT_EQ(first.tokens, again.tokens);
  p.sampling.seed = 43;
  GenerateResult other = session.generate(bytes("seed"), p);
  EXPECT_NE(first.tokens, other.tokens);
  GenerateResult greedyTokens = session.generate(bytes("seed"), greedy(40));
  EXPECT_NE(first.tokens, greedyTokens.tokens);
  // Copies of a prompt in one batch draw streams of their own (the index in
  // the batch keys them); the first draws as the prompt alone.
  p.sampling.seed = 42;
  GenerateResult pair = session.generate({bytes("seed"), bytes("seed")}, p);
  EXPECT_EQ(pair.tokens[0], first.tokens[0]);
  EXPECT_NE(pair.tokens[1], pair.tokens[0]);

  // Top-k 1 is greedy whatever the temperature and seed.
  p.sampling.topK = 1;
  EXPECT_EQ(session.generate(bytes("seed"), p).tokens, greedyTokens.tokens);

  // With top-k 3, every token is among the reference's 3 most likely.
  p.sampling.topK = 3;
  std::vector<int32_t> history = bytes("seed");
  GenerateResult topK = session.generate(history, p);
  test::ToyWeights weights = test::makeToyWeights(config);
  for (int32_t token : topK.tokens[0]) {
    std::vector<float> ref = test::toyReferenceLogits(config, weights, history);
    std::vector<float> sorted = ref;
    std::sort(sorted.rbegin(), sorted.rend());
    EXPECT_GE(ref[token], sorted[2] - 1e-3f);
    history.push_back(token);
  }
}

TEST_F(ToyEngineTest, KVCacheFullAfterTheTokensThatFit) {
  auto engine = Engine::load(writeToy(toyConfig()));
  Session session(engine);
  std::vector<int32_t> prompt(60, 'x');
  std::vector<int32_t> delivered;
  try {
    session.generate(prompt, greedy(10), [&](uint32_t, int32_t t) {
      delivered.push_back(t);
      return true;
    });
    FAIL() << "expected KV cache full";
  } catch (const Error &e) {
    EXPECT_EQ(e.code(), ErrorCode::KVCacheFull);
    EXPECT_NE(std::string(e.what()).find("KV cache full: sequence 0 holds 64"),
              std::string::npos)
        << e.what();
  }
  // 60 prompt rows + 4 decode rows fill 64; the 5th token needs no row.
  EXPECT_EQ(delivered.size(), 5u);
  // The session stays usable.
  EXPECT_EQ(session.generate(bytes("ok"), greedy(3)).tokens[0].size(), 3u);
}

TEST_F(ToyEngineTest, RequestErrorsHaveTheirCodes) {
  auto engine = Engine::load(writeToy(toyConfig()));
  Session session(engine);
  auto code = [&](const std::vector<std::vector<int32_t>> &prompts,
                  GenerateParams params) {
    try {
      session.generate(prompts, params);
    } catch (const Error &e) {
      return e.code();
    }
    ADD_FAILURE() << "expected an error";
    return ErrorCode::Cuda;
  };
  EXPECT_EQ(code({std::vector<int32_t>(65, 1)}, greedy(1)),
            ErrorCode::PromptTooLong);
  EXPECT_EQ(code({{1, 256}}, greedy(1)), ErrorCode::TokenOutOfVocab);
  EXPECT_EQ(code({{1, -1}}, greedy(1)), ErrorCode::TokenOutOfVocab);
  EXPECT_EQ(code({{}}, greedy(1)), ErrorCode::InvalidArgument);
  EXPECT_EQ(code(std::vector<std::vector<int32_t>>(9, {1}), greedy(1)),
            ErrorCode::InvalidArgument);
  EXPECT_EQ(code({{1}}, greedy(0)), ErrorCode::InvalidArgument);
  GenerateParams badTopP = sampled(2, 1);
  badTopP.sampling.topP = 0.0f;
  EXPECT_EQ(code({{1}}, badTopP), ErrorCode::InvalidArgument);
  GenerateParams badTemperature = sampled(2, 1);
  badTemperature.sampling.temperature = NAN;
  EXPECT_EQ(code({{1}}, badTemperature), ErrorCode::InvalidArgument);
  EXPECT_EQ(session.generate({1, 2}, greedy(2)).tokens[0].size(), 2u);
}

TEST_F(ToyEngineTest, EosEndsASequence) {
  test::ToyConfig config = toyConfig();
  std::vector<int32_t> tokens;
  {
    Session session(Engine::load(writeToy(config)));
    tokens = session.generate(bytes("eos"), greedy(20)).tokens[0];
  }
  size_t k = 1;
  while (k < tokens.size() && std::find(tokens.begin(), tokens.begin() + k,
                                        tokens[k]) != tokens.begin() + k)
    ++k;
  ASSERT_LT(k, tokens.size()) << "greedy tokens repeat from the start";
  config.eosTokenIds = {tokens[k]};
  Session session(Engine::load(writeToy(config)));
  GenerateResult r = session.generate(bytes("eos"), greedy(20));
  EXPECT_EQ(r.tokens[0],
            std::vector<int32_t>(tokens.begin(), tokens.begin() + k + 1));
  GenerateParams ignore = greedy(20);
  ignore.stopAtEos = false;
  EXPECT_EQ(session.generate(bytes("eos"), ignore).tokens[0], tokens);
}

TEST_F(ToyEngineTest, EngineForAnotherGpuIsRejected) {
  test::ToyConfig config = toyConfig();
  config.targetSm = deviceSm / 10 == 9 ? 100 : 90;
  std::string path = writeToy(config);
  try {
    Engine::load(path);
    FAIL() << "expected WrongGpu";
  } catch (const Error &e) {
    EXPECT_EQ(e.code(), ErrorCode::WrongGpu);
    EXPECT_NE(std::string(e.what()).find("engine was compiled for sm_" +
                                         std::to_string(config.targetSm)),
              std::string::npos)
        << e.what();
  }
}

TEST_F(ToyEngineTest, OlderTargetRunsThroughPtx) {
  test::ToyConfig native = toyConfig();
  test::ToyConfig older = native;
  older.targetSm = deviceSm / 10 == 8 ? 75 : 80;
  auto engine = Engine::load(writeToy(older, true, true));
  EXPECT_TRUE(engine->usesPtx());
  Session session(engine);
  GenerateResult viaPtx = session.generate(bytes("ptx"), greedy(16));
  Session nativeSession(Engine::load(writeToy(native)));
  EXPECT_EQ(viaPtx.tokens,
            nativeSession.generate(bytes("ptx"), greedy(16)).tokens);
}

TEST_F(ToyEngineTest, LoadErrorsAreInvalidEngine) {
  std::string path = writeToy(toyConfig());
  FILE *f = std::fopen(path.c_str(), "r+b");
  ASSERT_NE(f, nullptr);
  std::fseek(f, -10, SEEK_END);
  std::fputc(0x5a, f);
  std::fclose(f);
  try {
    Engine::load(path);
    FAIL() << "expected InvalidEngine";
  } catch (const Error &e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidEngine);
    EXPECT_NE(std::string(e.what()).find("content hash mismatch"),
              std::string::npos)
        << e.what();
  }
  try {
    Engine::load(dir + "/missing.sits");
    FAIL() << "expected InvalidEngine";
  } catch (const Error &e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidEngine);
  }
}

} // namespace
