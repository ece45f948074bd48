//===- Interpreter.h - Renders a parsed template ----------------*- C++ -*-===//
//
// A tree-walking evaluator with jinja2's scoping: `for` bodies, macros,
// call/filter/set blocks and `with` get their own scope per run (a `set` in
// a loop is gone after the iteration), `if` does not. Variable lookup goes
// from the innermost scope to the template's variables, then the globals.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_CHAT_INTERPRETER_H
#define SITS_CHAT_INTERPRETER_H

#include "Ast.h"
#include "Builtins.h"
#include "Value.h"

#include <memory>
#include <string>
#include <vector>

namespace sits {
namespace chat {

/// Bounds on evaluation: nesting of evaluation calls (macro recursion
/// included) and the total number of loop iterations and macro calls.
constexpr unsigned kMaxEvalDepth = 600;
constexpr uint64_t kMaxSteps = 10'000'000;

struct Scope {
  std::shared_ptr<Scope> parent;
  std::vector<std::pair<std::string, Value>> vars;
  const Value *find(std::string_view name) const;
  void set(const std::string &name, Value value);
};
using ScopePtr = std::shared_ptr<Scope>;

class MacroObject;
class LoopObject;

class Interpreter {
public:
  /// `now` is the local time strftime_now formats ("YYYY-MM-DD
  /// HH:MM:SS[.ffffff]"); empty reads the clock.
  Interpreter(Value variables, std::string now);
  ~Interpreter();

  /// Renders; throws RenderError.
  std::string render(const Body &root);

  // Services for builtins.
  /// jinja2's sandboxed getattr: methods first, then dict keys.
  Value getAttr(const Value &obj, std::string_view name);
  /// jinja2's getitem: keys and indices first, then attributes.
  Value getItem(const Value &obj, const Value &key);
  Value call(const Value &callee, CallArgs &args);
  Value callFilter(std::string_view name, const Value &input, CallArgs &args);
  bool callTest(std::string_view name, const Value &input, CallArgs &args);
  /// Counts a loop iteration or a call against kMaxSteps.
  void step();
  /// Keeps a namespace so that reference cycles are broken at the end.
  void adopt(std::shared_ptr<NamespaceObject> ns);
  const std::string &now() const { return fixedNow; }

  // Used by the objects below.
  Value callMacro(const MacroObject &macro, CallArgs &args);
  std::string runLoop(const LoopObject &parent, const Value &iterable);

private:
  enum class Flow { Normal, Break, Continue };
  struct DepthGuard;

  Flow exec(const Body &body, const ScopePtr &scope, std::string &out);
  Flow execStmt(const Stmt &s, const ScopePtr &scope, std::string &out);
  Value eval(const Expr &e, const ScopePtr &scope);
  Value evalInner(const Expr &e, const ScopePtr &scope);
  Value lookup(const std::string &name, const ScopePtr &scope);
  void assign(const Target &target, const Value &value, const ScopePtr &scope);
  void collectArgs(const Expr &e, const ScopePtr &scope, CallArgs &args);
  Value applyFilter(const Expr &e, const Value &input, const ScopePtr &scope);
  Flow execFor(const Stmt &s, const ScopePtr &scope, const Value &iterable,
               unsigned depth, std::string &out);
  Value evalCompare(const Expr &e, const ScopePtr &scope);
  Value makeMacro(const Stmt &s, const ScopePtr &scope, const char *name);
  void append(std::string &out, std::string_view text);

  Value variables;
  std::string fixedNow;
  unsigned depth = 0;
  uint64_t steps = 0;
  std::vector<ScopePtr> capturedScopes;
  std::vector<std::shared_ptr<NamespaceObject>> namespaces;
};

/// A macro (or the caller of a call block) with the scope it was defined in.
class MacroObject : public Object {
public:
  MacroObject(const Stmt &definition, ScopePtr scope, std::string macroName)
      : def(definition), closure(std::move(scope)), name(std::move(macroName)) {
  }
  const char *typeName() const override { return "Macro"; }
  bool isCallable() const override { return true; }
  Value call(Interpreter &interp, CallArgs &args) const override {
    return interp.callMacro(*this, args);
  }
  std::string str() const override;
  Value getAttr(std::string_view attr) const override;

  const Stmt &def;
  ScopePtr closure;
  std::string name;
};

/// jinja2's LoopContext: one per loop, updated each iteration.
class LoopObject : public Object {
public:
  const char *typeName() const override { return "LoopContext"; }
  Value getAttr(std::string_view name) const override;
  bool isCallable() const override { return stmt->recursive; }
  Value call(Interpreter &interp, CallArgs &args) const override;
  std::string str() const override;

  const Stmt *stmt = nullptr;
  ScopePtr scope; ///< where the loop runs (for recursive calls)
  std::shared_ptr<const std::vector<Value>> items;
  size_t index0 = 0;
  unsigned depth0 = 0;
  mutable bool hasLastChanged = false;
  mutable Value lastChanged;
  std::weak_ptr<const LoopObject> self; ///< for loop.cycle / loop.changed
};

} // namespace chat
} // namespace sits

#endif // SITS_CHAT_INTERPRETER_H
