//===- BpeModel.cpp - tokenizer.json `model` of type BPE ------------------===//

#include "BpeModel.h"

#include "JsonConfig.h"
#include "TokenizerJson.h"
#include "Unicode.h"
#include "sits/Error.h"

#include <algorithm>
#include <cstdio>
#include <mutex>

using namespace sits::tok;

namespace {

/// Ids above this are refused: they would only make the id tables huge.
constexpr int64_t kMaxTokenId = (int64_t(1) << 24) - 1;
/// Words this long or longer are not cached (as in `tokenizers`).
constexpr size_t kMaxCachedWordBytes = 256;
constexpr size_t kCacheCapacity = size_t(1) << 16;

struct Symbol {
  int32_t id;
  int32_t prev, next;
  uint32_t length; // bytes of the word it covers; 0 once merged away
};

struct QueuedMerge {
  uint32_t rank;
  uint32_t pos;
  int32_t merged;
};

/// A min-heap on (rank, position): the lowest rank first, leftmost first.
bool laterMerge(const QueuedMerge &a, const QueuedMerge &b) {
  return a.rank != b.rank ? a.rank > b.rank : a.pos > b.pos;
}

/// Scratch buffers reused across words (per thread: the model is shared).
struct MergeScratch {
  std::vector<Symbol> symbols;
  std::vector<QueuedMerge> queue;
};

MergeScratch &scratch() {
  thread_local MergeScratch buffers;
  return buffers;
}

} // namespace

void MergeTable::reserve(size_t expected) {
  size_t capacity = 16;
  while (capacity < expected * 2)
    capacity *= 2;
  if (capacity > slots.size()) {
    std::vector<Slot> old = std::move(slots);
    slots.assign(capacity, Slot());
    mask = capacity - 1;
    count = 0;
    for (const Slot &slot : old)
      if (slot.key != kEmpty)
        insert(int32_t(slot.key >> 32), int32_t(uint32_t(slot.key)), slot.rank,
               slot.merged);
  }
}

void MergeTable::grow() { reserve(slots.empty() ? 8 : slots.size()); }

void MergeTable::insert(int32_t left, int32_t right, uint32_t rank,
                        int32_t merged) {
  if ((count + 1) * 2 > slots.size())
    grow();
  uint64_t key = pairKey(left, right);
  for (size_t i = hashOf(key) & mask;; i = (i + 1) & mask) {
    Slot &slot = slots[i];
    if (slot.key == kEmpty || slot.key == key) {
      if (slot.key == kEmpty)
        ++count;
      slot.key = key;
      slot.rank = rank;
      slot.merged = merged;
      return;
    }
  }
}

BpeModel::~BpeModel() = default;

std::unique_ptr<BpeModel> BpeModel::parse(const JsonNode &model,
                                          ModelTables &tables) {
  auto result = std::unique_ptr<BpeModel>(new BpeModel());
  BpeModel &bpe = *result;

  JsonNode dropout = model.field("dropout");
  if (!dropout.isNull() &&
      !(dropout.value().is_number() && dropout.value().get<double>() == 0.0))
    dropout.fail("BPE dropout is not supported (it makes encoding random); "
                 "it must be null");

  // The vocabulary: token -> id. The reader took it out of the DOM when it
  // was an object; what is left there is an error.
  JsonNode vocabNode = model.field("vocab");
  if (!tables.haveVocab) {
    if (vocabNode.isNull())
      vocabNode.fail("missing (the BPE vocabulary is required)");
    vocabNode.fail("expected an object mapping tokens to ids");
  }
  int64_t maxId = -1;
  size_t bytes = 0;
  for (const auto &[token, id] : tables.vocab) {
    if (id < 0 || id > kMaxTokenId)
      vocabNode.fail("the id of " + quoteJson(token) +
                     " must be an integer from 0 to " +
                     std::to_string(kMaxTokenId));
    maxId = std::max(maxId, id);
    bytes += token.size();
  }
  bpe.tokens.resize(static_cast<size_t>(maxId + 1));
  bpe.present.assign(static_cast<size_t>(maxId + 1), false);
  bpe.vocab.reserve(tables.vocab.size(), bytes);
  for (auto &[token, id] : tables.vocab) {
    auto index = static_cast<size_t>(id);
    if (!bpe.vocab.insert(token, static_cast<int32_t>(id)))
      vocabNode.fail(quoteJson(token) + " appears twice");
    if (bpe.present[index])
      vocabNode.fail("id " + std::to_string(id) + " is given to both " +
                     quoteJson(bpe.tokens[index]) + " and " + quoteJson(token));
    bpe.tokens[index] = std::move(token);
    bpe.present[index] = true;
  }
  tables.vocab = {};

  // Options.
  if (model.field("continuing_subword_prefix").value().is_string())
    bpe.continuingSubwordPrefix =
        model.field("continuing_subword_prefix").asString();
  if (model.field("end_of_word_suffix").value().is_string())
    bpe.endOfWordSuffix = model.field("end_of_word_suffix").asString();
  bpe.fuseUnk = model.boolField("fuse_unk", false);
  bpe.byteFallback = model.boolField("byte_fallback", false);
  bpe.ignoreMerges = model.boolField("ignore_merges", false);
  JsonNode unk = model.field("unk_token");
  if (!unk.isNull()) {
    std::string unkToken = unk.asString();
    bpe.unkId = bpe.tokenToId(unkToken);
    if (!bpe.unkId)
      unk.fail(quoteJson(unkToken) + " is not in model.vocab");
  }

  // Merges, by rank: "a b" strings or ["a", "b"] pairs.
  JsonNode mergesNode = model.field("merges");
  if (!tables.haveMerges && !mergesNode.isNull())
    mergesNode.arraySize(); // fails: not an array
  bpe.merges.reserve(tables.merges.size());
  uint32_t rank = 0;
  std::string mergedToken;
  size_t prefixLength = bpe.continuingSubwordPrefix.size();
  for (size_t i = 0; i < tables.merges.size(); ++i) {
    const ModelTables::Merge &entry = tables.merges[i];
    auto mergeError = [&](const std::string &message) {
      throw Error(ErrorCode::InvalidTokenizer,
                  "model.merges[" + std::to_string(i) + "]: " + message);
    };
    std::string_view left, right;
    if (!entry.isPair) {
      std::string_view line = entry.first;
      if (line.substr(0, 8) == "#version")
        continue; // a merges.txt header kept in the list
      size_t space = line.find(' ');
      if (space == std::string_view::npos ||
          line.find(' ', space + 1) != std::string_view::npos)
        mergeError("expected two tokens separated by one space, got " +
                   quoteJson(entry.first));
      left = line.substr(0, space);
      right = line.substr(space + 1);
    } else {
      left = entry.first;
      right = entry.second;
    }
    int32_t leftId = bpe.vocab.find(left), rightId = bpe.vocab.find(right);
    if (leftId < 0)
      mergeError("token " + quoteJson(std::string(left)) +
                 " is not in model.vocab");
    if (rightId < 0)
      mergeError("token " + quoteJson(std::string(right)) +
                 " is not in model.vocab");
    if (right.size() < prefixLength)
      mergeError("token " + quoteJson(std::string(right)) +
                 " is shorter than continuing_subword_prefix");
    mergedToken.assign(left);
    mergedToken.append(right.substr(prefixLength));
    int32_t mergedId = bpe.vocab.find(mergedToken);
    if (mergedId < 0)
      mergeError("the merged token " + quoteJson(mergedToken) +
                 " is not in model.vocab");
    bpe.merges.insert(leftId, rightId, rank++, mergedId);
  }
  tables.merges = {};

  // Lookup tables of the per-character start of every word.
  if (bpe.continuingSubwordPrefix.empty() && bpe.endOfWordSuffix.empty()) {
    bpe.smallCharIds.assign(0x800, -1);
    std::string character;
    for (char32_t cp = 0; cp < 0x800; ++cp) {
      character.clear();
      appendUtf8(character, cp);
      if (auto id = bpe.tokenToId(character))
        bpe.smallCharIds[cp] = *id;
    }
  }
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    auto id = bpe.tokenToId(name);
    bpe.byteIds[b] = id ? *id : -1;
  }
  return result;
}

std::optional<int32_t> BpeModel::tokenToId(std::string_view token) const {
  int32_t id = vocab.find(token);
  return id < 0 ? std::nullopt : std::optional<int32_t>(id);
}

const std::string *BpeModel::idToToken(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= tokens.size() || !present[id])
    return nullptr;
  return &tokens[id];
}

std::optional<int32_t> BpeModel::charId(std::string_view character, bool first,
                                        bool last) const {
  if (!smallCharIds.empty()) {
    if (character.size() <= 2) {
      size_t length;
      char32_t cp = decodeUtf8(character, 0, length);
      int32_t id = smallCharIds[cp];
      return id < 0 ? std::nullopt : std::optional<int32_t>(id);
    }
    return tokenToId(character);
  }
  std::string decorated;
  if (!first)
    decorated += continuingSubwordPrefix;
  decorated.append(character);
  if (last)
    decorated += endOfWordSuffix;
  return tokenToId(decorated);
}

void BpeModel::mergeWord(std::string_view word,
                         std::vector<int32_t> &ids) const {
  MergeScratch &buffers = scratch();
  std::vector<Symbol> &symbols = buffers.symbols;
  symbols.clear();
  auto add = [&](int32_t id, uint32_t length) {
    auto index = static_cast<int32_t>(symbols.size());
    if (!symbols.empty())
      symbols.back().next = index;
    symbols.push_back({id, index - 1, -1, length});
  };

  // One symbol per character, following `tokenizers`' merge_word exactly,
  // including its order when byte fallback and a pending unknown meet.
  bool unkPending = false;
  int32_t pendingUnkId = 0;
  uint32_t pendingUnkLength = 0;
  size_t pos = 0;
  while (pos < word.size()) {
    size_t length = utf8Length(static_cast<unsigned char>(word[pos]));
    bool first = pos == 0, last = pos + length == word.size();
    std::string_view character = word.substr(pos, length);
    pos += length;
    if (auto id = charId(character, first, last)) {
      if (unkPending) {
        add(pendingUnkId, pendingUnkLength);
        unkPending = false;
      }
      add(*id, static_cast<uint32_t>(length));
      continue;
    }
    if (byteFallback) {
      // The bytes of the character as looked up (prefix and suffix too).
      std::string decorated(first ? "" : continuingSubwordPrefix);
      decorated.append(character);
      if (last)
        decorated += endOfWordSuffix;
      bool allBytes = true;
      for (char c : decorated)
        allBytes = allBytes && byteIds[static_cast<unsigned char>(c)] >= 0;
      if (allBytes) {
        for (char c : decorated)
          add(byteIds[static_cast<unsigned char>(c)], 1);
        continue;
      }
    }
    if (!unkId)
      continue; // no unknown token: the character is dropped
    if (unkPending && fuseUnk) {
      pendingUnkLength += static_cast<uint32_t>(length);
    } else {
      if (unkPending)
        add(pendingUnkId, pendingUnkLength);
      unkPending = true;
      pendingUnkId = *unkId;
      pendingUnkLength = static_cast<uint32_t>(length);
    }
  }
  if (unkPending)
    add(pendingUnkId, pendingUnkLength);

  // Merge the lowest-ranked pair first, leftmost among equals, with the
  // queue's stale entries checked as `tokenizers`' Word::merge_all does.
  std::vector<QueuedMerge> &queue = buffers.queue;
  queue.clear();
  uint32_t rank;
  int32_t merged;
  for (size_t i = 0; i + 1 < symbols.size(); ++i)
    if (merges.find(symbols[i].id, symbols[i + 1].id, rank, merged))
      queue.push_back({rank, static_cast<uint32_t>(i), merged});
  std::make_heap(queue.begin(), queue.end(), laterMerge);
  while (!queue.empty()) {
    std::pop_heap(queue.begin(), queue.end(), laterMerge);
    QueuedMerge top = queue.back();
    queue.pop_back();
    Symbol &current = symbols[top.pos];
    if (current.length == 0 || current.next == -1)
      continue;
    Symbol right = symbols[current.next];
    if (!merges.find(current.id, right.id, rank, merged) ||
        merged != top.merged)
      continue;
    symbols[current.next].length = 0;
    current.id = top.merged;
    current.length += right.length;
    current.next = right.next;
    if (right.next >= 0)
      symbols[right.next].prev = static_cast<int32_t>(top.pos);
    if (current.prev >= 0 &&
        merges.find(symbols[current.prev].id, current.id, rank, merged)) {
      queue.push_back({rank, static_cast<uint32_t>(current.prev), merged});
      std::push_heap(queue.begin(), queue.end(), laterMerge);
    }
    if (current.next >= 0 &&
        merges.find(current.id, symbols[current.next].id, rank, merged)) {
      queue.push_back({rank, top.pos, merged});
      std::push_heap(queue.begin(), queue.end(), laterMerge);
    }
  }
  for (const Symbol &symbol : symbols)
    if (symbol.length != 0)
      ids.push_back(symbol.id);
}

void BpeModel::tokenize(std::string_view word,
                        std::vector<int32_t> &ids) const {
  if (word.empty())
    return;
  if (ignoreMerges) {
    // Llama-3: a pre-token that is a whole vocabulary entry is taken as is.
    if (auto id = tokenToId(word)) {
      ids.push_back(*id);
      return;
    }
  }
  bool cacheable = word.size() < kMaxCachedWordBytes;
  std::string key;
  if (cacheable) {
    key.assign(word);
    std::shared_lock<std::shared_mutex> lock(cacheMutex, std::try_to_lock);
    if (lock.owns_lock()) {
      auto it = cache.find(key);
      if (it != cache.end()) {
        ids.insert(ids.end(), it->second.begin(), it->second.end());
        return;
      }
    }
  }
  size_t first = ids.size();
  mergeWord(word, ids);
  if (cacheable) {
    std::unique_lock<std::shared_mutex> lock(cacheMutex, std::try_to_lock);
    if (lock.owns_lock() && cache.size() < kCacheCapacity)
      cache.emplace(std::move(key),
                    std::vector<int32_t>(ids.begin() + first, ids.end()));
  }
}
