//===- Lexer.cpp - Jinja tokens with transformers' whitespace rules -------===//
//
// This follows jinja2/lexer.py rule by rule, because chat templates depend
// on its exact whitespace behaviour:
//  - `{%-`, `{{-`, `{#-` strip all whitespace before the tag; `-%}`, `-}}`,
//    `-#}` strip all whitespace after it;
//  - trim_blocks: a block or comment end eats one newline after it (not
//    `+%}`, not a variable end, not `{% raw %}`);
//  - lstrip_blocks: spaces and tabs between a line start and a block or
//    comment tag are removed (not before `{%+`, not before `{{`).
// Whitespace is Python's (Unicode) whitespace, as in jinja2's regexes.
//
//===----------------------------------------------------------------------===//

#include "Lexer.h"

#include "Builtins.h"
#include "Unicode.h"
#include "Value.h"

#include <algorithm>
#include <charconv>
#include <cstdio>

namespace sits {
namespace chat {

namespace {

class Lexer {
public:
  explicit Lexer(std::string_view input) {
    // jinja2 normalizes \r\n and \r to \n and drops one trailing newline
    // (keep_trailing_newline=False).
    src.reserve(input.size());
    for (size_t i = 0; i < input.size(); ++i) {
      if (input[i] == '\r') {
        src += '\n';
        if (i + 1 < input.size() && input[i + 1] == '\n')
          ++i;
      } else {
        src += input[i];
      }
    }
    if (!src.empty() && src.back() == '\n')
      src.pop_back();
    lineStarts.push_back(0);
    for (size_t i = 0; i < src.size(); ++i)
      if (src[i] == '\n')
        lineStarts.push_back(i + 1);
  }

  std::vector<Token> run();

private:
  [[noreturn]] void error(size_t offset, std::string message) {
    uint32_t line, column;
    position(offset, line, column);
    throw SyntaxError{std::move(message), line, column};
  }

  // Tokens come in source order: count columns from the previous token on
  // the same line, so that a long one-line template stays linear.
  void position(size_t offset, uint32_t &line, uint32_t &column) {
    auto it = std::upper_bound(lineStarts.begin(), lineStarts.end(), offset);
    size_t start = *(it - 1);
    line = static_cast<uint32_t>(it - lineStarts.begin());
    if (line != lastLine || offset < lastOffset) {
      lastLine = line;
      lastOffset = start;
      lastColumn = 1;
    }
    lastColumn += static_cast<uint32_t>(codePointCount(
        std::string_view(src).substr(lastOffset, offset - lastOffset)));
    lastOffset = offset;
    column = lastColumn;
  }
  uint32_t lastLine = 0, lastColumn = 1;
  size_t lastOffset = 0;

  void emit(Token::Kind kind, size_t offset, std::string text = "") {
    Token token;
    token.kind = kind;
    token.text = std::move(text);
    position(offset, token.line, token.column);
    tokens.push_back(std::move(token));
  }

  bool startsWith(size_t pos, std::string_view s) const {
    return std::string_view(src).substr(pos, s.size()) == s;
  }

  // The Python whitespace code point at `pos`, as its byte length (0: none).
  size_t spaceAt(size_t pos) const {
    if (pos >= src.size())
      return 0;
    unsigned char c = static_cast<unsigned char>(src[pos]);
    if (c < 0x80)
      return isSpace(c) ? 1 : 0;
    size_t len = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : 4;
    std::u32string cp = decodeUtf8(std::string_view(src).substr(pos, len));
    return cp.size() == 1 && isSpace(cp[0]) ? len : 0;
  }

  size_t skipSpaces(size_t pos) const {
    while (size_t len = spaceAt(pos))
      pos += len;
    return pos;
  }

  static std::string rstripSpaces(std::string_view text) {
    return strip(text, nullptr, false, true);
  }

  // Applies `-` and lstrip_blocks to the text before a tag, as jinja2's
  // OptionalLStrip does, and emits it.
  void emitText(size_t begin, size_t end, char sign, bool isVariable) {
    std::string_view text = std::string_view(src).substr(begin, end - begin);
    std::string out;
    if (sign == '-') {
      out = rstripSpaces(text);
    } else if (sign != '+' && !isVariable) {
      size_t lineStart = text.rfind('\n');
      lineStart = lineStart == std::string_view::npos ? 0 : lineStart + 1;
      if (lineStart > 0 || lineStarting) {
        std::string_view tail = text.substr(lineStart);
        if (tail.find_first_not_of(" \t") == std::string_view::npos)
          text = text.substr(0, lineStart);
      }
      out = std::string(text);
    } else {
      out = std::string(text);
    }
    if (!out.empty())
      emit(Token::Data, begin, std::move(out));
  }

  // `{%(-|+|)\s*raw\s*(-%}\s*|%})` at `pos`: the end of the match, or 0.
  size_t matchRawBegin(size_t pos) const {
    size_t p = pos + 2;
    if (p < src.size() && (src[p] == '-' || src[p] == '+'))
      ++p;
    p = skipSpaces(p);
    if (!startsWith(p, "raw"))
      return 0;
    p = skipSpaces(p + 3);
    if (startsWith(p, "-%}"))
      return skipSpaces(p + 3);
    if (startsWith(p, "%}"))
      return p + 2;
    return 0;
  }

  // `{%(-|+|)\s*endraw\s*(+%}|-%}\s*|%}\n?)` at `pos`: its end, or 0.
  size_t matchRawEnd(size_t pos) const {
    size_t p = pos + 2;
    if (p < src.size() && (src[p] == '-' || src[p] == '+'))
      ++p;
    p = skipSpaces(p);
    if (!startsWith(p, "endraw"))
      return 0;
    p = skipSpaces(p + 6);
    return matchBlockEnd(p);
  }

  // `+%}|-%}\s*|%}\n?` at `p`: its end, or 0.
  size_t matchBlockEnd(size_t p) const {
    if (startsWith(p, "+%}"))
      return p + 3;
    if (startsWith(p, "-%}"))
      return skipSpaces(p + 3);
    if (startsWith(p, "%}"))
      return p + 2 + (startsWith(p + 2, "\n") ? 1 : 0);
    return 0;
  }

  size_t lexRaw(size_t bodyBegin);
  size_t lexComment(size_t pos);
  size_t lexTag(size_t pos, bool isBlock);
  size_t lexNumber(size_t pos);
  size_t lexString(size_t pos);

  std::string src;
  std::vector<size_t> lineStarts;
  std::vector<Token> tokens;
  bool lineStarting = true; // the previous match ended with a newline
};

std::vector<Token> Lexer::run() {
  size_t pos = 0;
  while (pos < src.size()) {
    size_t tag = pos;
    while (true) {
      tag = src.find('{', tag);
      if (tag == std::string::npos || tag + 1 >= src.size()) {
        tag = std::string::npos;
        break;
      }
      char c = src[tag + 1];
      if (c == '{' || c == '%' || c == '#')
        break;
      ++tag;
    }
    if (tag == std::string::npos) {
      emit(Token::Data, pos, src.substr(pos));
      break;
    }
    char kind = src[tag + 1];
    char sign = tag + 2 < src.size() ? src[tag + 2] : 0;
    if (sign != '-' && sign != '+')
      sign = 0;
    if (kind == '%') {
      if (size_t rawEnd = matchRawBegin(tag)) {
        emitText(pos, tag, sign, false);
        lineStarting = src[rawEnd - 1] == '\n';
        pos = lexRaw(rawEnd);
        continue;
      }
    }
    emitText(pos, tag, sign, kind == '{');
    size_t after = tag + 2 + (sign ? 1 : 0);
    if (kind == '#') {
      pos = lexComment(after);
      continue;
    }
    emit(kind == '%' ? Token::BlockBegin : Token::VariableBegin, tag);
    pos = lexTag(after, kind == '%');
  }
  emit(Token::Eof, src.size());
  return std::move(tokens);
}

size_t Lexer::lexRaw(size_t bodyBegin) {
  for (size_t p = src.find("{%", bodyBegin); p != std::string::npos;
       p = src.find("{%", p + 1)) {
    if (size_t end = matchRawEnd(p)) {
      char sign = src[p + 2] == '-' || src[p + 2] == '+' ? src[p + 2] : 0;
      emitText(bodyBegin, p, sign, false);
      lineStarting = src[end - 1] == '\n';
      return end;
    }
  }
  error(bodyBegin, "Missing end of raw directive");
}

size_t Lexer::lexComment(size_t pos) {
  for (size_t p = pos; p < src.size(); ++p) {
    size_t end = 0;
    if (startsWith(p, "+#}"))
      end = p + 3;
    else if (startsWith(p, "-#}"))
      end = skipSpaces(p + 3);
    else if (startsWith(p, "#}"))
      end = p + 2 + (startsWith(p + 2, "\n") ? 1 : 0);
    if (end) {
      lineStarting = src[end - 1] == '\n';
      return end;
    }
  }
  error(pos, "Missing end of comment tag");
}

static bool isNameStart(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
static bool isNameChar(char c) {
  return isNameStart(c) || (c >= '0' && c <= '9');
}
static bool isDigitChar(char c) { return c >= '0' && c <= '9'; }

size_t Lexer::lexTag(size_t pos, bool isBlock) {
  std::vector<char> balance; // open brackets
  size_t p = pos;
  while (p < src.size()) {
    if (balance.empty()) {
      size_t end = 0;
      if (isBlock) {
        end = matchBlockEnd(p);
      } else if (startsWith(p, "-}}")) {
        end = skipSpaces(p + 3);
      } else if (startsWith(p, "}}")) {
        end = p + 2;
      }
      if (end) {
        emit(isBlock ? Token::BlockEnd : Token::VariableEnd, p);
        lineStarting = src[end - 1] == '\n';
        return end;
      }
    }
    if (size_t space = skipSpaces(p); space != p) {
      lineStarting = src[space - 1] == '\n';
      p = space;
      continue;
    }
    lineStarting = false;
    char c = src[p];
    if (isDigitChar(c)) {
      p = lexNumber(p);
      continue;
    }
    if (isNameStart(c)) {
      size_t end = p;
      while (end < src.size() && isNameChar(src[end]))
        ++end;
      emit(Token::Name, p, src.substr(p, end - p));
      p = end;
      continue;
    }
    if (c == '\'' || c == '"') {
      p = lexString(p);
      continue;
    }
    static const char *const twoChar[] = {"//", "**", "==", "!=", ">=", "<="};
    size_t len = 0;
    for (const char *op : twoChar)
      if (startsWith(p, op))
        len = 2;
    if (!len && std::string_view("+-/*%~[](){}><=.:|,;").find(c) !=
                    std::string_view::npos)
      len = 1;
    if (!len) {
      std::u32string cp =
          decodeUtf8(std::string_view(src).substr(p, c & 0x80 ? 4 : 1));
      error(p, "unexpected char " + reprString(encodeUtf8(cp.substr(0, 1))));
    }
    if (len == 1 && (c == '(' || c == '[' || c == '{')) {
      balance.push_back(c == '(' ? ')' : c == '[' ? ']' : '}');
    } else if (len == 1 && (c == ')' || c == ']' || c == '}')) {
      if (balance.empty())
        error(p, std::string("unexpected '") + c + "'");
      if (balance.back() != c)
        error(p, std::string("unexpected '") + c + "', expected '" +
                     balance.back() + "'");
      balance.pop_back();
    }
    emit(Token::Operator, p, src.substr(p, len));
    p += len;
  }
  return p; // end of input inside a tag: the parser reports it
}

size_t Lexer::lexNumber(size_t pos) {
  auto digits = [&](size_t p, auto isDigit) {
    // (\d+_)*\d+ : digits, single underscores between them.
    size_t start = p;
    while (p < src.size() && isDigit(src[p])) {
      ++p;
      if (p + 1 < src.size() && src[p] == '_' && isDigit(src[p + 1]))
        ++p;
    }
    return p == start ? std::string::npos : p;
  };
  auto dec = [](char ch) { return ch >= '0' && ch <= '9'; };
  auto clean = [&](size_t b, size_t e) {
    std::string s;
    for (size_t i = b; i < e; ++i)
      if (src[i] != '_')
        s += src[i];
    return s;
  };
  // A float cannot start right after a '.' (so `x.0.1` is two lookups).
  bool afterDot = pos > 0 && src[pos - 1] == '.';
  size_t intEnd = digits(pos, dec);
  if (!afterDot) {
    size_t p = intEnd;
    bool isFloat = false;
    if (p < src.size() && src[p] == '.' && p + 1 < src.size() &&
        dec(src[p + 1])) {
      p = digits(p + 1, dec);
      isFloat = true;
    }
    if (p < src.size() && (src[p] == 'e' || src[p] == 'E')) {
      size_t q = p + 1;
      if (q < src.size() && (src[q] == '+' || src[q] == '-'))
        ++q;
      size_t expEnd = digits(q, dec);
      if (expEnd != std::string::npos) {
        p = expEnd;
        isFloat = true;
      }
      // Otherwise (`1.5e`) the float ends before the `e`, a name.
    }
    if (isFloat) {
      std::string text = clean(pos, p);
      double value = 0;
      parseFloat(text, value); // Python's float(): 1e400 is inf
      emit(Token::Float, pos, text);
      tokens.back().floatValue = value;
      return p;
    }
  }
  // Integers: 0b / 0o / 0x prefixes, [1-9](_?\d)*, or 0(_?0)*.
  int base = 10;
  size_t begin = pos, end;
  char prefix = pos + 1 < src.size() ? (src[pos + 1] | 0x20) : 0;
  auto bin = [](char ch) { return ch == '0' || ch == '1'; };
  auto oct = [](char ch) { return ch >= '0' && ch <= '7'; };
  auto hex = [](char ch) {
    return (ch >= '0' && ch <= '9') ||
           ((ch | 0x20) >= 'a' && (ch | 0x20) <= 'f');
  };
  auto prefixed = [&](auto isDigit) {
    // 0x(_?[\da-f])+
    size_t p = pos + 2, last = std::string::npos;
    while (p < src.size()) {
      size_t q = p + (src[p] == '_' ? 1 : 0);
      if (q < src.size() && isDigit(src[q]))
        p = last = q + 1;
      else
        break;
    }
    return last;
  };
  if (src[pos] == '0' && prefix == 'b' && prefixed(bin) != std::string::npos) {
    base = 2, begin = pos + 2, end = prefixed(bin);
  } else if (src[pos] == '0' && prefix == 'o' &&
             prefixed(oct) != std::string::npos) {
    base = 8, begin = pos + 2, end = prefixed(oct);
  } else if (src[pos] == '0' && prefix == 'x' &&
             prefixed(hex) != std::string::npos) {
    base = 16, begin = pos + 2, end = prefixed(hex);
  } else if (src[pos] == '0') {
    end = pos + 1;
    while (end < src.size()) {
      size_t q = end + (src[end] == '_' ? 1 : 0);
      if (q < src.size() && src[q] == '0')
        end = q + 1;
      else
        break;
    }
  } else {
    end = intEnd;
  }
  std::string text = clean(begin, end);
  int64_t value = 0;
  auto result =
      std::from_chars(text.data(), text.data() + text.size(), value, base);
  if (result.ec != std::errc())
    error(pos, "integer literal too large (integers are 64-bit here)");
  emit(Token::Integer, pos, src.substr(pos, end - pos));
  tokens.back().intValue = value;
  return end;
}

// Python's "unicode-escape" decoding of a literal after jinja2 replaced its
// non-ASCII characters by backslash escapes (so "\é" keeps a backslash).
static bool decodeEscapes(std::string_view raw, std::string &out,
                          std::string &problem) {
  auto hexValue = [](char c) -> int {
    if (c >= '0' && c <= '9')
      return c - '0';
    c |= 0x20;
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
  };
  for (size_t i = 0; i < raw.size();) {
    char c = raw[i];
    if (c != '\\') {
      out += c;
      ++i;
      continue;
    }
    char next = raw[i + 1]; // the literal regex never ends in a backslash
    i += 2;
    if (static_cast<unsigned char>(next) >= 0x80) {
      // The character became \xhh, \uhhhh or \Uhhhhhhhh and this backslash
      // escaped the backslash of that text.
      size_t len = (next & 0xE0) == 0xC0 ? 2 : (next & 0xF0) == 0xE0 ? 3 : 4;
      std::u32string cp = decodeUtf8(raw.substr(i - 1, len));
      char buf[16];
      if (cp[0] < 0x100)
        std::snprintf(buf, sizeof(buf), "\\x%02x", unsigned(cp[0]));
      else if (cp[0] < 0x10000)
        std::snprintf(buf, sizeof(buf), "\\u%04x", unsigned(cp[0]));
      else
        std::snprintf(buf, sizeof(buf), "\\U%08x", unsigned(cp[0]));
      out += buf;
      i += len - 1;
      continue;
    }
    switch (next) {
    case '\n':
      continue;
    case '\\':
    case '\'':
    case '"':
      out += next;
      continue;
    case 'a':
      out += '\a';
      continue;
    case 'b':
      out += '\b';
      continue;
    case 'f':
      out += '\f';
      continue;
    case 'n':
      out += '\n';
      continue;
    case 'r':
      out += '\r';
      continue;
    case 't':
      out += '\t';
      continue;
    case 'v':
      out += '\v';
      continue;
    default:
      break;
    }
    if (next >= '0' && next <= '7') {
      unsigned value = next - '0';
      for (int k = 0; k < 2 && i < raw.size() && raw[i] >= '0' && raw[i] <= '7';
           ++k)
        value = value * 8 + (raw[i++] - '0');
      appendUtf8(out, value);
      continue;
    }
    if (next == 'x' || next == 'u' || next == 'U') {
      int count = next == 'x' ? 2 : next == 'u' ? 4 : 8;
      uint32_t value = 0;
      for (int k = 0; k < count; ++k) {
        int h = i < raw.size() ? hexValue(raw[i]) : -1;
        if (h < 0) {
          problem = std::string("truncated \\") + next + "XX escape";
          return false;
        }
        value = value * 16 + h;
        ++i;
      }
      if (value > 0x10FFFF) {
        problem = "illegal Unicode character";
        return false;
      }
      if (value >= 0xD800 && value <= 0xDFFF) {
        problem = "a surrogate code point cannot be written as UTF-8";
        return false;
      }
      appendUtf8(out, value);
      continue;
    }
    if (next == 'N') {
      problem = "\\N{...} escapes are not supported";
      return false;
    }
    out += '\\';
    out += next;
  }
  return true;
}

size_t Lexer::lexString(size_t pos) {
  char quote = src[pos];
  size_t p = pos + 1;
  while (p < src.size() && src[p] != quote) {
    if (src[p] == '\\' && p + 1 < src.size())
      ++p;
    ++p;
  }
  if (p >= src.size())
    error(pos,
          std::string("unexpected char ") + (quote == '\'' ? "\"'\"" : "'\"'"));
  std::string value, problem;
  if (!decodeEscapes(std::string_view(src).substr(pos + 1, p - pos - 1), value,
                     problem))
    error(pos, "invalid string literal: " + problem);
  emit(Token::String, pos, std::move(value));
  return p + 1;
}

} // namespace

std::vector<Token> tokenize(std::string_view source) {
  return Lexer(source).run();
}

} // namespace chat
} // namespace sits
