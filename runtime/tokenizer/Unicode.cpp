//===- Unicode.cpp - UTF-8 and Unicode helpers of the tokenizer -----------===//

#include "Unicode.h"

#include "sits/Error.h"

#include <cstdlib>
#include <utf8proc.h>

using namespace sits::tok;

namespace {

/// Bytes [lo, hi] allowed after `lead` as the second byte of a sequence
/// (Unicode Table 3-7); returns the sequence length, or 0 for a byte that
/// cannot start a sequence.
size_t sequenceRule(unsigned char lead, unsigned char &lo, unsigned char &hi) {
  lo = 0x80;
  hi = 0xBF;
  if (lead >= 0xC2 && lead <= 0xDF)
    return 2;
  if (lead == 0xE0) {
    lo = 0xA0;
    return 3;
  }
  if ((lead >= 0xE1 && lead <= 0xEC) || lead == 0xEE || lead == 0xEF)
    return 3;
  if (lead == 0xED) {
    hi = 0x9F; // no surrogates
    return 3;
  }
  if (lead == 0xF0) {
    lo = 0x90;
    return 4;
  }
  if (lead >= 0xF1 && lead <= 0xF3)
    return 4;
  if (lead == 0xF4) {
    hi = 0x8F; // nothing above U+10FFFF
    return 4;
  }
  return 0;
}

/// The length of the valid sequence at `pos`, or 0 when it is ill-formed;
/// `maximalSubpart` gets how many bytes the ill-formed prefix spans (at least
/// one), which is what one U+FFFD replaces.
size_t validSequenceAt(std::string_view text, size_t pos,
                       size_t &maximalSubpart) {
  auto lead = static_cast<unsigned char>(text[pos]);
  maximalSubpart = 1;
  if (lead < 0x80)
    return 1;
  unsigned char lo, hi;
  size_t length = sequenceRule(lead, lo, hi);
  if (length == 0)
    return 0;
  for (size_t i = 1; i < length; ++i) {
    if (pos + i >= text.size())
      return 0;
    auto byte = static_cast<unsigned char>(text[pos + i]);
    if (i == 1 ? (byte < lo || byte > hi) : (byte < 0x80 || byte > 0xBF))
      return 0;
    maximalSubpart = i + 1;
  }
  return length;
}

} // namespace

size_t sits::tok::findInvalidUtf8(std::string_view text) {
  size_t pos = 0;
  while (pos < text.size()) {
    // ASCII runs are the common case.
    if (static_cast<unsigned char>(text[pos]) < 0x80) {
      ++pos;
      continue;
    }
    size_t subpart;
    size_t length = validSequenceAt(text, pos, subpart);
    if (length == 0)
      return pos;
    pos += length;
  }
  return std::string_view::npos;
}

char32_t sits::tok::decodeUtf8(std::string_view text, size_t pos,
                               size_t &length) {
  auto byte = [&](size_t i) {
    return static_cast<char32_t>(static_cast<unsigned char>(text[pos + i]));
  };
  char32_t lead = byte(0);
  length = utf8Length(static_cast<unsigned char>(lead));
  switch (length) {
  case 1:
    return lead;
  case 2:
    return ((lead & 0x1F) << 6) | (byte(1) & 0x3F);
  case 3:
    return ((lead & 0x0F) << 12) | ((byte(1) & 0x3F) << 6) | (byte(2) & 0x3F);
  default:
    return ((lead & 0x07) << 18) | ((byte(1) & 0x3F) << 12) |
           ((byte(2) & 0x3F) << 6) | (byte(3) & 0x3F);
  }
}

void sits::tok::appendUtf8(std::string &out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

void sits::tok::appendUtf8Lossy(std::string &out, std::string_view bytes) {
  size_t pos = 0, validStart = 0;
  while (pos < bytes.size()) {
    if (static_cast<unsigned char>(bytes[pos]) < 0x80) {
      ++pos;
      continue;
    }
    size_t subpart;
    size_t length = validSequenceAt(bytes, pos, subpart);
    if (length != 0) {
      pos += length;
      continue;
    }
    out.append(bytes.substr(validStart, pos - validStart));
    out.append(kReplacementChar);
    pos += subpart;
    validStart = pos;
  }
  out.append(bytes.substr(validStart));
}

std::string sits::tok::utf8Lossy(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  appendUtf8Lossy(out, bytes);
  return out;
}

bool sits::tok::isWhitespace(char32_t cp) {
  if (cp == ' ' || (cp >= 0x09 && cp <= 0x0D) || cp == 0x85)
    return true;
  if (cp < 0x80)
    return false;
  // White_Space is exactly these control characters plus the separators.
  auto category = utf8proc_category(static_cast<utf8proc_int32_t>(cp));
  return category == UTF8PROC_CATEGORY_ZS || category == UTF8PROC_CATEGORY_ZL ||
         category == UTF8PROC_CATEGORY_ZP;
}

bool sits::tok::isNumeric(char32_t cp) {
  if (cp < 0x80)
    return cp >= '0' && cp <= '9';
  auto category = utf8proc_category(static_cast<utf8proc_int32_t>(cp));
  return category == UTF8PROC_CATEGORY_ND || category == UTF8PROC_CATEGORY_NL ||
         category == UTF8PROC_CATEGORY_NO;
}

bool sits::tok::isPunctuation(char32_t cp) {
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(cp))) {
  case UTF8PROC_CATEGORY_PC:
  case UTF8PROC_CATEGORY_PD:
  case UTF8PROC_CATEGORY_PS:
  case UTF8PROC_CATEGORY_PE:
  case UTF8PROC_CATEGORY_PI:
  case UTF8PROC_CATEGORY_PF:
  case UTF8PROC_CATEGORY_PO:
    return true;
  default:
    return false;
  }
}

bool sits::tok::isWordChar(char32_t cp) {
  if (cp < 0x80)
    return (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') ||
           (cp >= '0' && cp <= '9') || cp == '_';
  if (cp == 0x200C || cp == 0x200D)
    return true;
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(cp))) {
  case UTF8PROC_CATEGORY_LU:
  case UTF8PROC_CATEGORY_LL:
  case UTF8PROC_CATEGORY_LT:
  case UTF8PROC_CATEGORY_LM:
  case UTF8PROC_CATEGORY_LO:
  case UTF8PROC_CATEGORY_MN:
  case UTF8PROC_CATEGORY_MC:
  case UTF8PROC_CATEGORY_ME:
  case UTF8PROC_CATEGORY_ND:
  case UTF8PROC_CATEGORY_NL:
  case UTF8PROC_CATEGORY_PC:
    return true;
  default:
    return false;
  }
}

std::string sits::tok::normalizeUnicode(std::string_view text,
                                        NormalForm form) {
  if (text.empty())
    return {};
  int options = UTF8PROC_STABLE;
  switch (form) {
  case NormalForm::NFC:
    options |= UTF8PROC_COMPOSE;
    break;
  case NormalForm::NFD:
    options |= UTF8PROC_DECOMPOSE;
    break;
  case NormalForm::NFKC:
    options |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT;
    break;
  case NormalForm::NFKD:
    options |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT;
    break;
  }
  utf8proc_uint8_t *result = nullptr;
  utf8proc_ssize_t length =
      utf8proc_map(reinterpret_cast<const utf8proc_uint8_t *>(text.data()),
                   static_cast<utf8proc_ssize_t>(text.size()), &result,
                   static_cast<utf8proc_option_t>(options));
  if (length < 0) {
    // The text was validated before: only memory can run out here.
    throw Error(ErrorCode::InvalidText,
                std::string("Unicode normalization failed: ") +
                    utf8proc_errmsg(length));
  }
  std::string out(reinterpret_cast<char *>(result),
                  static_cast<size_t>(length));
  std::free(result);
  return out;
}

std::string sits::tok::toLowercase(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t pos = 0;
  while (pos < text.size()) {
    auto byte = static_cast<unsigned char>(text[pos]);
    if (byte < 0x80) {
      out.push_back(
          static_cast<char>(byte >= 'A' && byte <= 'Z' ? byte + 32 : byte));
      ++pos;
      continue;
    }
    size_t length;
    char32_t cp = decodeUtf8(text, pos, length);
    pos += length;
    if (cp == 0x130) { // the one unconditional multi-character lowercase
      out.append("i\xCC\x87");
      continue;
    }
    appendUtf8(out, static_cast<char32_t>(
                        utf8proc_tolower(static_cast<utf8proc_int32_t>(cp))));
  }
  return out;
}
