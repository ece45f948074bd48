//===- Json.h - JSON in (the variables) and out (tojson) --------*- C++ -*-===//
//
// Variables arrive as a JSON object (read with nlohmann-json, keys kept in
// document order as Python's json keeps them). `tojson` writes what
// transformers' tojson writes: json.dumps(x, ensure_ascii=False, indent=...,
// separators=..., sort_keys=...), byte for byte.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_CHAT_JSON_H
#define SITS_CHAT_JSON_H

#include "Value.h"

#include <optional>
#include <string>
#include <string_view>

namespace sits {
namespace chat {

/// Parses the variables of a rendering into a dict. Throws
/// sits::Error(InvalidArgument) when the text is not a JSON object.
Value parseVariables(std::string_view json);

struct JsonOptions {
  bool ensureAscii = false;
  std::optional<std::string> indent; ///< unset: one line
  std::string itemSeparator = ", ";
  std::string keySeparator = ": ";
  bool sortKeys = false;
};

/// json.dumps; raises TypeError for values JSON cannot hold.
std::string toJson(const Value &v, const JsonOptions &options);

} // namespace chat
} // namespace sits

#endif // SITS_CHAT_JSON_H
