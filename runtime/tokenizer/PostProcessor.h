//===- PostProcessor.h - tokenizer.json `post_processor` --------*- C++ -*-===//
//
// What decoder LLMs ship as post-processor, for one sequence: the special
// tokens a TemplateProcessing puts around `$A` (`<s>`, `<|begin_of_text|>`),
// with ByteLevel (offsets only, nothing for ids) and Sequence around them.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_RUNTIME_TOKENIZER_POSTPROCESSOR_H
#define SITS_RUNTIME_TOKENIZER_POSTPROCESSOR_H

#include <cstdint>
#include <vector>

namespace sits::tok {

class JsonNode;

class PostProcessor {
public:
  /// Parses a non-null `post_processor` node.
  static PostProcessor parse(const JsonNode &node);

  /// The ids of one sequence with the special tokens added.
  std::vector<int32_t> apply(std::vector<int32_t> ids) const;
  /// Whether applying changes anything.
  bool addsTokens() const { return !templates.empty(); }

private:
  void parseInto(const JsonNode &node);

  // One template per TemplateProcessing, applied in order. An item is the
  // ids of a special token, or empty for the sequence itself.
  struct Item {
    bool isSequence;
    std::vector<int32_t> ids;
  };
  std::vector<std::vector<Item>> templates;
};

} // namespace sits::tok

#endif // SITS_RUNTIME_TOKENIZER_POSTPROCESSOR_H
