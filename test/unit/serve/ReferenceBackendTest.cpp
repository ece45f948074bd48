//===- ReferenceBackendTest.cpp - The serving backend on the CPU reference ===//
//
// ReferenceBackend's slots against greedyDecode of one prompt alone: a
// sequence started, chunked and decoded beside another gives the same
// tokens, a slot restarts at position 0, and bad steps are errors.
//
//===----------------------------------------------------------------------===//

#include "compiler/serve/ReferenceBackend.h"
#include "compiler/pipeline/Pipeline.h"
#include "compiler/registration/Registration.h"
#include "frontends/onnx/OnnxImporter.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"

#include <gtest/gtest.h>

using namespace sits;
using namespace sits::reference;

namespace {
class ReferenceBackendTest : public ::testing::Test {
protected:
  void SetUp() override {
    mlir::DialectRegistry registry;
    registerAllDialects(registry);
    context = std::make_unique<mlir::MLIRContext>(registry);
    context->loadAllAvailableDialects();
    module = importOnnxFile(SITS_SOURCE_DIR "/test/models/llama_gqa/model.onnx",
                            *context);
    ASSERT_TRUE(module);
    PipelineOptions options;
    options.maxSeqLen = 32;
    options.maxBatch = 2;
    mlir::PassManager pm(context.get());
    buildPipeline(pm, Stage::Optimized, options);
    ASSERT_TRUE(mlir::succeeded(pm.run(*module)));
    auto created = ReferenceBackend::create(*module);
    ASSERT_TRUE(bool(created)) << llvm::toString(created.takeError());
    backend = std::move(*created);
  }

  /// greedyDecode's tokens for `prompt` alone.
  std::vector<int32_t> alone(const std::vector<int32_t> &prompt, int count) {
    Executor executor(*module);
    auto program = findProgram(*module);
    EXPECT_TRUE(bool(program));
    auto steps =
        greedyDecode(executor, *module, *program,
                     std::vector<int64_t>(prompt.begin(), prompt.end()), count);
    EXPECT_TRUE(bool(steps));
    std::vector<int32_t> tokens;
    for (const GreedyStep &step : *steps)
      tokens.push_back(static_cast<int32_t>(step.token));
    return tokens;
  }

  serve::SlotStep step(uint32_t slot, uint32_t position,
                       std::vector<int32_t> tokens, bool sample = true) {
    serve::SlotStep s;
    s.slot = slot;
    s.position = position;
    s.tokens = std::move(tokens);
    s.sample = sample;
    return s;
  }

  std::unique_ptr<mlir::MLIRContext> context;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  std::unique_ptr<ReferenceBackend> backend;
};
} // namespace

TEST_F(ReferenceBackendTest, SlotsRunApartAndRestart) {
  EXPECT_EQ(backend->slots(), 2u);
  EXPECT_EQ(backend->maxSequenceLength(), 32u);
  std::vector<int32_t> a = {337, 146, 29, 222}, b = {5, 6, 7, 8, 9, 10, 11};
  std::vector<int32_t> wantA = alone(a, 5), wantB = alone(b, 3);

  std::vector<int32_t> gotA, gotB;
  gotA.push_back(backend->step({step(0, 0, a)})[0]);
  // B's prompt in two chunks while A decodes.
  std::vector<int32_t> out =
      backend->step({step(0, 4, {gotA.back()}), step(1, 0, {5, 6, 7}, false)});
  EXPECT_EQ(out[1], -1);
  gotA.push_back(out[0]);
  out = backend->step({step(0, 5, {gotA.back()}), step(1, 3, {8, 9, 10, 11})});
  gotA.push_back(out[0]);
  gotB.push_back(out[1]);
  for (uint32_t position = 6; gotA.size() < 5; ++position) {
    out = backend->step({step(0, position, {gotA.back()}),
                         step(1, position + 1, {gotB.back()})});
    gotA.push_back(out[0]);
    gotB.push_back(out[1]);
  }
  EXPECT_EQ(gotA, wantA);
  EXPECT_EQ(std::vector<int32_t>(gotB.begin(), gotB.begin() + 3), wantB);

  // Slot 0 starts over with B's prompt while slot 1 is left as it was.
  EXPECT_EQ(backend->step({step(0, 0, b)})[0], wantB[0]);
}

TEST_F(ReferenceBackendTest, BadStepsAreErrors) {
  backend->step({step(0, 0, {1, 2, 3})});
  try {
    backend->step({step(0, 5, {4})});
    FAIL() << "a wrong position ran";
  } catch (const Error &error) {
    EXPECT_NE(std::string(error.what()).find("holds 3 tokens"),
              std::string::npos)
        << error.what();
  }
  try {
    backend->step({step(2, 0, {1})});
    FAIL() << "a slot past the last ran";
  } catch (const Error &error) {
    EXPECT_NE(std::string(error.what()).find("slot 2"), std::string::npos);
  }
  try {
    backend->step({step(1, 0, std::vector<int32_t>(33, 1))});
    FAIL() << "a step past the capacity ran";
  } catch (const Error &error) {
    EXPECT_EQ(error.code(), ErrorCode::KVCacheFull);
  }
}

TEST_F(ReferenceBackendTest, ATensorParallelProgramIsRefused) {
  (*module)->setAttr("sits.tensor_parallel",
                     mlir::Builder(context.get()).getI64IntegerAttr(2));
  auto created = ReferenceBackend::create(*module);
  ASSERT_FALSE(bool(created));
  EXPECT_EQ(llvm::toString(created.takeError()),
            "the program is tensor-parallel over 2 ranks, which the reference "
            "server does not run: compile it without --tensor-parallel");
}

TEST_F(ReferenceBackendTest, BlocksSavedAndLoadedGiveAFullPrefillsTokens) {
  // Slot 0 prefills a 9-token prompt and saves its two full blocks of 4;
  // slot 1 loads them and prefills only the last token: its tokens are
  // those of the prompt alone.
  backend->allocateBlockPool(4, 3);
  EXPECT_EQ(backend->cacheBlockTokens(), 4u);
  EXPECT_EQ(backend->poolBlocks(), 3u);
  std::vector<int32_t> prompt = {337, 146, 29, 222, 5, 6, 7, 8, 9};
  std::vector<int32_t> want = alone(prompt, 4);
  EXPECT_EQ(backend->step({step(0, 0, prompt)})[0], want[0]);
  backend->saveBlocks(0, 0, {2, 0});
  backend->loadBlocks(1, {2, 0}, {});
  std::vector<int32_t> got = {backend->step({step(1, 8, {9})})[0]};
  for (uint32_t position = 9; got.size() < 4; ++position)
    got.push_back(backend->step({step(1, position, {got.back()})})[0]);
  EXPECT_EQ(got, want);

  // Any held block may be saved alone; blocks past the tokens held or
  // outside the pool are errors.
  backend->saveBlocks(0, 1, {1});
  EXPECT_THROW(backend->saveBlocks(0, 2, {1}), Error) << "past the tokens held";
  EXPECT_THROW(backend->loadBlocks(1, {7}, {}), Error) << "no such block";
  // A failed load leaves the slot to restart at 0, which works.
  EXPECT_EQ(backend->step({step(1, 0, prompt)})[0], want[0]);
  EXPECT_THROW(backend->allocateBlockPool(32, 1), Error) << "no token to spare";
}

TEST_F(ReferenceBackendTest, APagedPoolIsAccountedAsAPagedSessions) {
  // Blocks of 16 (two hold a slot's 32 tokens), a pool of 3: slots take
  // blocks as they grow, a step past the pool is KVCacheFull naming it, a
  // released slot gives its blocks back, and prefix blocks are shared with
  // the pool ids, not taken twice.
  EXPECT_THROW(backend->usePagedCache(10, 3), Error) << "not a power of two";
  backend->usePagedCache(16, 3);
  EXPECT_EQ(backend->sharedBlockTokens(), 16u);
  EXPECT_EQ(backend->kvPoolBlocks(), 3u);
  EXPECT_THROW(backend->allocateBlockPool(4, 2), Error) << "not the pool's";
  backend->allocateBlockPool(16, 2);
  std::vector<int32_t> prompt(17, 5);
  std::vector<int32_t> want = alone(prompt, 1);
  EXPECT_EQ(backend->step({step(0, 0, prompt)})[0], want[0]);
  EXPECT_EQ(backend->kvAvailableBlocks({}), 1u);
  try {
    backend->step({step(1, 0, prompt)});
    FAIL() << "a step past the pool ran";
  } catch (const Error &error) {
    EXPECT_EQ(error.code(), ErrorCode::KVCacheFull);
    EXPECT_NE(std::string(error.what()).find("pool of 3 blocks of 16 tokens"),
              std::string::npos)
        << error.what();
  }
  backend->release(1);
  // Slot 0's first block is shared with pool id 1; once the slot ends the
  // id alone holds it: available, unless about to be loaded.
  backend->saveBlocks(0, 0, {1});
  backend->release(0);
  EXPECT_EQ(backend->kvAvailableBlocks({}), 3u);
  EXPECT_EQ(backend->kvAvailableBlocks({1}), 2u);
  backend->loadBlocks(1, {1}, {});
  EXPECT_EQ(backend->kvAvailableBlocks({}), 2u);
  EXPECT_EQ(backend->step({step(1, 16, {5})})[0], want[0]);
  EXPECT_EQ(backend->kvAvailableBlocks({}), 1u);
  // A slot that needs the block only the id held takes it back; the id
  // then names nothing and cannot be loaded.
  backend->release(1);
  EXPECT_EQ(backend->step({step(0, 0, std::vector<int32_t>(32, 7))}).size(),
            1u);
  EXPECT_EQ(backend->step({step(1, 0, {9})}).size(), 1u);
  EXPECT_THROW(backend->loadBlocks(0, {1}, {}), Error) << "taken back";
}
