//===- Value.cpp - Python semantics of the template values ----------------===//
//
// Printing follows Python exactly (str and repr, the shortest float repr,
// repr's quote choice and escapes), as does equality (1 == 1.0 == True) and
// ordering (TypeError across types).
//
//===----------------------------------------------------------------------===//

#include "Value.h"

#include "Unicode.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace sits {
namespace chat {

void fail(std::string message) { throw RenderError{std::move(message)}; }

void checkStringSize(size_t bytes) {
  if (bytes > kMaxStringBytes)
    fail("string longer than the limit of " +
         std::to_string(kMaxStringBytes >> 20) + " MiB");
}

Object::~Object() = default;
Value Object::getAttr(std::string_view) const { return Value(); }
Value Object::call(Interpreter &, CallArgs &) const {
  fail(std::string("'") + typeName() + "' object is not callable");
}
std::string Object::str() const {
  return std::string("<") + typeName() + " object>";
}

Value Value::undefined(std::string message) {
  Value v(Kind::Undefined);
  v.ptr_ = std::make_shared<UndefinedData>(UndefinedData{std::move(message)});
  return v;
}

Value Value::string(std::string s) {
  checkStringSize(s.size());
  Value v(Kind::String);
  v.ptr_ = std::make_shared<const std::string>(std::move(s));
  return v;
}

static uint32_t depthOf(const std::vector<Value> &items) {
  uint32_t depth = 0;
  for (const Value &item : items)
    depth = std::max(depth, item.depth());
  if (depth + 1 > kMaxValueDepth)
    fail("value nested deeper than " + std::to_string(kMaxValueDepth) +
         " levels");
  return depth + 1;
}

Value Value::sequence(Kind kind, std::vector<Value> items,
                      const char *typeName) {
  if (items.size() > kMaxSequenceItems)
    fail("sequence longer than the limit of " +
         std::to_string(kMaxSequenceItems) + " items");
  auto data = std::make_shared<SeqData>();
  data->depth = depthOf(items);
  data->items = std::move(items);
  data->typeName = typeName;
  Value v(kind);
  v.ptr_ = std::move(data);
  return v;
}

Value Value::list(std::vector<Value> items) {
  return sequence(Kind::List, std::move(items), "list");
}

Value Value::tuple(std::vector<Value> items) {
  return sequence(Kind::Tuple, std::move(items), "tuple");
}

Value Value::range(int64_t start, int64_t stop, int64_t step) {
  // The caller checked the length against the sandbox's MAX_RANGE.
  __int128 count = 0;
  if (step > 0 && start < stop)
    count = ((__int128)stop - start + step - 1) / step;
  else if (step < 0 && start > stop)
    count = ((__int128)start - stop - step - 1) / -step;
  auto data = std::make_shared<SeqData>();
  for (__int128 k = 0; k < count; ++k)
    data->items.push_back(
        Value::integer(static_cast<int64_t>(start + k * step)));
  data->isRange = true;
  data->range[0] = start, data->range[1] = stop, data->range[2] = step;
  Value v(Kind::List);
  v.ptr_ = std::move(data);
  return v;
}

Value Value::dict(std::vector<std::pair<Value, Value>> items) {
  if (items.size() > kMaxSequenceItems)
    fail("dict larger than the limit of " + std::to_string(kMaxSequenceItems) +
         " items");
  auto data = std::make_shared<DictData>();
  uint32_t depth = 0;
  for (const auto &item : items)
    depth = std::max({depth, item.first.depth(), item.second.depth()});
  if (depth + 1 > kMaxValueDepth)
    fail("value nested deeper than " + std::to_string(kMaxValueDepth) +
         " levels");
  data->depth = depth + 1;
  data->items = std::move(items);
  if (data->items.size() > 16)
    for (size_t i = 0; i < data->items.size(); ++i)
      if (data->items[i].first.isString())
        data->index.emplace(data->items[i].first.str(), i);
  Value v(Kind::Dict);
  v.ptr_ = std::move(data);
  return v;
}

Value Value::object(std::shared_ptr<Object> object) {
  Value v(Kind::Object);
  v.ptr_ = std::move(object);
  return v;
}

const std::string &Value::str() const {
  return *static_cast<const std::string *>(ptr_.get());
}
const std::string &Value::undefinedMessage() const {
  static const std::string unnamed = "value is undefined";
  return ptr_ ? static_cast<const UndefinedData *>(ptr_.get())->message
              : unnamed;
}
const SeqData &Value::seq() const {
  return *static_cast<const SeqData *>(ptr_.get());
}
const DictData &Value::dict() const {
  return *static_cast<const DictData *>(ptr_.get());
}
Object &Value::object() const {
  return *const_cast<Object *>(static_cast<const Object *>(ptr_.get()));
}

uint32_t Value::depth() const {
  if (isSequence())
    return seq().depth;
  if (kind_ == Kind::Dict)
    return dict().depth;
  return 1;
}

bool Value::truthy() const {
  switch (kind_) {
  case Kind::Undefined:
  case Kind::None:
    return false;
  case Kind::Bool:
  case Kind::Int:
    return i_ != 0;
  case Kind::Float:
    return f_ != 0.0;
  case Kind::String:
    return !str().empty();
  case Kind::List:
  case Kind::Tuple:
  case Kind::View:
    return !items().empty();
  case Kind::Iterator:
    return true;
  case Kind::Dict:
    return !dict().items.empty();
  case Kind::Object:
    return true;
  }
  return false;
}

const char *Value::typeName() const {
  switch (kind_) {
  case Kind::Undefined:
    return "Undefined";
  case Kind::None:
    return "NoneType";
  case Kind::Bool:
    return "bool";
  case Kind::Int:
    return "int";
  case Kind::Float:
    return "float";
  case Kind::String:
    return "str";
  case Kind::List:
  case Kind::Tuple:
  case Kind::Iterator:
  case Kind::View:
    return seq().typeName;
  case Kind::Dict:
    return "dict";
  case Kind::Object:
    return object().typeName();
  }
  return "object";
}

const Value *DictData::findString(std::string_view key) const {
  if (!index.empty()) {
    auto it = index.find(key);
    return it == index.end() ? nullptr : &items[it->second].second;
  }
  for (const auto &item : items)
    if (item.first.isString() && item.first.str() == key)
      return &item.second;
  return nullptr;
}

const Value *DictData::find(const Value &key) const {
  if (key.isString())
    return findString(key.str());
  for (const auto &item : items)
    if (equals(item.first, key))
      return &item.second;
  return nullptr;
}

void DictBuilder::set(Value key, Value value) {
  checkHashable(key);
  if (key.isString()) {
    auto inserted = stringKeys_.emplace(key.str(), items_.size());
    if (!inserted.second)
      items_[inserted.first->second].second = std::move(value);
    else
      items_.emplace_back(std::move(key), std::move(value));
    return;
  }
  for (auto &item : items_) {
    if (equals(item.first, key)) {
      item.second = std::move(value);
      return;
    }
  }
  items_.emplace_back(std::move(key), std::move(value));
}

Value DictBuilder::build() { return Value::dict(std::move(items_)); }

//===----------------------------------------------------------------------===//
// Printing
//===----------------------------------------------------------------------===//

std::string formatFloat(double d) {
  if (std::isnan(d))
    return "nan";
  if (std::isinf(d))
    return d < 0 ? "-inf" : "inf";
  char buf[64];
  auto result =
      std::to_chars(buf, buf + sizeof(buf), d, std::chars_format::scientific);
  std::string_view text(buf, result.ptr - buf);
  bool negative = text[0] == '-';
  if (negative)
    text.remove_prefix(1);
  size_t e = text.find('e');
  std::string digits;
  for (char c : text.substr(0, e))
    if (c != '.')
      digits += c;
  int exponent = std::atoi(std::string(text.substr(e + 1)).c_str());
  int decpt = exponent + 1;
  std::string out = negative ? "-" : "";
  int ndigits = static_cast<int>(digits.size());
  if (decpt > -4 && decpt <= 16) {
    if (decpt <= 0) {
      out += "0." + std::string(-decpt, '0') + digits;
    } else if (decpt >= ndigits) {
      out += digits + std::string(decpt - ndigits, '0') + ".0";
    } else {
      out += digits.substr(0, decpt) + "." + digits.substr(decpt);
    }
    return out;
  }
  out += digits[0];
  if (ndigits > 1)
    out += "." + digits.substr(1);
  char exp[16];
  std::snprintf(exp, sizeof(exp), "e%c%02d", exponent < 0 ? '-' : '+',
                std::abs(exponent));
  return out + exp;
}

std::string reprString(std::string_view s) {
  bool hasSingle = s.find('\'') != std::string_view::npos;
  bool hasDouble = s.find('"') != std::string_view::npos;
  char quote = hasSingle && !hasDouble ? '"' : '\'';
  std::string out(1, quote);
  for (char32_t cp : decodeUtf8(s)) {
    if (cp == static_cast<char32_t>(quote) || cp == '\\') {
      out += '\\';
      out += static_cast<char>(cp);
    } else if (cp == '\n') {
      out += "\\n";
    } else if (cp == '\r') {
      out += "\\r";
    } else if (cp == '\t') {
      out += "\\t";
    } else if (!isPrintable(cp)) {
      char buf[16];
      if (cp < 0x100)
        std::snprintf(buf, sizeof(buf), "\\x%02x", static_cast<unsigned>(cp));
      else if (cp < 0x10000)
        std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(cp));
      else
        std::snprintf(buf, sizeof(buf), "\\U%08x", static_cast<unsigned>(cp));
      out += buf;
    } else {
      appendUtf8(out, cp);
    }
  }
  out += quote;
  return out;
}

static void appendItems(std::string &out, const std::vector<Value> &items,
                        size_t depth) {
  for (size_t i = 0; i < items.size(); ++i) {
    if (i)
      out += ", ";
    appendRepr(out, items[i], depth + 1);
  }
}

void appendRepr(std::string &out, const Value &v, size_t depth) {
  if (depth > kMaxValueDepth)
    fail("value nested too deeply (or containing itself) to print");
  checkStringSize(out.size());
  switch (v.kind()) {
  case Kind::Undefined:
    out += "Undefined";
    return;
  case Kind::String:
    out += reprString(v.str());
    return;
  case Kind::List:
    if (v.seq().isRange) {
      const int64_t *r = v.seq().range;
      out += "range(" + std::to_string(r[0]) + ", " + std::to_string(r[1]);
      if (r[2] != 1)
        out += ", " + std::to_string(r[2]);
      out += ")";
      return;
    }
    out += '[';
    appendItems(out, v.items(), depth);
    out += ']';
    return;
  case Kind::Tuple:
    out += '(';
    appendItems(out, v.items(), depth);
    if (v.items().size() == 1)
      out += ',';
    out += ')';
    return;
  case Kind::View:
    out += v.typeName();
    out += "([";
    appendItems(out, v.items(), depth);
    out += "])";
    return;
  case Kind::Iterator:
    out += "<";
    out += v.typeName();
    out += " object>";
    return;
  case Kind::Dict: {
    out += '{';
    bool first = true;
    for (const auto &item : v.dict().items) {
      if (!first)
        out += ", ";
      first = false;
      appendRepr(out, item.first, depth + 1);
      out += ": ";
      appendRepr(out, item.second, depth + 1);
    }
    out += '}';
    return;
  }
  default:
    out += toStr(v);
    return;
  }
}

std::string toRepr(const Value &v) {
  std::string out;
  appendRepr(out, v);
  return out;
}

std::string toStr(const Value &v) {
  switch (v.kind()) {
  case Kind::Undefined:
    return "";
  case Kind::None:
    return "None";
  case Kind::Bool:
    return v.asBool() ? "True" : "False";
  case Kind::Int:
    return std::to_string(v.asInt());
  case Kind::Float:
    return formatFloat(v.asDouble());
  case Kind::String:
    return v.str();
  case Kind::Object: {
    // A namespace can hold itself: count nested object printing, whose
    // depth the container printing above cannot see.
    static thread_local size_t objectDepth = 0;
    if (objectDepth >= kMaxValueDepth)
      fail("value nested too deeply (or containing itself) to print");
    ++objectDepth;
    try {
      std::string text = v.object().str();
      --objectDepth;
      return text;
    } catch (...) {
      --objectDepth;
      throw;
    }
  }
  default:
    return toRepr(v);
  }
}

//===----------------------------------------------------------------------===//
// Comparison
//===----------------------------------------------------------------------===//

// Python compares int and float exactly, not through a rounded double.
static int compareIntFloat(int64_t i, double f) {
  if (std::isnan(f))
    return 2; // unordered
  if (f >= 9223372036854775808.0)
    return -1;
  if (f < -9223372036854775808.0)
    return 1;
  double t = std::trunc(f);
  int64_t ti = static_cast<int64_t>(t);
  if (i != ti)
    return i < ti ? -1 : 1;
  if (f == t)
    return 0;
  return f > t ? -1 : 1;
}

// -1, 0, 1, or 2 when unordered (NaN).
static int compareNumbers(const Value &a, const Value &b) {
  if (a.isIntegral() && b.isIntegral())
    return a.asInt() < b.asInt() ? -1 : a.asInt() > b.asInt();
  if (a.isIntegral())
    return compareIntFloat(a.asInt(), b.asDouble());
  if (b.isIntegral()) {
    int c = compareIntFloat(b.asInt(), a.asDouble());
    return c == 2 ? 2 : -c;
  }
  double x = a.asDouble(), y = b.asDouble();
  if (std::isnan(x) || std::isnan(y))
    return 2;
  return x < y ? -1 : x > y;
}

bool equals(const Value &a, const Value &b, size_t depth) {
  if (depth > kMaxValueDepth)
    fail("values nested too deeply (or containing themselves) to compare");
  if (a.isNumber() && b.isNumber())
    return compareNumbers(a, b) == 0;
  if (a.kind() != b.kind())
    return false;
  switch (a.kind()) {
  case Kind::Undefined:
  case Kind::None:
    return true;
  case Kind::String:
    return a.str() == b.str();
  case Kind::List:
  case Kind::Tuple:
  case Kind::View: {
    if (a.kind() == Kind::View && a.typeName() != b.typeName())
      return false;
    const auto &x = a.items(), &y = b.items();
    if (x.size() != y.size())
      return false;
    for (size_t i = 0; i < x.size(); ++i)
      if (!equals(x[i], y[i], depth + 1))
        return false;
    return true;
  }
  case Kind::Dict: {
    const auto &x = a.dict().items;
    if (x.size() != b.dict().items.size())
      return false;
    for (const auto &item : x) {
      const Value *other = b.dict().find(item.first);
      if (!other || !equals(item.second, *other, depth + 1))
        return false;
    }
    return true;
  }
  default:
    return a.identity() == b.identity();
  }
}

int compareValues(const Value &a, const Value &b, const char *op,
                  size_t depth) {
  if (depth > kMaxValueDepth)
    fail("values nested too deeply (or containing themselves) to compare");
  if (a.isUndefined())
    failUndefined(a);
  if (b.isUndefined())
    failUndefined(b);
  if (a.isNumber() && b.isNumber())
    return compareNumbers(a, b);
  if (a.isString() && b.isString()) {
    int c = a.str().compare(b.str()); // UTF-8 byte order: code point order
    return c < 0 ? -1 : c > 0;
  }
  if ((a.kind() == Kind::List || a.kind() == Kind::Tuple) &&
      a.kind() == b.kind()) {
    const auto &x = a.items(), &y = b.items();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i)
      if (!equals(x[i], y[i], depth + 1))
        return compareValues(x[i], y[i], op, depth + 1);
    return x.size() < y.size() ? -1 : x.size() > y.size();
  }
  fail(std::string("'") + op + "' not supported between instances of '" +
       a.typeName() + "' and '" + b.typeName() + "'");
}

int64_t length(const Value &v) {
  switch (v.kind()) {
  case Kind::Undefined:
    return 0;
  case Kind::String:
    return static_cast<int64_t>(codePointCount(v.str()));
  case Kind::List:
  case Kind::Tuple:
  case Kind::View:
    return static_cast<int64_t>(v.items().size());
  case Kind::Dict:
    return static_cast<int64_t>(v.dict().items.size());
  default:
    fail(std::string("object of type '") + v.typeName() + "' has no len()");
  }
}

std::vector<Value> iterate(const Value &v) {
  switch (v.kind()) {
  case Kind::Undefined:
    return {};
  case Kind::String: {
    std::vector<Value> out;
    std::string cp;
    for (char32_t c : decodeUtf8(v.str())) {
      cp.clear();
      appendUtf8(cp, c);
      out.push_back(Value::string(cp));
    }
    return out;
  }
  case Kind::List:
  case Kind::Tuple:
  case Kind::Iterator:
  case Kind::View:
    return v.items();
  case Kind::Dict: {
    std::vector<Value> keys;
    keys.reserve(v.dict().items.size());
    for (const auto &item : v.dict().items)
      keys.push_back(item.first);
    return keys;
  }
  default:
    fail(std::string("'") + v.typeName() + "' object is not iterable");
  }
}

void checkHashable(const Value &v) {
  if (v.kind() == Kind::List || v.kind() == Kind::Dict ||
      v.kind() == Kind::View)
    fail(std::string("unhashable type: '") + v.typeName() + "'");
  if (v.kind() == Kind::Tuple)
    for (const Value &item : v.items())
      checkHashable(item);
}

void failUndefined(const Value &v) { fail(v.undefinedMessage()); }

std::string objectTypeRepr(const Value &v) {
  if (v.isNone())
    return "None";
  return std::string(v.typeName()) + " object";
}

Value undefinedAttribute(const Value &obj, std::string_view name) {
  return Value::undefined(reprString(objectTypeRepr(obj)) +
                          " has no attribute " + reprString(name));
}

Value undefinedItem(const Value &obj, const Value &key) {
  if (key.isString())
    return undefinedAttribute(obj, key.str());
  return Value::undefined(objectTypeRepr(obj) + " has no element " +
                          toRepr(key));
}

} // namespace chat
} // namespace sits
