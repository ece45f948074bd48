//===- TensorParallelTest.cpp - A sharded program run as its ranks --------===//
//
// The test decoder split by sits-tensor-parallel over 2 ranks (its 2 KV
// heads split) and 4 (each KV head held by 2 ranks) and run by the
// reference executor as its ranks, one thread each: logits within f32
// rounding of the unsplit program's, through prefill and decode steps with
// the ranks' KV caches, and the same greedy tokens; over 1 rank the pass
// changes nothing.
//
//===----------------------------------------------------------------------===//

#include "compiler/reference/Verification.h"
#include "compiler/registration/Registration.h"
#include "dialects/sits/Sharding.h"
#include "test/unit/reference/TestDecoder.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"

#include <gtest/gtest.h>

using namespace sits;
using namespace sits::reference;

namespace {

class TensorParallelExecution : public ::testing::Test {
protected:
  TensorParallelExecution() {
    mlir::DialectRegistry registry;
    sits::registerAllDialects(registry);
    sits::registerAllPasses();
    context.appendDialectRegistry(registry);
    context.loadAllAvailableDialects();
  }

  /// The test decoder over `ranks` ranks, with a KV cache.
  mlir::OwningOpRef<mlir::ModuleOp> compile(int ranks) {
    auto module = mlir::parseSourceString<mlir::ModuleOp>(test::decoderSource(),
                                                          &context);
    EXPECT_TRUE(module);
    std::string pipeline = "sits-kv-cache{max-seq-len=24 max-batch=2}";
    if (ranks > 1)
      pipeline =
          "sits-tensor-parallel{tensor-parallel=" + std::to_string(ranks) +
          "}," + pipeline;
    mlir::PassManager pm(&context);
    EXPECT_TRUE(mlir::succeeded(mlir::parsePassPipeline(pipeline, pm)));
    EXPECT_TRUE(mlir::succeeded(pm.run(*module)));
    return module;
  }

  static Tensor ids() {
    return Tensor::fromInts(ElementType::I64, {2, 6},
                            {1, 5, 9, 2, 33, 0, 7, 39, 4, 4, 8, 12});
  }

  /// Logits of a prefill of ids() and of three decode steps after it.
  std::vector<Tensor> stepLogits(mlir::ModuleOp module) {
    Executor executor(module);
    auto program = findProgram(module);
    EXPECT_TRUE(bool(program)) << llvm::toString(program.takeError());
    std::vector<Tensor> logits;
    auto prefill = runStep(executor, module, program->prefill, ids(), nullptr);
    if (!prefill) {
      ADD_FAILURE() << llvm::toString(prefill.takeError());
      return logits;
    }
    logits.push_back(prefill->logits);
    std::shared_ptr<KVCacheState> cache = prefill->cache;
    for (int64_t step = 0; step < 3; ++step) {
      Tensor next = Tensor::fromInts(ElementType::I64, {2, 1},
                                     {3 + step * 11, 20 - step * 5});
      auto decoded = runStep(executor, module, program->decode, next, cache);
      if (!decoded) {
        ADD_FAILURE() << llvm::toString(decoded.takeError());
        return logits;
      }
      logits.push_back(decoded->logits);
      cache = decoded->cache;
    }
    return logits;
  }

  std::vector<int64_t> greedy(mlir::ModuleOp module) {
    Executor executor(module);
    auto program = findProgram(module);
    EXPECT_TRUE(bool(program));
    auto steps = greedyDecode(executor, module, *program, {3, 14, 15, 9}, 12);
    EXPECT_TRUE(bool(steps)) << llvm::toString(steps.takeError());
    std::vector<int64_t> tokens;
    if (steps)
      for (const GreedyStep &step : *steps)
        tokens.push_back(step.token);
    return tokens;
  }

  mlir::MLIRContext context;
};

TEST_F(TensorParallelExecution, RanksGiveTheUnsplitLogits) {
  auto whole = compile(1);
  std::vector<Tensor> expected = stepLogits(*whole);
  ASSERT_EQ(expected.size(), 4u);
  for (int ranks : {2, 4}) {
    auto split = compile(ranks);
    EXPECT_EQ(getTensorParallelRanks(*split), ranks);
    std::vector<Tensor> actual = stepLogits(*split);
    ASSERT_EQ(actual.size(), expected.size()) << ranks << " ranks";
    for (size_t i = 0; i < expected.size(); ++i) {
      auto comparison = compareTensors(actual[i], expected[i]);
      ASSERT_TRUE(bool(comparison)) << llvm::toString(comparison.takeError());
      // Sums in another order: f32 rounding, no more.
      EXPECT_LT(comparison->maxAbsError, 1e-5) << ranks << " ranks, step " << i;
      EXPECT_EQ(comparison->argmaxAgreements(), comparison->positions());
    }
  }
}

TEST_F(TensorParallelExecution, RanksGiveTheUnsplitGreedyTokens) {
  auto whole = compile(1);
  std::vector<int64_t> expected = greedy(*whole);
  ASSERT_EQ(expected.size(), 12u);
  EXPECT_EQ(greedy(*compile(2)), expected);
  EXPECT_EQ(greedy(*compile(4)), expected);
}

TEST_F(TensorParallelExecution, OneRankIsTheUnsplitProgram) {
  auto module =
      mlir::parseSourceString<mlir::ModuleOp>(test::decoderSource(), &context);
  ASSERT_TRUE(module);
  auto reference = stepLogits(*compile(1));
  mlir::PassManager pm(&context);
  ASSERT_TRUE(mlir::succeeded(
      mlir::parsePassPipeline("sits-tensor-parallel{tensor-parallel=1},"
                              "sits-kv-cache{max-seq-len=24 max-batch=2}",
                              pm)));
  ASSERT_TRUE(mlir::succeeded(pm.run(*module)));
  auto actual = stepLogits(*module);
  ASSERT_EQ(actual.size(), reference.size());
  for (size_t i = 0; i < actual.size(); ++i) {
    auto comparison = compareTensors(actual[i], reference[i]);
    ASSERT_TRUE(bool(comparison));
    EXPECT_EQ(comparison->maxAbsError, 0.0) << "step " << i;
  }
}

TEST_F(TensorParallelExecution, AFilledCacheFromElsewhereIsRefused) {
  auto split = compile(2);
  auto program = findProgram(*split);
  ASSERT_TRUE(bool(program));
  // The cache of another executor's run: this executor does not hold the
  // other rank's part of it.
  Executor first(*split);
  auto prefill = runStep(first, *split, program->prefill, ids(), nullptr);
  ASSERT_TRUE(bool(prefill)) << llvm::toString(prefill.takeError());
  Executor second(*split);
  Tensor next = Tensor::fromInts(ElementType::I64, {2, 1}, {3, 4});
  auto decoded = runStep(second, *split, program->decode, next, prefill->cache);
  ASSERT_FALSE(bool(decoded));
  EXPECT_NE(llvm::toString(decoded.takeError())
                .find("holds tokens but was not filled by this "
                      "tensor-parallel program"),
            std::string::npos);
}

} // namespace
