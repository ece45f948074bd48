//===- FuzzInput.h - Splitting a fuzz input into its parts ------*- C++ -*-===//
//
// Text targets take several files in one input, separated by NUL bytes: JSON
// and templates never hold a raw NUL, so the separator cannot be confused
// with content, and libFuzzer's mutations move it freely.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_FUZZ_FUZZINPUT_H
#define SITS_FUZZ_FUZZINPUT_H

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace sits::fuzz {

/// The first `maxParts - 1` NUL-separated parts of `data`, and the rest as
/// the last part (which may hold NULs). Missing parts are empty.
inline std::vector<std::string_view> splitInput(const uint8_t *data,
                                                size_t size, size_t maxParts) {
  std::string_view rest(reinterpret_cast<const char *>(data), size);
  std::vector<std::string_view> parts;
  while (parts.size() + 1 < maxParts) {
    size_t nul = rest.find('\0');
    if (nul == std::string_view::npos)
      break;
    parts.push_back(rest.substr(0, nul));
    rest.remove_prefix(nul + 1);
  }
  parts.push_back(rest);
  parts.resize(maxParts);
  return parts;
}

} // namespace sits::fuzz

#endif // SITS_FUZZ_FUZZINPUT_H
