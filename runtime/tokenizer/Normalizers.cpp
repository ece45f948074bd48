//===- Normalizers.cpp - tokenizer.json `normalizer` ----------------------===//

#include "Normalizers.h"

#include "JsonConfig.h"
#include "Regex.h"
#include "Unicode.h"

#include <vector>

using namespace sits::tok;

Normalizer::~Normalizer() = default;

namespace {

class SequenceNormalizer : public Normalizer {
public:
  explicit SequenceNormalizer(std::vector<std::unique_ptr<Normalizer>> members)
      : members(std::move(members)) {}
  void normalize(std::string &text) const override {
    for (const auto &member : members)
      member->normalize(text);
  }

private:
  std::vector<std::unique_ptr<Normalizer>> members;
};

/// Replaces every match of the pattern (literal or regex) by `content`.
class ReplaceNormalizer : public Normalizer {
public:
  ReplaceNormalizer(std::unique_ptr<Pattern> pattern, std::string content)
      : pattern(std::move(pattern)), content(std::move(content)) {}
  void normalize(std::string &text) const override {
    std::vector<Span> spans;
    pattern->findMatches(text, spans);
    if (spans.size() == 1 && !spans[0].isMatch)
      return;
    std::string out;
    out.reserve(text.size());
    for (const Span &span : spans) {
      if (span.isMatch)
        out += content;
      else
        out.append(text, span.begin, span.end - span.begin);
    }
    text = std::move(out);
  }

private:
  std::unique_ptr<Pattern> pattern;
  std::string content;
};

/// Prepends a string to non-empty text (SentencePiece's "▁" prefix).
class PrependNormalizer : public Normalizer {
public:
  explicit PrependNormalizer(std::string prefix) : prefix(std::move(prefix)) {}
  void normalize(std::string &text) const override {
    if (!text.empty())
      text.insert(0, prefix);
  }

private:
  std::string prefix;
};

class UnicodeNormalizer : public Normalizer {
public:
  explicit UnicodeNormalizer(NormalForm form) : form(form) {}
  void normalize(std::string &text) const override {
    // ASCII is invariant under every normal form.
    for (char c : text)
      if (static_cast<unsigned char>(c) >= 0x80) {
        text = normalizeUnicode(text, form);
        return;
      }
  }

private:
  NormalForm form;
};

class LowercaseNormalizer : public Normalizer {
public:
  void normalize(std::string &text) const override { text = toLowercase(text); }
};

/// Strips Unicode whitespace on the left and/or the right.
class StripNormalizer : public Normalizer {
public:
  StripNormalizer(bool left, bool right) : left(left), right(right) {}
  void normalize(std::string &text) const override {
    size_t begin = 0, end = text.size();
    if (left) {
      while (begin < end) {
        size_t length;
        if (!isWhitespace(decodeUtf8(text, begin, length)))
          break;
        begin += length;
      }
    }
    if (right) {
      while (end > begin) {
        size_t start = end - 1;
        while (start > begin &&
               (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80)
          --start;
        size_t length;
        if (!isWhitespace(decodeUtf8(text, start, length)))
          break;
        end = start;
      }
    }
    text = text.substr(begin, end - begin);
  }

private:
  bool left, right;
};

} // namespace

std::unique_ptr<Normalizer> sits::tok::parseNormalizer(const JsonNode &node) {
  std::string type = node.type();
  if (type == "Sequence") {
    JsonNode list = node.field("normalizers");
    std::vector<std::unique_ptr<Normalizer>> members;
    for (size_t i = 0, e = list.arraySize(); i < e; ++i)
      members.push_back(parseNormalizer(list.element(i)));
    return std::make_unique<SequenceNormalizer>(std::move(members));
  }
  if (type == "Replace")
    return std::make_unique<ReplaceNormalizer>(
        parsePattern(node.field("pattern")), node.stringField("content"));
  if (type == "Prepend")
    return std::make_unique<PrependNormalizer>(node.stringField("prepend"));
  if (type == "NFC")
    return std::make_unique<UnicodeNormalizer>(NormalForm::NFC);
  if (type == "NFD")
    return std::make_unique<UnicodeNormalizer>(NormalForm::NFD);
  if (type == "NFKC")
    return std::make_unique<UnicodeNormalizer>(NormalForm::NFKC);
  if (type == "NFKD")
    return std::make_unique<UnicodeNormalizer>(NormalForm::NFKD);
  if (type == "Lowercase")
    return std::make_unique<LowercaseNormalizer>();
  if (type == "Strip")
    return std::make_unique<StripNormalizer>(
        node.boolField("strip_left", true),
        node.boolField("strip_right", true));
  node.unsupportedType(type, {"Sequence", "Replace", "Prepend", "NFC", "NFD",
                              "NFKC", "NFKD", "Lowercase", "Strip"});
}
