//===- Pipeline.cpp - The stages sitsc runs -------------------------------===//

#include "compiler/pipeline/Pipeline.h"

#include "dialects/sits/Sharding.h"
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
      .Case("kernels", Stage::Kernels)
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
  case Stage::Kernels:
    return "kernels";
  case Stage::Cuda:
    return "cuda";
  case Stage::Engine:
    return "engine";
  }
  return "";
}

void PipelineFlags::getOptions(PipelineOptions &options) const {
#define SITS_PIPELINE_OPTION(FIELD, ...) options.FIELD = FIELD.getValue();
#include "compiler/pipeline/PipelineOptions.inc"
}

std::optional<std::string>
validatePipelineOptions(const PipelineOptions &options, Stage last) {
  if (options.maxSeqLen < 1 || options.maxSeqLen > (int64_t{1} << 24))
    return "--max-seq-len must be between 1 and 16777216, got " +
           std::to_string(options.maxSeqLen);
  if (options.maxBatch < 1 || options.maxBatch > 1024)
    return "--max-batch must be between 1 and 1024, got " +
           std::to_string(options.maxBatch);
  for (auto [name, value] : {std::pair{"--weights", &options.weights},
                             std::pair{"--kv-cache", &options.kvCache}})
    if (*value != "fp16" && *value != "int8" && *value != "int4")
      return std::string(name) + " must be fp16, int8 or int4, got '" +
             value->getValue() + "'";
  if (options.weightScale != "mse" && options.weightScale != "absmax")
    return "--weight-scale must be mse or absmax, got '" +
           options.weightScale.getValue() + "'";
  int64_t unit = options.weights == "int4" ? 32 : 16;
  if (options.weightGroup < unit || options.weightGroup > 65536 ||
      options.weightGroup % unit != 0)
    return "--weight-group must be a multiple of " + std::to_string(unit) +
           " between " + std::to_string(unit) + " and 65536" +
           (options.weights == "int4" ? " for int4 weights" : "") +
           " (a group is whole 16-byte loads), got " +
           std::to_string(options.weightGroup);
  if (options.kvHotWindow < 1 ||
      (options.kvCache != "fp16" && options.kvHotWindow > options.maxSeqLen))
    return "--kv-hot-window must be between 1 and --max-seq-len (" +
           std::to_string(options.maxSeqLen) + "), got " +
           std::to_string(options.kvHotWindow);
  if (options.kvKeys != "auto" && options.kvKeys != "per-token" &&
      options.kvKeys != "per-channel")
    return "--kv-keys must be auto, per-token or per-channel, got '" +
           options.kvKeys.getValue() + "'";
  if (options.kvChannelBlock < 1 || options.kvChannelBlock > 4096)
    return "--kv-channel-block must be between 1 and 4096, got " +
           std::to_string(options.kvChannelBlock);
  if (options.tvc != "off" && options.tvc != "exact")
    return "--tvc must be off or exact, got '" + options.tvc.getValue() + "'";
  if (options.tvcRank < 0)
    return "--tvc-rank must be >= 0 (0: half the hidden size), got " +
           std::to_string(options.tvcRank);
  if (options.tvcCandidates < 1)
    return "--tvc-candidates must be >= 1, got " +
           std::to_string(options.tvcCandidates);
  if (options.tvcTopK < 1 || options.tvcTopK > options.tvcCandidates)
    return "--tvc-top-k must be between 1 and --tvc-candidates (" +
           std::to_string(options.tvcCandidates) + "), got " +
           std::to_string(options.tvcTopK);
  if (options.tensorParallel < 1 ||
      options.tensorParallel > kMaxTensorParallelRanks)
    return "--tensor-parallel must be between 1 and " +
           std::to_string(kMaxTensorParallelRanks) + ", got " +
           std::to_string(options.tensorParallel);
  if (options.tensorParallel > 1) {
    std::string flag =
        "--tensor-parallel=" + std::to_string(options.tensorParallel);
    if (options.weights != "fp16")
      return flag + " takes fp16 weights only, got --weights=" +
             options.weights.getValue() +
             ": quantized weights are not split over ranks yet";
    if (options.tvc != "off")
      return flag +
             " does not go with --tvc yet: the TVC head proves its tokens "
             "over the whole vocabulary, which the ranks split";
    if (last == Stage::Imported || last == Stage::Sits)
      return flag + " splits the optimized program; stage '" +
             getStageName(last).str() + "' comes before it";
    if (last != Stage::Optimized)
      return flag + " compiles to the optimized program only (--emit=" +
             "optimized, --audit): the CUDA backend does not run "
             "tensor-parallel programs yet";
  }
  bool quantizing = options.weights != "fp16" || options.kvCache != "fp16" ||
                    options.tvc != "off";
  if (quantizing && (last == Stage::Imported || last == Stage::Sits))
    return "--weights, --kv-cache and --tvc change the optimized program; "
           "stage '" +
           getStageName(last).str() + "' comes before them";
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
  // On the full-sequence program, so that the KV cache gets each rank's
  // kv heads from the sharded keys.
  if (options.tensorParallel > 1) {
    TensorParallelOptions tensorParallel;
    tensorParallel.tensorParallel = options.tensorParallel;
    pm.addPass(createTensorParallel(tensorParallel));
  }
  KVCacheOptions kvCache;
  kvCache.maxSeqLen = options.maxSeqLen;
  kvCache.maxBatch = options.maxBatch;
  pm.addPass(createKVCache(kvCache));
  // Quantization and the TVC head: only when asked, so that the default
  // program is unchanged.
  if (options.weights != "fp16" || options.kvCache != "fp16") {
    InsertQDQOptions qdq;
    qdq.weights = options.weights;
    qdq.weightGroup = options.weightGroup;
    qdq.weightScale = options.weightScale;
    qdq.kvCache = options.kvCache;
    qdq.kvHotWindow = options.kvHotWindow;
    qdq.kvChannelBlock = options.kvChannelBlock;
    qdq.kvKeys = options.kvKeys;
    pm.addPass(createInsertQDQ(qdq));
  }
  if (options.tvc == "exact") {
    FuseTVCOptions fuse;
    fuse.tvcRank = options.tvcRank;
    fuse.tvcCandidates = options.tvcCandidates;
    fuse.tvcTopK = options.tvcTopK;
    pm.addPass(createFuseTVC(fuse));
  }
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
}

void registerPipelines() {
  // registerPassPipeline rather than PassPipelineRegistration: its builder
  // can refuse bad values, with validatePipelineOptions' messages.
  registerPassPipeline(
      "sits-pipeline",
      "The sitsc pipeline from an imported program to the optimized one "
      "(stop-after=sits stops after raising)",
      [](OpPassManager &pm, StringRef text,
         function_ref<LogicalResult(const Twine &)> errorHandler) {
        PipelineOptions options;
        if (failed(options.parseFromString(text)))
          return failure();
        std::optional<Stage> last = parseStage(options.stopAfter);
        if (last != Stage::Sits && last != Stage::Optimized)
          return errorHandler("--stop-after must be sits or optimized, got '" +
                              options.stopAfter.getValue() + "'");
        if (std::optional<std::string> error =
                validatePipelineOptions(options, *last))
          return errorHandler(*error);
        buildPipeline(pm, *last, options);
        return success();
      },
      [](function_ref<void(const mlir::detail::PassOptions &)> optionsHandler) {
        optionsHandler(PipelineOptions());
      });
}

} // namespace sits
