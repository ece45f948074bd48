//===- JsonConfig.cpp - Reading tokenizer.json with error paths -----------===//

#include "JsonConfig.h"

#include "Unicode.h"
#include "sits/Error.h"

using namespace sits;
using namespace sits::tok;

namespace {

const nlohmann::json &nullValue() {
  static const nlohmann::json value;
  return value;
}

const char *kindName(const nlohmann::json &value) {
  if (value.is_number_integer() || value.is_number_unsigned())
    return "an integer";
  if (value.is_number_float())
    return "a number";
  if (value.is_string())
    return "a string";
  if (value.is_boolean())
    return "a boolean";
  if (value.is_array())
    return "an array";
  if (value.is_object())
    return "an object";
  return "null";
}

std::string join(const std::string &path, const std::string &member) {
  return path.empty() ? member : path + "." + member;
}

} // namespace

std::string sits::tok::quoteJson(const std::string &text) {
  return nlohmann::json(text).dump(-1, ' ', false,
                                   nlohmann::json::error_handler_t::replace);
}

void JsonNode::fail(const std::string &message) const {
  throw Error(ErrorCode::InvalidTokenizer,
              (nodePath.empty() ? std::string("tokenizer.json") : nodePath) +
                  ": " + message);
}

JsonNode JsonNode::field(const char *name) const {
  if (!node->is_object())
    fail(std::string("expected an object, got ") + kindName(*node));
  auto it = node->find(name);
  return JsonNode(it == node->end() ? nullValue() : *it, join(nodePath, name));
}

bool JsonNode::has(const char *name) const {
  return node->is_object() && node->contains(name);
}

size_t JsonNode::arraySize() const {
  if (!node->is_array())
    fail(std::string("expected an array, got ") + kindName(*node));
  return node->size();
}

JsonNode JsonNode::element(size_t index) const {
  return JsonNode((*node)[index], nodePath + "[" + std::to_string(index) + "]");
}

std::string JsonNode::asString() const {
  if (!node->is_string())
    fail(std::string("expected a string, got ") + kindName(*node));
  return node->get<std::string>();
}

bool JsonNode::asBool() const {
  if (!node->is_boolean())
    fail(std::string("expected true or false, got ") + kindName(*node));
  return node->get<bool>();
}

int64_t JsonNode::asInteger(int64_t min, int64_t max) const {
  if (node->is_number_unsigned()) {
    uint64_t value = node->get<uint64_t>();
    if (value > static_cast<uint64_t>(max))
      fail("expected an integer from " + std::to_string(min) + " to " +
           std::to_string(max) + ", got " + std::to_string(value));
    return static_cast<int64_t>(value);
  }
  if (!node->is_number_integer())
    fail(std::string("expected an integer, got ") + kindName(*node));
  int64_t value = node->get<int64_t>();
  if (value < min || value > max)
    fail("expected an integer from " + std::to_string(min) + " to " +
         std::to_string(max) + ", got " + std::to_string(value));
  return value;
}

std::string JsonNode::stringField(const char *name) const {
  JsonNode member = field(name);
  if (member.isNull())
    member.fail("missing (a string is required)");
  return member.asString();
}

bool JsonNode::boolField(const char *name, bool fallback) const {
  JsonNode member = field(name);
  return member.isNull() ? fallback : member.asBool();
}

int64_t JsonNode::integerField(const char *name, int64_t min, int64_t max,
                               int64_t fallback) const {
  JsonNode member = field(name);
  return member.isNull() ? fallback : member.asInteger(min, max);
}

std::string JsonNode::type() const {
  JsonNode member = field("type");
  if (member.isNull())
    member.fail("missing (every component names its type)");
  return member.asString();
}

void JsonNode::unsupportedType(
    const std::string &typeName,
    std::initializer_list<const char *> supported) const {
  std::string list;
  for (const char *name : supported)
    list += (list.empty() ? "" : ", ") + std::string(name);
  field("type").fail(quoteJson(typeName) +
                     " is not supported (supported: " + list + ")");
}

std::string JsonNode::charField(const char *name) const {
  JsonNode member = field(name);
  std::string text = member.isNull() ? std::string() : member.asString();
  size_t length = 0;
  if (!text.empty())
    decodeUtf8(text, 0, length);
  if (text.empty() || length != text.size())
    member.fail("expected exactly one character, got " + quoteJson(text));
  return text;
}
