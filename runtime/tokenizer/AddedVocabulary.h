//===- AddedVocabulary.h - tokenizer.json `added_tokens` --------*- C++ -*-===//
//
// Added tokens (special ones such as `<|eot_id|>`, and plain ones) are cut out
// of the text before the normalizer and the model see it: tokens with
// `normalized: false` in the raw text, the others in the normalized text of
// the pieces between, each with the leftmost-longest rule and the
// single_word / lstrip / rstrip options of `tokenizers`' AddedVocabulary.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_RUNTIME_TOKENIZER_ADDEDVOCABULARY_H
#define SITS_RUNTIME_TOKENIZER_ADDEDVOCABULARY_H

#include "sits/Tokenizer.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace sits::tok {

class BpeModel;
class JsonNode;
class Normalizer;

/// A piece of text: [begin, end) of the text it was cut from, and the id of
/// the added token it is (-1 for plain text).
struct Segment {
  size_t begin, end;
  int32_t id;
};

class AddedVocabulary {
public:
  /// Adds the `added_tokens` entries in order, giving each the id
  /// `tokenizers` gives it: the vocabulary's id of its content when there is
  /// one, else the next id after the vocabulary and the added tokens (the
  /// `id` written in the file is not what decides).
  void build(const JsonNode &list, const BpeModel &model,
             const Normalizer *normalizer);

  /// The added tokens by increasing id.
  const std::vector<AddedToken> &tokens() const { return sortedTokens; }
  std::optional<int32_t> idOf(std::string_view content) const;
  /// The string decode() and idToToken() give for added token `id`, or
  /// nullptr: its content, normalized when the token is matched after
  /// normalization (as `tokenizers` does).
  const std::string *contentOf(int32_t id) const;
  /// Whether `content` is the content of a special token (decode with
  /// skip_special_tokens drops every token string equal to one).
  bool isSpecialContent(const std::string &content) const {
    return specialContents.count(content) != 0;
  }
  int32_t maxId() const { return largestId; }

  /// Cuts `text` at the added tokens matched before normalization.
  void splitRaw(std::string_view text, std::vector<Segment> &out) const {
    findMatches(text, rawTrie, out);
  }
  /// Cuts normalized `text` at the added tokens matched after it.
  void splitNormalized(std::string_view text, std::vector<Segment> &out) const {
    findMatches(text, normalizedTrie, out);
  }
  bool hasRawTokens() const { return !rawTrie.empty(); }
  bool hasNormalizedTokens() const { return !normalizedTrie.empty(); }

private:
  /// Byte trie of the patterns; matching walks it from each candidate start.
  class Trie {
  public:
    void add(const std::string &pattern, int32_t id);
    bool empty() const { return ids.empty(); }
    /// The longest pattern starting at `pos`: its end and id; false if none.
    bool longestAt(std::string_view text, size_t pos, size_t &end,
                   int32_t &id) const;
    bool canStart(unsigned char byte) const { return firstBytes[byte]; }

  private:
    std::unordered_map<uint64_t, uint32_t> children; // node << 8 | byte
    std::vector<int32_t> ids{-1}; // per node: the id of the pattern ending
    bool firstBytes[256] = {};
  };

  void findMatches(std::string_view text, const Trie &trie,
                   std::vector<Segment> &out) const;

  std::unordered_map<std::string, int32_t> contentToId;
  std::map<int32_t, AddedToken> byId;
  std::unordered_map<int32_t, std::string> decodeStrings;
  std::unordered_set<std::string> specialContents;
  std::vector<AddedToken> sortedTokens;
  Trie rawTrie, normalizedTrie;
  int32_t largestId = -1;
};

} // namespace sits::tok

#endif // SITS_RUNTIME_TOKENIZER_ADDEDVOCABULARY_H
