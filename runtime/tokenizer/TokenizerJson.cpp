//===- TokenizerJson.cpp - Reading a tokenizer.json document --------------===//

#include "TokenizerJson.h"

#include "JsonConfig.h"
#include "sits/Error.h"

#include <cstdint>
#include <type_traits>

using namespace sits;
using namespace sits::tok;

namespace {

using Json = nlohmann::json;

/// Builds the DOM of everything but model.vocab and model.merges, which it
/// appends to ModelTables instead.
class TokenizerSax : public nlohmann::json_sax<Json> {
public:
  explicit TokenizerSax(TokenizerDocument &document) : document(document) {}

  std::string error;

  bool null() override { return scalar(nullptr); }
  bool boolean(bool value) override { return scalar(value); }
  bool number_integer(number_integer_t value) override { return scalar(value); }
  bool number_unsigned(number_unsigned_t value) override {
    return scalar(value);
  }
  bool number_float(number_float_t value, const string_t &) override {
    return scalar(value);
  }
  bool binary(binary_t &) override { return fail("tokenizer.json: binary"); }

  bool string(string_t &value) override {
    if (capture == Capture::Merges) {
      document.tables.merges.push_back({std::move(value), {}, false});
      return true;
    }
    if (capture == Capture::MergePair) {
      if (pairStrings == 0)
        pairFirst = std::move(value);
      else if (pairStrings == 1)
        pairSecond = std::move(value);
      ++pairStrings;
      return true;
    }
    return scalar(std::move(value));
  }

  bool key(string_t &value) override {
    if (capture == Capture::Vocab)
      vocabKey = std::move(value);
    else
      stack.back().key = std::move(value);
    return true;
  }

  bool start_object(std::size_t) override {
    if (capture != Capture::None)
      return badEntry();
    if (atModelMember("vocab")) {
      capture = Capture::Vocab;
      document.tables.haveVocab = true;
      return true;
    }
    Json *node = add(Json::object());
    if (stack.size() == 1 && stack[0].key == "model")
      model = node;
    stack.push_back({node, {}});
    return true;
  }

  bool end_object() override {
    if (capture == Capture::Vocab) {
      capture = Capture::None;
      return true;
    }
    stack.pop_back();
    return true;
  }

  bool start_array(std::size_t) override {
    if (capture == Capture::Merges) {
      capture = Capture::MergePair;
      pairStrings = 0;
      return true;
    }
    if (capture != Capture::None)
      return badEntry();
    if (atModelMember("merges")) {
      capture = Capture::Merges;
      document.tables.haveMerges = true;
      return true;
    }
    stack.push_back({add(Json::array()), {}});
    return true;
  }

  bool end_array() override {
    if (capture == Capture::MergePair) {
      if (pairStrings != 2)
        return badEntry();
      document.tables.merges.push_back(
          {std::move(pairFirst), std::move(pairSecond), true});
      capture = Capture::Merges;
      return true;
    }
    if (capture == Capture::Merges) {
      capture = Capture::None;
      return true;
    }
    stack.pop_back();
    return true;
  }

  bool parse_error(std::size_t, const std::string &,
                   const nlohmann::detail::exception &exception) override {
    return fail(std::string("tokenizer.json is not valid JSON: ") +
                exception.what());
  }

private:
  enum class Capture { None, Vocab, Merges, MergePair };
  struct Frame {
    Json *node;
    std::string key; // of the member being read, for objects
  };

  bool fail(std::string message) {
    error = std::move(message);
    return false;
  }

  /// A vocabulary id or merge of the wrong kind.
  bool badEntry() {
    if (capture == Capture::Vocab)
      return fail("model.vocab: the id of " + quoteJson(vocabKey) +
                  " must be an integer");
    return fail("model.merges[" +
                std::to_string(document.tables.merges.size()) +
                "]: expected \"a b\" or [\"a\", \"b\"]");
  }

  bool atModelMember(const char *name) const {
    return model && stack.size() == 2 && stack[1].node == model &&
           stack[1].key == name;
  }

  template <typename Value> bool scalar(Value &&value) {
    if (capture == Capture::Vocab) {
      using Plain = std::decay_t<Value>;
      if constexpr (std::is_integral_v<Plain> && !std::is_same_v<Plain, bool>) {
        // Ids beyond int64 are refused as out of range by the model.
        int64_t id = value > static_cast<Plain>(INT64_MAX)
                         ? INT64_MAX
                         : static_cast<int64_t>(value);
        document.tables.vocab.emplace_back(std::move(vocabKey), id);
        return true;
      }
      return badEntry();
    }
    if (capture != Capture::None)
      return badEntry();
    add(Json(std::forward<Value>(value)));
    return true;
  }

  Json *add(Json value) {
    if (stack.empty()) {
      document.dom = std::move(value);
      return &document.dom;
    }
    Frame &top = stack.back();
    if (top.node->is_object()) {
      Json &slot = (*top.node)[top.key];
      slot = std::move(value);
      return &slot;
    }
    top.node->push_back(std::move(value));
    return &top.node->back();
  }

  TokenizerDocument &document;
  std::vector<Frame> stack;
  Json *model = nullptr;
  Capture capture = Capture::None;
  std::string vocabKey, pairFirst, pairSecond;
  int pairStrings = 0;
};

} // namespace

TokenizerDocument sits::tok::parseTokenizerJson(std::string_view text) {
  TokenizerDocument document;
  TokenizerSax handler(document);
  if (!Json::sax_parse(text.begin(), text.end(), &handler)) {
    throw Error(ErrorCode::InvalidTokenizer,
                handler.error.empty()
                    ? std::string("tokenizer.json is not valid JSON")
                    : handler.error);
  }
  return document;
}
