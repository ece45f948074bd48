//===- Normalizers.h - tokenizer.json `normalizer` --------------*- C++ -*-===//
//
// The normalizers decoder LLMs ship: Sequence, Replace, Prepend, NFC/NFD/
// NFKC/NFKD, Lowercase, Strip. A normalizer rewrites one piece of text (the
// text between added tokens) before pre-tokenization; only the resulting
// string matters for token ids, so no offsets are tracked.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_RUNTIME_TOKENIZER_NORMALIZERS_H
#define SITS_RUNTIME_TOKENIZER_NORMALIZERS_H

#include <memory>
#include <string>

namespace sits::tok {

class JsonNode;

class Normalizer {
public:
  virtual ~Normalizer();
  /// Rewrites `text` (valid UTF-8) in place.
  virtual void normalize(std::string &text) const = 0;
};

/// Parses a non-null `normalizer` node; throws Error(InvalidTokenizer) naming
/// the path of an unsupported or invalid field.
std::unique_ptr<Normalizer> parseNormalizer(const JsonNode &node);

} // namespace sits::tok

#endif // SITS_RUNTIME_TOKENIZER_NORMALIZERS_H
