//===- SequenceFilters.cpp - jinja2's filters over lists and dicts --------===//
//
// map, select/reject(attr), items, unique and batch return generators as in
// jinja2 (always true, no length); sort and dictsort are stable, with
// Python's reverse order for equal keys; min/max keep the first extreme.
//
//===----------------------------------------------------------------------===//

#include "Filters.h"

#include "Interpreter.h"
#include "Unicode.h"

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <unordered_set>

namespace sits {
namespace chat {
namespace filters {

Value generator(std::vector<Value> items) {
  return Value::sequence(Kind::Iterator, std::move(items), "generator");
}

std::string filterName(const char *name) {
  return std::string("filter '") + name + "'";
}

// jinja2's make_attrgetter: "a.b.0" looked up with getitem, part by part.
std::vector<Value> attributeParts(const Value &attribute) {
  if (attribute.isIntegral())
    return {Value::integer(attribute.asInt())};
  if (!attribute.isString())
    return {attribute};
  std::vector<Value> parts;
  const std::string &s = attribute.str();
  size_t pos = 0;
  while (true) {
    size_t dot = s.find('.', pos);
    std::string part = s.substr(pos, dot - pos);
    if (!part.empty() &&
        part.find_first_not_of("0123456789") == std::string::npos)
      parts.push_back(Value::integer(std::strtoll(part.c_str(), nullptr, 10)));
    else
      parts.push_back(Value::string(part));
    if (dot == std::string::npos)
      break;
    pos = dot + 1;
  }
  return parts;
}

Value getPath(Interpreter &interp, Value item, const std::vector<Value> &parts,
              const Value *fallback) {
  for (const Value &part : parts) {
    item = interp.getItem(item, part);
    if (fallback && item.isUndefined())
      item = *fallback;
  }
  return item;
}

Value ignoreCase(const Value &v) {
  return v.isString() ? Value::string(lower(v.str())) : v;
}

Value fBatch(Interpreter &, const Value &v, CallArgs &args) {
  ArgBinder b(filterName("batch"), args, {"linecount", "fill_with"});
  b.require(1);
  int64_t count = b.integer(0, 1);
  if (count <= 0)
    fail("batch size must be positive");
  std::vector<Value> batches, current;
  for (Value &item : iterate(v)) {
    current.push_back(std::move(item));
    if (static_cast<int64_t>(current.size()) == count) {
      batches.push_back(Value::list(std::move(current)));
      current.clear();
    }
  }
  if (!current.empty()) {
    if (b.has(1) && !b.get(1).isNone())
      while (static_cast<int64_t>(current.size()) < count)
        current.push_back(b.get(1));
    batches.push_back(Value::list(std::move(current)));
  }
  return generator(std::move(batches));
}

static Value sortedCopy(std::vector<Value> items, bool reverse,
                        const std::function<Value(const Value &)> &key) {
  std::vector<std::pair<Value, Value>> keyed;
  keyed.reserve(items.size());
  for (Value &item : items)
    keyed.emplace_back(key(item), std::move(item));
  std::stable_sort(keyed.begin(), keyed.end(),
                   [&](const auto &a, const auto &b) {
                     return reverse ? lessThan(b.first, a.first)
                                    : lessThan(a.first, b.first);
                   });
  std::vector<Value> out;
  out.reserve(keyed.size());
  for (auto &k : keyed)
    out.push_back(std::move(k.second));
  return Value::list(std::move(out));
}

Value fDictsort(Interpreter &, const Value &v, CallArgs &args) {
  ArgBinder b(filterName("dictsort"), args,
              {"case_sensitive", "by", "reverse"});
  bool caseSensitive = b.get(0, Value::boolean(false)).truthy();
  Value by = b.get(1, Value::string("key"));
  if (!by.isString() || (by.str() != "key" && by.str() != "value"))
    fail("You can only sort by either \"key\" or \"value\"");
  size_t pos = by.str() == "key" ? 0 : 1;
  if (!v.isDict())
    fail(std::string("'") + v.typeName() + "' object has no attribute 'items'");
  std::vector<Value> items;
  for (const auto &item : v.dict().items)
    items.push_back(Value::tuple({item.first, item.second}));
  return sortedCopy(std::move(items), b.get(2, Value::boolean(false)).truthy(),
                    [&](const Value &item) {
                      const Value &k = item.items()[pos];
                      return caseSensitive ? k : ignoreCase(k);
                    });
}

Value fFirst(Interpreter &, const Value &v, CallArgs &args) {
  ArgBinder b(filterName("first"), args, {});
  std::vector<Value> items = iterate(v);
  if (items.empty())
    return Value::undefined("No first item, sequence was empty.");
  return items.front();
}

Value fLast(Interpreter &, const Value &v, CallArgs &args) {
  ArgBinder b(filterName("last"), args, {});
  if (v.kind() == Kind::Iterator || v.kind() == Kind::View)
    fail(std::string("'") + v.typeName() + "' object is not reversible");
  std::vector<Value> items = iterate(v);
  if (items.empty())
    return Value::undefined("No last item, sequence was empty.");
  return items.back();
}

Value fItems(Interpreter &, const Value &v, CallArgs &args) {
  ArgBinder b(filterName("items"), args, {});
  if (v.isUndefined())
    return generator({});
  if (!v.isDict())
    fail("Can only get item pairs from a mapping.");
  std::vector<Value> items;
  for (const auto &item : v.dict().items)
    items.push_back(Value::tuple({item.first, item.second}));
  return generator(std::move(items));
}

Value fJoin(Interpreter &interp, const Value &v, CallArgs &args) {
  ArgBinder b(filterName("join"), args, {"d", "attribute"});
  std::string sep = toStr(b.get(0, Value::string("")));
  std::vector<Value> items = iterate(v);
  std::vector<Value> parts;
  if (b.has(1) && !b.get(1).isNone()) {
    std::vector<Value> path = attributeParts(b.get(1));
    for (Value &item : items)
      item = getPath(interp, item, path);
  }
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i)
      out += sep;
    out += toStr(items[i]);
    checkStringSize(out.size());
  }
  return Value::string(std::move(out));
}

Value fList(Interpreter &, const Value &v, CallArgs &args) {
  ArgBinder b(filterName("list"), args, {});
  return Value::list(iterate(v));
}

Value fMap(Interpreter &interp, const Value &v, CallArgs &args) {
  std::vector<Value> out;
  bool byAttribute = args.positional.empty();
  std::vector<Value> path;
  Value fallback;
  bool hasFallback = false;
  CallArgs rest;
  std::string filter;
  if (byAttribute) {
    Value attribute;
    bool found = false;
    for (auto &kw : args.keyword) {
      if (kw.first == "attribute") {
        attribute = kw.second, found = true;
      } else if (kw.first == "default") {
        fallback = kw.second;
        hasFallback = !fallback.isNone();
      } else {
        fail("Unexpected keyword argument " + reprString(kw.first));
      }
    }
    if (!found)
      fail("map requires a filter argument");
    path = attributeParts(attribute);
  } else {
    if (!args.positional[0].isString())
      fail("map requires a filter name");
    filter = args.positional[0].str();
    rest.positional.assign(args.positional.begin() + 1, args.positional.end());
    rest.keyword = args.keyword;
  }
  if (!v.truthy())
    return generator({});
  for (const Value &item : iterate(v)) {
    if (byAttribute) {
      out.push_back(
          getPath(interp, item, path, hasFallback ? &fallback : nullptr));
    } else {
      CallArgs call = rest;
      out.push_back(interp.callFilter(filter, item, call));
    }
  }
  return generator(std::move(out));
}

Value minMax(Interpreter &interp, const Value &v, CallArgs &args, bool max) {
  ArgBinder b(filterName(max ? "max" : "min"), args,
              {"case_sensitive", "attribute"});
  bool caseSensitive = b.get(0, Value::boolean(false)).truthy();
  std::vector<Value> items = iterate(v);
  if (items.empty())
    return Value::undefined("No aggregated item, sequence was empty.");
  std::vector<Value> path;
  bool byAttribute = b.has(1) && !b.get(1).isNone();
  if (byAttribute)
    path = attributeParts(b.get(1));
  auto key = [&](const Value &item) {
    Value k = byAttribute ? getPath(interp, item, path) : item;
    return caseSensitive ? k : ignoreCase(k);
  };
  size_t best = 0;
  Value bestKey = key(items[0]);
  for (size_t i = 1; i < items.size(); ++i) {
    Value k = key(items[i]);
    if (max ? lessThan(bestKey, k) : lessThan(k, bestKey)) {
      best = i;
      bestKey = k;
    }
  }
  return items[best];
}

Value selectReject(Interpreter &interp, const Value &v, CallArgs &args,
                   bool select, bool byAttribute) {
  size_t off = byAttribute ? 1 : 0;
  std::vector<Value> path;
  if (byAttribute) {
    if (args.positional.empty())
      fail("Missing parameter for attribute name");
    path = attributeParts(args.positional[0]);
  }
  bool hasTest = args.positional.size() > off;
  std::string test;
  CallArgs testArgs;
  if (hasTest) {
    if (!args.positional[off].isString())
      fail("the test name must be a string");
    test = args.positional[off].str();
    testArgs.positional.assign(args.positional.begin() + off + 1,
                               args.positional.end());
    testArgs.keyword = args.keyword;
  }
  std::vector<Value> out;
  if (!v.truthy())
    return generator({});
  for (const Value &item : iterate(v)) {
    Value subject = byAttribute ? getPath(interp, item, path) : item;
    bool passed;
    if (hasTest) {
      CallArgs call = testArgs;
      passed = interp.callTest(test, subject, call);
    } else {
      passed = subject.truthy();
    }
    if (passed == select)
      out.push_back(item);
  }
  return generator(std::move(out));
}

Value fReverse(Interpreter &, const Value &v, CallArgs &args) {
  ArgBinder b(filterName("reverse"), args, {});
  if (v.isString()) {
    std::u32string cps = decodeUtf8(v.str());
    std::reverse(cps.begin(), cps.end());
    return Value::string(encodeUtf8(cps));
  }
  std::vector<Value> items = iterate(v);
  std::reverse(items.begin(), items.end());
  // Reversible values give an iterator; generators a list (jinja2's
  // fallback when reversed() fails).
  if (v.kind() == Kind::Iterator || v.kind() == Kind::View)
    return Value::list(std::move(items));
  const char *name = v.kind() == Kind::List   ? "list_reverseiterator"
                     : v.kind() == Kind::Dict ? "dict_reversekeyiterator"
                                              : "reversed";
  return Value::sequence(Kind::Iterator, std::move(items), name);
}

Value fSort(Interpreter &interp, const Value &v, CallArgs &args) {
  ArgBinder b(filterName("sort"), args,
              {"reverse", "case_sensitive", "attribute"});
  bool reverse = b.get(0, Value::boolean(false)).truthy();
  bool caseSensitive = b.get(1, Value::boolean(false)).truthy();
  std::vector<Value> path;
  bool byAttribute = b.has(2) && !b.get(2).isNone();
  if (byAttribute)
    path = attributeParts(b.get(2));
  return sortedCopy(iterate(v), reverse, [&](const Value &item) {
    Value k = byAttribute ? getPath(interp, item, path) : item;
    return caseSensitive ? k : ignoreCase(k);
  });
}

Value fSum(Interpreter &interp, const Value &v, CallArgs &args) {
  ArgBinder b(filterName("sum"), args, {"attribute", "start"});
  Value total = b.get(1, Value::integer(0));
  if (total.isString())
    fail("sum() can't sum strings [use ''.join(seq) instead]");
  std::vector<Value> path;
  bool byAttribute = b.has(0) && !b.get(0).isNone();
  if (byAttribute)
    path = attributeParts(b.get(0));
  for (const Value &item : iterate(v))
    total = binaryOp(BinOp::Add, total,
                     byAttribute ? getPath(interp, item, path) : item);
  return total;
}

Value fUnique(Interpreter &interp, const Value &v, CallArgs &args) {
  ArgBinder b(filterName("unique"), args, {"case_sensitive", "attribute"});
  bool caseSensitive = b.get(0, Value::boolean(false)).truthy();
  std::vector<Value> path;
  bool byAttribute = b.has(1) && !b.get(1).isNone();
  if (byAttribute)
    path = attributeParts(b.get(1));
  // Python keeps a set; strings (the common case) get a hash set here.
  std::vector<Value> seen, out;
  std::unordered_set<std::string> seenStrings;
  for (const Value &item : iterate(v)) {
    Value key = byAttribute ? getPath(interp, item, path) : item;
    if (!caseSensitive)
      key = ignoreCase(key);
    checkHashable(key);
    bool found = false;
    if (key.isString()) {
      found = !seenStrings.insert(key.str()).second;
    } else {
      for (const Value &s : seen)
        found = found || equals(s, key);
      if (!found)
        seen.push_back(key);
    }
    if (!found)
      out.push_back(item);
  }
  return generator(std::move(out));
}

} // namespace filters
} // namespace chat
} // namespace sits
