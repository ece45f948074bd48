//===- BpeModel.h - tokenizer.json `model` of type BPE ----------*- C++ -*-===//
//
// Byte-pair encoding as `tokenizers` does it: a word starts as one symbol per
// character (byte-fallback tokens `<0xAB>` or the unknown token for characters
// outside the vocabulary), then the adjacent pair of lowest merge rank is
// merged, leftmost first, until no pair has a merge. Words already seen are
// answered from a cache.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_RUNTIME_TOKENIZER_BPEMODEL_H
#define SITS_RUNTIME_TOKENIZER_BPEMODEL_H

#include "StringTable.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace sits::tok {

class JsonNode;
struct ModelTables;

/// (left id, right id) -> (rank, merged id), open addressing: the merge
/// lookup is the inner loop of BPE.
class MergeTable {
public:
  void reserve(size_t count);
  /// Inserts or overwrites (a later merge of the same pair wins, as in
  /// `tokenizers`, whose merge map is built from the list in order).
  void insert(int32_t left, int32_t right, uint32_t rank, int32_t merged);
  /// Finds the merge of (left, right); false when there is none.
  bool find(int32_t left, int32_t right, uint32_t &rank,
            int32_t &merged) const {
    if (slots.empty())
      return false;
    uint64_t key = pairKey(left, right);
    for (size_t i = hashOf(key) & mask;; i = (i + 1) & mask) {
      const Slot &slot = slots[i];
      if (slot.key == key) {
        rank = slot.rank;
        merged = slot.merged;
        return true;
      }
      if (slot.key == kEmpty)
        return false;
    }
  }
  size_t size() const { return count; }

private:
  static constexpr uint64_t kEmpty = ~uint64_t(0);
  struct Slot {
    uint64_t key = kEmpty;
    uint32_t rank = 0;
    int32_t merged = 0;
  };
  static uint64_t pairKey(int32_t left, int32_t right) {
    return (uint64_t(uint32_t(left)) << 32) | uint32_t(right);
  }
  static size_t hashOf(uint64_t key) {
    key ^= key >> 33;
    key *= 0xff51afd7ed558ccdULL;
    key ^= key >> 33;
    return static_cast<size_t>(key);
  }
  void grow();

  std::vector<Slot> slots;
  size_t mask = 0, count = 0;
};

class BpeModel {
public:
  /// Parses `model` (type BPE) with its vocabulary and merges, which the
  /// reader took out of the DOM; throws Error(InvalidTokenizer) naming the
  /// path of an invalid or unsupported field.
  static std::unique_ptr<BpeModel> parse(const JsonNode &model,
                                         ModelTables &tables);
  ~BpeModel();

  /// Appends the ids of one pre-token (valid UTF-8, not empty).
  void tokenize(std::string_view word, std::vector<int32_t> &ids) const;

  std::optional<int32_t> tokenToId(std::string_view token) const;
  /// The vocabulary string of `id`, or nullptr for an id the vocabulary does
  /// not name.
  const std::string *idToToken(int32_t id) const;
  /// Entries in the vocabulary (`tokenizers`' get_vocab_size of the model).
  size_t vocabEntries() const { return vocab.count(); }
  /// One more than the largest vocabulary id.
  uint32_t idLimit() const { return static_cast<uint32_t>(tokens.size()); }
  bool usesByteFallback() const { return byteFallback; }
  size_t mergeCount() const { return merges.size(); }

private:
  BpeModel() = default;
  void mergeWord(std::string_view word, std::vector<int32_t> &ids) const;
  std::optional<int32_t> charId(std::string_view character, bool first,
                                bool last) const;

  std::vector<std::string> tokens; // by id
  std::vector<bool> present;       // whether tokens[id] is in the vocabulary
  StringTable vocab;
  MergeTable merges;
  // Ids of one-character tokens below U+0800 (-1: none), when there is no
  // continuing_subword_prefix or end_of_word_suffix to add to them.
  std::vector<int32_t> smallCharIds;
  int32_t byteIds[256];
  bool byteFallback = false, fuseUnk = false, ignoreMerges = false;
  std::optional<int32_t> unkId;
  std::string continuingSubwordPrefix, endOfWordSuffix;

  // The word cache. try_lock keeps threads from waiting on each other: a
  // busy cache is simply skipped, as in `tokenizers`.
  mutable std::shared_mutex cacheMutex;
  mutable std::unordered_map<std::string, std::vector<int32_t>> cache;
};

} // namespace sits::tok

#endif // SITS_RUNTIME_TOKENIZER_BPEMODEL_H
