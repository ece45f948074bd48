//===- VerificationTest.cpp - Greedy decoding, perplexity, comparisons ----===//
//
// A small random decoder in sits ops runs as a full-sequence function and,
// after --sits-kv-cache, as prefill/decode steps with a KV cache: both must
// give the same logits, the same greedy stream and the same perplexity. This
// is what `sitsc --verify-greedy` relies on.
//
//===----------------------------------------------------------------------===//

#include "compiler/reference/Verification.h"
#include "compiler/registration/Registration.h"
#include "test/unit/reference/TestDecoder.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "llvm/ADT/StringExtras.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

using namespace sits::reference;

namespace {

constexpr int64_t kVocab = test::kDecoderVocab;
using test::decoderSource;

class Verification : public ::testing::Test {
protected:
  Verification() {
    mlir::DialectRegistry registry;
    sits::registerAllDialects(registry);
    sits::registerAllPasses();
    context.appendDialectRegistry(registry);
    context.loadAllAvailableDialects();
    std::string source = decoderSource();
    full = mlir::parseSourceString<mlir::ModuleOp>(source, &context);
    cached = mlir::parseSourceString<mlir::ModuleOp>(source, &context);
    EXPECT_TRUE(full && cached);
    mlir::PassManager pm(&context);
    EXPECT_TRUE(mlir::succeeded(mlir::parsePassPipeline(
        "sits-kv-cache{max-seq-len=24 max-batch=2}", pm)));
    EXPECT_TRUE(mlir::succeeded(pm.run(*cached)));
  }

  mlir::MLIRContext context;
  mlir::OwningOpRef<mlir::ModuleOp> full, cached;
};

TEST_F(Verification, FindsTheProgramOfEachStage) {
  llvm::Expected<Program> fullProgram = findProgram(*full);
  ASSERT_TRUE(bool(fullProgram)) << llvm::toString(fullProgram.takeError());
  EXPECT_EQ(fullProgram->forward, "forward");
  EXPECT_FALSE(fullProgram->hasCache());
  llvm::Expected<Program> cachedProgram = findProgram(*cached);
  ASSERT_TRUE(bool(cachedProgram)) << llvm::toString(cachedProgram.takeError());
  EXPECT_TRUE(cachedProgram->hasCache());
  EXPECT_EQ(cachedProgram->prefill, "prefill");
  EXPECT_EQ(cachedProgram->decode, "decode");
}

TEST_F(Verification, PrefillMatchesTheFullSequence) {
  Executor fullExecutor(*full), cachedExecutor(*cached);
  Tensor ids = Tensor::fromInts(ElementType::I64, {2, 7},
                                {1, 5, 9, 2, 33, 0, 7, 39, 4, 4, 8, 12, 3, 21});
  llvm::Expected<Tensor> expected =
      runLogits(fullExecutor, *full, "forward", ids);
  ASSERT_TRUE(bool(expected)) << llvm::toString(expected.takeError());
  llvm::Expected<Tensor> actual =
      runLogits(cachedExecutor, *cached, "prefill", ids);
  ASSERT_TRUE(bool(actual)) << llvm::toString(actual.takeError());
  llvm::Expected<Comparison> comparison = compareTensors(*actual, *expected);
  ASSERT_TRUE(bool(comparison)) << llvm::toString(comparison.takeError());
  EXPECT_EQ(comparison->maxAbsError, 0.0);
  EXPECT_EQ(comparison->argmaxAgreements(), 14);
  EXPECT_TRUE(comparison->withinTolerance(1e-3));
}

TEST_F(Verification, GreedyWithTheCacheMatchesRecomputation) {
  Executor fullExecutor(*full), cachedExecutor(*cached);
  std::vector<int64_t> prompt = {3, 17, 25, 8};
  auto reference =
      greedyDecode(fullExecutor, *full, *findProgram(*full), prompt, 12);
  ASSERT_TRUE(bool(reference)) << llvm::toString(reference.takeError());
  auto withCache =
      greedyDecode(cachedExecutor, *cached, *findProgram(*cached), prompt, 12);
  ASSERT_TRUE(bool(withCache)) << llvm::toString(withCache.takeError());
  ASSERT_EQ(withCache->size(), 12u);
  std::vector<int64_t> tokens;
  for (size_t i = 0; i < reference->size(); ++i) {
    tokens.push_back((*reference)[i].token);
    EXPECT_EQ((*withCache)[i].token, (*reference)[i].token) << "step " << i;
    for (size_t v = 0; v < (*reference)[i].logits.size(); ++v)
      ASSERT_NEAR((*withCache)[i].logits[v], (*reference)[i].logits[v], 1e-5)
          << "step " << i << ", token " << v;
    EXPECT_GE((*withCache)[i].margin, 0.0f);
  }
  EXPECT_FALSE(findGreedyMismatch(*withCache, tokens));

  // A different expected token at step 5 is reported with the margin.
  std::vector<int64_t> altered = tokens;
  altered[5] = (tokens[5] + 1) % kVocab;
  std::optional<GreedyMismatch> mismatch =
      findGreedyMismatch(*withCache, altered);
  ASSERT_TRUE(mismatch);
  EXPECT_EQ(mismatch->step, 5);
  EXPECT_EQ(mismatch->actualToken, tokens[5]);
  EXPECT_EQ(mismatch->expectedToken, altered[5]);
  const std::vector<float> &row = (*withCache)[5].logits;
  EXPECT_FLOAT_EQ(mismatch->margin, row[tokens[5]] - row[altered[5]]);
  EXPECT_GT(mismatch->margin, 0.0f);
}

TEST_F(Verification, DecodingPastTheCapacityIsAnError) {
  Executor executor(*cached);
  std::vector<int64_t> prompt(20, 1);
  auto steps =
      greedyDecode(executor, *cached, *findProgram(*cached), prompt, 8);
  ASSERT_FALSE(bool(steps));
  std::string message = llvm::toString(steps.takeError());
  EXPECT_NE(message.find("KV cache full"), std::string::npos) << message;
}

TEST_F(Verification, PerplexityAgreesAcrossStages) {
  Executor fullExecutor(*full), cachedExecutor(*cached);
  std::vector<int64_t> ids;
  for (int i = 0; i < 45; ++i)
    ids.push_back((i * 7 + 3) % kVocab);
  auto a = teacherForcedPerplexity(fullExecutor, *full, *findProgram(*full),
                                   ids, 16);
  ASSERT_TRUE(bool(a)) << llvm::toString(a.takeError());
  auto b = teacherForcedPerplexity(cachedExecutor, *cached,
                                   *findProgram(*cached), ids, 16);
  ASSERT_TRUE(bool(b)) << llvm::toString(b.takeError());
  // Windows of 16, 16 and 13 tokens predict 15 + 15 + 12.
  EXPECT_EQ(a->predictedTokens, 42);
  EXPECT_EQ(b->predictedTokens, 42);
  EXPECT_NEAR(a->meanNll, b->meanNll, 1e-9);
  EXPECT_GT(a->perplexity(), 1.0);
  EXPECT_LT(a->perplexity(), 1e6);

  // By hand for the first window: -log softmax(logits[t])[ids[t + 1]].
  Tensor window = Tensor::fromInts(ElementType::I64, {1, 16},
                                   {ids.begin(), ids.begin() + 16});
  auto logits = runLogits(fullExecutor, *full, "forward", window);
  ASSERT_TRUE(bool(logits));
  double nll = 0;
  for (int t = 0; t < 15; ++t) {
    double sum = 0;
    for (int v = 0; v < kVocab; ++v)
      sum += std::exp(double(logits->floats()[t * kVocab + v]));
    nll += std::log(sum) - logits->floats()[t * kVocab + ids[t + 1]];
  }
  auto first = teacherForcedPerplexity(fullExecutor, *full, *findProgram(*full),
                                       ids, 16, 16);
  ASSERT_TRUE(bool(first));
  EXPECT_EQ(first->predictedTokens, 15);
  EXPECT_NEAR(first->meanNll, nll / 15, 1e-6);
}

TEST(Comparison, ReportsErrorsAndArgmax) {
  Tensor expected = Tensor::fromFloats(ElementType::F32, {1, 2, 3},
                                       {1, 5, 2, 0.5f, 0.1f, 0.2f});
  Tensor actual = Tensor::fromFloats(ElementType::F32, {1, 2, 3},
                                     {1, 5.01f, 2, 0.1f, 0.6f, 0.2f});
  llvm::Expected<Comparison> result = compareTensors(actual, expected);
  ASSERT_TRUE(bool(result));
  EXPECT_NEAR(result->maxAbsError, 0.5, 1e-6);
  EXPECT_EQ(result->worstIndex, 4);
  EXPECT_EQ(result->positions(), 2);
  EXPECT_EQ(result->argmaxAgreements(), 1);
  EXPECT_FALSE(result->withinTolerance(1e-3));
  std::string report;
  llvm::raw_string_ostream os(report);
  result->print(os);
  EXPECT_NE(report.find("argmax agrees at 1 of 2 positions"), std::string::npos)
      << report;
  EXPECT_NE(report.find("batch 0, position 1: argmax 1, reference 0"),
            std::string::npos)
      << report;
  llvm::Expected<Comparison> mismatched =
      compareTensors(actual, actual.reshaped({2, 3}));
  ASSERT_FALSE(bool(mismatched));
  EXPECT_NE(llvm::toString(mismatched.takeError())
                .find("differs from the reference shape"),
            std::string::npos);
}

TEST(OnnxData, DecodesTensorProtoBytes) {
  std::vector<char> bytes(16);
  int64_t ids[2] = {7, -3};
  std::memcpy(bytes.data(), ids, 16);
  llvm::Expected<Tensor> tensor = tensorFromOnnxData(7, {1, 2}, bytes);
  ASSERT_TRUE(bool(tensor));
  EXPECT_EQ(tensor->getElementType(), ElementType::I64);
  EXPECT_EQ(tensor->ints()[1], -3);
  llvm::Expected<Tensor> wrongSize = tensorFromOnnxData(1, {3}, bytes);
  ASSERT_FALSE(bool(wrongSize));
  EXPECT_NE(llvm::toString(wrongSize.takeError()).find("needs 12"),
            std::string::npos);
  // Doubles are held as the nearest f32; unsigned 16-bit integers as i64.
  double wide[2] = {0.1, -2.5};
  std::memcpy(bytes.data(), wide, 16);
  llvm::Expected<Tensor> doubles = tensorFromOnnxData(11, {2}, bytes);
  ASSERT_TRUE(bool(doubles)) << llvm::toString(doubles.takeError());
  EXPECT_EQ(doubles->getElementType(), ElementType::F64);
  EXPECT_EQ(doubles->floats()[0], 0.1f);
  EXPECT_EQ(doubles->floats()[1], -2.5f);
  uint16_t shorts[2] = {65535, 7};
  llvm::Expected<Tensor> unsignedShorts = tensorFromOnnxData(
      4, {2}, llvm::ArrayRef(reinterpret_cast<char *>(shorts), 4));
  ASSERT_TRUE(bool(unsignedShorts));
  EXPECT_EQ(unsignedShorts->ints()[0], 65535);
  llvm::Expected<Tensor> complex = tensorFromOnnxData(14, {2}, bytes);
  ASSERT_FALSE(bool(complex));
  EXPECT_NE(llvm::toString(complex.takeError()).find("ONNX element type 14"),
            std::string::npos);
}

TEST(AllClose, ComparesAsNumpyAssertAllclose) {
  float nan = std::nanf(""), inf = INFINITY;
  Tensor expected = Tensor::fromFloats(ElementType::F32, {2, 3},
                                       {1.0f, -2.0f, 0.0f, nan, inf, 100.0f});
  // Within atol + rtol |e| everywhere: 1e-3 of 100 is 0.1.
  Tensor close = Tensor::fromFloats(
      ElementType::F32, {2, 3}, {1.0005f, -2.001f, 5e-8f, nan, inf, 100.09f});
  llvm::Expected<AllCloseComparison> agree =
      compareAllClose(close, expected, 1e-3, 1e-7);
  ASSERT_TRUE(bool(agree)) << llvm::toString(agree.takeError());
  EXPECT_TRUE(agree->passed());
  EXPECT_NEAR(agree->maxAbsError, 0.09, 1e-4);
  // Just past the bound at [0, 1], a NaN against a number, -inf for inf.
  Tensor far = Tensor::fromFloats(ElementType::F32, {2, 3},
                                  {1.0f, -2.0031f, 0.0f, 0.0f, -inf, 100.0f});
  llvm::Expected<AllCloseComparison> differ =
      compareAllClose(far, expected, 1e-3, 1e-7);
  ASSERT_TRUE(bool(differ));
  EXPECT_FALSE(differ->passed());
  EXPECT_EQ(differ->mismatches, 3);
  EXPECT_EQ(differ->firstMismatch, 1);
  std::string report;
  llvm::raw_string_ostream os(report);
  differ->print(os);
  EXPECT_NE(report.find("3 of 6 elements differ, the first at [0, 1]: "
                        "-2.0030999 against -2"),
            std::string::npos)
      << report;
  // Element types and shapes must match.
  llvm::Expected<AllCloseComparison> halves =
      compareAllClose(expected.castTo(ElementType::F16), expected, 1e-3, 1e-7);
  ASSERT_FALSE(bool(halves));
  EXPECT_NE(llvm::toString(halves.takeError())
                .find("element type f16 differs from the reference's f32"),
            std::string::npos);
  llvm::Expected<AllCloseComparison> reshaped =
      compareAllClose(expected.reshaped({3, 2}), expected, 1e-3, 1e-7);
  ASSERT_FALSE(bool(reshaped));
}

} // namespace
