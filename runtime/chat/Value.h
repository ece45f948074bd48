//===- Value.h - The values a Jinja chat template computes with -*- C++ -*-===//
//
// A Value is one of Python's values as jinja2 sees them: Undefined, None,
// bool, int, float, str, list, tuple, dict, the lazy sequences filters
// return (generators, dict views), and objects (namespace, loop, macros,
// functions, bound methods). Containers are immutable once built, as
// transformers' ImmutableSandboxedEnvironment makes them; only a namespace
// changes. Values are cheap to copy (scalars inline, the rest shared).
//
//===----------------------------------------------------------------------===//

#ifndef SITS_CHAT_VALUE_H
#define SITS_CHAT_VALUE_H

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace sits {
namespace chat {

class Value;
class Interpreter;
struct CallArgs;

/// Limits that keep a hostile template or input from exhausting the stack or
/// memory; crossing one is a render error, never a crash.
constexpr size_t kMaxValueDepth = 512;         ///< nesting of containers
constexpr size_t kMaxStringBytes = 64u << 20;  ///< any string and the output
constexpr size_t kMaxSequenceItems = 4u << 20; ///< any list, tuple or dict

/// A failure while rendering. `located` is set once the evaluator attached
/// the position of the innermost expression or statement that failed.
struct RenderError {
  std::string message;
  bool located = false;
  uint32_t line = 0, column = 0;
  bool raised = false; ///< the template called raise_exception
};
[[noreturn]] void fail(std::string message);

enum class Kind : uint8_t {
  Undefined,
  None,
  Bool,
  Int,
  Float,
  String,
  List,
  Tuple,
  Iterator, ///< generator-like: always true, no len(), not indexable
  View,     ///< dict_keys/values/items: len() but not indexable
  Dict,
  Object,
};

struct UndefinedData {
  std::string message; ///< what is raised when the value is misused
};

struct SeqData {
  std::vector<Value> items;
  uint32_t depth = 1;
  const char *typeName = "list"; ///< Python's type name (iterators, views)
  bool isRange = false;          ///< printed as range(start, stop[, step])
  int64_t range[3] = {0, 0, 1};
};

struct DictData {
  std::vector<std::pair<Value, Value>> items;
  uint32_t depth = 1;
  /// String keys to their item, for dicts too large to search in order.
  std::unordered_map<std::string_view, size_t> index;
  const Value *find(const Value &key) const;
  const Value *findString(std::string_view key) const;
};

/// Objects: namespaces, loops, macros, functions, bound methods.
class Object {
public:
  virtual ~Object();
  virtual const char *typeName() const = 0;
  /// Attribute lookup: Undefined when missing (the evaluator names it).
  virtual Value getAttr(std::string_view name) const;
  virtual bool isCallable() const { return false; }
  virtual Value call(Interpreter &interp, CallArgs &args) const;
  virtual std::string str() const;
  virtual bool isNamespace() const { return false; }
};

class Value {
public:
  Value() : kind_(Kind::Undefined) {}
  static Value undefined(std::string message);
  static Value none() { return Value(Kind::None); }
  static Value boolean(bool b) {
    Value v(Kind::Bool);
    v.i_ = b;
    return v;
  }
  static Value integer(int64_t i) {
    Value v(Kind::Int);
    v.i_ = i;
    return v;
  }
  static Value real(double f) {
    Value v(Kind::Float);
    v.f_ = f;
    return v;
  }
  static Value string(std::string s);
  static Value list(std::vector<Value> items);
  static Value tuple(std::vector<Value> items);
  /// A sequence of another flavour (Iterator or View) named `typeName`.
  static Value sequence(Kind kind, std::vector<Value> items,
                        const char *typeName);
  /// range(start, stop, step); the caller bounds its length.
  static Value range(int64_t start, int64_t stop, int64_t step);
  /// `items` must hold unique keys (use DictBuilder otherwise).
  static Value dict(std::vector<std::pair<Value, Value>> items);
  static Value object(std::shared_ptr<Object> object);

  Kind kind() const { return kind_; }
  bool isUndefined() const { return kind_ == Kind::Undefined; }
  bool isNone() const { return kind_ == Kind::None; }
  bool isString() const { return kind_ == Kind::String; }
  bool isInt() const { return kind_ == Kind::Int; }
  /// int or bool (Python's bool is an int).
  bool isIntegral() const { return kind_ == Kind::Int || kind_ == Kind::Bool; }
  bool isNumber() const { return isIntegral() || kind_ == Kind::Float; }
  bool isSequence() const {
    return kind_ == Kind::List || kind_ == Kind::Tuple ||
           kind_ == Kind::Iterator || kind_ == Kind::View;
  }
  bool isDict() const { return kind_ == Kind::Dict; }
  bool isObject() const { return kind_ == Kind::Object; }

  bool asBool() const { return i_ != 0; }
  int64_t asInt() const { return i_; }
  double asDouble() const {
    return kind_ == Kind::Float ? f_ : static_cast<double>(i_);
  }
  const std::string &str() const;
  const std::string &undefinedMessage() const;
  const SeqData &seq() const;
  const std::vector<Value> &items() const { return seq().items; }
  const DictData &dict() const;
  Object &object() const;
  /// Identity of containers and objects (Python's `is`).
  const void *identity() const { return ptr_.get(); }

  /// The nesting depth of a container (1 for scalars).
  uint32_t depth() const;

  /// Python truthiness.
  bool truthy() const;
  /// Python's type name ("str", "NoneType", "list" ...).
  const char *typeName() const;

private:
  explicit Value(Kind kind) : kind_(kind) {}
  Kind kind_;
  union {
    int64_t i_ = 0;
    double f_;
  };
  std::shared_ptr<const void> ptr_;
};

/// Positional and keyword arguments of a call.
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};

/// Builds a dict with Python's rules (a repeated key keeps its first place
/// and takes the last value; unhashable keys are an error).
class DictBuilder {
public:
  void set(Value key, Value value);
  Value build();

private:
  std::vector<std::pair<Value, Value>> items_;
  std::unordered_map<std::string, size_t> stringKeys_;
};

// Python semantics.
std::string toStr(const Value &v);  ///< str(v)
std::string toRepr(const Value &v); ///< repr(v)
void appendRepr(std::string &out, const Value &v, size_t depth = 0);
std::string reprString(std::string_view s);
std::string formatFloat(double d); ///< float.__repr__
bool equals(const Value &a, const Value &b, size_t depth = 0);
/// Python's ordering: -1, 0 or 1, or 2 when unordered (NaN); raises
/// TypeError naming `op` when the types do not order.
int compareValues(const Value &a, const Value &b, const char *op = "<",
                  size_t depth = 0);
/// a < b, raising TypeError when the types do not order.
inline bool lessThan(const Value &a, const Value &b) {
  return compareValues(a, b) == -1;
}
/// len(v), raising TypeError when v has no length.
int64_t length(const Value &v);
/// list(v): the items of an iterable, raising TypeError otherwise.
std::vector<Value> iterate(const Value &v);
/// Fails with TypeError unless `v` can be a dict key.
void checkHashable(const Value &v);
/// The error an Undefined raises when misused.
[[noreturn]] void failUndefined(const Value &v);
/// "'dict object' has no attribute 'x'" style messages.
std::string objectTypeRepr(const Value &v);
Value undefinedAttribute(const Value &obj, std::string_view name);
Value undefinedItem(const Value &obj, const Value &key);
/// Fails when a string would exceed kMaxStringBytes.
void checkStringSize(size_t bytes);

} // namespace chat
} // namespace sits

#endif // SITS_CHAT_VALUE_H
