//===- Unicode.h - UTF-8 and Unicode helpers of the tokenizer ---*- C++ -*-===//
//
// UTF-8 validation, decoding and the lossy decoding Rust's
// String::from_utf8_lossy does (which `tokenizers` uses to turn bytes back into
// text), plus the few Unicode properties the tokenizer needs, all answered by
// utf8proc: no hand-written character tables.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_RUNTIME_TOKENIZER_UNICODE_H
#define SITS_RUNTIME_TOKENIZER_UNICODE_H

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace sits::tok {

/// The byte offset of the first ill-formed UTF-8 sequence in `text` (overlong
/// forms, surrogates, code points above U+10FFFF, truncated sequences and lone
/// continuation bytes are ill-formed), or npos when `text` is valid.
size_t findInvalidUtf8(std::string_view text);

/// The length in bytes of the UTF-8 sequence that starts with `lead` (1 for
/// bytes that cannot start one). Only for valid text.
inline size_t utf8Length(unsigned char lead) {
  if (lead < 0xC0)
    return 1;
  if (lead < 0xE0)
    return 2;
  if (lead < 0xF0)
    return 3;
  return 4;
}

/// Decodes the character at `text[pos]` of valid UTF-8 text; sets `length`.
char32_t decodeUtf8(std::string_view text, size_t pos, size_t &length);
/// Appends `cp` as UTF-8.
void appendUtf8(std::string &out, char32_t cp);

/// `bytes` as text, each maximal ill-formed subsequence replaced by one
/// U+FFFD, exactly as Rust's String::from_utf8_lossy.
std::string utf8Lossy(std::string_view bytes);
/// Appends utf8Lossy(bytes) to `out`.
void appendUtf8Lossy(std::string &out, std::string_view bytes);

/// U+FFFD REPLACEMENT CHARACTER in UTF-8.
inline constexpr std::string_view kReplacementChar = "\xEF\xBF\xBD";

/// Unicode White_Space (Rust's char::is_whitespace, the `\s` of Rust's regex
/// and of Oniguruma).
bool isWhitespace(char32_t cp);
/// Rust's char::is_numeric: general category Nd, Nl or No.
bool isNumeric(char32_t cp);
/// Unicode punctuation (general category P*); what the Punctuation
/// pre-tokenizer splits on, together with ASCII punctuation.
bool isPunctuation(char32_t cp);
/// The `\w` of Rust's regex: letters, marks, decimal numbers, letter numbers,
/// connector punctuation and the joiners U+200C/U+200D. (Unicode's
/// Alphabetic property adds a few symbols, such as circled letters, that
/// utf8proc cannot tell; they count as non-word here.)
bool isWordChar(char32_t cp);

/// Unicode normalization forms, through utf8proc.
enum class NormalForm { NFC, NFD, NFKC, NFKD };
std::string normalizeUnicode(std::string_view text, NormalForm form);

/// Rust's str::to_lowercase applied char by char (as the Lowercase
/// normalizer does): the simple lowercase mapping, except U+0130, whose full
/// mapping is "i\u0307".
std::string toLowercase(std::string_view text);

} // namespace sits::tok

#endif // SITS_RUNTIME_TOKENIZER_UNICODE_H
