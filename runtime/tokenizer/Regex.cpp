//===- Regex.cpp - PCRE2 regexes and literal split patterns ---------------===//

#include "Regex.h"

#include "JsonConfig.h"
#include "Unicode.h"
#include "sits/Error.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

using namespace sits;
using namespace sits::tok;

namespace {

std::string pcre2Message(int code) {
  PCRE2_UCHAR buffer[256];
  if (pcre2_get_error_message(code, buffer, sizeof(buffer)) < 0)
    return "error " + std::to_string(code);
  return reinterpret_cast<const char *>(buffer);
}

/// Match data, a match context and a JIT stack per thread: a Tokenizer is
/// shared between threads, and these are the only mutable matching state.
struct ThreadMatchState {
  pcre2_match_data *data = nullptr;
  pcre2_match_context *context = nullptr;
  pcre2_jit_stack *jitStack = nullptr;

  ThreadMatchState() {
    // Only the whole match is read; PCRE2 still reports it when the
    // pattern has groups (rc == 0: "ovector too small").
    data = pcre2_match_data_create(1, nullptr);
    context = pcre2_match_context_create(nullptr);
    // `\s+(?!\S)` backtracks over whole whitespace runs: give the JIT more
    // than its 32 KiB default so long runs do not fail.
    jitStack = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, nullptr);
    if (context && jitStack)
      pcre2_jit_stack_assign(context, nullptr, jitStack);
  }
  ~ThreadMatchState() {
    pcre2_jit_stack_free(jitStack);
    pcre2_match_context_free(context);
    pcre2_match_data_free(data);
  }
};

ThreadMatchState &threadMatchState() {
  thread_local ThreadMatchState state;
  return state;
}

} // namespace

Regex::Regex(const std::string &source, const std::string &path)
    : pattern(source) {
  int errorCode = 0;
  PCRE2_SIZE errorOffset = 0;
  pcre2_code *compiledCode =
      pcre2_compile(reinterpret_cast<PCRE2_SPTR>(source.data()), source.size(),
                    PCRE2_UTF | PCRE2_UCP, &errorCode, &errorOffset, nullptr);
  if (!compiledCode)
    throw Error(ErrorCode::InvalidTokenizer,
                path + ": the regex does not compile at offset " +
                    std::to_string(errorOffset) + ": " +
                    pcre2Message(errorCode));
  // Without JIT (an unsupported CPU) pcre2_match still works, only slower.
  pcre2_jit_compile(compiledCode, PCRE2_JIT_COMPLETE);
  code = compiledCode;
}

Regex::~Regex() { pcre2_code_free(static_cast<pcre2_code *>(code)); }

bool Regex::find(std::string_view text, size_t start, size_t &matchBegin,
                 size_t &matchEnd) const {
  ThreadMatchState &state = threadMatchState();
  if (!state.data)
    throw std::bad_alloc();
  // The text is valid UTF-8 (checked once per encode), so PCRE2 need not
  // check it again at every call.
  int rc = pcre2_match(static_cast<pcre2_code *>(code),
                       reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(),
                       start, PCRE2_NO_UTF_CHECK, state.data, state.context);
  if (rc == PCRE2_ERROR_NOMATCH)
    return false;
  if (rc < 0)
    throw Error(ErrorCode::InvalidText,
                "the regex '" + pattern +
                    "' failed on this text: " + pcre2Message(rc));
  PCRE2_SIZE *ovector = pcre2_get_ovector_pointer(state.data);
  matchBegin = ovector[0];
  matchEnd = ovector[1];
  return true;
}

std::unique_ptr<Pattern> Pattern::literal(std::string text) {
  auto result = std::unique_ptr<Pattern>(new Pattern());
  result->literalText = std::move(text);
  return result;
}

std::unique_ptr<Pattern> Pattern::regex(const std::string &source,
                                        const std::string &path) {
  auto result = std::unique_ptr<Pattern>(new Pattern());
  result->compiled = std::make_unique<Regex>(source, path);
  return result;
}

void Pattern::findMatches(std::string_view text,
                          std::vector<Span> &spans) const {
  if (text.empty()) {
    spans.push_back({0, 0, false});
    return;
  }
  size_t previous = 0;
  auto addMatch = [&](size_t begin, size_t end) {
    if (previous != begin)
      spans.push_back({previous, begin, false});
    spans.push_back({begin, end, true});
    previous = end;
  };
  if (!compiled) {
    // A literal (the loader refuses empty ones): non-overlapping, leftmost.
    size_t pos = 0;
    while ((pos = text.find(literalText, pos)) != std::string_view::npos) {
      addMatch(pos, pos + literalText.size());
      pos += literalText.size();
    }
  } else {
    // Oniguruma's find_iter: an empty match right after the previous match
    // is skipped by moving one character on.
    size_t searchFrom = 0;
    bool haveLastEnd = false;
    size_t lastMatchEnd = 0;
    while (searchFrom <= text.size()) {
      size_t begin, end;
      if (!compiled->find(text, searchFrom, begin, end))
        break;
      if (begin == end && haveLastEnd && lastMatchEnd == end) {
        searchFrom +=
            searchFrom < text.size()
                ? utf8Length(static_cast<unsigned char>(text[searchFrom]))
                : 1;
        continue;
      }
      searchFrom = end;
      haveLastEnd = true;
      lastMatchEnd = end;
      addMatch(begin, end);
    }
  }
  if (previous != text.size())
    spans.push_back({previous, text.size(), false});
}

std::unique_ptr<Pattern> sits::tok::parsePattern(const JsonNode &node) {
  if (node.isNull())
    node.fail("missing (expected {\"String\": ...} or {\"Regex\": ...})");
  bool isString = node.has("String"), isRegex = node.has("Regex");
  if (isString == isRegex || node.value().size() != 1)
    node.fail("expected {\"String\": ...} or {\"Regex\": ...}");
  JsonNode text = node.field(isString ? "String" : "Regex");
  std::string source = text.asString();
  if (source.empty())
    text.fail("an empty pattern is not supported");
  if (isString)
    return Pattern::literal(std::move(source));
  return Pattern::regex(source, text.path());
}
