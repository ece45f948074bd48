//===- ParseStatements.cpp - Blocks and tags of a Jinja template ----------===//
//
// {% for %}, {% if %}, {% set %}, {% macro %}, {% call %}, {% filter %},
// {% with %}, {% print %}, loop controls and transformers' {% generation %},
// with jinja2's error messages for unknown and unclosed tags. The tags that
// need a template loader (extends, include, import, block) are refused.
//
//===----------------------------------------------------------------------===//

#include "ParserImpl.h"

#include <set>

namespace sits {
namespace chat {

bool Parser::atEndTag(const EndTags *endTags) const {
  if (!endTags || cur().kind != Token::Name)
    return false;
  for (const std::string &tag : *endTags)
    if (cur().text == tag)
      return true;
  return false;
}

Body Parser::subparse(const EndTags *endTags) {
  DepthGuard guard(*this);
  Body body;
  while (cur().kind != Token::Eof) {
    const Token &t = cur();
    if (t.kind == Token::Data) {
      auto s = stmt(StmtKind::Data, posOf(t));
      s->text = t.text;
      body.push_back(std::move(s));
      next();
    } else if (t.kind == Token::VariableBegin) {
      next();
      auto s = stmt(StmtKind::Output, posOf(cur()));
      s->expr = parseTuple(false, true, nullptr, false);
      if (cur().kind != Token::VariableEnd)
        expected("'end of print statement'");
      next();
      body.push_back(std::move(s));
    } else if (t.kind == Token::BlockBegin) {
      next();
      if (atEndTag(endTags))
        return body;
      body.push_back(parseStatement());
      expectBlockEnd();
    } else {
      failHere("unexpected " + describe(t));
    }
  }
  return body;
}

// Parses up to one of `endTags` (left as the current token).
Body Parser::parseStatements(const EndTags &endTags, bool dropNeedle) {
  skipOp(":");
  expectBlockEnd();
  endStack.push_back(&endTags);
  Body body = subparse(&endTags);
  endStack.pop_back();
  if (cur().kind == Token::Eof)
    failUnknownTag(nullptr, endTags);
  if (dropNeedle)
    next();
  return body;
}

void Parser::failUnknownTag(const Token *name, const EndTags &looking) {
  std::string message = name ? "Encountered unknown tag '" + name->text + "'."
                             : "Unexpected end of template.";
  if (!looking.empty()) {
    std::string tags;
    for (size_t i = 0; i < looking.size(); ++i)
      tags += (i ? " or '" : "'") + looking[i] + "'";
    bool expectedElsewhere = false;
    for (const EndTags *tagsOf : endStack)
      for (const std::string &tag : *tagsOf)
        expectedElsewhere |= name && tag == name->text;
    if (expectedElsewhere)
      message += " You probably made a nesting mistake. Jinja is expecting "
                 "this tag, but currently looking for " +
                 tags + ".";
    else
      message += " Jinja was looking for the following tags: " + tags + ".";
  }
  if (!tagStack.empty())
    message += " The innermost block that needs to be closed is '" +
               tagStack.back() + "'.";
  if (name)
    failAt(*name, message);
  failHere(message);
}

StmtPtr Parser::parseStatement() {
  const Token &t = cur();
  if (t.kind != Token::Name)
    failHere("tag name expected");
  const std::string &tag = t.text;
  tagStack.push_back(tag);
  StmtPtr result;
  if (tag == "for")
    result = parseFor();
  else if (tag == "if")
    result = parseIf();
  else if (tag == "set")
    result = parseSet();
  else if (tag == "macro")
    result = parseMacro();
  else if (tag == "call")
    result = parseCallBlock();
  else if (tag == "filter")
    result = parseFilterBlock();
  else if (tag == "with")
    result = parseWith();
  else if (tag == "print")
    result = parsePrint();
  else if (tag == "generation")
    result = parseGeneration();
  else if (tag == "break" || tag == "continue") {
    result =
        stmt(tag == "break" ? StmtKind::Break : StmtKind::Continue, posOf(t));
    next();
  } else if (tag == "block" || tag == "extends" || tag == "include" ||
             tag == "import" || tag == "from" || tag == "autoescape" ||
             tag == "do") {
    failHere("the '" + tag +
             "' tag is not supported in chat templates by this engine");
  } else {
    tagStack.pop_back();
    const EndTags none;
    failUnknownTag(&t, endStack.empty() ? none : *endStack.back());
  }
  tagStack.pop_back();
  return result;
}

StmtPtr Parser::parseFor() {
  auto s = stmt(StmtKind::For, posOf(next()));
  static const EndTags inTag = {"in"};
  s->target = parseAssignTarget(true, false, &inTag, false);
  expectName("in");
  static const EndTags recursiveTag = {"recursive"};
  s->expr = parseTuple(false, false, &recursiveTag, false);
  if (skipName("if"))
    s->condition = parseExpression(true);
  s->recursive = skipName("recursive");
  static const EndTags bodyEnd = {"endfor", "else"};
  s->body = parseStatements(bodyEnd);
  if (next().text == "else") {
    static const EndTags elseEnd = {"endfor"};
    s->elseBody = parseStatements(elseEnd, true);
  }
  return s;
}

StmtPtr Parser::parseIf() {
  auto s = stmt(StmtKind::If, posOf(next()));
  static const EndTags branchEnd = {"elif", "else", "endif"};
  static const EndTags elseEnd = {"endif"};
  while (true) {
    ExprPtr test = parseTuple(false, false, nullptr, false);
    Body body = parseStatements(branchEnd);
    s->branches.emplace_back(std::move(test), std::move(body));
    const Token &t = next();
    if (t.text == "elif")
      continue;
    if (t.text == "else")
      s->elseBody = parseStatements(elseEnd, true);
    break;
  }
  return s;
}

StmtPtr Parser::parseSet() {
  Pos pos = posOf(next());
  Target target = parseAssignTarget(true, false, nullptr, true);
  if (skipOp("=")) {
    auto s = stmt(StmtKind::Set, pos);
    s->target = std::move(target);
    s->expr = parseTuple(false, true, nullptr, false);
    return s;
  }
  auto s = stmt(StmtKind::SetBlock, pos);
  s->target = std::move(target);
  if (isOp("|"))
    s->expr = parseFilter(nullptr, false);
  static const EndTags end = {"endset"};
  s->body = parseStatements(end, true);
  return s;
}

void Parser::parseSignature(std::vector<Param> &params) {
  expectOp("(");
  bool sawDefault = false;
  while (!isOp(")")) {
    if (!params.empty())
      expectOp(",");
    Param param;
    param.name = expectAnyName().text;
    checkAssignable(param.name);
    if (skipOp("=")) {
      param.defaultValue = parseExpression(true);
      sawDefault = true;
    } else if (sawDefault) {
      failHere("non-default argument follows default argument");
    }
    params.push_back(std::move(param));
  }
  expectOp(")");
}

StmtPtr Parser::parseMacro() {
  auto s = stmt(StmtKind::Macro, posOf(next()));
  s->text = expectAnyName().text;
  checkAssignable(s->text);
  parseSignature(s->params);
  static const EndTags end = {"endmacro"};
  s->body = parseStatements(end, true);
  return s;
}

StmtPtr Parser::parseCallBlock() {
  auto s = stmt(StmtKind::CallBlock, posOf(next()));
  if (isOp("("))
    parseSignature(s->params);
  const Token &at = cur();
  s->expr = parseExpression(true);
  if (s->expr->kind != ExprKind::Call)
    failAt(at, "expected call");
  static const EndTags end = {"endcall"};
  s->body = parseStatements(end, true);
  return s;
}

StmtPtr Parser::parseFilterBlock() {
  auto s = stmt(StmtKind::FilterBlock, posOf(next()));
  s->expr = parseFilter(nullptr, true);
  static const EndTags end = {"endfilter"};
  s->body = parseStatements(end, true);
  return s;
}

StmtPtr Parser::parseWith() {
  auto s = stmt(StmtKind::With, posOf(next()));
  while (cur().kind != Token::BlockEnd) {
    if (!s->targets.empty())
      expectOp(",");
    s->targets.push_back(parseAssignTarget(true, false, nullptr, false));
    expectOp("=");
    s->values.push_back(parseExpression(true));
  }
  static const EndTags end = {"endwith"};
  s->body = parseStatements(end, true);
  return s;
}

StmtPtr Parser::parsePrint() {
  Pos pos = posOf(next());
  // One Output per expression, held by an If without branches: the
  // interpreter runs its else body, and it opens no scope.
  auto s = stmt(StmtKind::If, pos);
  while (cur().kind != Token::BlockEnd) {
    if (!s->elseBody.empty())
      expectOp(",");
    auto out = stmt(StmtKind::Output, posOf(cur()));
    out->expr = parseExpression(true);
    s->elseBody.push_back(std::move(out));
  }
  return s;
}

StmtPtr Parser::parseGeneration() {
  auto s = stmt(StmtKind::Generation, posOf(next()));
  static const EndTags end = {"endgeneration"};
  s->body = parseStatements(end, true);
  return s;
}

void Parser::checkAssignable(const std::string &name) {
  static const std::set<std::string> constants = {"true", "false", "none",
                                                  "True", "False", "None"};
  if (constants.count(name))
    failHere("can't assign to 'const'");
}

Target Parser::targetFrom(const Expr &e) {
  Target t;
  t.pos = e.pos;
  if (e.kind == ExprKind::Name) {
    t.kind = Target::Name;
    t.name = e.name;
    return t;
  }
  if (e.kind == ExprKind::Tuple) {
    t.kind = Target::Tuple;
    for (const ExprPtr &item : e.items)
      t.items.push_back(targetFrom(*item));
    return t;
  }
  const char *what = e.kind == ExprKind::Const ? "const" : "expression";
  throw SyntaxError{std::string("can't assign to '") + what + "'", e.pos.line,
                    e.pos.column};
}

Target Parser::parseAssignTarget(bool withTuple, bool nameOnly,
                                 const EndTags *extraEnd, bool withNamespace) {
  if (withNamespace && cur().kind == Token::Name &&
      peek().kind == Token::Operator && peek().text == ".") {
    Target t;
    t.kind = Target::NsAttr;
    t.pos = posOf(cur());
    t.name = next().text;
    next(); // '.'
    t.attr = expectAnyName().text;
    return t;
  }
  if (nameOnly) {
    Target t;
    t.pos = posOf(cur());
    t.name = expectAnyName().text;
    checkAssignable(t.name);
    return t;
  }
  ExprPtr e =
      withTuple ? parseTuple(true, true, extraEnd, false) : parsePrimary();
  return targetFrom(*e);
}

//===--------------------------------------------------------------------===//
// Expressions
//===--------------------------------------------------------------------===//

Body parseTemplate(std::string_view source) {
  Parser parser(tokenize(source));
  Body body = parser.parseRoot();
  checkTemplate(body);
  return body;
}

} // namespace chat
} // namespace sits
