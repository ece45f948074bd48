//===- Lexer.h - Jinja tokens, transformers' whitespace rules ---*- C++ -*-===//
//
// Splits a template into text and the tokens inside {{ }}, {% %} and {# #},
// applying what jinja2's lexer applies: newline normalization, dropping one
// trailing newline, `-`/`+` whitespace control, and transformers'
// trim_blocks and lstrip_blocks.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_CHAT_LEXER_H
#define SITS_CHAT_LEXER_H

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace sits {
namespace chat {

struct Token {
  enum Kind : uint8_t {
    Data,
    VariableBegin,
    VariableEnd,
    BlockBegin,
    BlockEnd,
    Name,
    String,
    Integer,
    Float,
    Operator,
    Eof,
  };
  Kind kind;
  std::string text; ///< data, name, operator, or the decoded string literal
  int64_t intValue = 0;
  double floatValue = 0;
  uint32_t line = 1, column = 1;
};

/// A syntax error with its position (thrown by the lexer and the parser).
struct SyntaxError {
  std::string message;
  uint32_t line, column;
};

/// Tokenizes `source`; throws SyntaxError.
std::vector<Token> tokenize(std::string_view source);

} // namespace chat
} // namespace sits

#endif // SITS_CHAT_LEXER_H
