//===- Tests.cpp - jinja2's tests (`x is defined`, `n is divisibleby 3`) --===//
//
// As in jinja2/tests.py: `number` counts bools, `integer` does not,
// `sequence` is "has len() and []" (so strings and dicts are sequences),
// and an Undefined is iterable, a sequence and callable, as Python finds.
//
//===----------------------------------------------------------------------===//

#include "Builtins.h"

#include "Interpreter.h"
#include "Unicode.h"

namespace sits {
namespace chat {

namespace {

std::string testName(const char *name) {
  return std::string("test '") + name + "'";
}

template <bool (*Pred)(const Value &)>
bool unary(Interpreter &, const Value &v, CallArgs &args) {
  ArgBinder b("test", args, {});
  return Pred(v);
}

bool isDefined(const Value &v) { return !v.isUndefined(); }
bool isUndefinedValue(const Value &v) { return v.isUndefined(); }
bool isNoneValue(const Value &v) { return v.isNone(); }
bool isBoolean(const Value &v) { return v.kind() == Kind::Bool; }
bool isTrue(const Value &v) { return v.kind() == Kind::Bool && v.asBool(); }
bool isFalse(const Value &v) { return v.kind() == Kind::Bool && !v.asBool(); }
bool isInteger(const Value &v) { return v.kind() == Kind::Int; }
bool isFloat(const Value &v) { return v.kind() == Kind::Float; }
bool isNumberValue(const Value &v) { return v.isNumber(); }
bool isStringValue(const Value &v) { return v.isString(); }
bool isMapping(const Value &v) { return v.isDict(); }
bool isEscaped(const Value &) { return false; }

bool isSequenceValue(const Value &v) {
  switch (v.kind()) {
  case Kind::Undefined:
  case Kind::String:
  case Kind::List:
  case Kind::Tuple:
  case Kind::Dict:
    return true;
  default:
    return false;
  }
}

bool isIterable(const Value &v) {
  switch (v.kind()) {
  case Kind::None:
  case Kind::Bool:
  case Kind::Int:
  case Kind::Float:
    return false;
  case Kind::Object:
    return std::string_view(v.typeName()) == "LoopContext";
  default:
    return true;
  }
}

bool isCallableValue(const Value &v) {
  if (v.isUndefined())
    return true;
  if (!v.isObject())
    return false;
  std::string_view type = v.typeName();
  return v.object().isCallable() || type == "LoopContext";
}

bool isLowerString(const Value &v) {
  std::string s = toStr(v);
  bool cased = false;
  for (char32_t cp : decodeUtf8(s)) {
    if (isUpperCase(cp))
      return false;
    cased |= isLowerCase(cp);
  }
  return cased;
}

bool isUpperString(const Value &v) {
  std::string s = toStr(v);
  bool cased = false;
  for (char32_t cp : decodeUtf8(s)) {
    if (isLowerCase(cp) && cp != 0xDF)
      return false;
    if (cp == 0xDF)
      return false;
    cased |= isUpperCase(cp);
  }
  return cased;
}

bool modulo(const Value &v, const Value &divisor, int64_t want) {
  return equals(binaryOp(BinOp::Mod, v, divisor), Value::integer(want));
}

bool tOdd(Interpreter &, const Value &v, CallArgs &args) {
  ArgBinder b(testName("odd"), args, {});
  return modulo(v, Value::integer(2), 1);
}

bool tEven(Interpreter &, const Value &v, CallArgs &args) {
  ArgBinder b(testName("even"), args, {});
  return modulo(v, Value::integer(2), 0);
}

bool tDivisibleby(Interpreter &, const Value &v, CallArgs &args) {
  ArgBinder b(testName("divisibleby"), args, {"num"});
  b.require(1);
  return modulo(v, b.get(0), 0);
}

bool tSameas(Interpreter &, const Value &v, CallArgs &args) {
  ArgBinder b(testName("sameas"), args, {"other"});
  b.require(1);
  const Value &o = b.get(0);
  if (v.kind() != o.kind())
    return false;
  switch (v.kind()) {
  case Kind::Undefined:
  case Kind::None:
    return true;
  case Kind::Bool:
  case Kind::Int:
  case Kind::Float:
  case Kind::String:
    // Python's small ints and interned strings make these usually identical.
    return equals(v, o);
  default:
    return v.identity() == o.identity();
  }
}

bool tIn(Interpreter &, const Value &v, CallArgs &args) {
  ArgBinder b(testName("in"), args, {"seq"});
  b.require(1);
  return contains(b.get(0), v);
}

bool tFilter(Interpreter &, const Value &v, CallArgs &args) {
  ArgBinder b(testName("filter"), args, {});
  return v.isString() && findFilter(v.str());
}

bool tTest(Interpreter &, const Value &v, CallArgs &args) {
  ArgBinder b(testName("test"), args, {});
  return v.isString() && findTest(v.str());
}

template <CmpOp Op>
bool tCompare(Interpreter &, const Value &v, CallArgs &args) {
  ArgBinder b("comparison test", args, {"other"});
  b.require(1);
  const Value &o = b.get(0);
  switch (Op) {
  case CmpOp::Eq:
    return equals(v, o);
  case CmpOp::Ne:
    return !equals(v, o);
  default:
    break;
  }
  int c = compareValues(v, o,
                        Op == CmpOp::Lt   ? "<"
                        : Op == CmpOp::Le ? "<="
                        : Op == CmpOp::Gt ? ">"
                                          : ">=");
  switch (Op) {
  case CmpOp::Lt:
    return c == -1;
  case CmpOp::Le:
    return c == -1 || c == 0;
  case CmpOp::Gt:
    return c == 1;
  default:
    return c == 1 || c == 0;
  }
}

const Builtin kTests[] = {
    {"boolean", nullptr, unary<isBoolean>},
    {"callable", nullptr, unary<isCallableValue>},
    {"defined", nullptr, unary<isDefined>},
    {"divisibleby", nullptr, tDivisibleby},
    {"eq", nullptr, tCompare<CmpOp::Eq>},
    {"equalto", nullptr, tCompare<CmpOp::Eq>},
    {"==", nullptr, tCompare<CmpOp::Eq>},
    {"escaped", nullptr, unary<isEscaped>},
    {"even", nullptr, tEven},
    {"false", nullptr, unary<isFalse>},
    {"filter", nullptr, tFilter},
    {"float", nullptr, unary<isFloat>},
    {"ge", nullptr, tCompare<CmpOp::Ge>},
    {">=", nullptr, tCompare<CmpOp::Ge>},
    {"gt", nullptr, tCompare<CmpOp::Gt>},
    {"greaterthan", nullptr, tCompare<CmpOp::Gt>},
    {">", nullptr, tCompare<CmpOp::Gt>},
    {"in", nullptr, tIn},
    {"integer", nullptr, unary<isInteger>},
    {"iterable", nullptr, unary<isIterable>},
    {"le", nullptr, tCompare<CmpOp::Le>},
    {"<=", nullptr, tCompare<CmpOp::Le>},
    {"lower", nullptr, unary<isLowerString>},
    {"lt", nullptr, tCompare<CmpOp::Lt>},
    {"lessthan", nullptr, tCompare<CmpOp::Lt>},
    {"<", nullptr, tCompare<CmpOp::Lt>},
    {"mapping", nullptr, unary<isMapping>},
    {"ne", nullptr, tCompare<CmpOp::Ne>},
    {"!=", nullptr, tCompare<CmpOp::Ne>},
    {"none", nullptr, unary<isNoneValue>},
    {"number", nullptr, unary<isNumberValue>},
    {"odd", nullptr, tOdd},
    {"sameas", nullptr, tSameas},
    {"sequence", nullptr, unary<isSequenceValue>},
    {"string", nullptr, unary<isStringValue>},
    {"test", nullptr, tTest},
    {"true", nullptr, unary<isTrue>},
    {"undefined", nullptr, unary<isUndefinedValue>},
    {"upper", nullptr, unary<isUpperString>},
};

} // namespace

const Builtin *findTest(std::string_view name) {
  for (const Builtin &b : kTests)
    if (name == b.name)
      return &b;
  return nullptr;
}

} // namespace chat
} // namespace sits
