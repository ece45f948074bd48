//===- Filters.h - What the two filter files share --------------*- C++ -*-===//

#ifndef SITS_CHAT_FILTERS_H
#define SITS_CHAT_FILTERS_H

#include "Builtins.h"

#include <string>
#include <vector>

namespace sits {
namespace chat {
namespace filters {

/// What jinja2's map/select/items return: a generator (always true, no
/// length, not indexable).
Value generator(std::vector<Value> items);
/// "filter 'name'", for argument errors.
std::string filterName(const char *name);
/// jinja2's make_attrgetter: "a.b.0" is looked up with getitem, part by part
/// (digits as integers); `fallback` replaces an Undefined.
std::vector<Value> attributeParts(const Value &attribute);
Value getPath(Interpreter &interp, Value item, const std::vector<Value> &parts,
              const Value *fallback = nullptr);
/// The sort key of case-insensitive filters: strings lowered.
Value ignoreCase(const Value &v);

// Filters over sequences (SequenceFilters.cpp).
Value fBatch(Interpreter &, const Value &v, CallArgs &args);
Value fDictsort(Interpreter &, const Value &v, CallArgs &args);
Value fFirst(Interpreter &, const Value &v, CallArgs &args);
Value fLast(Interpreter &, const Value &v, CallArgs &args);
Value fItems(Interpreter &, const Value &v, CallArgs &args);
Value fJoin(Interpreter &interp, const Value &v, CallArgs &args);
Value fList(Interpreter &, const Value &v, CallArgs &args);
Value fMap(Interpreter &interp, const Value &v, CallArgs &args);
Value minMax(Interpreter &interp, const Value &v, CallArgs &args, bool max);
Value selectReject(Interpreter &interp, const Value &v, CallArgs &args,
                   bool select, bool byAttribute);
Value fReverse(Interpreter &, const Value &v, CallArgs &args);
Value fSort(Interpreter &interp, const Value &v, CallArgs &args);
Value fSum(Interpreter &interp, const Value &v, CallArgs &args);
Value fUnique(Interpreter &interp, const Value &v, CallArgs &args);

} // namespace filters
} // namespace chat
} // namespace sits

#endif // SITS_CHAT_FILTERS_H
