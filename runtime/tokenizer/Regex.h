//===- Regex.h - PCRE2 regexes and literal split patterns -------*- C++ -*-===//
//
// tokenizer.json patterns come as {"Regex": "..."} (an Oniguruma regex in
// `tokenizers`) or {"String": "..."} (a literal). Regexes are compiled by PCRE2
// in UTF + UCP mode, JIT-compiled, which reads the patterns decoder LLMs ship
// (`\p{L}`, `\p{N}`, `(?i:'s|...)`, `\s+(?!\S)`) with the same meaning.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_RUNTIME_TOKENIZER_REGEX_H
#define SITS_RUNTIME_TOKENIZER_REGEX_H

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace sits::tok {

class JsonNode;

/// One span of a text that a pattern split: [begin, end) and whether it is a
/// match of the pattern. The spans of one text are contiguous and cover it.
struct Span {
  size_t begin, end;
  bool isMatch;
};

/// A compiled PCRE2 regex. Thread-safe: matching uses per-thread match data.
class Regex {
public:
  /// Compiles `pattern`; throws Error(InvalidTokenizer) "PATH: ..." naming
  /// `path` and PCRE2's message when it does not compile.
  Regex(const std::string &pattern, const std::string &path);
  ~Regex();
  Regex(const Regex &) = delete;
  Regex &operator=(const Regex &) = delete;

  /// The leftmost match in `text` at or after `start`, as [matchBegin,
  /// matchEnd); false when there is none. `text` must be valid UTF-8.
  bool find(std::string_view text, size_t start, size_t &matchBegin,
            size_t &matchEnd) const;

  const std::string &source() const { return pattern; }

private:
  std::string pattern;
  void *code = nullptr; // pcre2_code_8
};

/// A split pattern: a literal string or a regex.
class Pattern {
public:
  static std::unique_ptr<Pattern> literal(std::string text);
  static std::unique_ptr<Pattern> regex(const std::string &source,
                                        const std::string &path);

  /// Appends the spans of `text`, as `tokenizers`' Pattern::find_matches:
  /// matches found left to right (an empty match right after the previous
  /// match is skipped, as the Oniguruma iterator does), with the text between
  /// them as non-matches. An empty text gives one empty non-match span.
  void findMatches(std::string_view text, std::vector<Span> &spans) const;

private:
  std::string literalText;
  std::unique_ptr<Regex> compiled;
};

/// Parses a tokenizer.json pattern, {"String": "..."} or {"Regex": "..."};
/// an empty pattern is refused (in `tokenizers` it matches between every two
/// characters, which no tokenizer means).
std::unique_ptr<Pattern> parsePattern(const JsonNode &node);

} // namespace sits::tok

#endif // SITS_RUNTIME_TOKENIZER_REGEX_H
