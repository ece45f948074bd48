//===- EngineBuilder.h - From a plan and its kernels to an engine -*- C++ -*-=//
//
// Lays out the weights (converted to --dtype while the engine is written), the
// buffers (weights, the activation workspace, the KV cache and the
// runtime's I/O buffers), resolves every launch argument to a buffer and
// offset, and writes the metadata JSON (docs/engine-format.md).
//
//===----------------------------------------------------------------------===//

#ifndef SITS_BACKENDS_CUDA_ENGINEBUILDER_H
#define SITS_BACKENDS_CUDA_ENGINEBUILDER_H

#include "backends/cuda/Nvrtc.h"
#include "backends/cuda/Plan.h"
#include "format/EngineWriter.h"
#include "sits/ModelTokenizer.h"

#include "llvm/Support/Error.h"

#include <optional>

namespace sits::codegen {

/// What the engine records about where it came from.
struct EngineSource {
  std::string modelName;    ///< e.g. the model's folder name
  std::string path;         ///< the input file
  format::Hash sha256{};    ///< of the input file
  uint32_t cudaVersion = 0; ///< NVRTC's, 13000 = 13.0
  std::string sitscOptions; ///< the options used, as given
  /// The model's tokenizer, stored in the engine's tokenizer section; null:
  /// none (a byte vocabulary of 256 tokens still reads and writes text).
  std::shared_ptr<const ModelTokenizer> tokenizer;
  /// EOS ids of the model's config (genai_config.json), stored after the
  /// tokenizer's.
  std::vector<int32_t> configEosIds;
};

/// Builds the engine: its contents, and the weights section as a fill
/// function that reads the plan's weight constants (which must outlive it)
/// while the engine is written. `module` holds the compiled kernels of
/// emitCudaSource(plan); `persistent`, with plan.persistentDecode, the same
/// source compiled with SITS_PERSISTENT_DECODE (the persistent decode
/// kernels, a module of their own).
llvm::Expected<format::StreamedEngine>
buildEngine(const EnginePlan &plan, CompiledModule module,
            const EngineSource &source,
            std::optional<CompiledModule> persistent = std::nullopt);

/// The metadata JSON of the engine (also used by tests).
std::string buildMetadata(const EnginePlan &plan, const EngineSource &source);

/// Bytes of the weights section for `plan` (after alignment).
uint64_t weightSectionBytes(const EnginePlan &plan);

} // namespace sits::codegen

#endif // SITS_BACKENDS_CUDA_ENGINEBUILDER_H
