//===- ModelTokenizer.h - Tokenizer, specials, chat template --*- C++ -*-===//
//
// What a model needs to turn text into prompt ids and ids back into text,
// made from the files Hugging Face models ship beside their weights:
//
//   tokenizer.json          the tokenizer itself (sits/Tokenizer.h)
//   tokenizer_config.json   special tokens (bos/eos/...) and the chat template
//   chat_template.jinja     the chat template, where newer models keep it
//   generation_config.json  the EOS ids generation stops at
//
// sitsc reads these from the model's folder, validates them through this
// class and stores them verbatim in the engine; the runtime, sits-run and the
// Python package rebuild the same object from the engine. A byte-vocabulary
// engine (token = byte) gets the same interface from `bytes`.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_RUNTIME_MODELTOKENIZER_H
#define SITS_RUNTIME_MODELTOKENIZER_H

#include "sits/ChatTemplate.h"
#include "sits/Error.h"
#include "sits/Tokenizer.h"

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sits {

namespace format {
struct EngineContents;
struct RuntimeConfig;
} // namespace format

/// File name -> content.
using TokenizerFiles = std::map<std::string, std::string>;

/// One chat message. Richer messages (tool calls, ...) go through the JSON
/// form of applyChatTemplate.
struct ChatMessage {
  std::string role;
  std::string content;
};

class ModelTokenizer {
public:
  /// The files this class reads, in the order they are looked for.
  static const std::vector<std::string> &knownFileNames();

  /// Reads the known files present in `folder`. Throws InvalidTokenizer
  /// when it holds no tokenizer.json or a file cannot be read.
  static TokenizerFiles readFolder(const std::string &folder);

  /// Builds and validates the tokenizer from `files` (tokenizer.json is
  /// required, the rest optional). Throws InvalidTokenizer naming the file
  /// and the field, TemplateError for a chat template that does not parse.
  static std::shared_ptr<const ModelTokenizer>
  fromFiles(const TokenizerFiles &files);

  /// The tokenizer an engine holds: its tokenizer section's files, a byte
  /// vocabulary, or null (the engine takes and returns ids only). Throws
  /// InvalidEngine naming what is wrong with the stored files.
  static std::shared_ptr<const ModelTokenizer>
  fromEngine(const format::EngineContents &contents,
             const format::RuntimeConfig &config);

  /// A byte vocabulary of `vocabSize` >= 256 tokens: token b < 256 is byte b.
  static std::shared_ptr<const ModelTokenizer>
  bytes(uint32_t vocabSize, std::vector<int32_t> eosTokenIds = {});

  const std::shared_ptr<const Tokenizer> &tokenizer() const {
    return tokenizerImpl;
  }
  /// "byte-level BPE", ..., or "bytes".
  std::string kind() const { return tokenizerImpl->kind(); }
  uint32_t vocabSize() const { return tokenizerImpl->vocabSize(); }

  /// Prompt ids of plain text, as transformers' `tokenizer(text)`: with
  /// the special tokens the tokenizer's post-processor adds (BOS).
  std::vector<int32_t> encode(std::string_view text) const;
  std::string decode(const std::vector<int32_t> &ids,
                     bool skipSpecialTokens = true) const;

  bool hasChatTemplate() const { return chatTemplate != nullptr; }
  const std::string &chatTemplateSource() const { return templateSource; }
  /// The prompt text of a conversation, as transformers'
  /// `apply_chat_template(messages, tokenize=False,
  /// add_generation_prompt=...)`. Throws NoTokenizer without a chat template,
  /// TemplateError when the template refuses the conversation.
  std::string applyChatTemplate(const std::vector<ChatMessage> &messages,
                                bool addGenerationPrompt = true) const;
  /// The same from JSON: `messagesJson` an array of message objects,
  /// `toolsJson` an array (or empty: no tools), `extraJson` an object of
  /// more template variables (or empty), e.g. {"enable_thinking": false}.
  std::string applyChatTemplateJson(std::string_view messagesJson,
                                    bool addGenerationPrompt = true,
                                    std::string_view toolsJson = {},
                                    std::string_view extraJson = {}) const;
  /// Prompt ids of a conversation, as apply_chat_template(tokenize=True):
  /// the rendered text encoded without adding special tokens (the template
  /// writes them).
  std::vector<int32_t> encodeChat(const std::vector<ChatMessage> &messages,
                                  bool addGenerationPrompt = true) const;

  /// The special tokens of tokenizer_config.json (empty when absent).
  const std::string &bosToken() const { return bos; }
  const std::string &eosToken() const { return eos; }
  std::optional<int32_t> bosTokenId() const { return bosId; }
  /// Where generation stops: the eos token's id and generation_config's
  /// eos_token_id(s), without duplicates, in that order.
  const std::vector<int32_t> &eosTokenIds() const { return eosIds; }

  /// The files this tokenizer was made from (to store in an engine).
  const TokenizerFiles &files() const { return sourceFiles; }

  /// Several lines for --inspect: kind, vocabulary, special tokens, EOS
  /// ids, whether a chat template is present.
  std::string describe() const;

private:
  ModelTokenizer() = default;
  std::shared_ptr<const Tokenizer> tokenizerImpl;
  std::shared_ptr<const ChatTemplate> chatTemplate;
  std::string templateSource;
  std::string bos, eos;
  std::optional<int32_t> bosId;
  std::vector<int32_t> eosIds;
  /// JSON text of the special-token variables every render gets
  /// (bos_token, eos_token, unk_token, pad_token, ...), an object.
  std::string specialTokenVariables;
  TokenizerFiles sourceFiles;
};

} // namespace sits

#endif // SITS_RUNTIME_MODELTOKENIZER_H
