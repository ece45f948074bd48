//===- Decoders.h - tokenizer.json `decoder` --------------------*- C++ -*-===//
//
// Decoders turn token strings back into text, each as a step of
// `tokenizers`' decode_chain: a list of strings in, a list out, joined at the
// end. ByteLevel, Metaspace, Replace, ByteFallback, Fuse, Strip, Sequence.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_RUNTIME_TOKENIZER_DECODERS_H
#define SITS_RUNTIME_TOKENIZER_DECODERS_H

#include <memory>
#include <string>
#include <vector>

namespace sits::tok {

class JsonNode;

class Decoder {
public:
  virtual ~Decoder();
  /// Rewrites the token strings (the list may shrink, e.g. Fuse).
  virtual void decodeChain(std::vector<std::string> &tokens) const = 0;
  /// Whether a ByteFallback step is part of this decoder: then a run of
  /// `<0xAB>` tokens decodes as a whole (all U+FFFD if any part is invalid).
  virtual bool hasByteFallback() const { return false; }
  virtual bool hasByteLevel() const { return false; }
  /// Whether this step, run after a Fuse when `afterFuse` (set when it
  /// fuses), decodes a window of a sequence's tokens that starts at a token
  /// to the matching part of the whole sequence's text, as
  /// TokenStreamDecoder needs: not a Strip of trailing characters, or of
  /// more than one leading one, from the joined text (its window's ends are
  /// not the sequence's: a run of spaces inside the text would lose them).
  virtual bool keepsWindowsExact(bool &afterFuse) const { return true; }
};

/// Parses a non-null `decoder` node.
std::unique_ptr<Decoder> parseDecoder(const JsonNode &node);

/// The byte a `<0xAB>` token stands for (ByteFallback's rule), or -1.
int byteFallbackValue(const std::string &token);

} // namespace sits::tok

#endif // SITS_RUNTIME_TOKENIZER_DECODERS_H
