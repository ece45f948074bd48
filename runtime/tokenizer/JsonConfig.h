//===- JsonConfig.h - Reading tokenizer.json with error paths ---*- C++ -*-===//
//
// A view of one JSON value together with its path in tokenizer.json
// ("normalizer.normalizers[1].type"), so that every error about a field names
// where it is. Internal to the tokenizer library: nlohmann::json stays out of
// the public headers.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_RUNTIME_TOKENIZER_JSONCONFIG_H
#define SITS_RUNTIME_TOKENIZER_JSONCONFIG_H

#include <nlohmann/json.hpp>

#include <cstdint>
#include <initializer_list>
#include <string>

namespace sits::tok {

class JsonNode {
public:
  JsonNode(const nlohmann::json &value, std::string path)
      : node(&value), nodePath(std::move(path)) {}

  const nlohmann::json &value() const { return *node; }
  const std::string &path() const { return nodePath; }
  bool isNull() const { return node->is_null(); }

  /// Throws Error(InvalidTokenizer) "PATH: MESSAGE".
  [[noreturn]] void fail(const std::string &message) const;

  /// The member `name` of this object (a null node when absent). Fails when
  /// this is not an object.
  JsonNode field(const char *name) const;
  bool has(const char *name) const;
  /// The elements of this array. Fails when this is not an array.
  size_t arraySize() const;
  JsonNode element(size_t index) const;

  std::string asString() const;
  bool asBool() const;
  int64_t asInteger(int64_t min, int64_t max) const;

  /// Typed members: required ones fail when absent or null; the others
  /// return `fallback` then.
  std::string stringField(const char *name) const;
  bool boolField(const char *name, bool fallback) const;
  int64_t integerField(const char *name, int64_t min, int64_t max,
                       int64_t fallback) const;

  /// The "type" member of a component; fails when it is missing.
  std::string type() const;
  /// Fails naming `typeName` as unsupported and listing the supported ones.
  [[noreturn]] void
  unsupportedType(const std::string &typeName,
                  std::initializer_list<const char *> supported) const;
  /// The one character of a string field (Metaspace's replacement, Strip's
  /// content), as UTF-8.
  std::string charField(const char *name) const;

private:
  const nlohmann::json *node;
  std::string nodePath;
};

/// Quotes `text` as JSON does, for messages.
std::string quoteJson(const std::string &text);

} // namespace sits::tok

#endif // SITS_RUNTIME_TOKENIZER_JSONCONFIG_H
