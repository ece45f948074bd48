//===- ParseExpressions.cpp - Jinja expressions, by jinja2's grammar ------===//
//
// parse_expression -> condexpr -> or -> and -> not -> compare -> math1 (+ -)
// -> concat (~) -> math2 (* / // %) -> pow -> unary -> primary, postfix
// (. [] ()) and filter/test chains, exactly as jinja2/parser.py nests them.
//
//===----------------------------------------------------------------------===//

#include "ParserImpl.h"

namespace sits {
namespace chat {

ExprPtr Parser::parseExpression(bool withCondExpr) {
  return withCondExpr ? parseCondExpr() : parseOr();
}

ExprPtr Parser::parseCondExpr() {
  DepthGuard guard(*this);
  Pos pos = posOf(cur());
  ExprPtr expr1 = parseOr();
  while (skipName("if")) {
    auto e = node(ExprKind::CondExpr, pos);
    e->a = parseOr();
    e->b = std::move(expr1);
    if (skipName("else"))
      e->c = parseCondExpr();
    expr1 = std::move(e);
  }
  return expr1;
}

ExprPtr Parser::parseOr() {
  Pos pos = posOf(cur());
  ExprPtr left = parseAnd();
  while (skipName("or")) {
    auto e = node(ExprKind::Or, pos);
    e->a = std::move(left);
    e->b = parseAnd();
    left = std::move(e);
  }
  return left;
}

ExprPtr Parser::parseAnd() {
  Pos pos = posOf(cur());
  ExprPtr left = parseNot();
  while (skipName("and")) {
    auto e = node(ExprKind::And, pos);
    e->a = std::move(left);
    e->b = parseNot();
    left = std::move(e);
  }
  return left;
}

ExprPtr Parser::parseNot() {
  DepthGuard guard(*this);
  if (isName("not")) {
    auto e = node(ExprKind::Not, posOf(next()));
    e->a = parseNot();
    return e;
  }
  return parseCompare();
}

ExprPtr Parser::parseCompare() {
  Pos pos = posOf(cur());
  ExprPtr expr = parseMath1();
  std::unique_ptr<Expr> cmp;
  while (true) {
    CmpOp op;
    if (isOp("=="))
      op = CmpOp::Eq;
    else if (isOp("!="))
      op = CmpOp::Ne;
    else if (isOp("<"))
      op = CmpOp::Lt;
    else if (isOp("<="))
      op = CmpOp::Le;
    else if (isOp(">"))
      op = CmpOp::Gt;
    else if (isOp(">="))
      op = CmpOp::Ge;
    else if (isName("in"))
      op = CmpOp::In;
    else if (isName("not") && peek().kind == Token::Name &&
             peek().text == "in") {
      next();
      op = CmpOp::NotIn;
    } else {
      break;
    }
    next();
    if (!cmp) {
      cmp = node(ExprKind::Compare, pos);
      cmp->a = std::move(expr);
    }
    cmp->ops.push_back(op);
    cmp->items.push_back(parseMath1());
  }
  return cmp ? std::move(cmp) : std::move(expr);
}

ExprPtr Parser::binary(BinOp op, Pos pos, ExprPtr left, ExprPtr right) {
  auto e = node(ExprKind::Binary, pos);
  e->binop = op;
  e->a = std::move(left);
  e->b = std::move(right);
  return e;
}

ExprPtr Parser::parseMath1() {
  Pos pos = posOf(cur());
  ExprPtr left = parseConcat();
  while (isOp("+") || isOp("-")) {
    BinOp op = next().text == "+" ? BinOp::Add : BinOp::Sub;
    left = binary(op, pos, std::move(left), parseConcat());
  }
  return left;
}

ExprPtr Parser::parseConcat() {
  Pos pos = posOf(cur());
  ExprPtr first = parseMath2();
  if (!isOp("~"))
    return first;
  auto e = node(ExprKind::Concat, pos);
  e->items.push_back(std::move(first));
  while (skipOp("~"))
    e->items.push_back(parseMath2());
  return e;
}

ExprPtr Parser::parseMath2() {
  Pos pos = posOf(cur());
  ExprPtr left = parsePow();
  while (isOp("*") || isOp("/") || isOp("//") || isOp("%")) {
    const std::string &t = next().text;
    BinOp op = t == "*"    ? BinOp::Mul
               : t == "/"  ? BinOp::Div
               : t == "//" ? BinOp::FloorDiv
                           : BinOp::Mod;
    left = binary(op, pos, std::move(left), parsePow());
  }
  return left;
}

ExprPtr Parser::parsePow() {
  Pos pos = posOf(cur());
  ExprPtr left = parseUnary(true);
  while (skipOp("**"))
    left = binary(BinOp::Pow, pos, std::move(left), parseUnary(true));
  return left;
}

ExprPtr Parser::parseUnary(bool withFilter) {
  DepthGuard guard(*this);
  Pos pos = posOf(cur());
  ExprPtr e;
  if (isOp("-") || isOp("+")) {
    e = node(next().text == "-" ? ExprKind::Neg : ExprKind::Plus, pos);
    e->a = parseUnary(false);
  } else {
    e = parsePrimary();
  }
  e = parsePostfix(std::move(e));
  if (withFilter)
    e = parseFilterExpr(std::move(e));
  return e;
}

ExprPtr Parser::constant(Value v, Pos pos) {
  auto e = node(ExprKind::Const, pos);
  e->value = std::move(v);
  return e;
}

ExprPtr Parser::parsePrimary() {
  DepthGuard guard(*this);
  const Token &t = cur();
  Pos pos = posOf(t);
  switch (t.kind) {
  case Token::Name: {
    next();
    if (t.text == "true" || t.text == "True")
      return constant(Value::boolean(true), pos);
    if (t.text == "false" || t.text == "False")
      return constant(Value::boolean(false), pos);
    if (t.text == "none" || t.text == "None")
      return constant(Value::none(), pos);
    auto e = node(ExprKind::Name, pos);
    e->name = t.text;
    return e;
  }
  case Token::String: {
    std::string text = next().text;
    while (cur().kind == Token::String)
      text += next().text;
    return constant(Value::string(std::move(text)), pos);
  }
  case Token::Integer:
    return constant(Value::integer(next().intValue), pos);
  case Token::Float:
    return constant(Value::real(next().floatValue), pos);
  case Token::Operator:
    if (t.text == "(") {
      next();
      ExprPtr e = parseTuple(false, true, nullptr, true);
      expectOp(")");
      return e;
    }
    if (t.text == "[")
      return parseList();
    if (t.text == "{")
      return parseDict();
    break;
  default:
    break;
  }
  if (t.kind == Token::Eof)
    failHere("unexpected end of template, expected an expression.");
  failHere("unexpected " + describe(t));
}

bool Parser::isTupleEnd(const EndTags *extraEnd) const {
  if (cur().kind == Token::VariableEnd || cur().kind == Token::BlockEnd ||
      isOp(")"))
    return true;
  return atEndTag(extraEnd);
}

ExprPtr Parser::parseTuple(bool simplified, bool withCondExpr,
                           const EndTags *extraEnd, bool explicitParentheses) {
  Pos pos = posOf(cur());
  std::vector<ExprPtr> args;
  bool isTuple = false;
  while (true) {
    if (!args.empty())
      expectOp(",");
    if (isTupleEnd(extraEnd))
      break;
    args.push_back(simplified     ? parsePrimary()
                   : withCondExpr ? parseExpression(true)
                                  : parseExpression(false));
    if (isOp(","))
      isTuple = true;
    else
      break;
  }
  if (!isTuple) {
    if (!args.empty())
      return std::move(args[0]);
    if (!explicitParentheses)
      failHere("Expected an expression, got " + describe(cur()));
  }
  auto e = node(ExprKind::Tuple, pos);
  e->items = std::move(args);
  return e;
}

ExprPtr Parser::parseList() {
  auto e = node(ExprKind::List, posOf(next()));
  while (!isOp("]")) {
    if (!e->items.empty())
      expectOp(",");
    if (isOp("]"))
      break;
    e->items.push_back(parseExpression(true));
  }
  expectOp("]");
  return e;
}

ExprPtr Parser::parseDict() {
  auto e = node(ExprKind::Dict, posOf(next()));
  while (!isOp("}")) {
    if (!e->items.empty())
      expectOp(",");
    if (isOp("}"))
      break;
    e->items.push_back(parseExpression(true));
    expectOp(":");
    e->items.push_back(parseExpression(true));
  }
  expectOp("}");
  return e;
}

ExprPtr Parser::parsePostfix(ExprPtr e) {
  while (true) {
    if (isOp(".") || isOp("["))
      e = parseSubscript(std::move(e));
    else if (isOp("("))
      e = parseCall(std::move(e));
    else
      return e;
  }
}

ExprPtr Parser::parseFilterExpr(ExprPtr e) {
  while (true) {
    if (isOp("|"))
      e = parseFilter(std::move(e), false);
    else if (isName("is"))
      e = parseTest(std::move(e));
    else if (isOp("("))
      e = parseCall(std::move(e));
    else
      return e;
  }
}

ExprPtr Parser::parseSubscript(ExprPtr obj) {
  const Token &t = next();
  Pos pos = posOf(t);
  if (t.text == ".") {
    const Token &attr = next();
    if (attr.kind == Token::Name) {
      auto e = node(ExprKind::Getattr, pos);
      e->a = std::move(obj);
      e->name = attr.text;
      return e;
    }
    if (attr.kind != Token::Integer)
      failAt(attr, "expected name or number");
    auto e = node(ExprKind::Getitem, pos);
    e->a = std::move(obj);
    e->b = constant(Value::integer(attr.intValue), posOf(attr));
    return e;
  }
  std::vector<ExprPtr> args;
  while (!isOp("]")) {
    if (!args.empty())
      expectOp(",");
    args.push_back(parseSubscribed());
  }
  expectOp("]");
  auto e = node(ExprKind::Getitem, pos);
  e->a = std::move(obj);
  if (args.size() == 1) {
    e->b = std::move(args[0]);
  } else {
    e->b = node(ExprKind::Tuple, pos);
    e->b->items = std::move(args);
  }
  return e;
}

ExprPtr Parser::parseSubscribed() {
  Pos pos = posOf(cur());
  ExprPtr start;
  if (!isOp(":")) {
    start = parseExpression(true);
    if (!isOp(":"))
      return start;
  }
  next(); // ':'
  auto slice = node(ExprKind::Slice, pos);
  slice->a = std::move(start);
  if (!isOp(":") && !isOp("]") && !isOp(","))
    slice->b = parseExpression(true);
  if (skipOp(":")) {
    if (!isOp("]") && !isOp(","))
      slice->c = parseExpression(true);
  }
  return slice;
}

void Parser::parseCallArgs(Expr &e) {
  expectOp("(");
  bool requireComma = false;
  auto ensure = [&](bool ok) {
    if (!ok)
      failHere("invalid syntax for function call expression");
  };
  while (!isOp(")")) {
    if (requireComma) {
      expectOp(",");
      if (isOp(")"))
        break;
    }
    if (isOp("*")) {
      ensure(!e.dynArgs && !e.dynKwargs);
      next();
      e.dynArgs = parseExpression(true);
    } else if (isOp("**")) {
      ensure(!e.dynKwargs);
      next();
      e.dynKwargs = parseExpression(true);
    } else if (cur().kind == Token::Name && peek().kind == Token::Operator &&
               peek().text == "=") {
      ensure(!e.dynKwargs);
      std::string key = next().text;
      next();
      e.kwargs.emplace_back(std::move(key), parseExpression(true));
    } else {
      ensure(!e.dynArgs && !e.dynKwargs && e.kwargs.empty());
      e.items.push_back(parseExpression(true));
    }
    requireComma = true;
  }
  expectOp(")");
}

ExprPtr Parser::parseCall(ExprPtr callee) {
  auto e = node(ExprKind::Call, posOf(cur()));
  e->a = std::move(callee);
  parseCallArgs(*e);
  return e;
}

std::string Parser::dottedName() {
  std::string name = expectAnyName().text;
  while (isOp(".")) {
    next();
    name += "." + expectAnyName().text;
  }
  return name;
}

ExprPtr Parser::parseFilter(ExprPtr input, bool startInline) {
  while (isOp("|") || startInline) {
    if (!startInline)
      next();
    auto e = node(ExprKind::Filter, posOf(cur()));
    e->name = dottedName();
    e->a = std::move(input);
    if (isOp("("))
      parseCallArgs(*e);
    input = std::move(e);
    startInline = false;
  }
  return input;
}

ExprPtr Parser::parseTest(ExprPtr operand) {
  next(); // 'is'
  bool negated = skipName("not");
  auto e = node(ExprKind::Test, posOf(cur()));
  e->name = dottedName();
  e->a = std::move(operand);
  const Token &t = cur();
  if (isOp("(")) {
    parseCallArgs(*e);
  } else if ((t.kind == Token::Name || t.kind == Token::String ||
              t.kind == Token::Integer || t.kind == Token::Float || isOp("(") ||
              isOp("[") || isOp("{")) &&
             !isName("else") && !isName("or") && !isName("and")) {
    if (isName("is"))
      failHere("You cannot chain multiple tests with is");
    e->items.push_back(parsePostfix(parsePrimary()));
  }
  if (!negated)
    return e;
  auto notExpr = node(ExprKind::Not, e->pos);
  notExpr->a = std::move(e);
  return notExpr;
}

} // namespace chat
} // namespace sits
