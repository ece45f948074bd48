//===- Format.cpp - Python's string formatting and number parsing ---------===//
//
// `"%s: %d" % (a, b)` and the `format` filter use printf-style formatting;
// `"{}: {:>4}".format(a, b)` uses the format mini-language. Both follow
// Python for the conversions templates use (s r d i o x X e f g c and the
// flags, widths and precisions); numbers are printed by snprintf with a
// spec built here, never from template text.
//
//===----------------------------------------------------------------------===//

#include "Builtins.h"

#include "Interpreter.h"
#include "Unicode.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

namespace sits {
namespace chat {

static std::string cformat(const char *spec, ...) {
  va_list args, copy;
  va_start(args, spec);
  va_copy(copy, args);
  int size = std::vsnprintf(nullptr, 0, spec, args);
  va_end(args);
  if (size < 0) {
    va_end(copy);
    fail("formatting failed");
  }
  checkStringSize(static_cast<size_t>(size));
  std::string out(static_cast<size_t>(size) + 1, '\0');
  std::vsnprintf(out.data(), out.size(), spec, copy);
  va_end(copy);
  out.pop_back();
  return out;
}

static std::string pad(const std::string &text, int64_t width, char align,
                       const std::string &fill = " ") {
  int64_t len = static_cast<int64_t>(codePointCount(text));
  if (width <= len)
    return text;
  checkStringSize(static_cast<size_t>(width) * fill.size());
  int64_t missing = width - len;
  auto fillN = [&](int64_t n) {
    std::string s;
    for (int64_t i = 0; i < n; ++i)
      s += fill;
    return s;
  };
  if (align == '<')
    return text + fillN(missing);
  if (align == '^')
    return fillN(missing / 2) + text + fillN(missing - missing / 2);
  return fillN(missing) + text;
}

//===----------------------------------------------------------------------===//
// printf-style
//===----------------------------------------------------------------------===//

std::string percentFormat(const std::string &format, const Value &args) {
  std::vector<Value> positional;
  const Value *mapping = args.isDict() ? &args : nullptr;
  if (args.kind() == Kind::Tuple)
    positional = args.items();
  else
    positional.push_back(args);
  size_t next = 0;
  auto take = [&]() -> const Value & {
    if (next >= positional.size())
      fail("not enough arguments for format string");
    return positional[next++];
  };
  std::string out;
  for (size_t i = 0; i < format.size(); ++i) {
    if (format[i] != '%') {
      out += format[i];
      continue;
    }
    ++i;
    if (i >= format.size())
      fail("incomplete format");
    const Value *value = nullptr;
    if (format[i] == '(') {
      if (!mapping)
        fail("format requires a mapping");
      size_t close = format.find(')', i);
      if (close == std::string::npos)
        fail("incomplete format key");
      std::string key = format.substr(i + 1, close - i - 1);
      value = mapping->dict().findString(key);
      if (!value)
        fail("KeyError: " + reprString(key));
      i = close + 1;
    }
    std::string flags;
    while (i < format.size() &&
           std::string_view("#0- +").find(format[i]) != std::string_view::npos)
      flags += format[i++];
    auto number = [&]() -> int64_t {
      if (i < format.size() && format[i] == '*') {
        ++i;
        const Value &v = take();
        if (!v.isIntegral())
          fail("* wants int");
        return v.asInt();
      }
      int64_t n = 0;
      while (i < format.size() && format[i] >= '0' && format[i] <= '9') {
        n = n * 10 + (format[i++] - '0');
        if (n > static_cast<int64_t>(kMaxStringBytes))
          checkStringSize(kMaxStringBytes + 1);
      }
      return n;
    };
    int64_t width = number();
    int64_t precision = -1;
    if (i < format.size() && format[i] == '.') {
      ++i;
      precision = number();
    }
    while (i < format.size() &&
           (format[i] == 'h' || format[i] == 'l' || format[i] == 'L'))
      ++i;
    if (i >= format.size())
      fail("incomplete format");
    char conv = format[i];
    if (conv == '%') {
      out += '%';
      continue;
    }
    const Value &v = value ? *value : take();
    bool left = flags.find('-') != std::string::npos;
    bool zero = flags.find('0') != std::string::npos && !left;
    std::string cflags;
    for (char f : flags)
      if (f != '0' || !left)
        cflags += f;
    // C's printf takes the same flags for floats.
    std::string text;
    switch (conv) {
    case 's':
    case 'r':
    case 'a': {
      text = conv == 's' ? toStr(v) : toRepr(v);
      if (precision >= 0) {
        std::u32string cps = decodeUtf8(text);
        if (static_cast<int64_t>(cps.size()) > precision)
          text = encodeUtf8(cps.substr(0, precision));
      }
      text = pad(text, width, left ? '<' : '>');
      break;
    }
    case 'd':
    case 'i':
    case 'u':
    case 'o':
    case 'x':
    case 'X': {
      int64_t n;
      bool decimal = conv == 'd' || conv == 'i' || conv == 'u';
      if (v.isIntegral()) {
        n = v.asInt();
      } else if (v.kind() == Kind::Float && decimal) {
        double d = std::trunc(v.asDouble());
        if (!std::isfinite(d) || std::fabs(d) >= 9.2e18)
          fail("cannot convert float to integer");
        n = static_cast<int64_t>(d);
      } else {
        fail(std::string("%") + conv +
             " format: " + (decimal ? "a real number" : "an integer") +
             " is required, not " + v.typeName());
      }
      // Python prints the sign and the magnitude (C would wrap negative
      // hex), and its alternate octal prefix is 0o.
      uint64_t mag = n < 0 ? 0 - static_cast<uint64_t>(n) : n;
      std::string digits = cformat(decimal       ? "%llu"
                                   : conv == 'o' ? "%llo"
                                   : conv == 'x' ? "%llx"
                                                 : "%llX",
                                   static_cast<unsigned long long>(mag));
      if (precision > static_cast<int64_t>(digits.size()))
        digits.insert(0, precision - digits.size(), '0');
      std::string prefix = n < 0                                  ? "-"
                           : flags.find('+') != std::string::npos ? "+"
                           : flags.find(' ') != std::string::npos ? " "
                                                                  : "";
      if (flags.find('#') != std::string::npos && !decimal)
        prefix += conv == 'o' ? "0o" : conv == 'x' ? "0x" : "0X";
      int64_t missing =
          width - static_cast<int64_t>(prefix.size() + digits.size());
      if (missing > 0 && zero)
        digits.insert(0, missing, '0');
      text = pad(prefix + digits, width, left ? '<' : '>');
      break;
    }
    case 'e':
    case 'E':
    case 'f':
    case 'F':
    case 'g':
    case 'G': {
      if (!v.isNumber())
        fail(std::string("must be real number, not ") + v.typeName());
      std::string spec = "%" + cflags + (width ? std::to_string(width) : "") +
                         "." + std::to_string(precision >= 0 ? precision : 6) +
                         conv;
      text = cformat(spec.c_str(), v.asDouble());
      break;
    }
    case 'c': {
      if (v.isIntegral()) {
        if (v.asInt() < 0 || v.asInt() > 0x10FFFF)
          fail("%c arg not in range(0x110000)");
        if (v.asInt() >= 0xD800 && v.asInt() <= 0xDFFF)
          fail("a surrogate code point cannot be written as UTF-8");
        appendUtf8(text, static_cast<char32_t>(v.asInt()));
      } else if (v.isString() && codePointCount(v.str()) == 1) {
        text = v.str();
      } else {
        fail("%c requires int or char");
      }
      text = pad(text, width, left ? '<' : '>');
      break;
    }
    default: {
      char buf[96];
      std::snprintf(buf, sizeof(buf),
                    "unsupported format character '%c' (0x%x) at index %zu",
                    conv, static_cast<unsigned char>(conv), i);
      fail(buf);
    }
    }
    out += text;
    checkStringSize(out.size());
  }
  if (!mapping && next < positional.size())
    fail("not all arguments converted during string formatting");
  return out;
}

//===----------------------------------------------------------------------===//
// str.format
//===----------------------------------------------------------------------===//

static std::string groupDigits(const std::string &digits, char sep) {
  std::string out;
  int count = 0;
  for (size_t i = digits.size(); i-- > 0;) {
    out.insert(out.begin(), digits[i]);
    if (++count % 3 == 0 && i > 0)
      out.insert(out.begin(), sep);
  }
  return out;
}

// format(value, spec) for the mini-language
// [[fill]align][sign][#][0][width][grouping][.precision][type].
static std::string formatSpec(const Value &v, const std::string &specText) {
  if (specText.empty())
    return toStr(v);
  std::u32string spec = decodeUtf8(specText);
  size_t i = 0;
  std::string fill = " ";
  char align = 0;
  auto isAlign = [](char32_t c) {
    return c == '<' || c == '>' || c == '^' || c == '=';
  };
  if (spec.size() >= 2 && isAlign(spec[1])) {
    fill.clear();
    appendUtf8(fill, spec[0]);
    align = static_cast<char>(spec[1]);
    i = 2;
  } else if (!spec.empty() && isAlign(spec[0])) {
    align = static_cast<char>(spec[0]);
    i = 1;
  }
  char sign = '-';
  if (i < spec.size() && (spec[i] == '+' || spec[i] == '-' || spec[i] == ' '))
    sign = static_cast<char>(spec[i++]);
  bool alternate = i < spec.size() && spec[i] == '#' && ++i;
  if (i < spec.size() && spec[i] == '0') {
    if (!align) {
      fill = "0";
      align = '=';
    }
    ++i;
  }
  int64_t width = 0;
  while (i < spec.size() && spec[i] >= '0' && spec[i] <= '9') {
    width = width * 10 + (spec[i++] - '0');
    if (width > static_cast<int64_t>(kMaxStringBytes))
      checkStringSize(kMaxStringBytes + 1);
  }
  char grouping = 0;
  if (i < spec.size() && (spec[i] == ',' || spec[i] == '_'))
    grouping = static_cast<char>(spec[i++]);
  int64_t precision = -1;
  if (i < spec.size() && spec[i] == '.') {
    ++i;
    precision = 0;
    while (i < spec.size() && spec[i] >= '0' && spec[i] <= '9')
      precision = precision * 10 + (spec[i++] - '0');
  }
  char type = 0;
  if (i < spec.size())
    type = static_cast<char>(spec[i++]);
  if (i != spec.size())
    fail("Invalid format specifier");

  if (v.isString() || (!v.isNumber())) {
    if (!v.isString())
      fail(std::string("unsupported format string passed to ") + v.typeName() +
           ".__format__");
    if (type && type != 's')
      fail(std::string("Unknown format code '") + type +
           "' for object of type 'str'");
    std::string text = v.str();
    if (precision >= 0) {
      std::u32string cps = decodeUtf8(text);
      if (static_cast<int64_t>(cps.size()) > precision)
        text = encodeUtf8(cps.substr(0, precision));
    }
    return pad(text, width, align ? align : '<', fill);
  }

  std::string body;
  bool negative = false;
  bool isIntType = v.isIntegral() &&
                   (type == 0 || type == 'd' || type == 'b' || type == 'o' ||
                    type == 'x' || type == 'X' || type == 'c' || type == 'n');
  if (isIntType) {
    int64_t n = v.asInt();
    negative = n < 0;
    uint64_t mag = negative ? 0 - static_cast<uint64_t>(n) : n;
    switch (type) {
    case 'b':
      do {
        body.insert(body.begin(), static_cast<char>('0' + (mag & 1)));
        mag >>= 1;
      } while (mag);
      if (alternate)
        body = "0b" + body;
      break;
    case 'o':
      body = cformat("%llo", static_cast<unsigned long long>(mag));
      if (alternate)
        body = "0o" + body;
      break;
    case 'x':
    case 'X':
      body = cformat(type == 'x' ? "%llx" : "%llX",
                     static_cast<unsigned long long>(mag));
      if (alternate)
        body = (type == 'x' ? "0x" : "0X") + body;
      break;
    case 'c':
      if (negative || mag > 0x10FFFF)
        fail("%c arg not in range(0x110000)");
      if (mag >= 0xD800 && mag <= 0xDFFF)
        fail("a surrogate code point cannot be written as UTF-8");
      appendUtf8(body, static_cast<char32_t>(mag));
      break;
    default:
      body = std::to_string(mag);
      if (grouping)
        body = groupDigits(body, grouping);
      break;
    }
  } else {
    // Only these codes may reach snprintf with a double.
    if (type &&
        std::string_view("eEfFgG%n").find(type) == std::string_view::npos)
      fail(std::string("Unknown format code '") + type +
           "' for object of type '" + v.typeName() + "'");
    double d = v.asDouble();
    negative = std::signbit(d) && !std::isnan(d);
    double mag = std::fabs(d);
    if (type == 0 && precision < 0) {
      body = v.isIntegral() ? std::to_string(static_cast<uint64_t>(mag))
                            : formatFloat(mag);
    } else {
      char t = type == 0 ? 'g' : type == 'n' ? 'g' : type;
      int64_t p = precision >= 0 ? precision : 6;
      if (t == '%') {
        body =
            cformat(("%." + std::to_string(p) + "f").c_str(), mag * 100) + "%";
      } else {
        body = cformat(
            ((alternate ? "%#." : "%.") + std::to_string(p) + t).c_str(), mag);
      }
      if (type == 0 && body.find_first_of(".einn") == std::string::npos)
        body += ".0";
      if (std::isinf(mag) || std::isnan(mag))
        body = std::isnan(mag) ? (t >= 'a' ? "nan" : "NAN")
                               : (t >= 'a' ? "inf" : "INF");
    }
    if (grouping) {
      size_t end = body.find_first_not_of("0123456789");
      body = groupDigits(body.substr(0, end), grouping) +
             (end == std::string::npos ? "" : body.substr(end));
    }
  }
  std::string signText = negative      ? "-"
                         : sign == '+' ? "+"
                         : sign == ' ' ? " "
                                       : "";
  if (align == '=') {
    int64_t missing =
        width - static_cast<int64_t>(codePointCount(signText + body));
    std::string padding;
    for (int64_t k = 0; k < missing; ++k)
      padding += fill;
    return signText + padding + body;
  }
  return pad(signText + body, width, align ? align : '>', fill);
}

std::string braceFormat(Interpreter &interp, const std::string &format,
                        CallArgs &args) {
  std::string out;
  size_t autoIndex = 0;
  bool manual = false, automatic = false;
  for (size_t i = 0; i < format.size(); ++i) {
    char c = format[i];
    if (c == '}') {
      if (i + 1 < format.size() && format[i + 1] == '}') {
        out += '}';
        ++i;
        continue;
      }
      fail("Single '}' encountered in format string");
    }
    if (c != '{') {
      out += c;
      continue;
    }
    if (i + 1 < format.size() && format[i + 1] == '{') {
      out += '{';
      ++i;
      continue;
    }
    size_t close = format.find('}', i);
    if (close == std::string::npos)
      fail("Single '{' encountered in format string");
    std::string field = format.substr(i + 1, close - i - 1);
    if (field.find('{') != std::string::npos)
      fail("nested replacement fields are not supported");
    i = close;
    std::string spec;
    size_t colon = field.find(':');
    if (colon != std::string::npos) {
      spec = field.substr(colon + 1);
      field.resize(colon);
    }
    char conversion = 0;
    size_t bang = field.find('!');
    if (bang != std::string::npos) {
      if (bang + 2 != field.size())
        fail("expected ':' after conversion specifier");
      conversion = field[bang + 1];
      field.resize(bang);
    }
    size_t nameEnd = field.find_first_of(".[");
    std::string head = field.substr(0, nameEnd);
    Value value;
    if (head.empty()) {
      if (manual)
        fail("cannot switch from manual field specification to automatic "
             "field numbering");
      automatic = true;
      if (autoIndex >= args.positional.size())
        fail("Replacement index " + std::to_string(autoIndex) +
             " out of range for positional args tuple");
      value = args.positional[autoIndex++];
    } else if (head.find_first_not_of("0123456789") == std::string::npos) {
      if (automatic)
        fail("cannot switch from automatic field numbering to manual field "
             "specification");
      manual = true;
      size_t index = head.size() > 9 ? SIZE_MAX : std::stoul(head);
      if (index >= args.positional.size())
        fail("Replacement index " + head +
             " out of range for positional args tuple");
      value = args.positional[index];
    } else {
      bool found = false;
      for (const auto &kw : args.keyword)
        if (kw.first == head)
          value = kw.second, found = true;
      if (!found)
        fail("KeyError: " + reprString(head));
    }
    // .attr and [key] lookups, through the sandbox.
    for (size_t p = nameEnd; p != std::string::npos && p < field.size();) {
      if (field[p] == '.') {
        size_t end = field.find_first_of(".[", p + 1);
        value = interp.getAttr(value, field.substr(p + 1, end - p - 1));
        p = end;
      } else {
        size_t end = field.find(']', p);
        if (end == std::string::npos)
          fail("Missing ']' in format string");
        std::string key = field.substr(p + 1, end - p - 1);
        Value k = key.find_first_not_of("0123456789") == std::string::npos &&
                          !key.empty()
                      ? Value::integer(std::strtoll(key.c_str(), nullptr, 10))
                      : Value::string(key);
        value = interp.getItem(value, k);
        p = end + 1;
      }
    }
    if (conversion == 'r' || conversion == 'a')
      value = Value::string(toRepr(value));
    else if (conversion == 's')
      value = Value::string(toStr(value));
    else if (conversion)
      fail(std::string("Unknown conversion specifier ") + conversion);
    out += formatSpec(value, spec);
    checkStringSize(out.size());
  }
  return out;
}

//===----------------------------------------------------------------------===//
// int() and float() of strings
//===----------------------------------------------------------------------===//

static std::string_view trimmed(std::string_view text) {
  std::string s = strip(text, nullptr, true, true);
  size_t begin = 0;
  while (begin < text.size() && text.substr(begin, s.size()) != s)
    ++begin;
  return text.substr(begin, s.size());
}

static int digitValue(char c) {
  if (c >= '0' && c <= '9')
    return c - '0';
  c |= 0x20;
  return c >= 'a' && c <= 'z' ? c - 'a' + 10 : 99;
}

// Digits of `base` with single underscores between them; false otherwise.
static bool cleanDigits(std::string_view text, std::string &out, int base) {
  if (text.empty() || text.front() == '_' || text.back() == '_')
    return false;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '_') {
      if (text[i + 1] == '_')
        return false;
      continue;
    }
    if (digitValue(text[i]) >= base)
      return false;
    out += text[i];
  }
  return true;
}

bool parseInt(std::string_view text, int base, int64_t &out) {
  std::string_view t = trimmed(text);
  bool negative = false;
  if (!t.empty() && (t[0] == '+' || t[0] == '-')) {
    negative = t[0] == '-';
    t.remove_prefix(1);
  }
  if (t.size() >= 2 && t[0] == '0') {
    char p = t[1] | 0x20;
    int prefixBase = p == 'x' ? 16 : p == 'o' ? 8 : p == 'b' ? 2 : 0;
    if (prefixBase && (base == 0 || base == prefixBase)) {
      base = prefixBase;
      t.remove_prefix(2);
      if (!t.empty() && t[0] == '_')
        t.remove_prefix(1);
    }
  }
  if (base == 0) {
    base = 10;
    // Python refuses leading zeros in base 0 ("010"), except all zeros.
    if (t.size() > 1 && t[0] == '0' &&
        t.find_first_not_of("0_") != std::string_view::npos)
      return false;
  }
  if (base < 2 || base > 36)
    return false;
  std::string digits;
  if (!cleanDigits(t, digits, base))
    return false;
  uint64_t value = 0;
  auto result = std::from_chars(digits.data(), digits.data() + digits.size(),
                                value, base);
  if (result.ec != std::errc() || result.ptr != digits.data() + digits.size())
    return false;
  if (value > static_cast<uint64_t>(INT64_MAX) + (negative ? 1 : 0))
    return false;
  out =
      negative ? static_cast<int64_t>(0 - value) : static_cast<int64_t>(value);
  return true;
}

bool parseFloat(std::string_view text, double &out) {
  std::string_view t = trimmed(text);
  bool negative = false;
  std::string_view body = t;
  if (!body.empty() && (body[0] == '+' || body[0] == '-')) {
    negative = body[0] == '-';
    body.remove_prefix(1);
  }
  std::string lowered = lower(body);
  if (lowered == "inf" || lowered == "infinity") {
    out = negative ? -INFINITY : INFINITY;
    return true;
  }
  if (lowered == "nan") {
    out = NAN;
    return true;
  }
  // digits [. digits] [e [sign] digits], with underscores between digits.
  std::string clean;
  size_t i = 0;
  auto digitRun = [&](bool required) {
    size_t start = i;
    while (i < body.size() &&
           ((body[i] >= '0' && body[i] <= '9') ||
            (body[i] == '_' && i > start && i + 1 < body.size() &&
             body[i + 1] >= '0' && body[i + 1] <= '9'))) {
      if (body[i] != '_')
        clean += body[i];
      ++i;
    }
    return !required || i > start;
  };
  bool intPart = digitRun(false);
  bool fracPart = false;
  if (i < body.size() && body[i] == '.') {
    clean += body[i++];
    size_t before = clean.size();
    digitRun(false);
    fracPart = clean.size() > before;
  }
  if (!intPart && !fracPart)
    return false;
  if (clean == ".")
    return false;
  if (i < body.size() && (body[i] == 'e' || body[i] == 'E')) {
    clean += body[i++];
    if (i < body.size() && (body[i] == '+' || body[i] == '-'))
      clean += body[i++];
    if (!digitRun(true))
      return false;
  }
  if (i != body.size())
    return false;
  double value = 0;
  auto result =
      std::from_chars(clean.data(), clean.data() + clean.size(), value);
  if (result.ec == std::errc::invalid_argument)
    return false;
  if (result.ec == std::errc::result_out_of_range) {
    // Python gives inf for too large and 0.0 for too small: compare the
    // decimal exponent of the leading digit with zero.
    size_t e = clean.find_first_of("eE");
    std::string mantissa = clean.substr(0, e);
    long exponent = e == std::string::npos
                        ? 0
                        : std::strtol(clean.c_str() + e + 1, nullptr, 10);
    // strtol saturates at LONG_MAX/MIN; any exponent this large decides the
    // result alone, and the clamp keeps `exponent + position` from
    // overflowing (position is bounded by the literal's length).
    exponent = std::clamp(exponent, -(1L << 40), 1L << 40);
    size_t point = mantissa.find('.');
    size_t first = mantissa.find_first_of("123456789");
    long position = static_cast<long>(
                        point == std::string::npos ? mantissa.size() : point) -
                    static_cast<long>(first) - (first > point ? 0 : 1);
    value = exponent + position > 0 ? INFINITY : 0.0;
  }
  out = negative ? -value : value;
  return true;
}

} // namespace chat
} // namespace sits
