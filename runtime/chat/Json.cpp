//===- Json.cpp - JSON in (the variables) and out (tojson) ----------------===//

#include "Json.h"

#include "Unicode.h"
#include "sits/Error.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace sits {
namespace chat {

using OrderedJson = nlohmann::ordered_json;

// The deepest nesting of arrays and objects, found before parsing so that
// neither the parser nor the conversion below can exhaust the stack.
static size_t jsonDepth(std::string_view text) {
  size_t depth = 0, deepest = 0;
  bool inString = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (inString) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        inString = false;
    } else if (c == '"') {
      inString = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

static Value fromJson(const OrderedJson &j) {
  switch (j.type()) {
  case OrderedJson::value_t::null:
  case OrderedJson::value_t::discarded:
    return Value::none();
  case OrderedJson::value_t::boolean:
    return Value::boolean(j.get<bool>());
  case OrderedJson::value_t::number_integer:
    return Value::integer(j.get<int64_t>());
  case OrderedJson::value_t::number_unsigned: {
    uint64_t u = j.get<uint64_t>();
    // Python keeps big integers exact; 64 bits is what we have.
    if (u > static_cast<uint64_t>(INT64_MAX))
      return Value::real(static_cast<double>(u));
    return Value::integer(static_cast<int64_t>(u));
  }
  case OrderedJson::value_t::number_float:
    return Value::real(j.get<double>());
  case OrderedJson::value_t::string:
    return Value::string(j.get<std::string>());
  case OrderedJson::value_t::array: {
    std::vector<Value> items;
    items.reserve(j.size());
    for (const OrderedJson &item : j)
      items.push_back(fromJson(item));
    return Value::list(std::move(items));
  }
  case OrderedJson::value_t::object: {
    std::vector<std::pair<Value, Value>> items;
    items.reserve(j.size());
    for (auto it = j.begin(); it != j.end(); ++it)
      items.emplace_back(Value::string(it.key()), fromJson(it.value()));
    return Value::dict(std::move(items));
  }
  case OrderedJson::value_t::binary:
    break;
  }
  fail("unsupported JSON value");
}

Value parseVariables(std::string_view json) {
  if (jsonDepth(json) > kMaxValueDepth)
    throw Error(ErrorCode::InvalidArgument,
                "chat template variables are nested deeper than " +
                    std::to_string(kMaxValueDepth) + " levels");
  OrderedJson parsed;
  try {
    parsed = OrderedJson::parse(json.begin(), json.end());
  } catch (const std::exception &e) {
    throw Error(ErrorCode::InvalidArgument,
                std::string("chat template variables are not valid JSON: ") +
                    e.what());
  }
  if (!parsed.is_object())
    throw Error(ErrorCode::InvalidArgument,
                "chat template variables must be a JSON object, not " +
                    std::string(parsed.type_name()));
  try {
    return fromJson(parsed);
  } catch (const RenderError &e) {
    throw Error(ErrorCode::InvalidArgument,
                "chat template variables: " + e.message);
  }
}

//===----------------------------------------------------------------------===//
// json.dumps
//===----------------------------------------------------------------------===//

namespace {
class Encoder {
public:
  Encoder(const JsonOptions &options) : opts(options) {}

  void encode(const Value &v, size_t level) {
    if (level > kMaxValueDepth)
      fail("Circular reference detected");
    checkStringSize(out.size());
    switch (v.kind()) {
    case Kind::None:
      out += "null";
      return;
    case Kind::Bool:
      out += v.asBool() ? "true" : "false";
      return;
    case Kind::Int:
      out += std::to_string(v.asInt());
      return;
    case Kind::Float:
      out += floatText(v.asDouble());
      return;
    case Kind::String:
      string(v.str());
      return;
    case Kind::List:
    case Kind::Tuple:
      list(v.items(), level);
      return;
    case Kind::Dict:
      dict(v, level);
      return;
    default:
      fail(std::string("Object of type ") + v.typeName() +
           " is not JSON serializable");
    }
  }

  std::string out;

private:
  static std::string floatText(double d) {
    if (std::isnan(d))
      return "NaN";
    if (std::isinf(d))
      return d < 0 ? "-Infinity" : "Infinity";
    return formatFloat(d);
  }

  void string(const std::string &s) {
    out += '"';
    for (char32_t cp : decodeUtf8(s)) {
      switch (cp) {
      case '"':
        out += "\\\"";
        continue;
      case '\\':
        out += "\\\\";
        continue;
      case '\n':
        out += "\\n";
        continue;
      case '\r':
        out += "\\r";
        continue;
      case '\t':
        out += "\\t";
        continue;
      case '\b':
        out += "\\b";
        continue;
      case '\f':
        out += "\\f";
        continue;
      default:
        break;
      }
      if (cp < 0x20 || (opts.ensureAscii && cp >= 0x7F)) {
        auto unit = [&](unsigned u) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", u);
          out += buf;
        };
        if (cp >= 0x10000) {
          unit(0xD800 + ((cp - 0x10000) >> 10));
          unit(0xDC00 + ((cp - 0x10000) & 0x3FF));
        } else {
          unit(cp);
        }
      } else {
        appendUtf8(out, cp);
      }
    }
    out += '"';
  }

  void newline(size_t level) {
    out += '\n';
    for (size_t i = 0; i < level; ++i)
      out += *opts.indent;
  }

  void list(const std::vector<Value> &items, size_t level) {
    if (items.empty()) {
      out += "[]";
      return;
    }
    out += '[';
    if (opts.indent)
      newline(level + 1);
    for (size_t i = 0; i < items.size(); ++i) {
      if (i) {
        out += opts.itemSeparator;
        if (opts.indent)
          newline(level + 1);
      }
      encode(items[i], level + 1);
    }
    if (opts.indent)
      newline(level);
    out += ']';
  }

  std::string keyText(const Value &key) {
    switch (key.kind()) {
    case Kind::String:
      return key.str();
    case Kind::Float:
      return floatText(key.asDouble());
    case Kind::Bool:
      return key.asBool() ? "true" : "false";
    case Kind::None:
      return "null";
    case Kind::Int:
      return std::to_string(key.asInt());
    default:
      fail(std::string("keys must be str, int, float, bool or None, not ") +
           key.typeName());
    }
  }

  void dict(const Value &v, size_t level) {
    std::vector<const std::pair<Value, Value> *> items;
    for (const auto &item : v.dict().items)
      items.push_back(&item);
    if (items.empty()) {
      out += "{}";
      return;
    }
    if (opts.sortKeys)
      std::stable_sort(items.begin(), items.end(),
                       [](const auto *a, const auto *b) {
                         return lessThan(a->first, b->first);
                       });
    out += '{';
    if (opts.indent)
      newline(level + 1);
    bool first = true;
    for (const auto *item : items) {
      std::string key = keyText(item->first);
      if (!first) {
        out += opts.itemSeparator;
        if (opts.indent)
          newline(level + 1);
      }
      first = false;
      string(key);
      out += opts.keySeparator;
      encode(item->second, level + 1);
    }
    if (opts.indent)
      newline(level);
    out += '}';
  }

  const JsonOptions &opts;
};
} // namespace

std::string toJson(const Value &v, const JsonOptions &options) {
  Encoder encoder(options);
  encoder.encode(v, 0);
  checkStringSize(encoder.out.size());
  return std::move(encoder.out);
}

} // namespace chat
} // namespace sits
