//===- TokenizerJson.h - Reading a tokenizer.json document ------*- C++ -*-===//
//
// One pass of nlohmann's SAX parser over tokenizer.json: `model.vocab` and
// `model.merges` (Llama 3: 128K entries and 280K merges, nearly all of the
// file) go straight into flat lists, everything else into a small DOM. A full
// DOM of a Llama 3 file costs more to build and to free than the tokenizer
// built from it.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_RUNTIME_TOKENIZER_TOKENIZERJSON_H
#define SITS_RUNTIME_TOKENIZER_TOKENIZERJSON_H

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace sits::tok {

/// `model.vocab` and `model.merges` as read.
struct ModelTables {
  /// Whether model.vocab was an object (then it is here, not in the DOM).
  bool haveVocab = false;
  std::vector<std::pair<std::string, int64_t>> vocab;
  /// Whether model.merges was an array (then it is here, not in the DOM).
  bool haveMerges = false;
  /// One entry per merge: a "a b" string (`isPair` false, in `first`) or an
  /// ["a", "b"] pair.
  struct Merge {
    std::string first, second;
    bool isPair;
  };
  std::vector<Merge> merges;
};

struct TokenizerDocument {
  nlohmann::json dom;
  ModelTables tables;
};

/// Parses the text of a tokenizer.json. Throws Error(InvalidTokenizer) for
/// text that is not JSON and for vocabulary or merge entries of the wrong
/// kind, naming their path.
TokenizerDocument parseTokenizerJson(std::string_view text);

} // namespace sits::tok

#endif // SITS_RUNTIME_TOKENIZER_TOKENIZERJSON_H
