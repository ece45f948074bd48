//===- GenAIConfig.h - genai_config.json beside a model ---------*- C++ -*-===//
//
// The ONNX Runtime GenAI model builder writes genai_config.json next to its
// model.onnx. The graph holds everything the program computes; the config
// adds what the graph cannot say: how long a sequence may grow
// (model.context_length, which its RoPE caches were sized for) and where
// generation stops (model.eos_token_id). Its `search` defaults are not
// read: an engine records no sampling defaults.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_COMPILER_PIPELINE_GENAICONFIG_H
#define SITS_COMPILER_PIPELINE_GENAICONFIG_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace sits {

struct PipelineOptions;

struct GenAIConfig {
  /// The file read.
  std::string path;
  /// model.context_length, when given.
  std::optional<int64_t> contextLength;
  /// model.eos_token_id (an integer or a list of them).
  std::vector<int32_t> eosTokenIds;
};

/// Reads genai_config.json in the folder of `modelPath`: nullopt when there
/// is none, an error naming the file and the field when it is malformed.
llvm::Expected<std::optional<GenAIConfig>>
readGenAIConfig(llvm::StringRef modelPath);

/// Bounds `options.maxSeqLen` by the config's context length: a default
/// (`maxSeqLenGiven` false) above it is lowered to it, a given one above it
/// is an error. Returns a line saying what was changed, or "".
llvm::Expected<std::string> applyContextLength(const GenAIConfig &config,
                                               bool maxSeqLenGiven,
                                               PipelineOptions &options);

} // namespace sits

#endif // SITS_COMPILER_PIPELINE_GENAICONFIG_H
