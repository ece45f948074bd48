//===- Pipeline.cpp - The stages sitsc runs -------------------------------===//

#include "compiler/pipeline/Pipeline.h"

#include "frontends/onnx/Passes.h"
#include "passes/Passes.h"

#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/ADT/StringSwitch.h"

using namespace mlir;

namespace sits {

std::optional<Stage> parseStage(llvm::StringRef name) {
  return llvm::StringSwitch<std::optional<Stage>>(name)
      .Case("imported", Stage::Imported)
      .Case("sits", Stage::Sits)
      .Case("optimized", Stage::Optimized)
      .Case("cuda", Stage::Cuda)
      .Case("engine", Stage::Engine)
      .Default(std::nullopt);
}

llvm::StringRef getStageName(Stage stage) {
  switch (stage) {
  case Stage::Imported:
    return "imported";
  case Stage::Sits:
    return "sits";
  case Stage::Optimized:
    return "optimized";
  case Stage::Cuda:
    return "cuda";
  case Stage::Engine:
    return "engine";
  }
  return "";
}

std::optional<std::string>
validatePipelineOptions(const PipelineOptions &options) {
  if (options.maxSeqLen < 1 || options.maxSeqLen > (int64_t{1} << 24))
    return "--max-seq-len must be between 1 and 16777216, got " +
           std::to_string(options.maxSeqLen);
  if (options.maxBatch < 1 || options.maxBatch > 1024)
    return "--max-batch must be between 1 and 1024, got " +
           std::to_string(options.maxBatch);
  return std::nullopt;
}

void buildPipeline(OpPassManager &pm, Stage last,
                   const PipelineOptions &options) {
  if (last == Stage::Imported)
    return;
  // Raising: exporter idioms into sits ops.
  pm.addPass(createRaiseOnnx());
  pm.addPass(createCanonicalizerPass());
  if (last == Stage::Sits)
    return;
  // The decode passes.
  HoistRopeOptions hoistRope;
  hoistRope.maxSeqLen = options.maxSeqLen;
  pm.addPass(createHoistRope(hoistRope));
  pm.addPass(createFoldCausalMask());
  KVCacheOptions kvCache;
  kvCache.maxSeqLen = options.maxSeqLen;
  kvCache.maxBatch = options.maxBatch;
  pm.addPass(createKVCache(kvCache));
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
}

void registerPipelines() {
  PassPipelineRegistration<PipelineOptions>(
      "sits-pipeline",
      "The sitsc pipeline from an imported program to the optimized one "
      "(stop-after=sits stops after raising)",
      [](OpPassManager &pm, const PipelineOptions &options) {
        Stage last = parseStage(options.stopAfter).value_or(Stage::Optimized);
        buildPipeline(pm, last, options);
      });
}

} // namespace sits
