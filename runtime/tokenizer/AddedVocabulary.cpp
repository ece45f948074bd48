//===- AddedVocabulary.cpp - tokenizer.json `added_tokens` ----------------===//

#include "AddedVocabulary.h"

#include "BpeModel.h"
#include "JsonConfig.h"
#include "Normalizers.h"
#include "Unicode.h"

#include <algorithm>

using namespace sits;
using namespace sits::tok;

namespace {

/// All the fields `tokenizers` compares two added tokens by, as one string.
std::string tokenKey(const AddedToken &token) {
  std::string key = token.content;
  key += {'\0',
          char('0' + token.special),
          char('0' + token.singleWord),
          char('0' + token.lstrip),
          char('0' + token.rstrip),
          char('0' + token.normalized)};
  return key;
}

/// The character that ends `text[0, end)` (valid UTF-8, end > 0).
char32_t charBefore(std::string_view text, size_t end, size_t &start) {
  start = end - 1;
  while (start > 0 && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80)
    --start;
  size_t length;
  return decodeUtf8(text, start, length);
}

} // namespace

void AddedVocabulary::Trie::add(const std::string &pattern, int32_t id) {
  uint32_t node = 0;
  for (char c : pattern) {
    uint64_t key = (uint64_t(node) << 8) | static_cast<unsigned char>(c);
    auto it = children.find(key);
    if (it == children.end()) {
      auto child = static_cast<uint32_t>(ids.size());
      ids.push_back(-1);
      it = children.emplace(key, child).first;
    }
    node = it->second;
  }
  ids[node] = id;
  firstBytes[static_cast<unsigned char>(pattern[0])] = true;
}

bool AddedVocabulary::Trie::longestAt(std::string_view text, size_t pos,
                                      size_t &end, int32_t &id) const {
  uint32_t node = 0;
  bool found = false;
  for (size_t i = pos; i < text.size(); ++i) {
    auto it = children.find((uint64_t(node) << 8) |
                            static_cast<unsigned char>(text[i]));
    if (it == children.end())
      break;
    node = it->second;
    if (ids[node] >= 0) {
      found = true;
      end = i + 1;
      id = ids[node];
    }
  }
  return found;
}

void AddedVocabulary::build(const JsonNode &list, const BpeModel &model,
                            const Normalizer *normalizer) {
  std::vector<AddedToken> entries;
  for (size_t i = 0, e = list.isNull() ? 0 : list.arraySize(); i < e; ++i) {
    JsonNode entry = list.element(i);
    AddedToken token;
    token.content = entry.stringField("content");
    token.special = entry.boolField("special", false);
    token.singleWord = entry.boolField("single_word", false);
    token.lstrip = entry.boolField("lstrip", false);
    token.rstrip = entry.boolField("rstrip", false);
    token.normalized = entry.boolField("normalized", !token.special);
    entries.push_back(std::move(token));
  }

  // tokenizers' AddedVocabulary::add_tokens, step by step.
  std::vector<AddedToken> specialList, plainList;
  for (const AddedToken &token : entries)
    if (token.special && !token.content.empty() &&
        specialContents.insert(token.content).second)
      specialList.push_back(token);
  auto vocabEntries = static_cast<int64_t>(model.vocabEntries());
  // The tokens stored by id, by all their fields: an entry equal to one of
  // them is skipped (a set, where `tokenizers` scans all stored tokens).
  std::unordered_map<std::string, int> storedKeys;
  int64_t maxAdded = -1; // ids in contentToId never change, so only grows
  for (const AddedToken &token : entries) {
    if (token.content.empty() || storedKeys.count(tokenKey(token)))
      continue;
    int64_t newId;
    if (auto it = contentToId.find(token.content); it != contentToId.end()) {
      newId = it->second;
    } else if (auto id = model.tokenToId(token.content)) {
      newId = *id;
    } else if (contentToId.empty()) {
      newId = vocabEntries;
    } else {
      newId = (maxAdded >= vocabEntries || vocabEntries == 0) ? maxAdded + 1
                                                              : vocabEntries;
    }
    contentToId[token.content] = static_cast<int32_t>(newId);
    maxAdded = std::max(maxAdded, newId);
    AddedToken stored = token;
    stored.id = static_cast<int32_t>(newId);
    if (auto it = byId.find(stored.id); it != byId.end()) {
      auto old = storedKeys.find(tokenKey(it->second));
      if (--old->second == 0)
        storedKeys.erase(old);
    }
    ++storedKeys[tokenKey(stored)];
    byId[stored.id] = stored;
    if (!specialContents.count(token.content))
      plainList.push_back(token);
  }

  // The two tries: tokens matched in the raw text, and tokens matched in
  // the normalized text (their own content normalized the same way).
  auto addPattern = [&](const AddedToken &token) {
    int32_t id = contentToId.at(token.content);
    if (!token.normalized) {
      rawTrie.add(token.content, id);
      return;
    }
    std::string pattern = token.content;
    if (normalizer)
      normalizer->normalize(pattern);
    if (!pattern.empty())
      normalizedTrie.add(pattern, id);
  };
  for (const AddedToken &token : specialList)
    addPattern(token);
  for (const AddedToken &token : plainList)
    addPattern(token);

  for (const auto &item : byId) {
    std::string decoded = item.second.content;
    if (item.second.normalized && normalizer)
      normalizer->normalize(decoded);
    decodeStrings[item.first] = std::move(decoded);
    sortedTokens.push_back(item.second);
    largestId = std::max(largestId, item.first);
  }
}

std::optional<int32_t> AddedVocabulary::idOf(std::string_view content) const {
  auto it = contentToId.find(std::string(content));
  if (it == contentToId.end())
    return std::nullopt;
  return it->second;
}

const std::string *AddedVocabulary::contentOf(int32_t id) const {
  auto it = decodeStrings.find(id);
  return it == decodeStrings.end() ? nullptr : &it->second;
}

void AddedVocabulary::findMatches(std::string_view text, const Trie &trie,
                                  std::vector<Segment> &out) const {
  size_t startOffset = 0;
  if (!trie.empty()) {
    size_t pos = 0;
    while (pos < text.size()) {
      size_t end;
      int32_t id;
      if (!trie.canStart(static_cast<unsigned char>(text[pos])) ||
          !trie.longestAt(text, pos, end, id)) {
        ++pos;
        continue;
      }
      size_t start = pos, stop = end;
      pos = end; // the next match starts after this one, kept or not
      const AddedToken &token = byId.at(id);
      if (token.singleWord) {
        size_t unused;
        bool spaceBefore =
            start == 0 || !isWordChar(charBefore(text, start, unused));
        size_t length;
        bool spaceAfter =
            stop == text.size() || !isWordChar(decodeUtf8(text, stop, length));
        if (!spaceBefore || !spaceAfter)
          continue;
      }
      if (token.lstrip) {
        size_t newStart = start;
        while (newStart > 0) {
          size_t charStart;
          if (!isWhitespace(charBefore(text, newStart, charStart)))
            break;
          newStart = charStart;
        }
        start = std::max(newStart, startOffset);
      }
      if (token.rstrip) {
        while (stop < text.size()) {
          size_t length;
          if (!isWhitespace(decodeUtf8(text, stop, length)))
            break;
          stop += length;
        }
      }
      start = std::max(start, startOffset);
      if (startOffset < start)
        out.push_back({startOffset, start, -1});
      out.push_back({start, stop, id});
      startOffset = stop;
      pos = std::max(pos, stop);
    }
  }
  if (startOffset < text.size())
    out.push_back({startOffset, text.size(), -1});
}
