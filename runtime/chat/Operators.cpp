//===- Operators.cpp - Python's arithmetic, `in` and slicing --------------===//
//
// bool is an int, `/` is true division, `//` and `%` floor towards minus
// infinity (and `%` of a string formats), `**` with a negative exponent is a
// float, `*` repeats strings and lists. Integers are 64-bit here where
// Python's are unbounded: overflowing is an error, never a wrong result.
//
//===----------------------------------------------------------------------===//

#include "Builtins.h"

#include "Unicode.h"

#include <cmath>

namespace sits {
namespace chat {

static const char *opSymbol(BinOp op) {
  switch (op) {
  case BinOp::Add:
    return "+";
  case BinOp::Sub:
    return "-";
  case BinOp::Mul:
    return "*";
  case BinOp::Div:
    return "/";
  case BinOp::FloorDiv:
    return "//";
  case BinOp::Mod:
    return "%";
  case BinOp::Pow:
    return "** or pow()";
  }
  return "?";
}

[[noreturn]] static void unsupported(BinOp op, const Value &a, const Value &b) {
  fail(std::string("unsupported operand type(s) for ") + opSymbol(op) + ": '" +
       a.typeName() + "' and '" + b.typeName() + "'");
}

[[noreturn]] static void overflow() {
  fail("integer overflow (integers are 64-bit here, unbounded in Python)");
}

static Value repeat(const Value &seq, int64_t times) {
  // An empty sequence stays empty however many times it repeats: no loop
  // of `times` appends of nothing (2^63 of them at most).
  const bool empty = seq.isString() ? seq.str().empty() : seq.items().empty();
  if (times <= 0 || empty)
    return seq.isString() ? Value::string("")
                          : (seq.kind() == Kind::Tuple ? Value::tuple({})
                                                       : Value::list({}));
  if (seq.isString()) {
    size_t size = seq.str().size();
    if (size && static_cast<uint64_t>(times) > kMaxStringBytes / size)
      checkStringSize(kMaxStringBytes + 1);
    std::string out;
    out.reserve(size * times);
    for (int64_t i = 0; i < times; ++i)
      out += seq.str();
    return Value::string(std::move(out));
  }
  size_t size = seq.items().size();
  if (size && static_cast<uint64_t>(times) > kMaxSequenceItems / size)
    fail("sequence longer than the limit of " +
         std::to_string(kMaxSequenceItems) + " items");
  std::vector<Value> items;
  items.reserve(size * times);
  for (int64_t i = 0; i < times; ++i)
    items.insert(items.end(), seq.items().begin(), seq.items().end());
  return seq.kind() == Kind::Tuple ? Value::tuple(std::move(items))
                                   : Value::list(std::move(items));
}

static double floatFloorDiv(double x, double y, double *modOut) {
  double mod = std::fmod(x, y);
  double div = (x - mod) / y;
  if (mod) {
    if ((y < 0) != (mod < 0)) {
      mod += y;
      div -= 1.0;
    }
  } else {
    mod = std::copysign(0.0, y);
  }
  double floordiv;
  if (div) {
    floordiv = std::floor(div);
    if (div - floordiv > 0.5)
      floordiv += 1.0;
  } else {
    floordiv = std::copysign(0.0, x / y);
  }
  if (modOut)
    *modOut = mod;
  return floordiv;
}

static Value intPow(int64_t base, int64_t exp) {
  int64_t result = 1;
  while (exp > 0) {
    if ((exp & 1) && __builtin_mul_overflow(result, base, &result))
      overflow();
    exp >>= 1;
    if (exp && __builtin_mul_overflow(base, base, &base))
      overflow();
  }
  return Value::integer(result);
}

static Value floatPow(double x, double y) {
  if (x == 0.0 && y < 0)
    fail("0.0 cannot be raised to a negative power");
  if (x < 0 && std::isfinite(y) && y != std::floor(y))
    fail("a negative number to a fractional power is complex, which "
         "templates cannot use here");
  double r = std::pow(x, y);
  if (std::isinf(r) && std::isfinite(x) && std::isfinite(y))
    fail("(34, 'Numerical result out of range')");
  return Value::real(r);
}

Value binaryOp(BinOp op, const Value &a, const Value &b) {
  if (a.isUndefined())
    failUndefined(a);
  if (b.isUndefined())
    failUndefined(b);
  bool ints = a.isIntegral() && b.isIntegral();
  bool numbers = a.isNumber() && b.isNumber();
  int64_t x = a.asInt(), y = b.asInt(), r;
  switch (op) {
  case BinOp::Add:
    if (ints) {
      if (__builtin_add_overflow(x, y, &r))
        overflow();
      return Value::integer(r);
    }
    if (numbers)
      return Value::real(a.asDouble() + b.asDouble());
    if (a.isString() && b.isString()) {
      checkStringSize(a.str().size() + b.str().size());
      return Value::string(a.str() + b.str());
    }
    if ((a.kind() == Kind::List || a.kind() == Kind::Tuple) &&
        a.kind() == b.kind()) {
      std::vector<Value> items = a.items();
      items.insert(items.end(), b.items().begin(), b.items().end());
      return a.kind() == Kind::List ? Value::list(std::move(items))
                                    : Value::tuple(std::move(items));
    }
    if (a.isString() || a.kind() == Kind::List || a.kind() == Kind::Tuple)
      fail(std::string("can only concatenate ") + a.typeName() + " (not \"" +
           b.typeName() + "\") to " + a.typeName());
    unsupported(op, a, b);
  case BinOp::Sub:
    if (ints) {
      if (__builtin_sub_overflow(x, y, &r))
        overflow();
      return Value::integer(r);
    }
    if (numbers)
      return Value::real(a.asDouble() - b.asDouble());
    unsupported(op, a, b);
  case BinOp::Mul:
    if (ints) {
      if (__builtin_mul_overflow(x, y, &r))
        overflow();
      return Value::integer(r);
    }
    if (numbers)
      return Value::real(a.asDouble() * b.asDouble());
    if (b.isIntegral() &&
        (a.isString() || a.kind() == Kind::List || a.kind() == Kind::Tuple))
      return repeat(a, y);
    if (a.isIntegral() &&
        (b.isString() || b.kind() == Kind::List || b.kind() == Kind::Tuple))
      return repeat(b, x);
    if (a.isString() || a.kind() == Kind::List || a.kind() == Kind::Tuple ||
        b.isString() || b.kind() == Kind::List || b.kind() == Kind::Tuple)
      fail(std::string("can't multiply sequence by non-int of type '") +
           (a.isNumber() || a.isNone() ? a : b).typeName() + "'");
    unsupported(op, a, b);
  case BinOp::Div:
    if (numbers) {
      if (b.asDouble() == 0.0)
        fail("division by zero");
      return Value::real(a.asDouble() / b.asDouble());
    }
    unsupported(op, a, b);
  case BinOp::FloorDiv:
    if (ints) {
      if (y == 0)
        fail("integer division or modulo by zero");
      if (x == INT64_MIN && y == -1)
        overflow();
      int64_t q = x / y;
      if ((x % y != 0) && ((x < 0) != (y < 0)))
        --q;
      return Value::integer(q);
    }
    if (numbers) {
      if (b.asDouble() == 0.0)
        fail("float floor division by zero");
      return Value::real(floatFloorDiv(a.asDouble(), b.asDouble(), nullptr));
    }
    unsupported(op, a, b);
  case BinOp::Mod:
    if (ints) {
      if (y == 0)
        fail("integer division or modulo by zero");
      if (y == -1)
        return Value::integer(0);
      int64_t m = x % y;
      if (m != 0 && ((m < 0) != (y < 0)))
        m += y;
      return Value::integer(m);
    }
    if (numbers) {
      if (b.asDouble() == 0.0)
        fail("float modulo");
      double mod;
      floatFloorDiv(a.asDouble(), b.asDouble(), &mod);
      return Value::real(mod);
    }
    if (a.isString())
      return Value::string(percentFormat(a.str(), b));
    unsupported(op, a, b);
  case BinOp::Pow:
    if (ints) {
      if (y < 0)
        return floatPow(static_cast<double>(x), static_cast<double>(y));
      return intPow(x, y);
    }
    if (numbers)
      return floatPow(a.asDouble(), b.asDouble());
    unsupported(op, a, b);
  }
  unsupported(op, a, b);
}

Value negate(const Value &v) {
  if (v.isUndefined())
    failUndefined(v);
  if (v.isIntegral()) {
    if (v.asInt() == INT64_MIN)
      overflow();
    return Value::integer(-v.asInt());
  }
  if (v.kind() == Kind::Float)
    return Value::real(-v.asDouble());
  fail(std::string("bad operand type for unary -: '") + v.typeName() + "'");
}

Value unaryPlus(const Value &v) {
  if (v.isUndefined())
    failUndefined(v);
  if (v.isIntegral())
    return Value::integer(v.asInt());
  if (v.kind() == Kind::Float)
    return v;
  fail(std::string("bad operand type for unary +: '") + v.typeName() + "'");
}

bool contains(const Value &container, const Value &item) {
  switch (container.kind()) {
  case Kind::Undefined:
    return false;
  case Kind::String:
    if (!item.isString())
      fail(std::string("'in <string>' requires string as left operand, not ") +
           item.typeName());
    return container.str().find(item.str()) != std::string::npos;
  case Kind::List:
  case Kind::Tuple:
  case Kind::Iterator:
  case Kind::View:
    for (const Value &v : container.items())
      if (equals(v, item))
        return true;
    return false;
  case Kind::Dict:
    checkHashable(item);
    return container.dict().find(item) != nullptr;
  default:
    fail(std::string("argument of type '") + container.typeName() +
         "' is not iterable");
  }
}

bool normalizeIndex(int64_t &index, int64_t size) {
  if (index < 0)
    index += size;
  return index >= 0 && index < size;
}

Value slice(const Value &obj, const Value &start, const Value &stop,
            const Value &step) {
  auto sliceText = [&] {
    return "slice(" + toRepr(start) + ", " + toRepr(stop) + ", " +
           toRepr(step) + ")";
  };
  bool sliceable =
      obj.isString() || obj.kind() == Kind::List || obj.kind() == Kind::Tuple;
  auto validPart = [](const Value &v) { return v.isNone() || v.isIntegral(); };
  if (!sliceable || !validPart(start) || !validPart(stop) || !validPart(step))
    return Value::undefined(objectTypeRepr(obj) + " has no element " +
                            sliceText());
  int64_t stride = step.isNone() ? 1 : step.asInt();
  if (stride == 0)
    fail("slice step cannot be zero");
  std::u32string cps;
  int64_t size;
  if (obj.isString()) {
    cps = decodeUtf8(obj.str());
    size = static_cast<int64_t>(cps.size());
  } else {
    size = static_cast<int64_t>(obj.items().size());
  }
  // PySlice_AdjustIndices.
  auto adjust = [&](const Value &v, int64_t fallback) {
    if (v.isNone())
      return fallback;
    int64_t i = v.asInt();
    if (i < 0) {
      i += size;
      if (i < 0)
        i = stride < 0 ? -1 : 0;
    } else if (i >= size) {
      i = stride < 0 ? size - 1 : size;
    }
    return i;
  };
  int64_t first = adjust(start, stride < 0 ? size - 1 : 0);
  int64_t last = adjust(stop, stride < 0 ? -1 : size);
  __int128 count = 0;
  if (stride > 0 && first < last)
    count = ((__int128)last - first - 1) / stride + 1;
  else if (stride < 0 && first > last)
    count = ((__int128)first - last - 1) / -(__int128)stride + 1;
  if (obj.kind() == Kind::List && obj.seq().isRange) {
    // A slice of a range is a range.
    const int64_t *r = obj.seq().range;
    __int128 newStart = r[0] + (__int128)first * r[2];
    __int128 newStop = r[0] + (__int128)last * r[2];
    __int128 newStep = (__int128)r[2] * stride;
    if (newStart >= INT64_MIN && newStart <= INT64_MAX &&
        newStop >= INT64_MIN && newStop <= INT64_MAX && newStep >= INT64_MIN &&
        newStep <= INT64_MAX)
      return Value::range(static_cast<int64_t>(newStart),
                          static_cast<int64_t>(newStop),
                          static_cast<int64_t>(newStep));
  }
  std::vector<int64_t> picks;
  for (__int128 k = 0; k < count; ++k)
    picks.push_back(static_cast<int64_t>(first + k * stride));
  if (obj.isString()) {
    std::u32string out;
    for (int64_t i : picks)
      out += cps[i];
    return Value::string(encodeUtf8(out));
  }
  std::vector<Value> items;
  items.reserve(picks.size());
  for (int64_t i : picks)
    items.push_back(obj.items()[i]);
  return obj.kind() == Kind::Tuple ? Value::tuple(std::move(items))
                                   : Value::list(std::move(items));
}

} // namespace chat
} // namespace sits
