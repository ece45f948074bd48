//===- PagedQuantSessionGpuTest.cpp - Paged int8/int4 KV caches on a GPU --===//
//
// The real generated kernels of engines with a quantized KV cache (sitsc
// --kv-cache=int8|int4), paged (--kv-layout=paged) against contiguous:
// the same greedy tokens for a batch of prompts of different lengths fed
// through Session::step in chunks, and with prefix caching (shared cold
// blocks, copied tail blocks, restored FP16 rows) the tokens of a full
// prefill, through the Session and through the server's scheduler.
//
// The engines come from sitsc, which the runtime's tests do not build: set
// SITS_TEST_QUANT_ENGINES to a folder holding int8.sits, int8-paged.sits,
// int4.sits and int4-paged.sits (bench/device/paged-quant-kv.sh makes them
// from test/models/llama_gqa: --max-seq-len=256 --max-batch=4
// --max-prefill-tokens=32 --kv-hot-window=16 --kv-channel-block=16, the
// paged ones --kv-block-tokens=16). Skips without it or without a GPU
// (label `gpu`).
//
//===----------------------------------------------------------------------===//

#include "Scheduler.h"
#include "SessionBackend.h"
#include "sits/Runtime.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cuda_runtime_api.h>
#include <string>

using namespace sits;

namespace {

class PagedQuantSessionTest : public ::testing::TestWithParam<const char *> {
protected:
  void SetUp() override {
    int gpus = 0;
    if (cudaGetDeviceCount(&gpus) != cudaSuccess || gpus == 0)
      GTEST_SKIP() << "no CUDA GPU";
    const char *dir = std::getenv("SITS_TEST_QUANT_ENGINES");
    if (!dir || !*dir)
      GTEST_SKIP() << "SITS_TEST_QUANT_ENGINES is not set (a folder of "
                      "int8/int4 engines, contiguous and paged: see the "
                      "file's header)";
    const std::string base = std::string(dir) + "/" + GetParam();
    contiguous = Engine::load(base + ".sits");
    paged = Engine::load(base + "-paged.sits");
    ASSERT_TRUE(paged->config().kvCache.paged());
    ASSERT_NE(paged->config().kvCache.coldBits, 0u);
    ASSERT_FALSE(contiguous->config().kvCache.paged());
  }

  std::shared_ptr<Engine> contiguous, paged;
};

StepInput input(uint32_t slot, std::vector<int32_t> tokens, bool reset) {
  StepInput in;
  in.slot = slot;
  in.tokens = std::move(tokens);
  in.reset = reset;
  return in;
}

/// Prompts of different lengths: within the hot window (16), across it and
/// across blocks and key blocks (16), longer than the prefill chunk (32).
std::vector<std::vector<int32_t>> prompts() {
  std::vector<std::vector<int32_t>> out;
  for (uint32_t length : {5u, 40u, 97u, 150u}) {
    std::vector<int32_t> p;
    for (uint32_t i = 0; i < length; ++i)
      p.push_back(int32_t((i * 37 + length * 11) % 250 + 3));
    out.push_back(p);
  }
  return out;
}

/// Prompt i in slot firstSlot + i, prefilled together in chunks of 32 from
/// `from[i]` (0: a reset), then `count` greedy tokens each, decoded
/// together.
std::vector<std::vector<int32_t>>
runBatch(Session &session, const std::vector<std::vector<int32_t>> &ps,
         uint32_t count, const std::vector<uint32_t> &from = {},
         uint32_t firstSlot = 0) {
  std::vector<size_t> at(ps.size(), 0);
  for (size_t i = 0; i < from.size(); ++i)
    at[i] = from[i];
  std::vector<std::vector<int32_t>> out(ps.size());
  for (bool prefilling = true; prefilling;) {
    prefilling = false;
    std::vector<StepInput> inputs;
    std::vector<size_t> fed;
    for (size_t i = 0; i < ps.size(); ++i) {
      if (at[i] >= ps[i].size())
        continue;
      size_t end = std::min(ps[i].size(), at[i] + 32);
      inputs.push_back(input(
          firstSlot + uint32_t(i),
          std::vector<int32_t>(ps[i].begin() + at[i], ps[i].begin() + end),
          at[i] == 0));
      fed.push_back(i);
      at[i] = end;
    }
    if (inputs.empty())
      break;
    prefilling = true;
    std::vector<int32_t> next = session.step(inputs);
    for (size_t k = 0; k < fed.size(); ++k)
      if (at[fed[k]] == ps[fed[k]].size())
        out[fed[k]].push_back(next[k]);
  }
  while (out[0].size() < count) {
    std::vector<StepInput> inputs;
    for (size_t i = 0; i < ps.size(); ++i)
      inputs.push_back(input(firstSlot + uint32_t(i), {out[i].back()}, false));
    std::vector<int32_t> next = session.step(inputs);
    for (size_t i = 0; i < ps.size(); ++i)
      out[i].push_back(next[i]);
  }
  return out;
}

TEST_P(PagedQuantSessionTest, PagedTokensEqualContiguousOnes) {
  Session a(contiguous), b(paged);
  std::vector<std::vector<int32_t>> want = runBatch(a, prompts(), 48);
  std::vector<std::vector<int32_t>> got = runBatch(b, prompts(), 48);
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_EQ(got[i], want[i]) << "prompt " << i;
  // Released slots give their blocks back.
  for (uint32_t slot = 0; slot < 4; ++slot)
    b.releaseSlot(slot);
  EXPECT_EQ(b.kvBlocks().available, b.kvBlocks().blocks);
}

/// Prefix caching through the Session: a prompt's blocks saved, then loaded
/// into another slot for a prompt sharing them; the rest prefilled and
/// decoded gives the tokens of a full prefill.
TEST_P(PagedQuantSessionTest, ALoadedPrefixGivesAFullPrefillsTokens) {
  const std::vector<int32_t> first = prompts()[3]; // 150 tokens
  std::vector<int32_t> second(first.begin(), first.begin() + 112);
  for (int32_t t = 0; t < 23; ++t)
    second.push_back(200 + t);
  Session full(paged);
  const std::vector<int32_t> want = runBatch(full, {second}, 32)[0];

  Session session(paged);
  session.allocateBlockPool(16, 32);
  runBatch(session, {first}, 1);
  std::vector<uint32_t> ids;
  for (uint32_t i = 0; i < 9; ++i) // 144 tokens
    ids.push_back(i);
  session.saveBlocks(0, 0, ids);
  // 112 tokens: from token floor((112 - 16) / 16) * 16 = 96 the sequence
  // quantizes or reads in FP16 again: blocks 0-5 shared, block 6 copied
  // with its FP16 rows, which the ring of the first prompt (150 tokens,
  // 63 rows) still held when saved.
  std::vector<uint32_t> hit(ids.begin(), ids.begin() + 7);
  Session::PrefixLoad plan = session.planPrefixLoad(hit);
  EXPECT_EQ(plan.blocks, 7u);
  EXPECT_EQ(plan.shared, 6u);
  // Block 0's rows had left the ring: a prefix of one block cannot load.
  EXPECT_EQ(session.planPrefixLoad({0}).blocks, 0u);
  EXPECT_THROW(session.loadBlocks(2, {0}, SamplingParams()), Error);

  const uint32_t before = session.kvBlocks().available;
  session.loadBlocks(1, hit, SamplingParams());
  EXPECT_EQ(session.slotLength(1), 112u);
  EXPECT_EQ(session.kvBlocks().available, before - 1) << "one copied block";
  EXPECT_EQ(runBatch(session, {second}, 32, {112}, /*firstSlot=*/1)[0], want);
}

/// The server's scheduler over a paged quantized engine: requests sharing
/// a long prefix, with the prefix cache on, get the tokens they get with it
/// off, and some prompt tokens come from the cache.
TEST_P(PagedQuantSessionTest, PrefixCacheOnGivesTheTokensOfPrefixCacheOff) {
  std::vector<serve::Request> requests;
  const std::vector<int32_t> shared = prompts()[3];
  for (int32_t i = 0; i < 6; ++i) {
    serve::Request r;
    r.prompt.assign(shared.begin(), shared.begin() + 100 + 7 * i);
    r.prompt.push_back(10 + i);
    r.maxTokens = 24;
    r.stopAtEos = false;
    requests.push_back(r);
  }
  auto serveAll = [&](bool prefix, serve::Metrics *metrics) {
    Session session(paged);
    serve::SessionBackend backend(session);
    if (prefix)
      backend.allocateBlockPool(16, 64);
    serve::SchedulerOptions options;
    options.maxPrefillChunk = 32;
    std::vector<std::vector<int32_t>> tokens(requests.size());
    serve::Scheduler scheduler(backend, ModelTokenizer::bytes(512, {}), options,
                               metrics);
    for (size_t i = 0; i < requests.size(); ++i) {
      std::vector<int32_t> *out = &tokens[i];
      // One at a time, so that each finds the one before it cached.
      EXPECT_TRUE(scheduler
                      .submit(requests[i],
                              [out](const serve::RequestEvent &event) {
                                out->insert(out->end(), event.tokens.begin(),
                                            event.tokens.end());
                                return true;
                              })
                      .accepted());
      for (int k = 0; k < 100000 && scheduler.runOnce(); ++k) {
      }
    }
    return tokens;
  };
  serve::Metrics metrics;
  std::vector<std::vector<int32_t>> off = serveAll(false, nullptr);
  std::vector<std::vector<int32_t>> on = serveAll(true, &metrics);
  for (size_t i = 0; i < requests.size(); ++i) {
    EXPECT_EQ(on[i].size(), 24u) << i;
    EXPECT_EQ(on[i], off[i]) << "request " << i;
  }
  std::string text = metrics.render();
  EXPECT_EQ(text.find("sits_prefix_cache_hit_tokens_total 0\n"),
            std::string::npos)
      << "no prompt token came from the cache:\n"
      << text;
}

INSTANTIATE_TEST_SUITE_P(QuantizedCaches, PagedQuantSessionTest,
                         ::testing::Values("int8", "int4"));

} // namespace
