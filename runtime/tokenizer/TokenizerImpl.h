//===- TokenizerImpl.h - The tokenizer.json pipeline ------------*- C++ -*-===//
//
// The one implementation of sits::Tokenizer: added tokens, normalizer,
// pre-tokenizer, BPE model and post-processor for encode; the decoder for
// decode. Internal: the stream decoder reads a few of its details.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_RUNTIME_TOKENIZER_TOKENIZERIMPL_H
#define SITS_RUNTIME_TOKENIZER_TOKENIZERIMPL_H

#include "AddedVocabulary.h"
#include "BpeModel.h"
#include "Decoders.h"
#include "Normalizers.h"
#include "PostProcessor.h"
#include "PreTokenizers.h"
#include "sits/Tokenizer.h"

namespace sits::tok {

class TokenizerImpl final : public Tokenizer {
public:
  static std::shared_ptr<const TokenizerImpl> parse(std::string_view json);

  std::vector<int32_t> encode(std::string_view text,
                              bool addSpecialTokens) const override;
  std::string decode(const std::vector<int32_t> &ids,
                     bool skipSpecialTokens) const override;
  uint32_t vocabSize() const override { return vocabLimit; }
  std::optional<int32_t> tokenToId(std::string_view token) const override;
  std::string idToToken(int32_t id) const override;
  const std::vector<AddedToken> &addedTokens() const override {
    return added.tokens();
  }
  std::string kind() const override;

  /// Throws Error(TokenOutOfVocab) unless 0 <= id < vocabSize().
  void checkId(int32_t id) const;
  /// decode() of ids already checked, from `begin` to `end`.
  std::string decodeRange(const int32_t *begin, const int32_t *end,
                          bool skipSpecialTokens) const;
  /// Whether decoding `id` is part of a byte-fallback run: a later token can
  /// still change its text (a run decodes as a whole).
  bool continuesByteRun(int32_t id, bool skipSpecialTokens) const;
  /// Whether decoding `id` yields no token at all (a skipped special token
  /// or an id the vocabulary does not name).
  bool decodesToNothing(int32_t id, bool skipSpecialTokens) const;
  /// Whether a window of a sequence's ids whose already emitted part
  /// decodes to a non-empty text decodes to the matching part of the whole
  /// sequence's text (StreamWindowNeeds).
  bool decodesWindowsExactly() const;

private:
  TokenizerImpl() = default;
  /// The token string decode() uses for `id`, or nullptr when it has none
  /// or skips it.
  const std::string *decodeString(int32_t id, bool skipSpecialTokens) const;
  void encodePiece(std::string_view text, bool atStart,
                   std::vector<int32_t> &ids) const;

  std::unique_ptr<BpeModel> model;
  std::unique_ptr<Normalizer> normalizer;
  std::unique_ptr<PreTokenizer> preTokenizer;
  std::unique_ptr<PostProcessor> postProcessor;
  std::unique_ptr<Decoder> decoder;
  AddedVocabulary added;
  uint32_t vocabLimit = 0;
};

} // namespace sits::tok

#endif // SITS_RUNTIME_TOKENIZER_TOKENIZERIMPL_H
