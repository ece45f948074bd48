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

/// What a decoder chain needs of the windows TokenStreamDecoder decodes
/// (a window: the ids from some token of the sequence to its end).
struct StreamWindowNeeds {
  /// A Fuse came earlier in the chain: later steps see the joined text.
  bool afterFuse = false;
  /// Strips (of one character) from the joined text's ends. With one, a
  /// window decodes to the matching part of the sequence's text when the
  /// part of it already emitted decodes to a non-empty text
  /// (TokenStreamDecoder.cpp says why); with more, not shown, the stream
  /// decodes the whole sequence.
  unsigned endStrips = 0;
};

class Decoder {
public:
  virtual ~Decoder();
  /// Rewrites the token strings (the list may shrink, e.g. Fuse).
  virtual void decodeChain(std::vector<std::string> &tokens) const = 0;
  /// Whether a ByteFallback step is part of this decoder: then a run of
  /// `<0xAB>` tokens decodes as a whole (all U+FFFD if any part is invalid).
  virtual bool hasByteFallback() const { return false; }
  virtual bool hasByteLevel() const { return false; }
  /// Adds what this step needs of the windows of a sequence's tokens that
  /// TokenStreamDecoder decodes (StreamWindowNeeds).
  virtual void addStreamWindowNeeds(StreamWindowNeeds &needs) const {}
};

/// Parses a non-null `decoder` node.
std::unique_ptr<Decoder> parseDecoder(const JsonNode &node);

/// The byte a `<0xAB>` token stands for (ByteFallback's rule), or -1.
int byteFallbackValue(const std::string &token);

} // namespace sits::tok

#endif // SITS_RUNTIME_TOKENIZER_DECODERS_H
