//===- Filters.cpp - jinja2's filters and transformers' tojson ------------===//
//
// Each filter follows jinja2/filters.py, including its quirks: `default`
// replaces only Undefined unless asked for falsy values too, `int` of
// "42.23" is 42, `map`/`select`/`items`/`unique` return generators (always
// true, no length), `first` of an empty sequence is Undefined, `title`
// splits words at spaces, dashes and brackets.
//
//===----------------------------------------------------------------------===//

#include "Filters.h"

#include "Interpreter.h"
#include "Json.h"
#include "Unicode.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace sits {
namespace chat {

namespace {

using namespace filters;

std::string htmlEscape(const std::string &s) {
  std::string out;
  for (char c : s) {
    switch (c) {
    case '&':
      out += "&amp;";
      break;
    case '<':
      out += "&lt;";
      break;
    case '>':
      out += "&gt;";
      break;
    case '"':
      out += "&#34;";
      break;
    case '\'':
      out += "&#39;";
      break;
    default:
      out += c;
    }
  }
  return out;
}

Value fAbs(Interpreter &, const Value &v, CallArgs &args) {
  ArgBinder b(filterName("abs"), args, {});
  if (v.isUndefined())
    failUndefined(v);
  if (v.isIntegral()) {
    if (v.asInt() == INT64_MIN)
      fail("integer overflow (integers are 64-bit here)");
    return Value::integer(std::llabs(v.asInt()));
  }
  if (v.kind() == Kind::Float)
    return Value::real(std::fabs(v.asDouble()));
  fail(std::string("bad operand type for abs(): '") + v.typeName() + "'");
}

Value fAttr(Interpreter &, const Value &v, CallArgs &args) {
  ArgBinder b(filterName("attr"), args, {"name"});
  b.require(1);
  std::string name = toStr(b.get(0));
  if (v.isUndefined())
    failUndefined(v);
  if (v.isObject()) {
    Value a = v.object().getAttr(name);
    return a.isUndefined() ? undefinedAttribute(v, name) : a;
  }
  Value method;
  if (findMethod(v, name, method))
    return method;
  return undefinedAttribute(v, name);
}

template <std::string (*Fn)(std::string_view)>
Value fStringMap(Interpreter &, const Value &v, CallArgs &args) {
  ArgBinder b("filter", args, {});
  return Value::string(Fn(toStr(v)));
}

Value fCenter(Interpreter &interp, const Value &v, CallArgs &args) {
  ArgBinder b(filterName("center"), args, {"width"});
  CallArgs inner;
  inner.positional.push_back(b.get(0, Value::integer(80)));
  Value method;
  findMethod(Value::string(toStr(v)), "center", method);
  return interp.call(method, inner);
}

Value fLength(Interpreter &, const Value &v, CallArgs &args) {
  ArgBinder b(filterName("length"), args, {});
  return Value::integer(length(v));
}

Value fDefault(Interpreter &, const Value &v, CallArgs &args) {
  ArgBinder b(filterName("default"), args, {"default_value", "boolean"});
  bool boolean = b.get(1, Value::boolean(false)).truthy();
  if (v.isUndefined() || (boolean && !v.truthy()))
    return b.get(0, Value::string(""));
  return v;
}

Value fEscape(Interpreter &, const Value &v, CallArgs &args) {
  ArgBinder b(filterName("escape"), args, {});
  return Value::string(htmlEscape(toStr(v)));
}

Value fFloat(Interpreter &, const Value &v, CallArgs &args) {
  ArgBinder b(filterName("float"), args, {"default"});
  if (v.isUndefined())
    failUndefined(v);
  if (v.isNumber())
    return Value::real(v.asDouble());
  double d;
  if (v.isString() && parseFloat(v.str(), d))
    return Value::real(d);
  return b.get(0, Value::real(0.0));
}

Value fFormat(Interpreter &, const Value &v, CallArgs &args) {
  if (!args.positional.empty() && !args.keyword.empty())
    fail("can't handle positional and keyword arguments at the same time");
  Value values;
  if (!args.keyword.empty()) {
    DictBuilder kwargs;
    for (auto &kw : args.keyword)
      kwargs.set(Value::string(kw.first), kw.second);
    values = kwargs.build();
  } else {
    values = Value::tuple(args.positional);
  }
  return Value::string(percentFormat(toStr(v), values));
}

Value fIndent(Interpreter &, const Value &v, CallArgs &args) {
  ArgBinder b(filterName("indent"), args, {"width", "first", "blank"});
  Value width = b.get(0, Value::integer(4));
  std::string indention;
  if (width.isString()) {
    indention = width.str();
  } else if (width.isIntegral()) {
    checkStringSize(width.asInt() > 0 ? width.asInt() : 0);
    indention = std::string(width.asInt() > 0 ? width.asInt() : 0, ' ');
  } else {
    fail(std::string("can't multiply sequence by non-int of type '") +
         width.typeName() + "'");
  }
  bool first = b.get(1, Value::boolean(false)).truthy();
  bool blank = b.get(2, Value::boolean(false)).truthy();
  if (!v.isString()) {
    if (v.isUndefined())
      failUndefined(v);
    fail(std::string("unsupported operand type(s) for +=: '") + v.typeName() +
         "' and 'str'");
  }
  // s += "\n" then splitlines(), as jinja2 does.
  std::vector<std::string> lines;
  {
    std::u32string cps = decodeUtf8(v.str() + "\n");
    size_t start = 0;
    for (size_t i = 0; i < cps.size(); ++i) {
      char32_t c = cps[i];
      bool br = c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x1C ||
                c == 0x1D || c == 0x1E || c == 0x85 || c == 0x2028 ||
                c == 0x2029;
      if (!br)
        continue;
      size_t eol = i;
      if (c == '\r' && i + 1 < cps.size() && cps[i + 1] == '\n')
        ++i;
      lines.push_back(encodeUtf8(cps.substr(start, eol - start)));
      start = i + 1;
    }
    if (start < cps.size())
      lines.push_back(encodeUtf8(cps.substr(start)));
  }
  std::string rv;
  if (blank) {
    for (size_t i = 0; i < lines.size(); ++i) {
      if (i)
        rv += "\n" + indention;
      rv += lines[i];
      checkStringSize(rv.size());
    }
  } else {
    rv = lines.empty() ? "" : lines[0];
    for (size_t i = 1; i < lines.size(); ++i) {
      rv += "\n";
      if (!lines[i].empty())
        rv += indention;
      rv += lines[i];
      checkStringSize(rv.size());
    }
  }
  if (first)
    rv = indention + rv;
  return Value::string(std::move(rv));
}

Value fInt(Interpreter &, const Value &v, CallArgs &args) {
  ArgBinder b(filterName("int"), args, {"default", "base"});
  Value fallback = b.get(0, Value::integer(0));
  int64_t base = b.integer(1, 10);
  if (v.isUndefined())
    failUndefined(v);
  if (v.isIntegral())
    return Value::integer(v.asInt());
  auto fromDouble = [&](double d) {
    if (std::isnan(d))
      return fallback;
    if (std::isinf(d))
      fail("cannot convert float infinity to integer");
    d = std::trunc(d);
    if (std::fabs(d) >= 9.2e18)
      fail("integer overflow (integers are 64-bit here)");
    return Value::integer(static_cast<int64_t>(d));
  };
  if (v.kind() == Kind::Float)
    return fromDouble(v.asDouble());
  if (v.isString()) {
    int64_t n;
    if (parseInt(v.str(), static_cast<int>(base), n))
      return Value::integer(n);
    double d;
    if (parseFloat(v.str(), d))
      return fromDouble(d);
  }
  return fallback;
}

Value fReplace(Interpreter &interp, const Value &v, CallArgs &args) {
  ArgBinder b(filterName("replace"), args, {"old", "new", "count"});
  b.require(2);
  CallArgs inner;
  inner.positional = {Value::string(toStr(b.get(0))),
                      Value::string(toStr(b.get(1)))};
  if (b.has(2) && !b.get(2).isNone())
    inner.positional.push_back(b.get(2));
  Value method;
  findMethod(Value::string(toStr(v)), "replace", method);
  return interp.call(method, inner);
}

// Python's round(x, n): correctly rounded, ties to even on the exact
// binary value (what printf's %.*f does).
double pyRound(double x, int64_t n) {
  if (!std::isfinite(x))
    return x;
  if (n >= 0) {
    if (n > 330)
      return x;
    char buf[512];
    std::snprintf(buf, sizeof(buf), "%.*f", static_cast<int>(n), x);
    return std::strtod(buf, nullptr);
  }
  double p = std::pow(10.0, static_cast<double>(-n));
  if (!std::isfinite(p))
    return std::copysign(0.0, x);
  return std::nearbyint(x / p) * p;
}

Value fRound(Interpreter &, const Value &v, CallArgs &args) {
  ArgBinder b(filterName("round"), args, {"precision", "method"});
  int64_t precision = b.integer(0, 0);
  Value method = b.get(1, Value::string("common"));
  if (!method.isString() || (method.str() != "common" &&
                             method.str() != "ceil" && method.str() != "floor"))
    fail("method must be common, ceil or floor");
  if (v.isUndefined())
    failUndefined(v);
  if (!v.isNumber())
    fail(std::string("type ") + v.typeName() +
         " doesn't define __round__ method");
  if (method.str() == "common") {
    if (v.isIntegral()) {
      if (precision >= 0)
        return Value::integer(v.asInt());
      return Value::integer(static_cast<int64_t>(
          pyRound(static_cast<double>(v.asInt()), precision)));
    }
    return Value::real(pyRound(v.asDouble(), precision));
  }
  double p = std::pow(10.0, static_cast<double>(precision));
  double scaled = v.asDouble() * p;
  double r = method.str() == "ceil" ? std::ceil(scaled) : std::floor(scaled);
  return Value::real(r / p);
}

Value fSafe(Interpreter &, const Value &v, CallArgs &args) {
  ArgBinder b(filterName("safe"), args, {});
  return Value::string(toStr(v));
}

Value fString(Interpreter &, const Value &v, CallArgs &args) {
  ArgBinder b(filterName("string"), args, {});
  return v.isString() ? v : Value::string(toStr(v));
}

// jinja2's do_title: words start after spaces, dashes and brackets.
Value fTitle(Interpreter &, const Value &v, CallArgs &args) {
  ArgBinder b(filterName("title"), args, {});
  std::u32string cps = decodeUtf8(toStr(v));
  auto separator = [](char32_t c) {
    return isSpace(c) || c == '-' || c == '(' || c == '{' || c == '[' ||
           c == '<';
  };
  std::string out;
  bool wordStart = true;
  for (char32_t c : cps) {
    if (separator(c)) {
      appendUtf8(out, c);
      wordStart = true;
    } else if (wordStart) {
      if (c == 0xDF)
        out += "SS";
      else
        appendUtf8(out, toUpper(c));
      wordStart = false;
    } else {
      appendUtf8(out, toLower(c));
    }
  }
  return Value::string(std::move(out));
}

// transformers: json.dumps(x, ensure_ascii=False, indent=indent,
// separators=separators, sort_keys=sort_keys).
Value fTojson(Interpreter &, const Value &v, CallArgs &args) {
  ArgBinder b(filterName("tojson"), args,
              {"ensure_ascii", "indent", "separators", "sort_keys"});
  JsonOptions options;
  options.ensureAscii = b.get(0, Value::boolean(false)).truthy();
  Value indent = b.get(1, Value::none());
  if (indent.isString()) {
    options.indent = indent.str();
  } else if (indent.isIntegral()) {
    options.indent = std::string(indent.asInt() > 0 ? indent.asInt() : 0, ' ');
  } else if (!indent.isNone()) {
    fail(std::string("can't multiply sequence by non-int of type '") +
         indent.typeName() + "'");
  }
  if (options.indent)
    options.itemSeparator = ",";
  Value separators = b.get(2, Value::none());
  if (!separators.isNone()) {
    std::vector<Value> seps = iterate(separators);
    if (seps.size() != 2)
      fail(std::string(seps.size() < 2 ? "not enough" : "too many") +
           " values to unpack (expected 2)");
    for (const Value &sep : seps)
      if (!sep.isString())
        fail(std::string("sequence item 0: expected str instance, ") +
             sep.typeName() + " found");
    options.itemSeparator = seps[0].str();
    options.keySeparator = seps[1].str();
  }
  options.sortKeys = b.get(3, Value::boolean(false)).truthy();
  return Value::string(toJson(v, options));
}

Value fTrim(Interpreter &, const Value &v, CallArgs &args) {
  ArgBinder b(filterName("trim"), args, {"chars"});
  Value chars = b.get(0, Value::none());
  if (!chars.isNone() && !chars.isString())
    fail("strip arg must be None or str");
  return Value::string(
      strip(toStr(v), chars.isString() ? &chars.str() : nullptr, true, true));
}

Value fTruncate(Interpreter &, const Value &v, CallArgs &args) {
  ArgBinder b(filterName("truncate"), args,
              {"length", "killwords", "end", "leeway"});
  int64_t length = b.integer(0, 255);
  bool killwords = b.get(1, Value::boolean(false)).truthy();
  std::string end = toStr(b.get(2, Value::string("...")));
  int64_t leeway = b.integer(3, 5);
  int64_t endLength = static_cast<int64_t>(codePointCount(end));
  if (length < endLength)
    fail("expected length >= " + std::to_string(endLength) + ", got " +
         std::to_string(length));
  if (leeway < 0)
    fail("expected leeway >= 0, got " + std::to_string(leeway));
  std::u32string s = decodeUtf8(toStr(v));
  if (static_cast<int64_t>(s.size()) <= length + leeway)
    return Value::string(encodeUtf8(s));
  std::u32string head = s.substr(0, length - endLength);
  if (!killwords) {
    size_t space = head.rfind(U' ');
    if (space != std::u32string::npos)
      head = head.substr(0, space);
  }
  return Value::string(encodeUtf8(head) + end);
}

Value fWordcount(Interpreter &, const Value &v, CallArgs &args) {
  ArgBinder b(filterName("wordcount"), args, {});
  int64_t count = 0;
  bool inWord = false;
  for (char32_t c : decodeUtf8(toStr(v))) {
    bool word = isAlpha(c) || isDigit(c) || c == '_';
    count += word && !inWord;
    inWord = word;
  }
  return Value::integer(count);
}

const Builtin kFilters[] = {
    {"abs", fAbs, nullptr},
    {"attr", fAttr, nullptr},
    {"batch", fBatch, nullptr},
    {"capitalize", fStringMap<capitalize>, nullptr},
    {"center", fCenter, nullptr},
    {"count", fLength, nullptr},
    {"d", fDefault, nullptr},
    {"default", fDefault, nullptr},
    {"dictsort", fDictsort, nullptr},
    {"e", fEscape, nullptr},
    {"escape", fEscape, nullptr},
    {"first", fFirst, nullptr},
    {"float", fFloat, nullptr},
    {"forceescape", fEscape, nullptr},
    {"format", fFormat, nullptr},
    {"indent", fIndent, nullptr},
    {"int", fInt, nullptr},
    {"items", fItems, nullptr},
    {"join", fJoin, nullptr},
    {"last", fLast, nullptr},
    {"length", fLength, nullptr},
    {"list", fList, nullptr},
    {"lower", fStringMap<lower>, nullptr},
    {"map", fMap, nullptr},
    {"max",
     [](Interpreter &i, const Value &v, CallArgs &a) {
       return minMax(i, v, a, true);
     },
     nullptr},
    {"min",
     [](Interpreter &i, const Value &v, CallArgs &a) {
       return minMax(i, v, a, false);
     },
     nullptr},
    {"reject",
     [](Interpreter &i, const Value &v, CallArgs &a) {
       return selectReject(i, v, a, false, false);
     },
     nullptr},
    {"rejectattr",
     [](Interpreter &i, const Value &v, CallArgs &a) {
       return selectReject(i, v, a, false, true);
     },
     nullptr},
    {"replace", fReplace, nullptr},
    {"reverse", fReverse, nullptr},
    {"round", fRound, nullptr},
    {"safe", fSafe, nullptr},
    {"select",
     [](Interpreter &i, const Value &v, CallArgs &a) {
       return selectReject(i, v, a, true, false);
     },
     nullptr},
    {"selectattr",
     [](Interpreter &i, const Value &v, CallArgs &a) {
       return selectReject(i, v, a, true, true);
     },
     nullptr},
    {"sort", fSort, nullptr},
    {"string", fString, nullptr},
    {"sum", fSum, nullptr},
    {"title", fTitle, nullptr},
    {"tojson", fTojson, nullptr},
    {"trim", fTrim, nullptr},
    {"truncate", fTruncate, nullptr},
    {"unique", fUnique, nullptr},
    {"upper", fStringMap<upper>, nullptr},
    {"wordcount", fWordcount, nullptr},
};

} // namespace

const Builtin *findFilter(std::string_view name) {
  for (const Builtin &b : kFilters)
    if (name == b.name)
      return &b;
  return nullptr;
}

} // namespace chat
} // namespace sits
