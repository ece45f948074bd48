//===- Checker.cpp - What jinja2 rejects when it compiles a template ------===//
//
// jinja2 reports an unknown filter or test when it compiles, unless the
// filter sits in an `if` body or an inline if-expression (a "soft" frame):
// there it fails only if it runs. Loops, macros and blocks start new frames
// that are not soft again. This pass resolves every filter and test once.
//
//===----------------------------------------------------------------------===//

#include "Builtins.h"
#include "ParserImpl.h"

namespace sits {
namespace chat {

namespace {

class Checker {
public:
  void body(Body &statements, bool soft, bool inLoop) {
    for (StmtPtr &s : statements)
      statement(*s, soft, inLoop);
  }

private:
  [[noreturn]] static void failAt(Pos pos, std::string message) {
    throw SyntaxError{std::move(message), pos.line, pos.column};
  }

  void statement(Stmt &s, bool soft, bool inLoop) {
    switch (s.kind) {
    case StmtKind::Data:
      return;
    case StmtKind::Output:
    case StmtKind::Set:
      expr(s.expr.get(), soft);
      return;
    case StmtKind::If:
      for (auto &branch : s.branches) {
        expr(branch.first.get(), true);
        body(branch.second, true, inLoop);
      }
      body(s.elseBody, s.branches.empty() ? soft : true, inLoop);
      return;
    case StmtKind::For:
      checkLoopTarget(s.target);
      expr(s.expr.get(), soft);
      expr(s.condition.get(), false);
      body(s.body, false, true);
      body(s.elseBody, false, inLoop);
      return;
    case StmtKind::SetBlock:
    case StmtKind::FilterBlock:
      expr(s.expr.get(), false);
      body(s.body, false, inLoop);
      return;
    case StmtKind::Macro:
    case StmtKind::CallBlock:
      if (s.kind == StmtKind::CallBlock)
        expr(s.expr.get(), soft);
      for (Param &p : s.params)
        expr(p.defaultValue.get(), false);
      body(s.body, false, false);
      for (const StmtPtr &inner : s.body)
        findSpecialNames(*inner, s);
      return;
    case StmtKind::With:
      for (ExprPtr &value : s.values)
        expr(value.get(), soft);
      body(s.body, false, inLoop);
      return;
    case StmtKind::Generation:
      body(s.body, false, false);
      return;
    case StmtKind::Break:
    case StmtKind::Continue:
      if (!inLoop)
        failAt(s.pos, s.kind == StmtKind::Break ? "'break' outside loop"
                                                : "'continue' not properly in "
                                                  "loop");
      return;
    }
  }

  void checkLoopTarget(const Target &t) {
    if (t.kind == Target::Name && t.name == "loop")
      failAt(t.pos, "Can't assign to special loop variable in for-loop target");
    for (const Target &item : t.items)
      checkLoopTarget(item);
  }

  void expr(Expr *e, bool soft) {
    if (!e)
      return;
    if (e->kind == ExprKind::CondExpr)
      soft = true;
    if (e->kind == ExprKind::Filter || e->kind == ExprKind::Test) {
      bool isFilter = e->kind == ExprKind::Filter;
      e->builtin = isFilter ? findFilter(e->name) : findTest(e->name);
      if (!e->builtin && !soft)
        failAt(e->pos, std::string("No ") + (isFilter ? "filter" : "test") +
                           " named '" + e->name + "'.");
    }
    expr(e->a.get(), soft);
    expr(e->b.get(), soft);
    expr(e->c.get(), soft);
    for (ExprPtr &item : e->items)
      expr(item.get(), soft);
    for (auto &kw : e->kwargs)
      expr(kw.second.get(), soft);
    expr(e->dynArgs.get(), soft);
    expr(e->dynKwargs.get(), soft);
  }

  // A macro takes `caller`, `varargs` and `kwargs` only when its body
  // reads them (jinja2's find_undeclared).
  static void findSpecialNames(const Stmt &s, Stmt &macro) {
    auto visitExpr = [&](const Expr *e, auto &self) -> void {
      if (!e)
        return;
      if (e->kind == ExprKind::Name) {
        macro.usesCaller |= e->name == "caller";
        macro.usesVarargs |= e->name == "varargs";
        macro.usesKwargs |= e->name == "kwargs";
      }
      self(e->a.get(), self);
      self(e->b.get(), self);
      self(e->c.get(), self);
      for (const ExprPtr &item : e->items)
        self(item.get(), self);
      for (const auto &kw : e->kwargs)
        self(kw.second.get(), self);
      self(e->dynArgs.get(), self);
      self(e->dynKwargs.get(), self);
    };
    visitExpr(s.expr.get(), visitExpr);
    visitExpr(s.condition.get(), visitExpr);
    for (const auto &branch : s.branches) {
      visitExpr(branch.first.get(), visitExpr);
      for (const StmtPtr &inner : branch.second)
        findSpecialNames(*inner, macro);
    }
    for (const ExprPtr &value : s.values)
      visitExpr(value.get(), visitExpr);
    for (const Param &p : s.params)
      visitExpr(p.defaultValue.get(), visitExpr);
    for (const StmtPtr &inner : s.body)
      findSpecialNames(*inner, macro);
    for (const StmtPtr &inner : s.elseBody)
      findSpecialNames(*inner, macro);
  }
};

} // namespace

void checkTemplate(Body &body) { Checker().body(body, false, false); }

} // namespace chat
} // namespace sits
