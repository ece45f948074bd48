//===- Bytes.h - Little-endian encoding with checked bounds ----*- C++ -*-===//
//
// The binary sections (kernels, plan) are sequences of little-endian
// integers, length-prefixed strings and byte blobs. The reader checks every
// read against the end of its range and every size with overflow-checked
// arithmetic; after the first failure all reads fail and return zeros.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_RUNTIME_FORMAT_BYTES_H
#define SITS_RUNTIME_FORMAT_BYTES_H

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace sits {
namespace format {

inline bool checkedAdd(uint64_t a, uint64_t b, uint64_t *out) {
  return !__builtin_add_overflow(a, b, out);
}
inline bool checkedMul(uint64_t a, uint64_t b, uint64_t *out) {
  return !__builtin_mul_overflow(a, b, out);
}
/// Rounds `value` up to a multiple of `align` (a power of two).
inline bool checkedAlignUp(uint64_t value, uint64_t align, uint64_t *out) {
  uint64_t sum;
  if (!checkedAdd(value, align - 1, &sum))
    return false;
  *out = sum & ~(align - 1);
  return true;
}

/// The offset of the first byte of `text` that does not start a well-formed
/// UTF-8 sequence (no overlong forms, surrogates or code points past
/// U+10FFFF), or npos when all of it is valid.
inline size_t findInvalidUtf8(const std::string &text) {
  const auto *s = reinterpret_cast<const unsigned char *>(text.data());
  size_t n = text.size(), i = 0;
  while (i < n) {
    unsigned char c = s[i];
    size_t length;
    unsigned char low = 0x80, high = 0xbf; // the second byte's range
    if (c < 0x80)
      length = 1;
    else if (c >= 0xc2 && c <= 0xdf)
      length = 2;
    else if (c >= 0xe0 && c <= 0xef) {
      length = 3;
      low = c == 0xe0 ? 0xa0 : 0x80;  // overlong
      high = c == 0xed ? 0x9f : 0xbf; // surrogates
    } else if (c >= 0xf0 && c <= 0xf4) {
      length = 4;
      low = c == 0xf0 ? 0x90 : 0x80;  // overlong
      high = c == 0xf4 ? 0x8f : 0xbf; // past U+10FFFF
    } else
      return i;
    if (n - i < length)
      return i;
    for (size_t k = 1; k < length; ++k) {
      unsigned char b = s[i + k];
      if (k == 1 ? (b < low || b > high) : (b < 0x80 || b > 0xbf))
        return i;
    }
    i += length;
  }
  return std::string::npos;
}

class ByteWriter {
public:
  void u16(uint16_t v) { put(v, 2); }
  void u32(uint32_t v) { put(v, 4); }
  void u64(uint64_t v) { put(v, 8); }
  void i64(int64_t v) { put(static_cast<uint64_t>(v), 8); }
  void f32(float v) {
    uint32_t bits;
    std::memcpy(&bits, &v, 4);
    u32(bits);
  }
  void str(const std::string &s) {
    u32(static_cast<uint32_t>(s.size()));
    raw(s.data(), s.size());
  }
  void blob(const void *data, uint64_t size) {
    u64(size);
    raw(data, size);
  }
  void raw(const void *data, uint64_t size) {
    const uint8_t *p = static_cast<const uint8_t *>(data);
    out.insert(out.end(), p, p + size);
  }
  void zeros(uint64_t count) { out.resize(out.size() + count, 0); }
  std::vector<uint8_t> &bytes() { return out; }
  uint64_t size() const { return out.size(); }

private:
  void put(uint64_t v, int n) {
    for (int i = 0; i < n; ++i)
      out.push_back(static_cast<uint8_t>(v >> (8 * i)));
  }
  std::vector<uint8_t> out;
};

class ByteReader {
public:
  ByteReader(const uint8_t *data, uint64_t size) : data(data), size(size) {}

  uint16_t u16() { return static_cast<uint16_t>(get(2)); }
  uint32_t u32() { return static_cast<uint32_t>(get(4)); }
  uint64_t u64() { return get(8); }
  int64_t i64() { return static_cast<int64_t>(get(8)); }
  float f32() {
    uint32_t bits = u32();
    float v;
    std::memcpy(&v, &bits, 4);
    return v;
  }
  /// A length-prefixed string of at most `maxBytes`.
  std::string str(uint32_t maxBytes, const char *what) {
    uint32_t n = u32();
    if (failed)
      return {};
    if (n > maxBytes) {
      fail(std::string(what) + " is " + std::to_string(n) +
           " bytes long, more than the limit of " + std::to_string(maxBytes));
      return {};
    }
    const uint8_t *p = take(n, what);
    return p ? std::string(reinterpret_cast<const char *>(p), n)
             : std::string();
  }
  /// A length-prefixed blob: returns a pointer into the range, or nullptr.
  const uint8_t *blob(uint64_t *length, const char *what) {
    *length = u64();
    if (failed)
      return nullptr;
    const uint8_t *p = take(*length, what);
    if (!p)
      *length = 0;
    return p;
  }
  const uint8_t *take(uint64_t n, const char *what) {
    if (failed)
      return nullptr;
    if (n > size - pos) {
      fail(std::string(what) + " runs past the end of its section (needs " +
           std::to_string(n) + " bytes at offset " + std::to_string(pos) +
           ", section is " + std::to_string(size) + " bytes)");
      return nullptr;
    }
    const uint8_t *p = data + pos;
    pos += n;
    return p;
  }
  void fail(const std::string &why) {
    if (!failed) {
      failed = true;
      message = why;
    }
  }
  bool ok() const { return !failed; }
  bool atEnd() const { return pos == size; }
  uint64_t remaining() const { return size - pos; }
  uint64_t position() const { return pos; }
  const std::string &error() const { return message; }

private:
  uint64_t get(int n) {
    const uint8_t *p = take(static_cast<uint64_t>(n), "a field");
    if (!p)
      return 0;
    uint64_t v = 0;
    for (int i = 0; i < n; ++i)
      v |= static_cast<uint64_t>(p[i]) << (8 * i);
    return v;
  }

  const uint8_t *data;
  uint64_t size;
  uint64_t pos = 0;
  bool failed = false;
  std::string message;
};

} // namespace format
} // namespace sits

#endif // SITS_RUNTIME_FORMAT_BYTES_H
