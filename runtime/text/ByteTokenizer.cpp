//===- ByteTokenizer.cpp - A byte vocabulary behind the Tokenizer API -----===//
//
// Engines of byte-level models (vocabulary >= 256, token b < 256 = byte b)
// get text in and out through the same interface as tokenizer.json models.
// Decoding replaces invalid UTF-8 with U+FFFD, one per maximal invalid
// subpart, as Python's errors="replace" and Rust's from_utf8_lossy do.
//
//===----------------------------------------------------------------------===//

#include "sits/ModelTokenizer.h"

namespace sits {

namespace {

/// Length of the valid UTF-8 sequence starting at `s[i]`, or 0, with
/// `*invalidLength` set to the maximal subpart to replace.
size_t validSequence(const std::string &s, size_t i, size_t *invalidLength) {
  unsigned char c = s[i];
  size_t need;
  unsigned char lo = 0x80, hi = 0xbf;
  if (c < 0x80) {
    return 1;
  } else if (c >= 0xc2 && c <= 0xdf) {
    need = 1;
  } else if (c >= 0xe0 && c <= 0xef) {
    need = 2;
    if (c == 0xe0)
      lo = 0xa0;
    if (c == 0xed)
      hi = 0x9f;
  } else if (c >= 0xf0 && c <= 0xf4) {
    need = 3;
    if (c == 0xf0)
      lo = 0x90;
    if (c == 0xf4)
      hi = 0x8f;
  } else {
    *invalidLength = 1;
    return 0;
  }
  size_t k = 1;
  for (; k <= need && i + k < s.size(); ++k) {
    unsigned char d = s[i + k];
    if (d < lo || d > hi)
      break;
    lo = 0x80;
    hi = 0xbf;
  }
  if (k == need + 1)
    return k;
  *invalidLength = k;
  return 0;
}

std::string lossyUtf8(const std::string &bytes) {
  std::string out;
  out.reserve(bytes.size());
  for (size_t i = 0; i < bytes.size();) {
    size_t invalidLength = 0;
    size_t n = validSequence(bytes, i, &invalidLength);
    if (n) {
      out.append(bytes, i, n);
      i += n;
    } else {
      out += "\xef\xbf\xbd";
      i += invalidLength;
    }
  }
  return out;
}

class ByteTokenizer final : public Tokenizer {
public:
  explicit ByteTokenizer(uint32_t vocab) : vocab(vocab) {}

  std::vector<int32_t> encode(std::string_view text, bool) const override {
    std::vector<int32_t> ids;
    ids.reserve(text.size());
    for (unsigned char c : text)
      ids.push_back(c);
    return ids;
  }
  std::string decode(const std::vector<int32_t> &ids,
                     bool skipSpecialTokens) const override {
    std::string bytes;
    for (int32_t id : ids) {
      if (id < 0 || uint32_t(id) >= vocab)
        throw Error(ErrorCode::TokenOutOfVocab,
                    "token id " + std::to_string(id) +
                        " is outside the vocabulary (0.." +
                        std::to_string(vocab - 1) + ")");
      // Ids past the bytes carry no text.
      if (id < 256)
        bytes += static_cast<char>(id);
      else if (!skipSpecialTokens)
        bytes += "<" + std::to_string(id) + ">";
    }
    return lossyUtf8(bytes);
  }
  uint32_t vocabSize() const override { return vocab; }
  std::optional<int32_t> tokenToId(std::string_view token) const override {
    if (token.size() == 1)
      return static_cast<unsigned char>(token[0]);
    return std::nullopt;
  }
  std::string idToToken(int32_t id) const override {
    return id >= 0 && id < 256 ? std::string(1, static_cast<char>(id))
                               : std::string();
  }
  const std::vector<AddedToken> &addedTokens() const override { return none; }
  std::string kind() const override { return "bytes"; }

private:
  uint32_t vocab;
  std::vector<AddedToken> none;
};

} // namespace

std::shared_ptr<const ModelTokenizer>
ModelTokenizer::bytes(uint32_t vocabSize, std::vector<int32_t> eosTokenIds) {
  if (vocabSize < 256)
    throw Error(ErrorCode::InvalidTokenizer,
                "a byte vocabulary needs at least 256 tokens, not " +
                    std::to_string(vocabSize));
  std::shared_ptr<ModelTokenizer> result(new ModelTokenizer());
  result->tokenizerImpl = std::make_shared<ByteTokenizer>(vocabSize);
  result->eosIds = std::move(eosTokenIds);
  result->specialTokenVariables = "{}";
  return result;
}

} // namespace sits
