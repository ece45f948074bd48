//===- Parser.h - Tokens to the template's statements -----------*- C++ -*-===//

#ifndef SITS_CHAT_PARSER_H
#define SITS_CHAT_PARSER_H

#include "Ast.h"

#include <string_view>

namespace sits {
namespace chat {

/// The deepest nesting of expressions and blocks the parser accepts.
constexpr unsigned kMaxParseDepth = 256;

/// Parses a template; throws SyntaxError (Lexer.h) naming what was expected.
Body parseTemplate(std::string_view source);

} // namespace chat
} // namespace sits

#endif // SITS_CHAT_PARSER_H
