//===- Json.h - A small JSON value, reader and writer ----------*- C++ -*-===//
//
// Enough JSON for the engine metadata, with no dependency: objects keep their
// key order (so written metadata reads the way it was built), integers keep
// 64-bit precision, and the parser bounds nesting depth and never throws.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_RUNTIME_JSON_H
#define SITS_RUNTIME_JSON_H

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace sits {
namespace json {

class Value {
public:
  enum class Kind { Null, Bool, Number, String, Array, Object };

  Value() = default;
  Value(std::nullptr_t) {}
  Value(bool b) : kind(Kind::Bool), boolean(b) {}
  Value(int v) : Value(static_cast<int64_t>(v)) {}
  Value(unsigned v) : Value(static_cast<int64_t>(v)) {}
  Value(int64_t v)
      : kind(Kind::Number), integer(v), number(static_cast<double>(v)),
        isInt(true) {}
  Value(uint64_t v);
  Value(double v) : kind(Kind::Number), number(v) {}
  Value(const char *s) : kind(Kind::String), text(s) {}
  Value(std::string s) : kind(Kind::String), text(std::move(s)) {}

  static Value array() { return Value(Kind::Array); }
  static Value object() { return Value(Kind::Object); }

  Kind getKind() const { return kind; }
  bool isNull() const { return kind == Kind::Null; }
  bool isBool() const { return kind == Kind::Bool; }
  bool isNumber() const { return kind == Kind::Number; }
  bool isString() const { return kind == Kind::String; }
  bool isArray() const { return kind == Kind::Array; }
  bool isObject() const { return kind == Kind::Object; }
  /// A number written without fraction or exponent that fits in int64.
  bool isInteger() const { return kind == Kind::Number && isInt; }

  bool getBool() const { return boolean; }
  double getNumber() const { return number; }
  int64_t getInteger() const { return integer; }
  const std::string &getString() const { return text; }

  // Arrays.
  const std::vector<Value> &elements() const { return items; }
  Value &push(Value v);
  size_t size() const;

  // Objects.
  const std::vector<std::pair<std::string, Value>> &members() const {
    return fields;
  }
  /// Sets `key` (replacing an existing value) and returns the stored value.
  Value &set(const std::string &key, Value v);
  /// The value of `key`, or nullptr when absent or not an object.
  const Value *find(const std::string &key) const;

  /// Serializes; `indent` > 0 pretty-prints.
  std::string write(int indent = 2) const;

private:
  explicit Value(Kind k) : kind(k) {}
  void writeTo(std::string &out, int indent, int depth) const;

  Kind kind = Kind::Null;
  bool boolean = false;
  int64_t integer = 0;
  double number = 0;
  bool isInt = false;
  std::string text;
  std::vector<Value> items;
  std::vector<std::pair<std::string, Value>> fields;

  friend class Parser;
};

/// Parses a complete JSON text. On failure returns false and sets `*error`
/// to the cause with its byte offset. Duplicate keys are an error.
bool parse(const std::string &text, Value *result, std::string *error);

} // namespace json
} // namespace sits

#endif // SITS_RUNTIME_JSON_H
