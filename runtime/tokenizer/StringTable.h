//===- StringTable.h - Token string to id lookup ----------------*- C++ -*-===//
//
// The vocabulary lookup the BPE model does for every character of a word and
// three times per merge while loading (Llama 3: 280K merges). Open addressing
// over one array of slots, short strings inside the slots and long ones in an
// arena: a lookup mostly touches one slot, where std::unordered_map chases
// two pointers.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_RUNTIME_TOKENIZER_STRINGTABLE_H
#define SITS_RUNTIME_TOKENIZER_STRINGTABLE_H

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace sits::tok {

class StringTable {
public:
  /// Prepares for `count` strings of `bytes` bytes in all.
  void reserve(size_t count, size_t bytes) {
    size_t capacity = 16;
    while (capacity < count * 2)
      capacity *= 2;
    slots.assign(capacity, Slot());
    mask = capacity - 1;
    arena.reserve(bytes);
  }

  /// Adds `text` -> `id`; false when `text` is already there.
  bool insert(std::string_view text, int32_t id) {
    if ((size + 1) * 2 > slots.size())
      grow();
    uint64_t hash = hashOf(text);
    for (size_t i = hash & mask;; i = (i + 1) & mask) {
      Slot &slot = slots[i];
      if (slot.id < 0) {
        slot.hash = hash;
        slot.length = static_cast<uint32_t>(text.size());
        slot.id = id;
        if (text.size() <= kInline) {
          std::memcpy(slot.bytes, text.data(), text.size());
        } else {
          slot.offset = static_cast<uint32_t>(arena.size());
          arena.append(text);
        }
        ++size;
        return true;
      }
      if (slot.hash == hash && equals(slot, text))
        return false;
    }
  }

  /// The id of `text`, or -1.
  int32_t find(std::string_view text) const {
    if (slots.empty())
      return -1;
    uint64_t hash = hashOf(text);
    for (size_t i = hash & mask;; i = (i + 1) & mask) {
      const Slot &slot = slots[i];
      if (slot.id < 0)
        return -1;
      if (slot.hash == hash && equals(slot, text))
        return slot.id;
    }
  }

  size_t count() const { return size; }

  /// A 64-bit hash of short strings, eight bytes at a time.
  static uint64_t hashOf(std::string_view text) {
    const uint64_t k = 0x9E3779B97F4A7C15ULL;
    uint64_t hash = text.size() * k;
    size_t i = 0;
    for (; i + 8 <= text.size(); i += 8) {
      uint64_t word;
      std::memcpy(&word, text.data() + i, 8);
      hash = (hash ^ word) * k;
      hash ^= hash >> 29;
    }
    uint64_t tail = 0;
    if (i < text.size())
      std::memcpy(&tail, text.data() + i, text.size() - i);
    hash = (hash ^ tail) * k;
    hash ^= hash >> 32;
    hash *= 0xD6E8FEB86659FD93ULL;
    return hash ^ (hash >> 32);
  }

private:
  // Strings of up to kInline bytes (nearly all tokens) live in the slot
  // itself, so that comparing them costs no second memory access.
  static constexpr size_t kInline = 16;
  struct Slot {
    uint64_t hash = 0;
    uint32_t length = 0;
    int32_t id = -1;
    union {
      char bytes[kInline];
      uint32_t offset;
    };
    Slot() : bytes() {}
  };

  const char *bytesOf(const Slot &slot) const {
    return slot.length <= kInline ? slot.bytes : arena.data() + slot.offset;
  }
  bool equals(const Slot &slot, std::string_view text) const {
    return slot.length == text.size() &&
           std::memcmp(bytesOf(slot), text.data(), text.size()) == 0;
  }

  void grow() {
    std::vector<Slot> old = std::move(slots);
    size_t capacity = old.empty() ? 16 : old.size() * 2;
    slots.assign(capacity, Slot());
    mask = capacity - 1;
    for (const Slot &slot : old) {
      if (slot.id < 0)
        continue;
      for (size_t i = slot.hash & mask;; i = (i + 1) & mask)
        if (slots[i].id < 0) {
          slots[i] = slot;
          break;
        }
    }
  }

  std::vector<Slot> slots;
  std::string arena;
  size_t mask = 0, size = 0;
};

} // namespace sits::tok

#endif // SITS_RUNTIME_TOKENIZER_STRINGTABLE_H
