//===- ParserImpl.h - The parser's declaration (private) --------*- C++ -*-===//
//
// A recursive-descent parser with jinja2's grammar (jinja2/parser.py), so
// that precedence and its quirks match: `-1 ** 2` is 1, `**` is
// left-associative, `not x is y` is `not (x is y)`, filters bind tighter
// than arithmetic, and a `for` iterable has no inline if-else. Statements
// are parsed in ParseStatements.cpp, expressions in ParseExpressions.cpp.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_CHAT_PARSERIMPL_H
#define SITS_CHAT_PARSERIMPL_H

#include "Ast.h"
#include "Lexer.h"
#include "Parser.h"

#include <algorithm>
#include <string>
#include <vector>

namespace sits {
namespace chat {

class Parser {
public:
  explicit Parser(std::vector<Token> tokens) : toks(std::move(tokens)) {}

  Body parseRoot() {
    Body body = subparse(nullptr);
    if (cur().kind != Token::Eof)
      failHere("unexpected " + describe(cur()));
    return body;
  }

private:
  using EndTags = std::vector<std::string>;

  struct DepthGuard {
    explicit DepthGuard(Parser &p) : parser(p) {
      if (++parser.depth > kMaxParseDepth)
        parser.failHere("template nested deeper than " +
                        std::to_string(kMaxParseDepth) + " levels");
    }
    ~DepthGuard() { --parser.depth; }
    Parser &parser;
  };

  const Token &cur() const { return toks[index]; }
  const Token &peek(size_t k = 1) const {
    return toks[std::min(index + k, toks.size() - 1)];
  }
  const Token &next() {
    const Token &t = toks[index];
    if (index + 1 < toks.size())
      ++index;
    return t;
  }
  static Pos posOf(const Token &t) { return Pos{t.line, t.column}; }

  [[noreturn]] void failAt(const Token &t, std::string message) {
    throw SyntaxError{std::move(message), t.line, t.column};
  }
  [[noreturn]] void failHere(std::string message) {
    failAt(cur(), std::move(message));
  }

  static std::string describe(const Token &t) {
    switch (t.kind) {
    case Token::Name:
    case Token::Operator:
      return "'" + t.text + "'";
    case Token::String:
      return "string";
    case Token::Integer:
      return "integer";
    case Token::Float:
      return "float";
    case Token::Data:
      return "template data / text";
    case Token::VariableBegin:
      return "begin of print statement";
    case Token::VariableEnd:
      return "end of print statement";
    case Token::BlockBegin:
      return "begin of statement block";
    case Token::BlockEnd:
      return "end of statement block";
    case Token::Eof:
      return "end of template";
    }
    return "token";
  }

  bool isOp(const char *op) const {
    return cur().kind == Token::Operator && cur().text == op;
  }
  bool isName(const char *name) const {
    return cur().kind == Token::Name && cur().text == name;
  }
  bool skipOp(const char *op) {
    if (!isOp(op))
      return false;
    next();
    return true;
  }
  bool skipName(const char *name) {
    if (!isName(name))
      return false;
    next();
    return true;
  }
  [[noreturn]] void expected(const std::string &what) {
    if (cur().kind == Token::Eof)
      failHere("unexpected end of template, expected " + what + ".");
    failHere("expected token " + what + ", got " + describe(cur()));
  }
  const Token &expectOp(const char *op) {
    if (!isOp(op))
      expected(std::string("'") + op + "'");
    return next();
  }
  const Token &expectName(const char *name) {
    if (!isName(name))
      expected(std::string("'") + name + "'");
    return next();
  }
  const Token &expectAnyName() {
    if (cur().kind != Token::Name)
      expected("'name'");
    return next();
  }
  void expectBlockEnd() {
    if (cur().kind != Token::BlockEnd)
      expected("'end of statement block'");
    next();
  }

  ExprPtr node(ExprKind kind, Pos pos) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->pos = pos;
    return e;
  }
  StmtPtr stmt(StmtKind kind, Pos pos) {
    auto s = std::make_unique<Stmt>();
    s->kind = kind;
    s->pos = pos;
    return s;
  }

  //===--------------------------------------------------------------------===//
  // Statements
  //===--------------------------------------------------------------------===//

  // Statements (ParseStatements.cpp).
  bool atEndTag(const EndTags *endTags) const;
  Body subparse(const EndTags *endTags);
  Body parseStatements(const EndTags &endTags, bool dropNeedle = false);
  [[noreturn]] void failUnknownTag(const Token *name, const EndTags &looking);
  StmtPtr parseStatement();
  StmtPtr parseFor();
  StmtPtr parseIf();
  StmtPtr parseSet();
  void parseSignature(std::vector<Param> &params);
  StmtPtr parseMacro();
  StmtPtr parseCallBlock();
  StmtPtr parseFilterBlock();
  StmtPtr parseWith();
  StmtPtr parsePrint();
  StmtPtr parseGeneration();
  void checkAssignable(const std::string &name);
  Target targetFrom(const Expr &e);
  Target parseAssignTarget(bool withTuple, bool nameOnly,
                           const EndTags *extraEnd, bool withNamespace);

  // Expressions (ParseExpressions.cpp).
  ExprPtr parseExpression(bool withCondExpr);
  ExprPtr parseCondExpr();
  ExprPtr parseOr();
  ExprPtr parseAnd();
  ExprPtr parseNot();
  ExprPtr parseCompare();
  ExprPtr binary(BinOp op, Pos pos, ExprPtr left, ExprPtr right);
  ExprPtr parseMath1();
  ExprPtr parseConcat();
  ExprPtr parseMath2();
  ExprPtr parsePow();
  ExprPtr parseUnary(bool withFilter);
  ExprPtr constant(Value v, Pos pos);
  ExprPtr parsePrimary();
  bool isTupleEnd(const EndTags *extraEnd) const;
  ExprPtr parseTuple(bool simplified, bool withCondExpr,
                     const EndTags *extraEnd, bool explicitParentheses);
  ExprPtr parseList();
  ExprPtr parseDict();
  ExprPtr parsePostfix(ExprPtr e);
  ExprPtr parseFilterExpr(ExprPtr e);
  ExprPtr parseSubscript(ExprPtr obj);
  ExprPtr parseSubscribed();
  void parseCallArgs(Expr &e);
  ExprPtr parseCall(ExprPtr callee);
  std::string dottedName();
  ExprPtr parseFilter(ExprPtr input, bool startInline);
  ExprPtr parseTest(ExprPtr operand);

  std::vector<Token> toks;
  size_t index = 0;
  unsigned depth = 0;
  std::vector<const EndTags *> endStack;
  std::vector<std::string> tagStack;
};

/// The checks jinja2 makes when it compiles (Checker.cpp): unknown filters
/// and tests outside `if` bodies, `break` outside a loop, assigning `loop`,
/// and which macros take caller, varargs and kwargs.
void checkTemplate(Body &body);

} // namespace chat
} // namespace sits

#endif // SITS_CHAT_PARSERIMPL_H
