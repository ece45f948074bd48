//===- Globals.cpp - range, dict, namespace and transformers' globals -----===//
//
// jinja2's globals (range with the sandbox's 100000 limit, dict, namespace,
// joiner, cycler) and the ones transformers adds: raise_exception, whose
// message becomes the render error, and strftime_now, which formats the
// current local time (or the time a caller fixed, for reproducible prompts).
//
//===----------------------------------------------------------------------===//

#include "Builtins.h"

#include "Interpreter.h"

#include <cstdio>
#include <ctime>

namespace sits {
namespace chat {

namespace {

class Function : public Object {
public:
  Function(const char *name, FunctionFn fn) : name(name), fn(fn) {}
  const char *typeName() const override { return "function"; }
  bool isCallable() const override { return true; }
  Value call(Interpreter &interp, CallArgs &args) const override {
    return fn(interp, args);
  }
  Value getAttr(std::string_view attr) const override;
  std::string str() const override {
    return std::string("<function ") + name + ">";
  }

private:
  const char *name;
  FunctionFn fn;
};

// The sandbox's safe_range: at most MAX_RANGE = 100000 items.
Value rangeFn(Interpreter &, CallArgs &args) {
  if (!args.keyword.empty())
    fail("range() takes no keyword arguments");
  const auto &a = args.positional;
  if (a.empty() || a.size() > 3)
    fail("range expected at most 3 arguments, got " + std::to_string(a.size()));
  for (const Value &v : a)
    if (!v.isIntegral())
      fail(std::string("'") + v.typeName() +
           "' object cannot be interpreted as an integer");
  int64_t start = a.size() == 1 ? 0 : a[0].asInt();
  int64_t stop = a.size() == 1 ? a[0].asInt() : a[1].asInt();
  int64_t step = a.size() == 3 ? a[2].asInt() : 1;
  if (step == 0)
    fail("range() arg 3 must not be zero");
  __int128 count = 0;
  if (step > 0 && start < stop)
    count = ((__int128)stop - start + step - 1) / step;
  else if (step < 0 && start > stop)
    count = ((__int128)start - stop - step - 1) / -(__int128)step;
  if (count > 100000)
    fail("Range too big. The sandbox blocks ranges larger than MAX_RANGE "
         "(100000).");
  return Value::range(start, stop, step);
}

// dict(mapping or pairs, **kwargs)
Value dictFn(Interpreter &, CallArgs &args) {
  if (args.positional.size() > 1)
    fail("dict expected at most 1 argument, got " +
         std::to_string(args.positional.size()));
  DictBuilder out;
  if (!args.positional.empty()) {
    const Value &source = args.positional[0];
    if (source.isDict()) {
      for (const auto &item : source.dict().items)
        out.set(item.first, item.second);
    } else {
      std::vector<Value> pairs = iterate(source);
      for (size_t i = 0; i < pairs.size(); ++i) {
        std::vector<Value> pair = iterate(pairs[i]);
        if (pair.size() != 2)
          fail("dictionary update sequence element #" + std::to_string(i) +
               " has length " + std::to_string(pair.size()) +
               "; 2 is required");
        out.set(pair[0], pair[1]);
      }
    }
  }
  for (auto &kw : args.keyword)
    out.set(Value::string(kw.first), kw.second);
  return out.build();
}

Value fromkeysFn(Interpreter &, CallArgs &args) {
  ArgBinder b("dict.fromkeys()", args, {"iterable", "value"});
  b.require(1);
  DictBuilder out;
  Value value = b.get(1, Value::none());
  for (Value &key : iterate(b.get(0)))
    out.set(std::move(key), value);
  return out.build();
}

Value Function::getAttr(std::string_view attr) const {
  // transformers' TemplateDict exposes dict.fromkeys.
  if (fn == dictFn && attr == "fromkeys")
    return makeFunction("fromkeys", fromkeysFn);
  return Value();
}

Value namespaceFn(Interpreter &interp, CallArgs &args) {
  Value attrs = dictFn(interp, args);
  auto ns = std::make_shared<NamespaceObject>();
  for (const auto &item : attrs.dict().items) {
    if (!item.first.isString())
      fail("namespace attribute names must be strings");
    checkNamespaceName(item.first.str());
    ns->setAttr(item.first.str(), item.second);
  }
  interp.adopt(ns);
  return Value::object(ns);
}

Value raiseExceptionFn(Interpreter &, CallArgs &args) {
  ArgBinder b("raise_exception()", args, {"message"});
  b.require(1);
  RenderError error{toStr(b.get(0))};
  error.raised = true;
  throw error;
}

// Days since 1970-01-01 of a civil date (Howard Hinnant's algorithm).
int64_t daysFromCivil(int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const unsigned yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<int64_t>(doe) - 719468;
}

// A fixed "YYYY-MM-DD HH:MM:SS[.ffffff]" local time.
bool parseNow(const std::string &text, std::tm &tm, long &micros) {
  int y, mo, d, h, mi, s;
  char sep;
  int consumed = 0;
  if (std::sscanf(text.c_str(), "%d-%d-%d%c%d:%d:%d%n", &y, &mo, &d, &sep, &h,
                  &mi, &s, &consumed) != 7 ||
      (sep != ' ' && sep != 'T') || mo < 1 || mo > 12 || d < 1 || d > 31 ||
      h < 0 || h > 23 || mi < 0 || mi > 59 || s < 0 || s > 60)
    return false;
  micros = 0;
  const char *rest = text.c_str() + consumed;
  if (*rest == '.') {
    ++rest;
    int digits = 0;
    while (*rest >= '0' && *rest <= '9' && digits < 6) {
      micros = micros * 10 + (*rest++ - '0');
      ++digits;
    }
    for (; digits < 6; ++digits)
      micros *= 10;
  }
  if (*rest)
    return false;
  tm = std::tm();
  tm.tm_year = y - 1900;
  tm.tm_mon = mo - 1;
  tm.tm_mday = d;
  tm.tm_hour = h;
  tm.tm_min = mi;
  tm.tm_sec = s;
  int64_t days = daysFromCivil(y, mo, d);
  tm.tm_wday = static_cast<int>(((days % 7) + 11) % 7); // 1970-01-01: Thursday
  tm.tm_yday = static_cast<int>(days - daysFromCivil(y, 1, 1));
  tm.tm_isdst = -1;
  return true;
}

// datetime.now().strftime(format): Python handles %f, %z and %Z itself
// (a naive datetime has no zone), the C library the rest.
Value strftimeNowFn(Interpreter &interp, CallArgs &args) {
  ArgBinder b("strftime_now()", args, {"format"});
  b.require(1);
  if (!b.get(0).isString())
    fail(std::string("strftime() argument 1 must be str, not ") +
         b.get(0).typeName());
  const std::string &format = b.get(0).str();
  std::tm tm{};
  long micros = 0;
  if (!interp.now().empty()) {
    if (!parseNow(interp.now(), tm, micros))
      fail("the fixed time " + reprString(interp.now()) +
           " is not 'YYYY-MM-DD HH:MM:SS[.ffffff]'");
  } else {
    std::timespec ts;
    std::timespec_get(&ts, TIME_UTC);
    std::time_t seconds = ts.tv_sec;
    localtime_r(&seconds, &tm);
    micros = ts.tv_nsec / 1000;
  }
  std::string expanded;
  for (size_t i = 0; i < format.size(); ++i) {
    if (format[i] == '%' && i + 1 < format.size()) {
      char c = format[i + 1];
      if (c == 'f') {
        char buf[8];
        std::snprintf(buf, sizeof(buf), "%06ld", micros);
        expanded += buf;
        ++i;
        continue;
      }
      if (c == 'z' || c == 'Z') {
        ++i;
        continue;
      }
      expanded += '%';
      expanded += c;
      ++i;
      continue;
    }
    expanded += format[i];
  }
  if (expanded.empty())
    return Value::string("");
  // strftime gives no way to tell "too small" from "empty": grow, bounded.
  for (size_t size = 256; size <= (1u << 20); size *= 4) {
    std::string buf(size, '\0');
    size_t n = std::strftime(buf.data(), buf.size(), expanded.c_str(), &tm);
    if (n > 0) {
      buf.resize(n);
      return Value::string(std::move(buf));
    }
  }
  return Value::string("");
}

// joiner(sep): "" the first call, sep after.
class Joiner : public Object {
public:
  explicit Joiner(std::string sep) : sep(std::move(sep)) {}
  const char *typeName() const override { return "Joiner"; }
  bool isCallable() const override { return true; }
  Value call(Interpreter &, CallArgs &args) const override {
    ArgBinder b("joiner()", args, {});
    if (!used) {
      used = true;
      return Value::string("");
    }
    return Value::string(sep);
  }

private:
  std::string sep;
  mutable bool used = false;
};

Value joinerFn(Interpreter &, CallArgs &args) {
  ArgBinder b("joiner()", args, {"sep"});
  return Value::object(
      std::make_shared<Joiner>(b.has(0) ? toStr(b.get(0)) : ", "));
}

// cycler(*items): .next(), .current, .reset().
class Cycler : public Object {
public:
  explicit Cycler(std::vector<Value> items) : items(std::move(items)) {}
  const char *typeName() const override { return "Cycler"; }
  Value getAttr(std::string_view name) const override;
  const std::vector<Value> items;
  mutable size_t pos = 0;
  std::weak_ptr<const Cycler> self; // for the bound methods
};

class CyclerMethod : public Object {
public:
  CyclerMethod(std::shared_ptr<const Cycler> cycler, bool next)
      : cycler(std::move(cycler)), isNext(next) {}
  const char *typeName() const override { return "method"; }
  bool isCallable() const override { return true; }
  Value call(Interpreter &, CallArgs &args) const override {
    ArgBinder b(isNext ? "Cycler.next()" : "Cycler.reset()", args, {});
    if (!isNext) {
      cycler->pos = 0;
      return Value::none();
    }
    Value v = cycler->items[cycler->pos];
    cycler->pos = (cycler->pos + 1) % cycler->items.size();
    return v;
  }

private:
  std::shared_ptr<const Cycler> cycler;
  bool isNext;
};

Value Cycler::getAttr(std::string_view name) const {
  if (name == "current")
    return items[pos];
  if (name == "items")
    return Value::list(items);
  if (name == "next" || name == "reset")
    return Value::object(
        std::make_shared<CyclerMethod>(self.lock(), name == "next"));
  return Value();
}

Value cyclerFn(Interpreter &, CallArgs &args) {
  if (!args.keyword.empty())
    fail("cycler() takes no keyword arguments");
  if (args.positional.empty())
    fail("at least one item has to be provided");
  auto cycler = std::make_shared<Cycler>(args.positional);
  cycler->self = cycler;
  return Value::object(cycler);
}

struct GlobalEntry {
  const char *name;
  FunctionFn fn;
};
const GlobalEntry kGlobals[] = {
    {"range", rangeFn},
    {"dict", dictFn},
    {"namespace", namespaceFn},
    {"raise_exception", raiseExceptionFn},
    {"strftime_now", strftimeNowFn},
    {"joiner", joinerFn},
    {"cycler", cyclerFn},
};

} // namespace

Value makeFunction(const char *name, FunctionFn fn) {
  return Value::object(std::make_shared<Function>(name, fn));
}

Value findGlobal(std::string_view name) {
  for (const GlobalEntry &g : kGlobals)
    if (name == g.name)
      return makeFunction(g.name, g.fn);
  return Value();
}

void checkNamespaceName(std::string_view name) {
  if (!name.empty() && name[0] == '_')
    fail("Chat templates cannot store underscore-prefixed attributes on a "
         "namespace, but got " +
         reprString(name) + ". Please rename the attribute.");
}

Value NamespaceObject::getAttr(std::string_view name) const {
  for (const auto &attr : attrs)
    if (attr.first == name)
      return attr.second;
  return Value();
}

void NamespaceObject::setAttr(const std::string &name, Value value) {
  for (auto &attr : attrs) {
    if (attr.first == name) {
      attr.second = std::move(value);
      return;
    }
  }
  attrs.emplace_back(name, std::move(value));
}

std::string NamespaceObject::str() const {
  std::string out = "<Namespace {";
  for (size_t i = 0; i < attrs.size(); ++i) {
    if (i)
      out += ", ";
    out += reprString(attrs[i].first) + ": ";
    appendRepr(out, attrs[i].second, 1);
  }
  return out + "}>";
}

std::vector<std::pair<std::string, Value>> NamespaceObject::takeAll() {
  return std::move(attrs);
}

} // namespace chat
} // namespace sits
