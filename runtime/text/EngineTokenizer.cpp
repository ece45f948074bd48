//===- EngineTokenizer.cpp - The tokenizer stored in an engine ------------===//

#include "sits/EngineFormat.h"
#include "sits/ModelTokenizer.h"

namespace sits {

std::shared_ptr<const ModelTokenizer>
ModelTokenizer::fromEngine(const format::EngineContents &contents,
                           const format::RuntimeConfig &config) {
  switch (config.tokenizer) {
  case format::TokenizerKind::None:
    return nullptr;
  case format::TokenizerKind::Bytes:
    return bytes(config.vocabSize, config.eosTokenIds);
  case format::TokenizerKind::HuggingFace:
    break;
  }
  TokenizerFiles files;
  for (const format::TextFile &file : contents.tokenizerFiles)
    files[file.name] = file.content;
  std::shared_ptr<const ModelTokenizer> tokenizer;
  try {
    tokenizer = fromFiles(files);
  } catch (const Error &error) {
    throw Error(ErrorCode::InvalidEngine,
                std::string("the engine's tokenizer section: ") + error.what());
  }
  if (tokenizer->vocabSize() > config.vocabSize)
    throw Error(ErrorCode::InvalidEngine,
                "the engine's tokenizer has " +
                    std::to_string(tokenizer->vocabSize()) +
                    " tokens, more than the model's vocabulary of " +
                    std::to_string(config.vocabSize));
  return tokenizer;
}

} // namespace sits
