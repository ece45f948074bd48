//===- Tokenizer.h - Hugging Face tokenizer.json in C++ ---------*- C++ -*-===//
//
// Encodes text to token ids and decodes ids to text exactly as the Hugging
// Face `tokenizers` package does for the tokenizer.json shapes decoder LLMs
// ship (byte-level BPE with a split regex; SentencePiece-style BPE with byte
// fallback). No Python, no CUDA. A feature of tokenizer.json this library
// does not implement is an Error(InvalidTokenizer) naming the field, never a
// silent difference.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_RUNTIME_TOKENIZER_H
#define SITS_RUNTIME_TOKENIZER_H

#include "sits/Error.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sits {

/// One entry of tokenizer.json's `added_tokens`.
struct AddedToken {
  int32_t id = 0;
  std::string content;
  bool special = false;
  bool singleWord = false, lstrip = false, rstrip = false;
  bool normalized = false;
};

class Tokenizer {
public:
  /// Parses the text of a tokenizer.json. Throws Error(InvalidTokenizer)
  /// naming the JSON path of the first invalid or unsupported field.
  static std::shared_ptr<const Tokenizer> fromJson(std::string_view json);
  /// Reads and parses a tokenizer.json file (InvalidTokenizer also when the
  /// file cannot be read).
  static std::shared_ptr<const Tokenizer> fromFile(const std::string &path);

  virtual ~Tokenizer();

  /// Token ids of `text`, as `tokenizers`' `encode(text,
  /// add_special_tokens=addSpecialTokens).ids`. Throws Error(InvalidText)
  /// for text that is not valid UTF-8, naming the byte offset.
  virtual std::vector<int32_t> encode(std::string_view text,
                                      bool addSpecialTokens = true) const = 0;
  /// Text of `ids`, as `tokenizers`' `decode(ids, skip_special_tokens=...)`.
  /// Throws Error(TokenOutOfVocab) for an id outside [0, vocabSize()).
  virtual std::string decode(const std::vector<int32_t> &ids,
                             bool skipSpecialTokens = true) const = 0;

  /// Model vocabulary and added tokens: one more than the largest id.
  virtual uint32_t vocabSize() const = 0;
  virtual std::optional<int32_t> tokenToId(std::string_view token) const = 0;
  /// The vocabulary string of `id` (empty outside the vocabulary).
  virtual std::string idToToken(int32_t id) const = 0;
  virtual const std::vector<AddedToken> &addedTokens() const = 0;
  /// A short description of the shape: "byte-level BPE",
  /// "SentencePiece-style BPE (byte fallback)", ...
  virtual std::string kind() const = 0;
};

/// Decodes a token stream piece by piece for printing as tokens arrive:
/// `push` returns only text that is final (never half of a UTF-8 character,
/// never text a later token could still change), and the concatenation of
/// every `push` and the final `finish` equals `decode` of all the ids.
class TokenStreamDecoder {
public:
  explicit TokenStreamDecoder(std::shared_ptr<const Tokenizer> tokenizer,
                              bool skipSpecialTokens = true);
  ~TokenStreamDecoder();
  TokenStreamDecoder(TokenStreamDecoder &&) noexcept;
  TokenStreamDecoder &operator=(TokenStreamDecoder &&) noexcept;

  /// Appends one token; returns the text that became final (maybe empty).
  std::string push(int32_t id);
  /// The text still held back (an incomplete character comes out as
  /// decode() would write it). The decoder is empty afterwards.
  std::string finish();

private:
  struct State;
  std::unique_ptr<State> state;
};

} // namespace sits

#endif // SITS_RUNTIME_TOKENIZER_H
