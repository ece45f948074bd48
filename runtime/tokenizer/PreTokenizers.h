//===- PreTokenizers.h - tokenizer.json `pre_tokenizer` ---------*- C++ -*-===//
//
// Pre-tokenizers cut normalized text into the pieces the BPE model encodes
// one by one: ByteLevel (GPT-2's regex and its byte-to-character alphabet),
// Split (a regex or string with one of the five split behaviors), Metaspace,
// Digits, Punctuation, Whitespace, WhitespaceSplit and Sequence.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_RUNTIME_TOKENIZER_PRETOKENIZERS_H
#define SITS_RUNTIME_TOKENIZER_PRETOKENIZERS_H

#include <functional>
#include <memory>
#include <string>
#include <string_view>

namespace sits::tok {

class JsonNode;

/// Receives one non-empty piece. `atStart` is true when the piece begins at
/// offset 0 of the original text (Metaspace's prepend_scheme "first" asks).
using PieceFn = std::function<void(std::string_view piece, bool atStart)>;

class PreTokenizer {
public:
  virtual ~PreTokenizer();
  /// Cuts `text` (maybe rewriting it) and calls `emit` for every non-empty
  /// piece, in order.
  virtual void split(std::string_view text, bool atStart,
                     const PieceFn &emit) const = 0;
  /// Whether a ByteLevel pre-tokenizer is part of this one.
  virtual bool hasByteLevel() const { return false; }
};

/// Parses a non-null `pre_tokenizer` node.
std::unique_ptr<PreTokenizer> parsePreTokenizer(const JsonNode &node);

/// GPT-2's byte-to-character alphabet: the character (UTF-8) that stands for
/// byte `b`, and the byte a character stands for (-1 for other characters).
const std::string &byteLevelChar(unsigned char b);
int byteLevelByte(char32_t cp);

/// How a Split cuts text at the matches of its pattern (tokenizers'
/// SplitDelimiterBehavior).
enum class SplitBehavior {
  Removed,
  Isolated,
  MergedWithPrevious,
  MergedWithNext,
  Contiguous
};

} // namespace sits::tok

#endif // SITS_RUNTIME_TOKENIZER_PRETOKENIZERS_H
