//===- GenAIConfig.cpp - genai_config.json beside a model -----------------===//

#include "compiler/pipeline/GenAIConfig.h"

#include "compiler/pipeline/Pipeline.h"
#include "sits/Json.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <limits>

using namespace sits;

namespace {

llvm::Error configError(const std::string &path, const llvm::Twine &what) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 "'" + path + "': " + what);
}

} // namespace

llvm::Expected<std::optional<GenAIConfig>>
sits::readGenAIConfig(llvm::StringRef modelPath) {
  llvm::SmallString<256> path = llvm::sys::path::parent_path(modelPath);
  llvm::sys::path::append(path, "genai_config.json");
  GenAIConfig config;
  config.path = path.str().str();
  if (!llvm::sys::fs::exists(path))
    return std::nullopt;
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> buffer =
      llvm::MemoryBuffer::getFile(path, /*IsText=*/true);
  if (!buffer)
    return configError(config.path,
                       "cannot read it: " + buffer.getError().message());
  json::Value root;
  std::string error;
  if (!json::parse((*buffer)->getBuffer().str(), &root, &error))
    return configError(config.path, "not valid JSON: " + error);
  const json::Value *model = root.find("model");
  if (!model || !model->isObject())
    return configError(config.path, "no 'model' object");
  if (const json::Value *length = model->find("context_length")) {
    if (!length->isInteger() || length->getInteger() < 1)
      return configError(config.path, "model.context_length must be a "
                                      "positive integer");
    config.contextLength = length->getInteger();
  }
  if (const json::Value *eos = model->find("eos_token_id")) {
    std::vector<json::Value> ids =
        eos->isArray() ? eos->elements() : std::vector<json::Value>{*eos};
    for (const json::Value &id : ids) {
      if (!id.isInteger() || id.getInteger() < 0 ||
          id.getInteger() > std::numeric_limits<int32_t>::max())
        return configError(config.path, "model.eos_token_id must be a token "
                                        "id or a list of them");
      config.eosTokenIds.push_back(static_cast<int32_t>(id.getInteger()));
    }
  }
  return config;
}

llvm::Expected<std::string> sits::applyContextLength(const GenAIConfig &config,
                                                     bool maxSeqLenGiven,
                                                     PipelineOptions &options) {
  if (!config.contextLength || options.maxSeqLen <= *config.contextLength)
    return "";
  if (maxSeqLenGiven)
    return configError(config.path,
                       "--max-seq-len=" + std::to_string(options.maxSeqLen) +
                           " is past the model's context_length of " +
                           std::to_string(*config.contextLength));
  options.maxSeqLen = *config.contextLength;
  return "max-seq-len " + std::to_string(*config.contextLength) +
         ": the context_length of '" + config.path + "'";
}
