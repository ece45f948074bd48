//===- Unicode.h - UTF-8 and the Python string rules templates rely on ----===//
//
// Jinja runs on Python `str`: lengths, slices and indices count code points,
// `strip()` removes Unicode whitespace, `upper()` maps cases and `repr()`
// escapes what is not printable. The engine keeps strings as UTF-8 and uses
// these helpers wherever Python would look at code points.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_CHAT_UNICODE_H
#define SITS_CHAT_UNICODE_H

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace sits {
namespace chat {

/// Whether `text` is well-formed UTF-8 (no overlongs, no surrogates).
bool isValidUtf8(std::string_view text);

/// Decodes well-formed UTF-8 into code points (invalid bytes become U+FFFD).
std::u32string decodeUtf8(std::string_view text);
void appendUtf8(std::string &out, char32_t cp);
std::string encodeUtf8(std::u32string_view text);

/// The number of code points of well-formed UTF-8.
size_t codePointCount(std::string_view text);
/// The byte offset of code point `index` (the size when past the end).
size_t byteOffsetOfCodePoint(std::string_view text, size_t index);

/// Python's str.isspace() for one code point.
bool isSpace(char32_t cp);
/// Python's repr() prints this code point as is (str.isprintable()).
bool isPrintable(char32_t cp);

/// Simple one-to-one case mappings of ASCII, Latin-1, Latin Extended-A and
/// Additional, Greek, Cyrillic, Armenian and the fullwidth Latin letters.
char32_t toUpper(char32_t cp);
char32_t toLower(char32_t cp);
bool isCased(char32_t cp);
bool isUpperCase(char32_t cp);
bool isLowerCase(char32_t cp);
/// Approximations of str.isalpha()/isdigit() beyond ASCII (see docs).
bool isAlpha(char32_t cp);
bool isDigit(char32_t cp);

/// str.upper()/lower() (with U+00DF -> "SS"), str.capitalize(),
/// str.title() and str.swapcase().
std::string upper(std::string_view text);
std::string lower(std::string_view text);
std::string capitalize(std::string_view text);
std::string pythonTitle(std::string_view text);
std::string swapCase(std::string_view text);

/// str.strip(chars)/lstrip/rstrip: `chars` null strips whitespace.
std::string strip(std::string_view text, const std::string *chars, bool left,
                  bool right);

} // namespace chat
} // namespace sits

#endif // SITS_CHAT_UNICODE_H
