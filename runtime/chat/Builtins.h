//===- Builtins.h - Filters, tests, methods, globals, operators -*- C++ -*-===//
//
// What templates call: jinja2's filters and tests (with transformers'
// tojson), the methods of str, dict and list that the immutable sandbox
// allows, the globals (range, dict, namespace, raise_exception,
// strftime_now, joiner, cycler) and Python's operators.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_CHAT_BUILTINS_H
#define SITS_CHAT_BUILTINS_H

#include "Ast.h"
#include "Value.h"

#include <initializer_list>
#include <string>
#include <string_view>

namespace sits {
namespace chat {

class Interpreter;

using FilterFn = Value (*)(Interpreter &interp, const Value &input,
                           CallArgs &args);
using TestFn = bool (*)(Interpreter &interp, const Value &input,
                        CallArgs &args);
using MethodFn = Value (*)(Interpreter &interp, const Value &self,
                           CallArgs &args);
using FunctionFn = Value (*)(Interpreter &interp, CallArgs &args);

struct Builtin {
  const char *name;
  FilterFn filter;
  TestFn test;
};

const Builtin *findFilter(std::string_view name);
const Builtin *findTest(std::string_view name);

/// Binds call arguments to named parameters the way Python does, with
/// Python's TypeError messages.
class ArgBinder {
public:
  ArgBinder(std::string what, CallArgs &args,
            std::initializer_list<const char *> names);
  bool has(size_t i) const { return given[i]; }
  const Value &get(size_t i) const { return values[i]; }
  Value get(size_t i, Value fallback) const {
    return given[i] ? values[i] : std::move(fallback);
  }
  /// Fails unless the first `count` parameters were given.
  void require(size_t count) const;
  /// An integer parameter (bool counts, as in Python).
  int64_t integer(size_t i, int64_t fallback) const;

private:
  std::string what;
  std::vector<const char *> names;
  std::vector<Value> values;
  std::vector<bool> given;
};

/// A method of `self` (str, dict, list, tuple) bound to it, or an unsafe
/// Undefined for the methods that mutate (the sandbox refuses them when
/// called); false when `self` has no such method.
bool findMethod(const Value &self, std::string_view name, Value &out);

/// A global function or object (range, dict, namespace ...) or Undefined.
Value findGlobal(std::string_view name);

/// A callable object for a builtin function.
Value makeFunction(const char *name, FunctionFn fn);

/// A namespace (the only object a template can change).
class NamespaceObject : public Object {
public:
  const char *typeName() const override { return "Namespace"; }
  Value getAttr(std::string_view name) const override;
  std::string str() const override;
  bool isNamespace() const override { return true; }
  void setAttr(const std::string &name, Value value);
  /// Drops the attributes (the interpreter breaks reference cycles).
  std::vector<std::pair<std::string, Value>> takeAll();

private:
  std::vector<std::pair<std::string, Value>> attrs;
};

/// transformers' TemplateNamespace refuses underscore-prefixed names.
void checkNamespaceName(std::string_view name);

// Python operators (Operators.cpp).
Value binaryOp(BinOp op, const Value &a, const Value &b);
Value negate(const Value &v);
Value unaryPlus(const Value &v);
bool contains(const Value &container, const Value &item);
/// obj[start:stop:step] (parts Undefined when omitted).
Value slice(const Value &obj, const Value &start, const Value &stop,
            const Value &step);
/// Python's index normalization of an int subscript; false when out of
/// range.
bool normalizeIndex(int64_t &index, int64_t size);

// String formatting (Format.cpp).
/// printf-style: `format % args` (args a tuple, a dict or one value).
std::string percentFormat(const std::string &format, const Value &args);
/// str.format(*args, **kwargs).
std::string braceFormat(Interpreter &interp, const std::string &format,
                        CallArgs &args);

/// Python's int(str, base) parsing; false when the text is no integer.
bool parseInt(std::string_view text, int base, int64_t &out);
/// Python's float(str) parsing; false when the text is no float.
bool parseFloat(std::string_view text, double &out);

} // namespace chat
} // namespace sits

#endif // SITS_CHAT_BUILTINS_H
