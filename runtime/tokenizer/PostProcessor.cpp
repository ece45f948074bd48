//===- PostProcessor.cpp - tokenizer.json `post_processor` ----------------===//

#include "PostProcessor.h"

#include "JsonConfig.h"

using namespace sits::tok;

PostProcessor PostProcessor::parse(const JsonNode &node) {
  PostProcessor result;
  result.parseInto(node);
  return result;
}

void PostProcessor::parseInto(const JsonNode &node) {
  std::string type = node.type();
  if (type == "Sequence") {
    JsonNode list = node.field("processors");
    for (size_t i = 0, e = list.arraySize(); i < e; ++i)
      parseInto(list.element(i));
    return;
  }
  if (type == "ByteLevel")
    return; // it only trims offsets
  if (type != "TemplateProcessing")
    node.unsupportedType(type, {"TemplateProcessing", "ByteLevel", "Sequence"});

  JsonNode specialTokens = node.field("special_tokens");
  JsonNode single = node.field("single");
  std::vector<Item> items;
  for (size_t i = 0, e = single.arraySize(); i < e; ++i) {
    JsonNode piece = single.element(i);
    if (piece.has("Sequence")) {
      JsonNode id = piece.field("Sequence").field("id");
      if (id.asString() != "A")
        id.fail(quoteJson(id.asString()) + ": only $A is supported (one "
                                           "sequence is encoded at a time)");
      items.push_back({true, {}});
      continue;
    }
    if (!piece.has("SpecialToken"))
      piece.fail("expected {\"SpecialToken\": ...} or {\"Sequence\": ...}");
    JsonNode id = piece.field("SpecialToken").field("id");
    std::string name = id.asString();
    if (specialTokens.isNull() || !specialTokens.has(name.c_str()))
      id.fail(quoteJson(name) + " is not in " + specialTokens.path());
    JsonNode ids = specialTokens.field(name.c_str()).field("ids");
    Item item{false, {}};
    for (size_t k = 0, n = ids.arraySize(); k < n; ++k)
      item.ids.push_back(
          static_cast<int32_t>(ids.element(k).asInteger(0, INT32_MAX)));
    items.push_back(std::move(item));
  }
  templates.push_back(std::move(items));
}

std::vector<int32_t> PostProcessor::apply(std::vector<int32_t> ids) const {
  for (const auto &items : templates) {
    std::vector<int32_t> out;
    out.reserve(ids.size() + items.size());
    for (const Item &item : items) {
      if (item.isSequence)
        out.insert(out.end(), ids.begin(), ids.end());
      else
        out.insert(out.end(), item.ids.begin(), item.ids.end());
    }
    ids = std::move(out);
  }
  return ids;
}
