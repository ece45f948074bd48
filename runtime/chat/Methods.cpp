//===- Methods.cpp - str, dict and list methods the sandbox allows --------===//
//
// Python methods templates call (`content.strip()`, `m.get('x')`,
// `s.split('</think>')`), with Python's results: indices and widths in code
// points, Unicode whitespace. transformers' ImmutableSandboxedEnvironment
// refuses the methods that mutate a list or dict: looking one up gives an
// Undefined whose use raises the sandbox's error.
//
//===----------------------------------------------------------------------===//

#include "Builtins.h"

#include "Interpreter.h"
#include "Unicode.h"

#include <algorithm>

namespace sits {
namespace chat {

namespace {

class BoundMethod : public Object {
public:
  BoundMethod(Value self, MethodFn fn, const char *name)
      : self(std::move(self)), fn(fn), name(name) {}
  const char *typeName() const override { return "builtin_function_or_method"; }
  bool isCallable() const override { return true; }
  Value call(Interpreter &interp, CallArgs &args) const override {
    return fn(interp, self, args);
  }
  std::string str() const override {
    return std::string("<built-in method ") + name + " of " + self.typeName() +
           " object>";
  }

private:
  Value self;
  MethodFn fn;
  const char *name;
};

struct Method {
  const char *name;
  MethodFn fn;
};

std::string what(const char *type, const char *name) {
  return std::string(type) + "." + name + "()";
}

const std::string &strArg(const Value &v, const char *context) {
  if (!v.isString())
    fail(std::string(context) + " argument must be str, not " + v.typeName());
  return v.str();
}

// Python's slice-style start/end of a search, in code points.
void searchRange(const ArgBinder &b, size_t startArg, int64_t size,
                 int64_t &begin, int64_t &end) {
  auto bound = [&](size_t i, int64_t fallback) {
    if (!b.has(i) || b.get(i).isNone())
      return fallback;
    if (!b.get(i).isIntegral())
      fail("slice indices must be integers or None or have an __index__ "
           "method");
    int64_t v = b.get(i).asInt();
    if (v < 0)
      v = std::max<int64_t>(0, v + size);
    return std::min(v, size);
  };
  begin = bound(startArg, 0);
  end = bound(startArg + 1, size);
}

int64_t findIn(const std::u32string &hay, const std::u32string &needle,
               int64_t begin, int64_t end, bool reverse) {
  if (end - begin < static_cast<int64_t>(needle.size()))
    return -1;
  std::u32string_view window(hay.data() + begin, end - begin);
  size_t at = reverse ? window.rfind(needle) : window.find(needle);
  return at == std::u32string_view::npos ? -1 : begin + at;
}

//===--------------------------------------------------------------------===//
// str
//===--------------------------------------------------------------------===//

Value strStrip(const Value &self, CallArgs &args, const char *name, bool left,
               bool right) {
  ArgBinder b(what("str", name), args, {"chars"});
  if (b.has(0) && !b.get(0).isNone() && !b.get(0).isString())
    fail(std::string(name) + " arg must be None or str");
  const std::string *chars =
      b.has(0) && b.get(0).isString() ? &b.get(0).str() : nullptr;
  return Value::string(strip(self.str(), chars, left, right));
}

Value splitImpl(const Value &self, CallArgs &args, bool reverse) {
  ArgBinder b(what("str", reverse ? "rsplit" : "split"), args,
              {"sep", "maxsplit"});
  int64_t maxsplit = b.integer(1, -1);
  const std::string &s = self.str();
  std::vector<Value> parts;
  if (!b.has(0) || b.get(0).isNone()) {
    // Runs of whitespace; no empty parts.
    std::u32string cps = decodeUtf8(s);
    std::vector<std::u32string> words;
    if (!reverse) {
      size_t i = 0;
      while (i < cps.size()) {
        while (i < cps.size() && isSpace(cps[i]))
          ++i;
        if (i >= cps.size())
          break;
        if (maxsplit >= 0 && static_cast<int64_t>(words.size()) == maxsplit) {
          words.push_back(cps.substr(i)); // the rest keeps its whitespace
          break;
        }
        size_t start = i;
        while (i < cps.size() && !isSpace(cps[i]))
          ++i;
        words.push_back(cps.substr(start, i - start));
      }
    } else {
      size_t i = cps.size();
      while (i > 0) {
        while (i > 0 && isSpace(cps[i - 1]))
          --i;
        if (i == 0)
          break;
        if (maxsplit >= 0 && static_cast<int64_t>(words.size()) == maxsplit) {
          words.push_back(cps.substr(0, i)); // the rest keeps its whitespace
          break;
        }
        size_t end = i;
        while (i > 0 && !isSpace(cps[i - 1]))
          --i;
        words.push_back(cps.substr(i, end - i));
      }
      std::reverse(words.begin(), words.end());
    }
    for (const std::u32string &w : words)
      parts.push_back(Value::string(encodeUtf8(w)));
    return Value::list(std::move(parts));
  }
  const std::string &sep = strArg(b.get(0), "split");
  if (sep.empty())
    fail("empty separator");
  std::vector<std::string> pieces;
  if (!reverse) {
    size_t pos = 0;
    while (true) {
      size_t at = s.find(sep, pos);
      if (at == std::string::npos ||
          (maxsplit >= 0 && static_cast<int64_t>(pieces.size()) == maxsplit)) {
        pieces.push_back(s.substr(pos));
        break;
      }
      pieces.push_back(s.substr(pos, at - pos));
      pos = at + sep.size();
    }
  } else {
    size_t end = s.size();
    while (true) {
      size_t at = end >= sep.size() ? s.rfind(sep, end - sep.size())
                                    : std::string::npos;
      if (at == std::string::npos ||
          (maxsplit >= 0 && static_cast<int64_t>(pieces.size()) == maxsplit)) {
        pieces.push_back(s.substr(0, end));
        break;
      }
      pieces.push_back(s.substr(at + sep.size(), end - at - sep.size()));
      end = at;
    }
    std::reverse(pieces.begin(), pieces.end());
  }
  for (std::string &piece : pieces)
    parts.push_back(Value::string(std::move(piece)));
  return Value::list(std::move(parts));
}

Value strSplitlines(Interpreter &, const Value &self, CallArgs &args) {
  ArgBinder b(what("str", "splitlines"), args, {"keepends"});
  bool keep = b.get(0, Value::boolean(false)).truthy();
  std::u32string cps = decodeUtf8(self.str());
  std::vector<Value> lines;
  size_t start = 0;
  for (size_t i = 0; i < cps.size(); ++i) {
    char32_t c = cps[i];
    bool br = c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x1C ||
              c == 0x1D || c == 0x1E || c == 0x85 || c == 0x2028 || c == 0x2029;
    if (!br)
      continue;
    size_t eol = i;
    if (c == '\r' && i + 1 < cps.size() && cps[i + 1] == '\n')
      ++i;
    lines.push_back(Value::string(
        encodeUtf8(cps.substr(start, (keep ? i + 1 : eol) - start))));
    start = i + 1;
  }
  if (start < cps.size())
    lines.push_back(Value::string(encodeUtf8(cps.substr(start))));
  return Value::list(std::move(lines));
}

Value affix(const Value &self, CallArgs &args, bool suffix) {
  const char *name = suffix ? "endswith" : "startswith";
  ArgBinder b(what("str", name), args, {"prefix", "start", "end"});
  b.require(1);
  std::u32string cps = decodeUtf8(self.str());
  int64_t begin, end;
  searchRange(b, 1, static_cast<int64_t>(cps.size()), begin, end);
  std::vector<Value> options;
  if (b.get(0).kind() == Kind::Tuple)
    options = b.get(0).items();
  else
    options.push_back(b.get(0));
  for (const Value &option : options) {
    if (!option.isString())
      fail(std::string(name) +
           " first arg must be str or a tuple of str, "
           "not " +
           option.typeName());
    std::u32string needle = decodeUtf8(option.str());
    if (begin > end || end - begin < static_cast<int64_t>(needle.size()))
      continue;
    size_t at = suffix ? end - needle.size() : begin;
    if (cps.compare(at, needle.size(), needle) == 0)
      return Value::boolean(true);
  }
  return Value::boolean(false);
}

Value strReplace(Interpreter &, const Value &self, CallArgs &args) {
  ArgBinder b(what("str", "replace"), args, {"old", "new", "count"});
  b.require(2);
  const std::string &from = strArg(b.get(0), "replace()");
  const std::string &to = strArg(b.get(1), "replace()");
  int64_t count = b.integer(2, -1);
  const std::string &s = self.str();
  std::string out;
  if (from.empty()) {
    // Python inserts `to` before every code point and at the end.
    std::u32string cps = decodeUtf8(s);
    int64_t done = 0;
    for (char32_t cp : cps) {
      if (count < 0 || done < count) {
        out += to;
        ++done;
      }
      appendUtf8(out, cp);
      checkStringSize(out.size());
    }
    if (count < 0 || done < count)
      out += to;
    return Value::string(std::move(out));
  }
  size_t pos = 0;
  for (int64_t done = 0; count < 0 || done < count; ++done) {
    size_t at = s.find(from, pos);
    if (at == std::string::npos)
      break;
    out.append(s, pos, at - pos);
    out += to;
    checkStringSize(out.size());
    pos = at + from.size();
  }
  out.append(s, pos, std::string::npos);
  return Value::string(std::move(out));
}

Value findImpl(const Value &self, CallArgs &args, const char *name,
               bool reverse, bool raise) {
  ArgBinder b(what("str", name), args, {"sub", "start", "end"});
  b.require(1);
  std::u32string cps = decodeUtf8(self.str());
  std::u32string needle = decodeUtf8(strArg(b.get(0), name));
  int64_t begin, end;
  searchRange(b, 1, static_cast<int64_t>(cps.size()), begin, end);
  int64_t at = begin <= end ? findIn(cps, needle, begin, end, reverse) : -1;
  if (at < 0 && raise)
    fail("substring not found");
  return Value::integer(at);
}

Value strCount(Interpreter &, const Value &self, CallArgs &args) {
  ArgBinder b(what("str", "count"), args, {"sub", "start", "end"});
  b.require(1);
  std::u32string cps = decodeUtf8(self.str());
  std::u32string needle = decodeUtf8(strArg(b.get(0), "count"));
  int64_t begin, end;
  searchRange(b, 1, static_cast<int64_t>(cps.size()), begin, end);
  if (begin > end)
    return Value::integer(0);
  if (needle.empty())
    return Value::integer(end - begin + 1);
  int64_t n = 0;
  for (int64_t at = begin; (at = findIn(cps, needle, at, end, false)) >= 0;
       at += needle.size())
    ++n;
  return Value::integer(n);
}

Value strJoin(Interpreter &, const Value &self, CallArgs &args) {
  ArgBinder b(what("str", "join"), args, {"iterable"});
  b.require(1);
  std::string out;
  std::vector<Value> items = iterate(b.get(0));
  for (size_t i = 0; i < items.size(); ++i) {
    if (!items[i].isString())
      fail("sequence item " + std::to_string(i) + ": expected str instance, " +
           items[i].typeName() + " found");
    if (i)
      out += self.str();
    out += items[i].str();
    checkStringSize(out.size());
  }
  return Value::string(std::move(out));
}

Value justify(const Value &self, CallArgs &args, const char *name, char how) {
  ArgBinder b(what("str", name), args, {"width", "fillchar"});
  b.require(1);
  int64_t width = b.integer(0, 0);
  std::string fill = " ";
  if (b.has(1)) {
    fill = strArg(b.get(1), name);
    if (codePointCount(fill) != 1)
      fail("The fill character must be exactly one character long");
  }
  int64_t len = static_cast<int64_t>(codePointCount(self.str()));
  if (width <= len)
    return self;
  checkStringSize(static_cast<size_t>(width) * fill.size());
  int64_t marg = width - len, left = 0;
  if (how == '^')
    left = marg / 2 + (marg & width & 1);
  else if (how == '>')
    left = marg;
  std::string out;
  for (int64_t i = 0; i < left; ++i)
    out += fill;
  out += self.str();
  for (int64_t i = 0; i < marg - left; ++i)
    out += fill;
  return Value::string(std::move(out));
}

Value strZfill(Interpreter &, const Value &self, CallArgs &args) {
  ArgBinder b(what("str", "zfill"), args, {"width"});
  b.require(1);
  int64_t width = b.integer(0, 0);
  const std::string &s = self.str();
  int64_t len = static_cast<int64_t>(codePointCount(s));
  if (width <= len)
    return self;
  checkStringSize(static_cast<size_t>(width));
  std::string zeros(width - len, '0');
  if (!s.empty() && (s[0] == '+' || s[0] == '-'))
    return Value::string(s.substr(0, 1) + zeros + s.substr(1));
  return Value::string(zeros + s);
}

Value partition(const Value &self, CallArgs &args, bool reverse) {
  ArgBinder b(what("str", reverse ? "rpartition" : "partition"), args, {"sep"});
  b.require(1);
  const std::string &sep = strArg(b.get(0), "partition");
  if (sep.empty())
    fail("empty separator");
  const std::string &s = self.str();
  size_t at = reverse ? s.rfind(sep) : s.find(sep);
  if (at == std::string::npos)
    return reverse ? Value::tuple({Value::string(""), Value::string(""), self})
                   : Value::tuple({self, Value::string(""), Value::string("")});
  return Value::tuple({Value::string(s.substr(0, at)), Value::string(sep),
                       Value::string(s.substr(at + sep.size()))});
}

Value removeAffix(const Value &self, CallArgs &args, bool suffix) {
  ArgBinder b(what("str", suffix ? "removesuffix" : "removeprefix"), args,
              {"affix"});
  b.require(1);
  const std::string &a = strArg(b.get(0), "remove");
  const std::string &s = self.str();
  if (a.empty() || a.size() > s.size())
    return self;
  if (!suffix && s.compare(0, a.size(), a) == 0)
    return Value::string(s.substr(a.size()));
  if (suffix && s.compare(s.size() - a.size(), a.size(), a) == 0)
    return Value::string(s.substr(0, s.size() - a.size()));
  return self;
}

template <bool (*Pred)(char32_t)>
Value strIs(Interpreter &, const Value &self, CallArgs &args) {
  ArgBinder b("str method", args, {});
  std::u32string cps = decodeUtf8(self.str());
  if (cps.empty())
    return Value::boolean(false);
  for (char32_t cp : cps)
    if (!Pred(cp))
      return Value::boolean(false);
  return Value::boolean(true);
}
bool alnum(char32_t c) { return isAlpha(c) || isDigit(c); }

Value caseCheck(const Value &self, bool wantUpper) {
  bool cased = false;
  for (char32_t cp : decodeUtf8(self.str())) {
    if (wantUpper ? isLowerCase(cp) : isUpperCase(cp))
      return Value::boolean(false);
    cased |= isCased(cp);
  }
  return Value::boolean(cased);
}

Value strIsTitle(Interpreter &, const Value &self, CallArgs &) {
  bool previousCased = false, cased = false;
  for (char32_t cp : decodeUtf8(self.str())) {
    if (isUpperCase(cp)) {
      if (previousCased)
        return Value::boolean(false);
      previousCased = cased = true;
    } else if (isLowerCase(cp)) {
      if (!previousCased)
        return Value::boolean(false);
      previousCased = cased = true;
    } else {
      previousCased = false;
    }
  }
  return Value::boolean(cased);
}

template <std::string (*Fn)(std::string_view)>
Value strMap(Interpreter &, const Value &self, CallArgs &args) {
  ArgBinder b("str method", args, {});
  return Value::string(Fn(self.str()));
}

const Method kStrMethods[] = {
    {"strip", [](Interpreter &, const Value &s,
                 CallArgs &a) { return strStrip(s, a, "strip", true, true); }},
    {"lstrip",
     [](Interpreter &, const Value &s, CallArgs &a) {
       return strStrip(s, a, "lstrip", true, false);
     }},
    {"rstrip",
     [](Interpreter &, const Value &s, CallArgs &a) {
       return strStrip(s, a, "rstrip", false, true);
     }},
    {"split", [](Interpreter &, const Value &s,
                 CallArgs &a) { return splitImpl(s, a, false); }},
    {"rsplit", [](Interpreter &, const Value &s,
                  CallArgs &a) { return splitImpl(s, a, true); }},
    {"splitlines", strSplitlines},
    {"startswith", [](Interpreter &, const Value &s,
                      CallArgs &a) { return affix(s, a, false); }},
    {"endswith", [](Interpreter &, const Value &s,
                    CallArgs &a) { return affix(s, a, true); }},
    {"upper", strMap<upper>},
    {"lower", strMap<lower>},
    {"casefold", strMap<lower>},
    {"title", strMap<pythonTitle>},
    {"capitalize", strMap<capitalize>},
    {"swapcase", strMap<swapCase>},
    {"replace", strReplace},
    {"find", [](Interpreter &, const Value &s,
                CallArgs &a) { return findImpl(s, a, "find", false, false); }},
    {"rfind", [](Interpreter &, const Value &s,
                 CallArgs &a) { return findImpl(s, a, "rfind", true, false); }},
    {"index", [](Interpreter &, const Value &s,
                 CallArgs &a) { return findImpl(s, a, "index", false, true); }},
    {"rindex",
     [](Interpreter &, const Value &s, CallArgs &a) {
       return findImpl(s, a, "rindex", true, true);
     }},
    {"count", strCount},
    {"join", strJoin},
    {"format",
     [](Interpreter &interp, const Value &s, CallArgs &a) {
       return Value::string(braceFormat(interp, s.str(), a));
     }},
    {"center", [](Interpreter &, const Value &s,
                  CallArgs &a) { return justify(s, a, "center", '^'); }},
    {"ljust", [](Interpreter &, const Value &s,
                 CallArgs &a) { return justify(s, a, "ljust", '<'); }},
    {"rjust", [](Interpreter &, const Value &s,
                 CallArgs &a) { return justify(s, a, "rjust", '>'); }},
    {"zfill", strZfill},
    {"partition", [](Interpreter &, const Value &s,
                     CallArgs &a) { return partition(s, a, false); }},
    {"rpartition", [](Interpreter &, const Value &s,
                      CallArgs &a) { return partition(s, a, true); }},
    {"removeprefix", [](Interpreter &, const Value &s,
                        CallArgs &a) { return removeAffix(s, a, false); }},
    {"removesuffix", [](Interpreter &, const Value &s,
                        CallArgs &a) { return removeAffix(s, a, true); }},
    {"isdigit", strIs<isDigit>},
    {"isdecimal", strIs<isDigit>},
    {"isnumeric", strIs<isDigit>},
    {"isalpha", strIs<isAlpha>},
    {"isalnum", strIs<alnum>},
    {"isspace", strIs<isSpace>},
    {"islower", [](Interpreter &, const Value &s,
                   CallArgs &) { return caseCheck(s, false); }},
    {"isupper", [](Interpreter &, const Value &s,
                   CallArgs &) { return caseCheck(s, true); }},
    {"istitle", strIsTitle},
};

//===--------------------------------------------------------------------===//
// dict, list, tuple
//===--------------------------------------------------------------------===//

Value dictView(const Value &self, int which) {
  std::vector<Value> items;
  for (const auto &item : self.dict().items)
    items.push_back(which == 0   ? item.first
                    : which == 1 ? item.second
                                 : Value::tuple({item.first, item.second}));
  static const char *const names[] = {"dict_keys", "dict_values", "dict_items"};
  return Value::sequence(Kind::View, std::move(items), names[which]);
}

const Method kDictMethods[] = {
    {"keys",
     [](Interpreter &, const Value &s, CallArgs &a) {
       ArgBinder b("dict.keys()", a, {});
       return dictView(s, 0);
     }},
    {"values",
     [](Interpreter &, const Value &s, CallArgs &a) {
       ArgBinder b("dict.values()", a, {});
       return dictView(s, 1);
     }},
    {"items",
     [](Interpreter &, const Value &s, CallArgs &a) {
       ArgBinder b("dict.items()", a, {});
       return dictView(s, 2);
     }},
    {"get",
     [](Interpreter &, const Value &s, CallArgs &a) {
       ArgBinder b("dict.get()", a, {"key", "default"});
       b.require(1);
       checkHashable(b.get(0));
       const Value *v = s.dict().find(b.get(0));
       return v ? *v : b.get(1, Value::none());
     }},
    {"copy",
     [](Interpreter &, const Value &s, CallArgs &a) {
       ArgBinder b("dict.copy()", a, {});
       return s;
     }},
};

Value seqIndex(Interpreter &, const Value &self, CallArgs &args) {
  ArgBinder b(std::string(self.typeName()) + ".index()", args,
              {"value", "start", "stop"});
  b.require(1);
  const auto &items = self.items();
  int64_t begin, end;
  searchRange(b, 1, static_cast<int64_t>(items.size()), begin, end);
  for (int64_t i = begin; i < end; ++i)
    if (equals(items[i], b.get(0)))
      return Value::integer(i);
  fail(self.kind() == Kind::Tuple ? "tuple.index(x): x not in tuple"
                                  : toRepr(b.get(0)) + " is not in list");
}

Value seqCount(Interpreter &, const Value &self, CallArgs &args) {
  ArgBinder b(std::string(self.typeName()) + ".count()", args, {"value"});
  b.require(1);
  int64_t n = 0;
  for (const Value &item : self.items())
    n += equals(item, b.get(0));
  return Value::integer(n);
}

const Method kListMethods[] = {
    {"index", seqIndex},
    {"count", seqCount},
    {"copy",
     [](Interpreter &, const Value &s, CallArgs &a) {
       ArgBinder b("list.copy()", a, {});
       return Value::list(s.items());
     }},
};

const char *const kListMutators[] = {"append", "clear", "pop",    "reverse",
                                     "insert", "sort",  "extend", "remove"};
const char *const kDictMutators[] = {"clear", "pop", "popitem", "setdefault",
                                     "update"};

template <size_t N>
const Method *lookupMethod(const Method (&table)[N], std::string_view name) {
  for (const Method &m : table)
    if (name == m.name)
      return &m;
  return nullptr;
}

template <size_t N>
bool isListed(const char *const (&names)[N], std::string_view name) {
  for (const char *n : names)
    if (name == n)
      return true;
  return false;
}

} // namespace

bool findMethod(const Value &self, std::string_view name, Value &out) {
  const Method *m = nullptr;
  switch (self.kind()) {
  case Kind::String:
    m = lookupMethod(kStrMethods, name);
    break;
  case Kind::Dict:
    if (isListed(kDictMutators, name)) {
      out = Value::undefined("access to attribute " + reprString(name) +
                             " of 'dict' object is unsafe.");
      return true;
    }
    m = lookupMethod(kDictMethods, name);
    break;
  case Kind::List:
    if (isListed(kListMutators, name)) {
      out = Value::undefined("access to attribute " + reprString(name) +
                             " of 'list' object is unsafe.");
      return true;
    }
    m = lookupMethod(kListMethods, name);
    break;
  case Kind::Tuple:
    if (name == "index" || name == "count")
      m = lookupMethod(kListMethods, name);
    break;
  default:
    break;
  }
  if (!m)
    return false;
  out = Value::object(std::make_shared<BoundMethod>(self, m->fn, m->name));
  return true;
}

//===----------------------------------------------------------------------===//
// Argument binding
//===----------------------------------------------------------------------===//

ArgBinder::ArgBinder(std::string what, CallArgs &args,
                     std::initializer_list<const char *> names)
    : what(std::move(what)), names(names), values(names.size()),
      given(names.size(), false) {
  if (args.positional.size() > this->names.size())
    fail(this->what + " takes at most " + std::to_string(this->names.size()) +
         " argument" + (this->names.size() == 1 ? "" : "s") + " (" +
         std::to_string(args.positional.size()) + " given)");
  for (size_t i = 0; i < args.positional.size(); ++i) {
    values[i] = args.positional[i];
    given[i] = true;
  }
  for (auto &kw : args.keyword) {
    size_t i = 0;
    while (i < this->names.size() && kw.first != this->names[i])
      ++i;
    if (i == this->names.size())
      fail(this->what + " got an unexpected keyword argument " +
           reprString(kw.first));
    if (given[i])
      fail(this->what + " got multiple values for argument " +
           reprString(kw.first));
    values[i] = kw.second;
    given[i] = true;
  }
}

void ArgBinder::require(size_t count) const {
  for (size_t i = 0; i < count; ++i)
    if (!given[i])
      fail(what + " missing required argument " + reprString(names[i]));
}

int64_t ArgBinder::integer(size_t i, int64_t fallback) const {
  if (!given[i])
    return fallback;
  if (!values[i].isIntegral())
    fail(std::string("'") + values[i].typeName() +
         "' object cannot be interpreted as an integer");
  return values[i].asInt();
}

} // namespace chat
} // namespace sits
