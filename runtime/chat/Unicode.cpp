//===- Unicode.cpp - UTF-8 and the Python string rules templates rely on --===//
//
// Case mapping covers the scripts whose letters pair simply (no Unicode
// database is linked); everything else maps to itself, which is what
// chat templates need: they change the case of role names and keywords.
//
//===----------------------------------------------------------------------===//

#include "Unicode.h"

namespace sits {
namespace chat {

bool isValidUtf8(std::string_view text) {
  size_t i = 0, n = text.size();
  while (i < n) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len;
    char32_t cp, min;
    if ((c & 0xE0) == 0xC0) {
      len = 2, cp = c & 0x1F, min = 0x80;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3, cp = c & 0x0F, min = 0x800;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4, cp = c & 0x07, min = 0x10000;
    } else {
      return false;
    }
    if (i + len > n)
      return false;
    for (size_t k = 1; k < len; ++k) {
      unsigned char cc = static_cast<unsigned char>(text[i + k]);
      if ((cc & 0xC0) != 0x80)
        return false;
      cp = (cp << 6) | (cc & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
      return false;
    i += len;
  }
  return true;
}

std::u32string decodeUtf8(std::string_view text) {
  std::u32string out;
  out.reserve(text.size());
  size_t i = 0, n = text.size();
  while (i < n) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    size_t len = c < 0x80             ? 1
                 : (c & 0xE0) == 0xC0 ? 2
                 : (c & 0xF0) == 0xE0 ? 3
                 : (c & 0xF8) == 0xF0 ? 4
                                      : 0;
    if (len == 0 || i + len > n) {
      out.push_back(0xFFFD);
      ++i;
      continue;
    }
    char32_t cp = len == 1 ? c : c & (0x7F >> len);
    for (size_t k = 1; k < len; ++k)
      cp = (cp << 6) | (static_cast<unsigned char>(text[i + k]) & 0x3F);
    out.push_back(cp);
    i += len;
  }
  return out;
}

void appendUtf8(std::string &out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

std::string encodeUtf8(std::u32string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char32_t cp : text)
    appendUtf8(out, cp);
  return out;
}

size_t codePointCount(std::string_view text) {
  size_t count = 0;
  for (char c : text)
    count += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return count;
}

size_t byteOffsetOfCodePoint(std::string_view text, size_t index) {
  size_t seen = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    if ((static_cast<unsigned char>(text[i]) & 0xC0) != 0x80) {
      if (seen == index)
        return i;
      ++seen;
    }
  }
  return text.size();
}

bool isSpace(char32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20) ||
         cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 ||
         cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

bool isPrintable(char32_t cp) {
  if (cp < 0x20 || (cp >= 0x7F && cp <= 0xA0) || cp == 0xAD)
    return false;
  if (cp < 0x600)
    return true;
  // Format (Cf), separator (Z*, except the space), surrogate, private use
  // and noncharacter code points, as str.isprintable() has them.
  if ((cp >= 0x600 && cp <= 0x605) || cp == 0x61C || cp == 0x6DD ||
      cp == 0x70F || cp == 0x8E2 || cp == 0x1680 || cp == 0x180E ||
      (cp >= 0x2000 && cp <= 0x200F) || (cp >= 0x2028 && cp <= 0x202F) ||
      (cp >= 0x205F && cp <= 0x2064) || (cp >= 0x2066 && cp <= 0x206F) ||
      cp == 0x3000 || (cp >= 0xD800 && cp <= 0xF8FF) || cp == 0xFEFF ||
      (cp >= 0xFFF9 && cp <= 0xFFFB) || cp == 0xFFFE || cp == 0xFFFF ||
      cp == 0x110BD || cp == 0x110CD || (cp >= 0x1BCA0 && cp <= 0x1BCA3) ||
      (cp >= 0x1D173 && cp <= 0x1D17A) || (cp >= 0xE0000 && cp <= 0xE0FFF) ||
      cp >= 0xF0000)
    return false;
  return true;
}

namespace {
// Ranges where upper and lower case letters alternate (even code point
// upper when `evenUpper`).
struct PairRange {
  char32_t first, last;
  bool evenUpper;
};
const PairRange kPairRanges[] = {
    {0x0100, 0x012F, true}, {0x0132, 0x0137, true},  {0x0139, 0x0148, false},
    {0x014A, 0x0177, true}, {0x0179, 0x017E, false}, {0x0182, 0x0185, true},
    {0x01A0, 0x01A5, true}, {0x01CD, 0x01DC, false}, {0x01DE, 0x01EF, true},
    {0x01F8, 0x021F, true}, {0x0222, 0x0233, true},  {0x03D8, 0x03EF, true},
    {0x0460, 0x0481, true}, {0x048A, 0x04BF, true},  {0x04C1, 0x04CE, false},
    {0x04D0, 0x052F, true}, {0x1E00, 0x1E95, true},  {0x1EA0, 0x1EFF, true},
};

const PairRange *findPair(char32_t cp) {
  for (const PairRange &r : kPairRanges)
    if (cp >= r.first && cp <= r.last)
      return &r;
  return nullptr;
}
} // namespace

// The Latin digraphs have three cases: DŽ, Dž (title), dž.
static bool isDigraph(char32_t cp) {
  return (cp >= 0x1C4 && cp <= 0x1CC) || (cp >= 0x1F1 && cp <= 0x1F3);
}
static char32_t digraphBase(char32_t cp) {
  return cp >= 0x1F1 ? 0x1F1 : 0x1C4 + (cp - 0x1C4) / 3 * 3;
}

char32_t toUpper(char32_t cp) {
  if (cp < 0x80)
    return (cp >= 'a' && cp <= 'z') ? cp - 32 : cp;
  if (isDigraph(cp))
    return digraphBase(cp);
  if ((cp >= 0xE0 && cp <= 0xFE && cp != 0xF7))
    return cp - 32;
  if (cp == 0xFF)
    return 0x178;
  if (cp == 0xB5)
    return 0x39C;
  if (cp == 0x131)
    return 'I';
  if (cp == 0x17F)
    return 'S';
  if (const PairRange *r = findPair(cp)) {
    bool isUpper = ((cp & 1) == 0) == r->evenUpper;
    return isUpper ? cp : cp - 1;
  }
  if (cp >= 0x3B1 && cp <= 0x3C9 && cp != 0x3C2)
    return cp - 32;
  if (cp == 0x3C2)
    return 0x3A3;
  if (cp == 0x3AC)
    return 0x386;
  if (cp >= 0x3AD && cp <= 0x3AF)
    return cp - 37;
  if (cp == 0x3CC)
    return 0x38C;
  if (cp == 0x3CD || cp == 0x3CE)
    return cp - 63;
  if (cp >= 0x430 && cp <= 0x44F)
    return cp - 32;
  if (cp >= 0x450 && cp <= 0x45F)
    return cp - 80;
  if (cp == 0x4CF)
    return 0x4C0;
  if (cp >= 0x561 && cp <= 0x586)
    return cp - 48;
  if (cp >= 0xFF41 && cp <= 0xFF5A)
    return cp - 32;
  return cp;
}

char32_t toLower(char32_t cp) {
  if (cp < 0x80)
    return (cp >= 'A' && cp <= 'Z') ? cp + 32 : cp;
  if (isDigraph(cp))
    return digraphBase(cp) + 2;
  if (cp >= 0xC0 && cp <= 0xDE && cp != 0xD7)
    return cp + 32;
  if (cp == 0x178)
    return 0xFF;
  if (cp == 0x130)
    return 'i';
  if (const PairRange *r = findPair(cp)) {
    bool isUpper = ((cp & 1) == 0) == r->evenUpper;
    return isUpper ? cp + 1 : cp;
  }
  if (cp >= 0x391 && cp <= 0x3A9 && cp != 0x3A2)
    return cp + 32;
  if (cp == 0x386)
    return 0x3AC;
  if (cp >= 0x388 && cp <= 0x38A)
    return cp + 37;
  if (cp == 0x38C)
    return 0x3CC;
  if (cp == 0x38E || cp == 0x38F)
    return cp + 63;
  if (cp >= 0x410 && cp <= 0x42F)
    return cp + 32;
  if (cp >= 0x400 && cp <= 0x40F)
    return cp + 80;
  if (cp == 0x4C0)
    return 0x4CF;
  if (cp >= 0x531 && cp <= 0x556)
    return cp + 48;
  if (cp >= 0xFF21 && cp <= 0xFF3A)
    return cp + 32;
  return cp;
}

// Title case differs from upper case only for the digraphs (Dž).
static char32_t toTitle(char32_t cp) {
  return isDigraph(cp) ? digraphBase(cp) + 1 : toUpper(cp);
}

bool isUpperCase(char32_t cp) { return toLower(cp) != cp; }
bool isLowerCase(char32_t cp) {
  return toUpper(cp) != cp || cp == 0xDF || cp == 0x138 || cp == 0x149;
}
bool isCased(char32_t cp) { return isUpperCase(cp) || isLowerCase(cp); }

bool isAlpha(char32_t cp) {
  if (cp < 0x80)
    return (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z');
  if (isCased(cp))
    return true;
  // Letters of scripts without case (CJK, kana, Hangul, Arabic, Hebrew, Thai,
  // Devanagari ...), roughly: not spaces, punctuation, symbols or digits.
  if (cp < 0xC0 || cp == 0xD7 || cp == 0xF7 || isSpace(cp) || isDigit(cp))
    return false;
  if ((cp >= 0x2000 && cp <= 0x2BFF) || (cp >= 0x3000 && cp <= 0x303F) ||
      (cp >= 0xFE30 && cp <= 0xFE4F) || (cp >= 0xFF00 && cp <= 0xFF20) ||
      (cp >= 0xFF3B && cp <= 0xFF40) || (cp >= 0xFF5B && cp <= 0xFF65) ||
      (cp >= 0x1F000 && cp <= 0x1FAFF) || (cp >= 0xD800 && cp <= 0xF8FF))
    return false;
  return true;
}

bool isDigit(char32_t cp) {
  static const char32_t zeros[] = {
      0x30,  0x660, 0x6F0, 0x7C0, 0x966, 0x9E6, 0xA66,  0xAE6,  0xB66,  0xBE6,
      0xC66, 0xCE6, 0xD66, 0xE50, 0xED0, 0xF20, 0x1040, 0x17E0, 0x1810, 0xFF10};
  for (char32_t zero : zeros)
    if (cp >= zero && cp <= zero + 9)
      return true;
  return cp == 0xB2 || cp == 0xB3 || cp == 0xB9 ||
         (cp >= 0x2070 && cp <= 0x2079 && cp != 0x2071 && cp != 0x2072 &&
          cp != 0x2073) ||
         (cp >= 0x2080 && cp <= 0x2089);
}

// Full upper-case mappings that expand (SpecialCasing.txt) for the letters
// a prompt may hold: ß, the Latin ligatures, ŉ.
static const char *upperExpansion(char32_t cp) {
  switch (cp) {
  case 0xDF:
    return "SS";
  case 0x149:
    return "\u02BCN";
  case 0xFB00:
    return "FF";
  case 0xFB01:
    return "FI";
  case 0xFB02:
    return "FL";
  case 0xFB03:
    return "FFI";
  case 0xFB04:
    return "FFL";
  case 0xFB05:
  case 0xFB06:
    return "ST";
  default:
    return nullptr;
  }
}

static std::string mapCase(std::string_view text, bool toUpperCase) {
  std::u32string cps = decodeUtf8(text);
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < cps.size(); ++i) {
    char32_t cp = cps[i];
    if (toUpperCase) {
      if (const char *expanded = upperExpansion(cp))
        out += expanded;
      else
        appendUtf8(out, toUpper(cp));
      continue;
    }
    // Python's final sigma: Σ ending a word (after a cased letter, before
    // no cased letter) lowers to ς.
    if (cp == 0x3A3 && i > 0 && isCased(cps[i - 1]) &&
        (i + 1 == cps.size() || !isCased(cps[i + 1]))) {
      appendUtf8(out, 0x3C2);
      continue;
    }
    appendUtf8(out, toLower(cp));
  }
  return out;
}

std::string upper(std::string_view text) { return mapCase(text, true); }
std::string lower(std::string_view text) { return mapCase(text, false); }

std::string capitalize(std::string_view text) {
  std::u32string cps = decodeUtf8(text);
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < cps.size(); ++i) {
    if (i == 0 && cps[i] == 0xDF)
      out += "Ss";
    else
      appendUtf8(out, i == 0 ? toTitle(cps[i]) : toLower(cps[i]));
  }
  return out;
}

std::string pythonTitle(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  bool previousCased = false;
  for (char32_t cp : decodeUtf8(text)) {
    if (isCased(cp)) {
      if (previousCased)
        appendUtf8(out, toLower(cp));
      else if (cp == 0xDF)
        out += "Ss";
      else
        appendUtf8(out, toTitle(cp));
      previousCased = true;
    } else {
      appendUtf8(out, cp);
      previousCased = false;
    }
  }
  return out;
}

std::string swapCase(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char32_t cp : decodeUtf8(text)) {
    if (cp == 0xDF)
      out += "SS";
    else if (isUpperCase(cp))
      appendUtf8(out, toLower(cp));
    else
      appendUtf8(out, toUpper(cp));
  }
  return out;
}

std::string strip(std::string_view text, const std::string *chars, bool left,
                  bool right) {
  std::u32string cps = decodeUtf8(text);
  std::u32string set;
  if (chars)
    set = decodeUtf8(*chars);
  auto stripped = [&](char32_t cp) {
    return chars ? set.find(cp) != std::u32string::npos : isSpace(cp);
  };
  size_t begin = 0, end = cps.size();
  if (left)
    while (begin < end && stripped(cps[begin]))
      ++begin;
  if (right)
    while (end > begin && stripped(cps[end - 1]))
      --end;
  return encodeUtf8(std::u32string_view(cps).substr(begin, end - begin));
}

} // namespace chat
} // namespace sits
