//===- Json.cpp - A small JSON value, reader and writer -------------------===//

#include "sits/Json.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>

namespace sits {
namespace json {

Value::Value(uint64_t v) : kind(Kind::Number), number(static_cast<double>(v)) {
  if (v <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    integer = static_cast<int64_t>(v);
    isInt = true;
  }
}

Value &Value::push(Value v) {
  items.push_back(std::move(v));
  return items.back();
}

size_t Value::size() const {
  return kind == Kind::Array ? items.size() : fields.size();
}

Value &Value::set(const std::string &key, Value v) {
  for (auto &field : fields) {
    if (field.first == key) {
      field.second = std::move(v);
      return field.second;
    }
  }
  fields.emplace_back(key, std::move(v));
  return fields.back().second;
}

const Value *Value::find(const std::string &key) const {
  if (kind != Kind::Object)
    return nullptr;
  for (const auto &field : fields)
    if (field.first == key)
      return &field.second;
  return nullptr;
}

static void writeString(std::string &out, const std::string &s) {
  out += '"';
  for (unsigned char c : s) {
    switch (c) {
    case '"':
      out += "\\\"";
      break;
    case '\\':
      out += "\\\\";
      break;
    case '\n':
      out += "\\n";
      break;
    case '\r':
      out += "\\r";
      break;
    case '\t':
      out += "\\t";
      break;
    default:
      if (c < 0x20) {
        char buf[8];
        std::snprintf(buf, sizeof(buf), "\\u%04x", c);
        out += buf;
      } else {
        out += static_cast<char>(c);
      }
    }
  }
  out += '"';
}

static void newline(std::string &out, int indent, int depth) {
  if (indent <= 0)
    return;
  out += '\n';
  out.append(static_cast<size_t>(indent) * depth, ' ');
}

void Value::writeTo(std::string &out, int indent, int depth) const {
  switch (kind) {
  case Kind::Null:
    out += "null";
    return;
  case Kind::Bool:
    out += boolean ? "true" : "false";
    return;
  case Kind::Number: {
    if (isInt) {
      out += std::to_string(integer);
    } else if (!std::isfinite(number)) {
      out += "null"; // JSON has no infinities; metadata never needs them.
    } else {
      char buf[32];
      std::snprintf(buf, sizeof(buf), "%.17g", number);
      out += buf;
    }
    return;
  }
  case Kind::String:
    writeString(out, text);
    return;
  case Kind::Array:
    out += '[';
    for (size_t i = 0; i < items.size(); ++i) {
      if (i)
        out += ',';
      newline(out, indent, depth + 1);
      items[i].writeTo(out, indent, depth + 1);
    }
    if (!items.empty())
      newline(out, indent, depth);
    out += ']';
    return;
  case Kind::Object:
    out += '{';
    for (size_t i = 0; i < fields.size(); ++i) {
      if (i)
        out += ',';
      newline(out, indent, depth + 1);
      writeString(out, fields[i].first);
      out += indent > 0 ? ": " : ":";
      fields[i].second.writeTo(out, indent, depth + 1);
    }
    if (!fields.empty())
      newline(out, indent, depth);
    out += '}';
    return;
  }
}

std::string Value::write(int indent) const {
  std::string out;
  writeTo(out, indent, 0);
  return out;
}

//===----------------------------------------------------------------------===//
// Parser
//===----------------------------------------------------------------------===//

class Parser {
public:
  explicit Parser(const std::string &text) : s(text) {}

  bool run(Value *result, std::string *error) {
    skipSpace();
    if (!parseValue(*result, 0) || (skipSpace(), pos != s.size())) {
      if (message.empty())
        message = "unexpected trailing characters";
      *error = "invalid JSON at byte " + std::to_string(pos) + ": " + message;
      return false;
    }
    return true;
  }

private:
  static constexpr int kMaxDepth = 64;

  bool fail(const char *why) {
    if (message.empty())
      message = why;
    return false;
  }
  void skipSpace() {
    while (pos < s.size() && (s[pos] == ' ' || s[pos] == '\t' ||
                              s[pos] == '\n' || s[pos] == '\r'))
      ++pos;
  }
  bool literal(const char *word) {
    size_t n = std::char_traits<char>::length(word);
    if (s.compare(pos, n, word) != 0)
      return fail("unknown literal");
    pos += n;
    return true;
  }

  bool parseValue(Value &out, int depth) {
    if (depth > kMaxDepth)
      return fail("nesting deeper than 64 levels");
    if (pos >= s.size())
      return fail("unexpected end of text");
    char c = s[pos];
    if (c == '{')
      return parseObject(out, depth);
    if (c == '[')
      return parseArray(out, depth);
    if (c == '"') {
      out = Value(Value::Kind::String);
      return parseString(out.text);
    }
    if (c == 't') {
      out = Value(true);
      return literal("true");
    }
    if (c == 'f') {
      out = Value(false);
      return literal("false");
    }
    if (c == 'n') {
      out = Value();
      return literal("null");
    }
    return parseNumber(out);
  }

  bool parseObject(Value &out, int depth) {
    out = Value::object();
    ++pos;
    skipSpace();
    if (pos < s.size() && s[pos] == '}') {
      ++pos;
      return true;
    }
    while (true) {
      skipSpace();
      if (pos >= s.size() || s[pos] != '"')
        return fail("expected a string key");
      std::string key;
      if (!parseString(key))
        return false;
      if (out.find(key))
        return fail("duplicate key");
      skipSpace();
      if (pos >= s.size() || s[pos] != ':')
        return fail("expected ':'");
      ++pos;
      skipSpace();
      Value member;
      if (!parseValue(member, depth + 1))
        return false;
      out.fields.emplace_back(std::move(key), std::move(member));
      skipSpace();
      if (pos < s.size() && s[pos] == ',') {
        ++pos;
        continue;
      }
      if (pos < s.size() && s[pos] == '}') {
        ++pos;
        return true;
      }
      return fail("expected ',' or '}'");
    }
  }

  bool parseArray(Value &out, int depth) {
    out = Value::array();
    ++pos;
    skipSpace();
    if (pos < s.size() && s[pos] == ']') {
      ++pos;
      return true;
    }
    while (true) {
      skipSpace();
      Value element;
      if (!parseValue(element, depth + 1))
        return false;
      out.items.push_back(std::move(element));
      skipSpace();
      if (pos < s.size() && s[pos] == ',') {
        ++pos;
        continue;
      }
      if (pos < s.size() && s[pos] == ']') {
        ++pos;
        return true;
      }
      return fail("expected ',' or ']'");
    }
  }

  bool hex4(uint32_t &code) {
    if (s.size() - pos < 4)
      return fail("truncated \\u escape");
    code = 0;
    for (int i = 0; i < 4; ++i) {
      char c = s[pos++];
      code <<= 4;
      if (c >= '0' && c <= '9')
        code |= static_cast<uint32_t>(c - '0');
      else if (c >= 'a' && c <= 'f')
        code |= static_cast<uint32_t>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F')
        code |= static_cast<uint32_t>(c - 'A' + 10);
      else
        return fail("bad hex digit in \\u escape");
    }
    return true;
  }

  static void appendUtf8(std::string &out, uint32_t code) {
    if (code < 0x80) {
      out += static_cast<char>(code);
    } else if (code < 0x800) {
      out += static_cast<char>(0xc0 | (code >> 6));
      out += static_cast<char>(0x80 | (code & 0x3f));
    } else if (code < 0x10000) {
      out += static_cast<char>(0xe0 | (code >> 12));
      out += static_cast<char>(0x80 | ((code >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (code & 0x3f));
    } else {
      out += static_cast<char>(0xf0 | (code >> 18));
      out += static_cast<char>(0x80 | ((code >> 12) & 0x3f));
      out += static_cast<char>(0x80 | ((code >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (code & 0x3f));
    }
  }

  bool parseString(std::string &out) {
    ++pos; // opening quote
    while (true) {
      if (pos >= s.size())
        return fail("unterminated string");
      unsigned char c = static_cast<unsigned char>(s[pos++]);
      if (c == '"')
        return true;
      if (c < 0x20)
        return fail("control character in string");
      if (c != '\\') {
        out += static_cast<char>(c);
        continue;
      }
      if (pos >= s.size())
        return fail("unterminated escape");
      char e = s[pos++];
      switch (e) {
      case '"':
      case '\\':
      case '/':
        out += e;
        break;
      case 'b':
        out += '\b';
        break;
      case 'f':
        out += '\f';
        break;
      case 'n':
        out += '\n';
        break;
      case 'r':
        out += '\r';
        break;
      case 't':
        out += '\t';
        break;
      case 'u': {
        uint32_t code;
        if (!hex4(code))
          return false;
        if (code >= 0xd800 && code < 0xdc00) {
          uint32_t low;
          if (s.compare(pos, 2, "\\u") != 0)
            return fail("unpaired surrogate");
          pos += 2;
          if (!hex4(low))
            return false;
          if (low < 0xdc00 || low >= 0xe000)
            return fail("unpaired surrogate");
          code = 0x10000 + ((code - 0xd800) << 10) + (low - 0xdc00);
        } else if (code >= 0xdc00 && code < 0xe000) {
          return fail("unpaired surrogate");
        }
        appendUtf8(out, code);
        break;
      }
      default:
        return fail("unknown escape");
      }
    }
  }

  bool parseNumber(Value &out) {
    size_t start = pos;
    bool integral = true;
    if (pos < s.size() && s[pos] == '-')
      ++pos;
    if (pos >= s.size() || !isDigit(s[pos]))
      return fail("expected a value");
    if (s[pos] == '0' && pos + 1 < s.size() && isDigit(s[pos + 1]))
      return fail("leading zero in number");
    while (pos < s.size() && isDigit(s[pos]))
      ++pos;
    if (pos < s.size() && s[pos] == '.') {
      integral = false;
      ++pos;
      if (pos >= s.size() || !isDigit(s[pos]))
        return fail("expected digits after '.'");
      while (pos < s.size() && isDigit(s[pos]))
        ++pos;
    }
    if (pos < s.size() && (s[pos] == 'e' || s[pos] == 'E')) {
      integral = false;
      ++pos;
      if (pos < s.size() && (s[pos] == '+' || s[pos] == '-'))
        ++pos;
      if (pos >= s.size() || !isDigit(s[pos]))
        return fail("expected digits in exponent");
      while (pos < s.size() && isDigit(s[pos]))
        ++pos;
    }
    std::string token = s.substr(start, pos - start);
    out = Value(Value::Kind::Number);
    out.number = std::strtod(token.c_str(), nullptr);
    if (integral) {
      errno = 0;
      long long v = std::strtoll(token.c_str(), nullptr, 10);
      if (errno == 0) {
        out.integer = v;
        out.isInt = true;
      }
    }
    return true;
  }

  static bool isDigit(char c) { return c >= '0' && c <= '9'; }

  const std::string &s;
  size_t pos = 0;
  std::string message;
};

bool parse(const std::string &text, Value *result, std::string *error) {
  Parser parser(text);
  return parser.run(result, error);
}

} // namespace json
} // namespace sits
