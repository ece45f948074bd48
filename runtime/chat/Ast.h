//===- Ast.h - The parsed form of a Jinja template --------------*- C++ -*-===//
//
// One node type for expressions and one for statements (kind + the fields
// that kind uses), mirroring jinja2.nodes. Every node knows its position so
// that render errors can name the line and column.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_CHAT_AST_H
#define SITS_CHAT_AST_H

#include "Value.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace sits {
namespace chat {

struct Pos {
  uint32_t line = 0, column = 0;
};

struct Builtin;

enum class ExprKind : uint8_t {
  Const,    // value
  Name,     // name
  List,     // items
  Tuple,    // items
  Dict,     // items: key, value, key, value ...
  Getattr,  // a.name
  Getitem,  // a[b]
  Slice,    // a:b:c (inside Getitem; each part may be null)
  Call,     // a(items, kwargs, *dynArgs, **dynKwargs)
  Filter,   // a|name(items, kwargs); a null: the body of a filter block
  Test,     // a is name(items, kwargs)
  Neg,      // -a
  Plus,     // +a
  Not,      // not a
  Binary,   // a binop b
  Concat,   // items joined by ~
  Compare,  // a ops[0] items[0] ops[1] items[1] ...
  And,      // a and b
  Or,       // a or b
  CondExpr, // b if a else c (c may be null)
};

enum class BinOp : uint8_t { Add, Sub, Mul, Div, FloorDiv, Mod, Pow };
enum class CmpOp : uint8_t { Eq, Ne, Lt, Le, Gt, Ge, In, NotIn };

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  ExprKind kind;
  Pos pos;
  Value value;
  std::string name;
  ExprPtr a, b, c;
  std::vector<ExprPtr> items;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  ExprPtr dynArgs, dynKwargs;
  std::vector<CmpOp> ops;
  BinOp binop = BinOp::Add;
  /// The filter or test; null when unknown inside an `if` (jinja2 raises
  /// only when such a filter runs).
  const Builtin *builtin = nullptr;
};

/// An assignment target: a name, a tuple of targets, or `ns.attr`.
struct Target {
  enum Kind : uint8_t { Name, Tuple, NsAttr } kind = Name;
  std::string name, attr;
  std::vector<Target> items;
  Pos pos;
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

enum class StmtKind : uint8_t {
  Data,        // text
  Output,      // {{ expr }} / {% print expr %}
  If,          // branches (test, body), elseBody
  For,         // for target in expr [if condition] [recursive]: body, elseBody
  Set,         // set target = expr
  SetBlock,    // set target [| expr filter]: body
  Macro,       // macro text(params): body
  CallBlock,   // call(params) expr: body (the caller)
  FilterBlock, // filter expr: body
  With,        // with targets = values: body
  Break,
  Continue,
  Generation, // transformers' {% generation %}: body
};

struct Param {
  std::string name;
  ExprPtr defaultValue;
};

struct Stmt {
  StmtKind kind;
  Pos pos;
  std::string text;
  ExprPtr expr;
  std::vector<std::pair<ExprPtr, Body>> branches;
  Body body, elseBody;
  Target target;
  ExprPtr condition;
  bool recursive = false;
  std::vector<Param> params;
  bool usesCaller = false, usesVarargs = false, usesKwargs = false;
  std::vector<Target> targets;
  std::vector<ExprPtr> values;
};

} // namespace chat
} // namespace sits

#endif // SITS_CHAT_AST_H
