//===- ModelsTest.cpp - The test models against their PyTorch references -===//
//
// Every test model, imported and compiled to each stage (imported, sits,
// optimized), runs in the reference executor on `test_data_set_0/input_0.pb`
// and must match `output_0.pb` (PyTorch float32 logits) within 1e-3, with the
// same argmax at every position; its greedy continuation of `greedy.json`'s
// prompt must match Hugging Face's, or differ only at a near tie.
//
// Models come from test/models/ (committed), or from the shared models folder
// (llama_bytes*, llama_bpe16k); a model found in neither is skipped with a
// message saying where it was looked for.
//
//===----------------------------------------------------------------------===//

#include "compiler/pipeline/Pipeline.h"
#include "compiler/reference/Verification.h"
#include "compiler/registration/Registration.h"
#include "frontends/onnx/OnnxImporter.h"
#include "frontends/onnx/OnnxLoader.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <gtest/gtest.h>

#include <chrono>

using namespace sits::reference;

namespace {

/// The folder holding `name`'s model.onnx, or "" when neither place has it.
std::string modelFolder(llvm::StringRef name) {
  for (llvm::StringRef root : {llvm::StringRef(SITS_SOURCE_DIR "/test/models"),
                               llvm::StringRef(SITS_SHARED_MODELS_DIR)}) {
    llvm::SmallString<256> path(root);
    llvm::sys::path::append(path, name, "model.onnx");
    if (!root.empty() && llvm::sys::fs::exists(path))
      return llvm::sys::path::parent_path(path).str();
  }
  return "";
}

llvm::Expected<Tensor> readPb(llvm::StringRef path) {
  llvm::Expected<sits::LoadedTensor> loaded = sits::readTensorProtoFile(path);
  if (!loaded)
    return loaded.takeError();
  return tensorFromOnnxData(loaded->elementType, loaded->dims, loaded->data);
}

struct Compiled {
  std::unique_ptr<mlir::MLIRContext> context;
  mlir::OwningOpRef<mlir::ModuleOp> module;
};

/// Imports the model and runs the pipeline up to `stage`.
Compiled compile(const std::string &folder, sits::Stage stage) {
  Compiled result;
  mlir::DialectRegistry registry;
  sits::registerAllDialects(registry);
  result.context = std::make_unique<mlir::MLIRContext>(registry);
  result.context->loadAllAvailableDialects();
  std::string diagnostics;
  mlir::ScopedDiagnosticHandler handler(
      result.context.get(), [&](mlir::Diagnostic &diagnostic) {
        diagnostics += diagnostic.str() + "\n";
        return mlir::success();
      });
  result.module = sits::importOnnxFile(folder + "/model.onnx", *result.context);
  EXPECT_TRUE(result.module) << "import failed:\n" << diagnostics;
  if (!result.module || stage == sits::Stage::Imported)
    return result;
  sits::PipelineOptions options;
  options.maxSeqLen = 64;
  options.maxBatch = 2;
  mlir::PassManager pm(result.context.get());
  sits::buildPipeline(pm, stage, options);
  if (mlir::failed(pm.run(*result.module))) {
    ADD_FAILURE() << "the pipeline failed:\n" << diagnostics;
    result.module = nullptr;
  }
  return result;
}

using ModelStage = std::tuple<std::string, sits::Stage>;

class Models : public ::testing::TestWithParam<ModelStage> {
protected:
  void SetUp() override {
    folder = modelFolder(std::get<0>(GetParam()));
    if (folder.empty())
      GTEST_SKIP() << std::get<0>(GetParam()) << " is in neither "
                   << SITS_SOURCE_DIR "/test/models nor "
                   << SITS_SHARED_MODELS_DIR;
  }
  std::string folder;
};

double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
      .count();
}

TEST_P(Models, MatchTheReferenceLogits) {
  Compiled compiled = compile(folder, std::get<1>(GetParam()));
  ASSERT_TRUE(compiled.module);
  llvm::Expected<Program> program = findProgram(*compiled.module);
  ASSERT_TRUE(bool(program)) << llvm::toString(program.takeError());
  llvm::Expected<Tensor> ids = readPb(folder + "/test_data_set_0/input_0.pb");
  ASSERT_TRUE(bool(ids)) << llvm::toString(ids.takeError());
  llvm::Expected<Tensor> expected =
      readPb(folder + "/test_data_set_0/output_0.pb");
  ASSERT_TRUE(bool(expected)) << llvm::toString(expected.takeError());

  Executor executor(*compiled.module);
  auto start = std::chrono::steady_clock::now();
  llvm::Expected<Tensor> logits = runLogits(
      executor, *compiled.module,
      program->hasCache() ? program->prefill : program->forward, *ids);
  double seconds = secondsSince(start);
  ASSERT_TRUE(bool(logits)) << llvm::toString(logits.takeError());
  llvm::Expected<Comparison> comparison = compareTensors(*logits, *expected);
  ASSERT_TRUE(bool(comparison)) << llvm::toString(comparison.takeError());
  std::string report;
  llvm::raw_string_ostream os(report);
  comparison->print(os);
  std::printf("%s at stage %s (%s, %.1f ms): %s",
              std::get<0>(GetParam()).c_str(),
              sits::getStageName(std::get<1>(GetParam())).str().c_str(),
              program->hasCache() ? "prefill" : "full sequence", seconds * 1e3,
              report.c_str());
  EXPECT_TRUE(comparison->withinTolerance(1e-3)) << report;
  EXPECT_EQ(comparison->argmaxAgreements(), comparison->positions()) << report;
}

/// Greedy decoding of each model's optimized program (prefill, then decode
/// steps through the KV cache), as --verify-greedy runs it.
class ModelGreedy : public ::testing::TestWithParam<std::string> {
protected:
  void SetUp() override {
    folder = modelFolder(GetParam());
    if (folder.empty())
      GTEST_SKIP() << GetParam() << " is in neither "
                   << SITS_SOURCE_DIR "/test/models nor "
                   << SITS_SHARED_MODELS_DIR;
  }
  std::string folder;
};

TEST_P(ModelGreedy, MatchesHuggingFace) {
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> file =
      llvm::MemoryBuffer::getFile(folder + "/greedy.json");
  ASSERT_TRUE(bool(file)) << folder << "/greedy.json";
  llvm::Expected<llvm::json::Value> json =
      llvm::json::parse((*file)->getBuffer());
  ASSERT_TRUE(bool(json)) << llvm::toString(json.takeError());
  std::vector<int64_t> prompt, greedy;
  for (auto [key, out] : {std::pair{"prompt", &prompt}, {"greedy", &greedy}})
    for (const llvm::json::Value &token : *json->getAsObject()->getArray(key))
      out->push_back(*token.getAsInteger());

  Compiled compiled = compile(folder, sits::Stage::Optimized);
  ASSERT_TRUE(compiled.module);
  llvm::Expected<Program> program = findProgram(*compiled.module);
  ASSERT_TRUE(bool(program)) << llvm::toString(program.takeError());
  Executor executor(*compiled.module);
  auto start = std::chrono::steady_clock::now();
  auto steps =
      greedyDecode(executor, *compiled.module, *program, prompt, greedy.size());
  double seconds = secondsSince(start);
  ASSERT_TRUE(bool(steps)) << llvm::toString(steps.takeError());
  float smallestMargin = INFINITY;
  for (const GreedyStep &step : *steps)
    smallestMargin = std::min(smallestMargin, step.margin);
  std::optional<GreedyMismatch> mismatch = findGreedyMismatch(*steps, greedy);
  std::printf("%s greedy (%s, %zu tokens in %.2f s): %s; smallest top-2 "
              "margin %.4f\n",
              GetParam().c_str(),
              program->hasCache() ? "KV cache" : "full recomputation",
              greedy.size(), seconds,
              mismatch ? "MISMATCH" : "matches Hugging Face", smallestMargin);
  if (mismatch) {
    std::printf("  step %lld: token %lld, Hugging Face %lld, logit margin "
                "%.5f\n",
                (long long)mismatch->step, (long long)mismatch->actualToken,
                (long long)mismatch->expectedToken, mismatch->margin);
    // f32 differences can flip a near tie, and nothing else.
    EXPECT_LT(mismatch->margin, 1e-3)
        << "greedy differs at step " << mismatch->step << " by a margin of "
        << mismatch->margin;
  }
}

const std::string kModelNames[] = {
    "llama_gqa",   "llama_gqa_extdata",   "llama_mha",
    "llama_tied",  "llama_opset23",       "qwen2",
    "llama_bytes", "llama_bytes_opset23", "llama_bpe16k"};

std::string testName(const ::testing::TestParamInfo<ModelStage> &info) {
  return std::get<0>(info.param) + "_" +
         sits::getStageName(std::get<1>(info.param)).str();
}

INSTANTIATE_TEST_SUITE_P(
    All, Models,
    ::testing::Combine(::testing::ValuesIn(kModelNames),
                       ::testing::Values(sits::Stage::Imported,
                                         sits::Stage::Sits,
                                         sits::Stage::Optimized)),
    testName);

INSTANTIATE_TEST_SUITE_P(All, ModelGreedy, ::testing::ValuesIn(kModelNames),
                         [](const ::testing::TestParamInfo<std::string> &info) {
                           return info.param;
                         });

} // namespace
