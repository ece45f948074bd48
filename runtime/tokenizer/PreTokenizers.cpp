//===- PreTokenizers.cpp - tokenizer.json `pre_tokenizer` -----------------===//

#include "PreTokenizers.h"

#include "JsonConfig.h"
#include "Regex.h"
#include "Unicode.h"

#include <algorithm>
#include <array>
#include <vector>

using namespace sits::tok;

PreTokenizer::~PreTokenizer() = default;

namespace {

struct ByteLevelAlphabet {
  std::array<std::string, 256> charOf;
  std::array<int16_t, 324> byteOf; // indexed by code point, all below 324

  ByteLevelAlphabet() {
    byteOf.fill(-1);
    // GPT-2's bytes_to_unicode: printable Latin-1 bytes stand for
    // themselves, the others for U+0100 onwards in byte order.
    auto printable = [](int b) {
      return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) ||
             (b >= 0xAE && b <= 0xFF);
    };
    int next = 256;
    for (int b = 0; b < 256; ++b) {
      int cp = printable(b) ? b : next++;
      appendUtf8(charOf[b], static_cast<char32_t>(cp));
      byteOf[cp] = static_cast<int16_t>(b);
    }
  }
};

const ByteLevelAlphabet &alphabet() {
  static const ByteLevelAlphabet instance;
  return instance;
}

/// Cuts `spans` as `tokenizers`' NormalizedString::split does for
/// `behavior`, and emits the non-empty pieces of `text`.
void emitSplits(std::string_view text, bool atStart,
                const std::vector<Span> &spans, SplitBehavior behavior,
                const PieceFn &emit) {
  struct Cut {
    size_t begin, end;
    bool remove;
  };
  std::vector<Cut> cuts;
  cuts.reserve(spans.size());
  switch (behavior) {
  case SplitBehavior::Removed:
    for (const Span &span : spans)
      cuts.push_back({span.begin, span.end, span.isMatch});
    break;
  case SplitBehavior::Isolated:
    for (const Span &span : spans)
      cuts.push_back({span.begin, span.end, false});
    break;
  case SplitBehavior::MergedWithPrevious: {
    bool previousMatch = false;
    for (const Span &span : spans) {
      if (span.isMatch && !previousMatch && !cuts.empty())
        cuts.back().end = span.end;
      else
        cuts.push_back({span.begin, span.end, false});
      previousMatch = span.isMatch;
    }
    break;
  }
  case SplitBehavior::MergedWithNext: {
    bool previousMatch = false;
    for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
      if (it->isMatch && !previousMatch && !cuts.empty())
        cuts.back().begin = it->begin;
      else
        cuts.push_back({it->begin, it->end, false});
      previousMatch = it->isMatch;
    }
    std::reverse(cuts.begin(), cuts.end());
    break;
  }
  case SplitBehavior::Contiguous: {
    bool havePrevious = false, previousMatch = false;
    for (const Span &span : spans) {
      if (havePrevious && span.isMatch == previousMatch && !cuts.empty())
        cuts.back().end = span.end;
      else
        cuts.push_back({span.begin, span.end, false});
      havePrevious = true;
      previousMatch = span.isMatch;
    }
    break;
  }
  }
  for (const Cut &cut : cuts)
    if (!cut.remove && cut.end > cut.begin)
      emit(text.substr(cut.begin, cut.end - cut.begin),
           atStart && cut.begin == 0);
}

/// Spans of the single characters for which `isMatch` holds.
template <typename Predicate>
void findCharMatches(std::string_view text, Predicate isMatch,
                     std::vector<Span> &spans) {
  size_t previous = 0, pos = 0;
  while (pos < text.size()) {
    size_t length;
    char32_t cp = decodeUtf8(text, pos, length);
    if (isMatch(cp)) {
      if (previous < pos)
        spans.push_back({previous, pos, false});
      spans.push_back({pos, pos + length, true});
      previous = pos + length;
    }
    pos += length;
  }
  if (previous < text.size() || text.empty())
    spans.push_back({previous, text.size(), false});
}

SplitBehavior parseBehavior(const JsonNode &node) {
  std::string name = node.asString();
  if (name == "Removed")
    return SplitBehavior::Removed;
  if (name == "Isolated")
    return SplitBehavior::Isolated;
  if (name == "MergedWithPrevious")
    return SplitBehavior::MergedWithPrevious;
  if (name == "MergedWithNext")
    return SplitBehavior::MergedWithNext;
  if (name == "Contiguous")
    return SplitBehavior::Contiguous;
  node.fail(quoteJson(name) +
            " is not a split behavior (Removed, Isolated, "
            "MergedWithPrevious, MergedWithNext, Contiguous)");
}

class SequencePreTokenizer : public PreTokenizer {
public:
  explicit SequencePreTokenizer(
      std::vector<std::unique_ptr<PreTokenizer>> members)
      : members(std::move(members)) {}

  void split(std::string_view text, bool atStart,
             const PieceFn &emit) const override {
    splitFrom(0, text, atStart, emit);
  }
  bool hasByteLevel() const override {
    for (const auto &member : members)
      if (member->hasByteLevel())
        return true;
    return false;
  }

private:
  // Each member cuts every piece of the one before; pre-tokenizers act on
  // each piece alone, so depth-first order gives the same pieces.
  void splitFrom(size_t index, std::string_view text, bool atStart,
                 const PieceFn &emit) const {
    if (index == members.size()) {
      emit(text, atStart);
      return;
    }
    members[index]->split(text, atStart,
                          [&](std::string_view piece, bool pieceAtStart) {
                            splitFrom(index + 1, piece, pieceAtStart, emit);
                          });
  }

  std::vector<std::unique_ptr<PreTokenizer>> members;
};

class SplitPreTokenizer : public PreTokenizer {
public:
  SplitPreTokenizer(std::unique_ptr<Pattern> pattern, SplitBehavior behavior,
                    bool invert)
      : pattern(std::move(pattern)), behavior(behavior), invert(invert) {}

  void split(std::string_view text, bool atStart,
             const PieceFn &emit) const override {
    std::vector<Span> spans;
    pattern->findMatches(text, spans);
    if (invert)
      for (Span &span : spans)
        span.isMatch = !span.isMatch;
    emitSplits(text, atStart, spans, behavior, emit);
  }

private:
  std::unique_ptr<Pattern> pattern;
  SplitBehavior behavior;
  bool invert;
};

/// GPT-2's pre-tokenizer: an optional leading space, the GPT-2 regex, then
/// every byte written as its byte-level character.
class ByteLevelPreTokenizer : public PreTokenizer {
public:
  ByteLevelPreTokenizer(bool addPrefixSpace, bool useRegex)
      : addPrefixSpace(addPrefixSpace), useRegex(useRegex) {}

  void split(std::string_view text, bool atStart,
             const PieceFn &emit) const override {
    std::string prefixed;
    if (addPrefixSpace && (text.empty() || text[0] != ' ')) {
      prefixed.reserve(text.size() + 1);
      prefixed.push_back(' ');
      prefixed.append(text);
      text = prefixed;
    }
    std::string mapped;
    auto emitMapped = [&](std::string_view piece, bool pieceAtStart) {
      mapped.clear();
      const ByteLevelAlphabet &table = alphabet();
      for (char c : piece)
        mapped += table.charOf[static_cast<unsigned char>(c)];
      emit(mapped, pieceAtStart);
    };
    if (!useRegex) {
      if (!text.empty())
        emitMapped(text, atStart);
      return;
    }
    std::vector<Span> spans;
    gpt2Pattern().findMatches(text, spans);
    emitSplits(text, atStart, spans, SplitBehavior::Isolated, emitMapped);
  }
  bool hasByteLevel() const override { return true; }

private:
  static const Pattern &gpt2Pattern() {
    static const std::unique_ptr<Pattern> pattern =
        Pattern::regex(R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+)"
                       R"(| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)",
                       "pre_tokenizer (GPT-2 regex)");
    return *pattern;
  }

  bool addPrefixSpace, useRegex;
};

enum class PrependScheme { Always, First, Never };

PrependScheme parsePrependScheme(const JsonNode &node) {
  // Files older than prepend_scheme have add_prefix_space instead.
  if (!node.has("prepend_scheme") || node.field("prepend_scheme").isNull())
    return node.boolField("add_prefix_space", true) ? PrependScheme::Always
                                                    : PrependScheme::Never;
  JsonNode scheme = node.field("prepend_scheme");
  std::string name = scheme.asString();
  if (name == "always")
    return PrependScheme::Always;
  if (name == "first")
    return PrependScheme::First;
  if (name == "never")
    return PrependScheme::Never;
  scheme.fail(quoteJson(name) +
              " is not a prepend scheme (always, first, never)");
}

/// SentencePiece's whitespace handling: spaces become the replacement
/// character ("▁"), which is prepended per the scheme and split before.
class MetaspacePreTokenizer : public PreTokenizer {
public:
  MetaspacePreTokenizer(std::string replacement, PrependScheme scheme,
                        bool splitPieces)
      : replacement(std::move(replacement)), scheme(scheme),
        splitPieces(splitPieces) {
    size_t length;
    replacementChar = decodeUtf8(this->replacement, 0, length);
  }

  void split(std::string_view text, bool atStart,
             const PieceFn &emit) const override {
    std::string replaced;
    replaced.reserve(text.size() + replacement.size());
    bool prepend = scheme == PrependScheme::Always ||
                   (scheme == PrependScheme::First && atStart);
    if (prepend && !(text.substr(0, replacement.size()) == replacement) &&
        !(text.size() > 0 && text[0] == ' '))
      replaced += replacement;
    for (char c : text) {
      if (c == ' ')
        replaced += replacement;
      else
        replaced.push_back(c);
    }
    if (!splitPieces) {
      if (!replaced.empty())
        emit(replaced, atStart);
      return;
    }
    std::vector<Span> spans;
    findCharMatches(
        replaced, [&](char32_t cp) { return cp == replacementChar; }, spans);
    emitSplits(replaced, atStart, spans, SplitBehavior::MergedWithNext, emit);
  }

private:
  std::string replacement;
  char32_t replacementChar;
  PrependScheme scheme;
  bool splitPieces;
};

/// Splits on characters a predicate selects (Digits, Punctuation,
/// WhitespaceSplit).
template <typename Predicate>
class CharClassPreTokenizer : public PreTokenizer {
public:
  CharClassPreTokenizer(Predicate isMatch, SplitBehavior behavior)
      : isMatch(isMatch), behavior(behavior) {}
  void split(std::string_view text, bool atStart,
             const PieceFn &emit) const override {
    std::vector<Span> spans;
    findCharMatches(text, isMatch, spans);
    emitSplits(text, atStart, spans, behavior, emit);
  }

private:
  Predicate isMatch;
  SplitBehavior behavior;
};

template <typename Predicate>
std::unique_ptr<PreTokenizer> charClass(Predicate isMatch,
                                        SplitBehavior behavior) {
  return std::make_unique<CharClassPreTokenizer<Predicate>>(isMatch, behavior);
}

/// `\w+|[^\w\s]+`, whitespace dropped: runs of word characters and runs of
/// other non-space characters.
class WhitespacePreTokenizer : public PreTokenizer {
public:
  void split(std::string_view text, bool atStart,
             const PieceFn &emit) const override {
    enum Class { Word, Space, Other };
    auto classify = [](char32_t cp) {
      return isWordChar(cp) ? Word : isWhitespace(cp) ? Space : Other;
    };
    size_t pos = 0, runStart = 0;
    int runClass = Space;
    while (pos <= text.size()) {
      int cls = Space;
      size_t length = 1;
      if (pos < text.size())
        cls = classify(decodeUtf8(text, pos, length));
      if (pos == text.size() || cls != runClass) {
        if (runClass != Space && pos > runStart)
          emit(text.substr(runStart, pos - runStart), atStart && runStart == 0);
        runStart = pos;
        runClass = cls;
      }
      pos += length;
    }
  }
};

} // namespace

const std::string &sits::tok::byteLevelChar(unsigned char b) {
  return alphabet().charOf[b];
}

int sits::tok::byteLevelByte(char32_t cp) {
  return cp < 324 ? alphabet().byteOf[cp] : -1;
}

std::unique_ptr<PreTokenizer>
sits::tok::parsePreTokenizer(const JsonNode &node) {
  std::string type = node.type();
  if (type == "Sequence") {
    JsonNode list = node.field("pretokenizers");
    std::vector<std::unique_ptr<PreTokenizer>> members;
    for (size_t i = 0, e = list.arraySize(); i < e; ++i)
      members.push_back(parsePreTokenizer(list.element(i)));
    return std::make_unique<SequencePreTokenizer>(std::move(members));
  }
  if (type == "ByteLevel")
    return std::make_unique<ByteLevelPreTokenizer>(
        node.boolField("add_prefix_space", true),
        node.boolField("use_regex", true));
  if (type == "Split") {
    JsonNode behavior = node.field("behavior");
    if (behavior.isNull())
      behavior.fail("missing (a split behavior is required)");
    return std::make_unique<SplitPreTokenizer>(
        parsePattern(node.field("pattern")), parseBehavior(behavior),
        node.boolField("invert", false));
  }
  if (type == "Metaspace")
    return std::make_unique<MetaspacePreTokenizer>(
        node.charField("replacement"), parsePrependScheme(node),
        node.boolField("split", true));
  if (type == "Digits") {
    bool individual = node.boolField("individual_digits", false);
    return charClass([](char32_t cp) { return isNumeric(cp); },
                     individual ? SplitBehavior::Isolated
                                : SplitBehavior::Contiguous);
  }
  if (type == "Punctuation") {
    JsonNode behavior = node.field("behavior");
    return charClass(
        [](char32_t cp) {
          bool asciiPunct =
              cp < 0x80 && cp > ' ' && cp < 0x7F && !(cp >= '0' && cp <= '9') &&
              !(cp >= 'a' && cp <= 'z') && !(cp >= 'A' && cp <= 'Z');
          return asciiPunct || isPunctuation(cp);
        },
        behavior.isNull() ? SplitBehavior::Isolated : parseBehavior(behavior));
  }
  if (type == "Whitespace")
    return std::make_unique<WhitespacePreTokenizer>();
  if (type == "WhitespaceSplit")
    return charClass([](char32_t cp) { return isWhitespace(cp); },
                     SplitBehavior::Removed);
  node.unsupportedType(type,
                       {"Sequence", "ByteLevel", "Split", "Metaspace", "Digits",
                        "Punctuation", "Whitespace", "WhitespaceSplit"});
}
