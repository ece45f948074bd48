//===- Interpreter.cpp - Renders a parsed template ------------------------===//
//
// Errors are RenderError exceptions; each expression and statement on the
// way out stamps its position on an error that has none yet, so the
// message names the innermost place that failed. Reference cycles (a macro
// stored in the scope it closes over, a namespace holding itself) are
// broken when the interpreter ends, so rendering leaks nothing.
//
//===----------------------------------------------------------------------===//

#include "Interpreter.h"

#include "Unicode.h"

namespace sits {
namespace chat {

const Value *Scope::find(std::string_view name) const {
  for (auto it = vars.rbegin(); it != vars.rend(); ++it)
    if (it->first == name)
      return &it->second;
  return nullptr;
}

void Scope::set(const std::string &name, Value value) {
  for (auto &var : vars) {
    if (var.first == name) {
      var.second = std::move(value);
      return;
    }
  }
  vars.emplace_back(name, std::move(value));
}

struct Interpreter::DepthGuard {
  explicit DepthGuard(Interpreter &interp) : interp(interp) {
    if (++interp.depth > kMaxEvalDepth) {
      --interp.depth;
      fail("maximum recursion depth exceeded (templates nest at most " +
           std::to_string(kMaxEvalDepth) + " evaluations)");
    }
  }
  ~DepthGuard() { --interp.depth; }
  Interpreter &interp;
};

Interpreter::Interpreter(Value variables, std::string now)
    : variables(std::move(variables)), fixedNow(std::move(now)) {}

Interpreter::~Interpreter() {
  // Empty every scope a macro or loop captured and every namespace first,
  // then drop the values: no cycle survives and no destructor recurses
  // through a long chain of scopes.
  std::vector<Value> graveyard;
  for (const ScopePtr &scope : capturedScopes) {
    for (auto &var : scope->vars)
      graveyard.push_back(std::move(var.second));
    scope->vars.clear();
  }
  for (const auto &ns : namespaces)
    for (auto &attr : ns->takeAll())
      graveyard.push_back(std::move(attr.second));
  graveyard.clear();
  capturedScopes.clear();
  namespaces.clear();
}

void Interpreter::step() {
  if (++steps > kMaxSteps)
    fail("the template ran more than " + std::to_string(kMaxSteps) +
         " loop iterations and calls");
}

void Interpreter::adopt(std::shared_ptr<NamespaceObject> ns) {
  namespaces.push_back(std::move(ns));
}

void Interpreter::append(std::string &out, std::string_view text) {
  out += text;
  checkStringSize(out.size());
}

std::string Interpreter::render(const Body &root) {
  auto scope = std::make_shared<Scope>();
  capturedScopes.push_back(scope);
  std::string out;
  exec(root, scope, out);
  return out;
}

//===----------------------------------------------------------------------===//
// Statements
//===----------------------------------------------------------------------===//

Interpreter::Flow Interpreter::exec(const Body &body, const ScopePtr &scope,
                                    std::string &out) {
  for (const StmtPtr &s : body) {
    Flow flow = execStmt(*s, scope, out);
    if (flow != Flow::Normal)
      return flow;
  }
  return Flow::Normal;
}

static ScopePtr childOf(const ScopePtr &scope) {
  auto child = std::make_shared<Scope>();
  child->parent = scope;
  return child;
}

Interpreter::Flow Interpreter::execStmt(const Stmt &s, const ScopePtr &scope,
                                        std::string &out) {
  DepthGuard guard(*this);
  try {
    switch (s.kind) {
    case StmtKind::Data:
      append(out, s.text);
      return Flow::Normal;
    case StmtKind::Output:
      append(out, toStr(eval(*s.expr, scope)));
      return Flow::Normal;
    case StmtKind::If:
      for (const auto &branch : s.branches)
        if (eval(*branch.first, scope).truthy())
          return exec(branch.second, scope, out);
      return exec(s.elseBody, scope, out);
    case StmtKind::For:
      return execFor(s, scope, eval(*s.expr, scope), 0, out);
    case StmtKind::Set:
      assign(s.target, eval(*s.expr, scope), scope);
      return Flow::Normal;
    case StmtKind::SetBlock:
    case StmtKind::FilterBlock: {
      ScopePtr child = childOf(scope);
      std::string captured;
      exec(s.body, child, captured);
      Value result = Value::string(std::move(captured));
      if (s.expr) {
        // The chain's innermost filter (input null) takes the body.
        std::vector<const Expr *> chain;
        for (const Expr *f = s.expr.get(); f; f = f->a.get())
          chain.push_back(f);
        for (auto it = chain.rbegin(); it != chain.rend(); ++it)
          result = applyFilter(**it, result, child);
      }
      if (s.kind == StmtKind::SetBlock)
        assign(s.target, result, scope);
      else
        append(out, toStr(result));
      return Flow::Normal;
    }
    case StmtKind::Macro:
      scope->set(s.text, makeMacro(s, scope, s.text.c_str()));
      return Flow::Normal;
    case StmtKind::CallBlock: {
      Value caller = makeMacro(s, scope, "caller");
      const Expr &callExpr = *s.expr;
      Value callee = eval(*callExpr.a, scope);
      CallArgs args;
      collectArgs(callExpr, scope, args);
      args.keyword.emplace_back("caller", caller);
      append(out, toStr(call(callee, args)));
      return Flow::Normal;
    }
    case StmtKind::With: {
      ScopePtr child = childOf(scope);
      for (size_t i = 0; i < s.targets.size(); ++i)
        assign(s.targets[i], eval(*s.values[i], scope), child);
      exec(s.body, child, out);
      return Flow::Normal;
    }
    case StmtKind::Generation: {
      // transformers renders the body through caller(): its own scope.
      exec(s.body, childOf(scope), out);
      return Flow::Normal;
    }
    case StmtKind::Break:
      return Flow::Break;
    case StmtKind::Continue:
      return Flow::Continue;
    }
  } catch (RenderError &e) {
    if (!e.located) {
      e.located = true;
      e.line = s.pos.line;
      e.column = s.pos.column;
    }
    throw;
  }
  return Flow::Normal;
}

Interpreter::Flow Interpreter::execFor(const Stmt &s, const ScopePtr &scope,
                                       const Value &iterable, unsigned depth,
                                       std::string &out) {
  std::vector<Value> items = iterate(iterable);
  if (s.condition) {
    std::vector<Value> kept;
    for (Value &item : items) {
      step();
      ScopePtr test = childOf(scope);
      assign(s.target, item, test);
      if (eval(*s.condition, test).truthy())
        kept.push_back(std::move(item));
    }
    items = std::move(kept);
  }
  auto loop = std::make_shared<LoopObject>();
  loop->stmt = &s;
  loop->scope = scope;
  loop->depth0 = depth;
  loop->items = std::make_shared<const std::vector<Value>>(std::move(items));
  loop->self = loop;
  if (s.recursive)
    capturedScopes.push_back(scope);
  Value loopValue = Value::object(loop);
  const std::vector<Value> &all = *loop->items;
  ScopePtr iteration;
  for (size_t i = 0; i < all.size(); ++i) {
    step();
    loop->index0 = i;
    // Each iteration starts from an empty scope; reuse the last one when
    // nothing (a macro defined in the body) kept it.
    if (iteration && iteration.use_count() == 1)
      iteration->vars.clear();
    else
      iteration = childOf(scope);
    assign(s.target, all[i], iteration);
    iteration->set("loop", loopValue);
    if (exec(s.body, iteration, out) == Flow::Break)
      break;
  }
  if (all.empty())
    exec(s.elseBody, childOf(scope), out);
  return Flow::Normal;
}

std::string Interpreter::runLoop(const LoopObject &parent,
                                 const Value &iterable) {
  DepthGuard guard(*this);
  std::string out;
  execFor(*parent.stmt, parent.scope, iterable, parent.depth0 + 1, out);
  return out;
}

void Interpreter::assign(const Target &target, const Value &value,
                         const ScopePtr &scope) {
  switch (target.kind) {
  case Target::Name:
    scope->set(target.name, value);
    return;
  case Target::Tuple: {
    std::vector<Value> items = iterate(value);
    size_t want = target.items.size();
    if (items.size() < want)
      fail("not enough values to unpack (expected " + std::to_string(want) +
           ", got " + std::to_string(items.size()) + ")");
    if (items.size() > want)
      fail("too many values to unpack (expected " + std::to_string(want) + ")");
    for (size_t i = 0; i < want; ++i)
      assign(target.items[i], items[i], scope);
    return;
  }
  case Target::NsAttr: {
    Value ns = lookup(target.name, scope);
    if (!ns.isObject() || !ns.object().isNamespace())
      fail("cannot assign attribute on non-namespace object");
    checkNamespaceName(target.attr);
    static_cast<NamespaceObject &>(ns.object()).setAttr(target.attr, value);
    return;
  }
  }
}

Value Interpreter::makeMacro(const Stmt &s, const ScopePtr &scope,
                             const char *name) {
  capturedScopes.push_back(scope);
  return Value::object(
      std::make_shared<MacroObject>(s, scope, std::string(name)));
}

Value Interpreter::callMacro(const MacroObject &macro, CallArgs &args) {
  step();
  DepthGuard guard(*this);
  const Stmt &def = macro.def;
  const std::string &name = macro.name;
  ScopePtr scope = childOf(macro.closure);
  size_t count = def.params.size();
  std::vector<Value> &positional = args.positional;
  std::vector<std::pair<std::string, Value>> keyword = args.keyword;
  auto takeKeyword = [&](const std::string &key, Value &out) {
    for (auto it = keyword.begin(); it != keyword.end(); ++it) {
      if (it->first == key) {
        out = std::move(it->second);
        keyword.erase(it);
        return true;
      }
    }
    return false;
  };

  // jinja2.runtime.Macro.__call__, step by step.
  std::vector<Value> bound(count);
  std::vector<bool> given(count, false);
  for (size_t i = 0; i < count && i < positional.size(); ++i)
    bound[i] = positional[i], given[i] = true;
  bool foundCaller = false;
  if (positional.size() < count) {
    for (size_t i = positional.size(); i < count; ++i) {
      given[i] = takeKeyword(def.params[i].name, bound[i]);
      foundCaller |= def.params[i].name == "caller";
    }
  } else {
    for (const Param &p : def.params)
      foundCaller |= p.name == "caller";
  }
  if (def.usesCaller && !foundCaller) {
    Value caller;
    if (!takeKeyword("caller", caller) || caller.isNone())
      caller = Value::undefined("No caller defined");
    scope->set("caller", caller);
  }
  if (def.usesKwargs) {
    DictBuilder kwargs;
    for (auto &kw : keyword)
      kwargs.set(Value::string(kw.first), kw.second);
    scope->set("kwargs", kwargs.build());
  } else if (!keyword.empty()) {
    for (const auto &kw : keyword)
      if (kw.first == "caller")
        fail("macro " + reprString(name) +
             " was invoked with two values for the special caller argument. "
             "This is most likely a bug.");
    fail("macro " + reprString(name) + " takes no keyword argument " +
         reprString(keyword.front().first));
  }
  if (def.usesVarargs) {
    std::vector<Value> rest;
    for (size_t i = count; i < positional.size(); ++i)
      rest.push_back(positional[i]);
    scope->set("varargs", Value::tuple(std::move(rest)));
  } else if (positional.size() > count) {
    fail("macro " + reprString(name) + " takes not more than " +
         std::to_string(count) + " argument(s)");
  }
  for (size_t i = 0; i < count; ++i)
    if (given[i])
      scope->set(def.params[i].name, bound[i]);
  for (size_t i = 0; i < count; ++i) {
    if (given[i])
      continue;
    const Param &p = def.params[i];
    scope->set(p.name, p.defaultValue ? eval(*p.defaultValue, scope)
                                      : Value::undefined("parameter " +
                                                         reprString(p.name) +
                                                         " was not provided"));
  }
  std::string out;
  exec(def.body, scope, out);
  return Value::string(std::move(out));
}

//===----------------------------------------------------------------------===//
// Expressions
//===----------------------------------------------------------------------===//

Value Interpreter::eval(const Expr &e, const ScopePtr &scope) {
  DepthGuard guard(*this);
  try {
    return evalInner(e, scope);
  } catch (RenderError &err) {
    if (!err.located) {
      err.located = true;
      err.line = e.pos.line;
      err.column = e.pos.column;
    }
    throw;
  }
}

Value Interpreter::lookup(const std::string &name, const ScopePtr &scope) {
  for (const Scope *s = scope.get(); s; s = s->parent.get())
    if (const Value *v = s->find(name))
      return *v;
  if (const Value *v = variables.dict().findString(name))
    return *v;
  Value global = findGlobal(name);
  if (!global.isUndefined())
    return global;
  return Value::undefined(reprString(name) + " is undefined");
}

void Interpreter::collectArgs(const Expr &e, const ScopePtr &scope,
                              CallArgs &args) {
  for (const ExprPtr &item : e.items)
    args.positional.push_back(eval(*item, scope));
  for (const auto &kw : e.kwargs)
    args.keyword.emplace_back(kw.first, eval(*kw.second, scope));
  if (e.dynArgs)
    for (Value &v : iterate(eval(*e.dynArgs, scope)))
      args.positional.push_back(std::move(v));
  if (e.dynKwargs) {
    Value kwargs = eval(*e.dynKwargs, scope);
    if (!kwargs.isDict())
      fail(std::string("argument after ** must be a mapping, not ") +
           kwargs.typeName());
    for (const auto &item : kwargs.dict().items) {
      if (!item.first.isString())
        fail("keywords must be strings");
      args.keyword.emplace_back(item.first.str(), item.second);
    }
  }
}

Value Interpreter::applyFilter(const Expr &e, const Value &input,
                               const ScopePtr &scope) {
  CallArgs args;
  collectArgs(e, scope, args);
  if (!e.builtin)
    fail("No filter named " + reprString(e.name) + " found.");
  return e.builtin->filter(*this, input, args);
}

Value Interpreter::callFilter(std::string_view name, const Value &input,
                              CallArgs &args) {
  const Builtin *b = findFilter(name);
  if (!b)
    fail("No filter named " + reprString(name) + ".");
  return b->filter(*this, input, args);
}

bool Interpreter::callTest(std::string_view name, const Value &input,
                           CallArgs &args) {
  const Builtin *b = findTest(name);
  if (!b)
    fail("No test named " + reprString(name) + ".");
  return b->test(*this, input, args);
}

Value Interpreter::call(const Value &callee, CallArgs &args) {
  if (callee.isObject() && callee.object().isCallable())
    return callee.object().call(*this, args);
  if (callee.isUndefined())
    failUndefined(callee);
  fail(std::string("'") + callee.typeName() + "' object is not callable");
}

static bool isDunder(std::string_view name) {
  return name.size() > 4 && name.substr(0, 2) == "__" &&
         name.substr(name.size() - 2) == "__";
}

Value Interpreter::getAttr(const Value &obj, std::string_view name) {
  if (obj.isUndefined())
    failUndefined(obj);
  if (obj.isObject()) {
    Value v = obj.object().getAttr(name);
    return v.isUndefined() ? undefinedAttribute(obj, name) : v;
  }
  if (isDunder(name))
    return Value::undefined("access to attribute " + reprString(name) + " of " +
                            reprString(obj.typeName()) + " object is unsafe.");
  Value method;
  if (findMethod(obj, name, method))
    return method;
  if (obj.isNumber()) {
    // int and float attributes (bool is an int).
    if (name == "real")
      return obj.kind() == Kind::Float ? obj : Value::integer(obj.asInt());
    if (name == "imag")
      return obj.kind() == Kind::Float ? Value::real(0.0) : Value::integer(0);
    if (obj.isIntegral() && name == "numerator")
      return Value::integer(obj.asInt());
    if (obj.isIntegral() && name == "denominator")
      return Value::integer(1);
  }
  if (obj.isDict())
    if (const Value *v = obj.dict().findString(name))
      return *v;
  return undefinedAttribute(obj, name);
}

Value Interpreter::getItem(const Value &obj, const Value &key) {
  if (obj.isUndefined())
    failUndefined(obj);
  switch (obj.kind()) {
  case Kind::Dict: {
    bool hashable = key.kind() != Kind::List && key.kind() != Kind::Dict &&
                    key.kind() != Kind::View;
    if (hashable)
      if (const Value *v = obj.dict().find(key))
        return *v;
    break;
  }
  case Kind::List:
  case Kind::Tuple:
  case Kind::String:
    if (key.isIntegral()) {
      int64_t index = key.asInt();
      if (obj.isString()) {
        int64_t size = static_cast<int64_t>(codePointCount(obj.str()));
        if (!normalizeIndex(index, size))
          return undefinedItem(obj, key);
        const std::string &s = obj.str();
        size_t begin = byteOffsetOfCodePoint(s, index);
        size_t end = byteOffsetOfCodePoint(s, index + 1);
        return Value::string(s.substr(begin, end - begin));
      }
      if (!normalizeIndex(index, static_cast<int64_t>(obj.items().size())))
        return undefinedItem(obj, key);
      return obj.items()[index];
    }
    break;
  default:
    break;
  }
  // Not an item: jinja2 tries the attribute of that name.
  if (key.isString()) {
    if (obj.isObject()) {
      Value v = obj.object().getAttr(key.str());
      if (!v.isUndefined())
        return v;
    } else if (!isDunder(key.str())) {
      Value method;
      if (findMethod(obj, key.str(), method))
        return method;
      if (obj.isNumber()) {
        Value v = getAttr(obj, key.str());
        if (!v.isUndefined())
          return v;
      }
    }
  }
  return undefinedItem(obj, key);
}

Value Interpreter::evalCompare(const Expr &e, const ScopePtr &scope) {
  Value left = eval(*e.a, scope);
  for (size_t i = 0; i < e.ops.size(); ++i) {
    Value right = eval(*e.items[i], scope);
    bool result;
    switch (e.ops[i]) {
    case CmpOp::Eq:
      result = equals(left, right);
      break;
    case CmpOp::Ne:
      result = !equals(left, right);
      break;
    case CmpOp::In:
      result = contains(right, left);
      break;
    case CmpOp::NotIn:
      result = !contains(right, left);
      break;
    default: {
      static const char *const names[] = {"", "", "<", "<=", ">", ">="};
      int c = compareValues(left, right, names[static_cast<int>(e.ops[i])]);
      switch (e.ops[i]) {
      case CmpOp::Lt:
        result = c == -1;
        break;
      case CmpOp::Le:
        result = c == -1 || c == 0;
        break;
      case CmpOp::Gt:
        result = c == 1;
        break;
      default:
        result = c == 1 || c == 0;
        break;
      }
    }
    }
    if (!result)
      return Value::boolean(false);
    left = std::move(right);
  }
  return Value::boolean(true);
}

Value Interpreter::evalInner(const Expr &e, const ScopePtr &scope) {
  switch (e.kind) {
  case ExprKind::Const:
    return e.value;
  case ExprKind::Name:
    return lookup(e.name, scope);
  case ExprKind::List:
  case ExprKind::Tuple: {
    std::vector<Value> items;
    items.reserve(e.items.size());
    for (const ExprPtr &item : e.items)
      items.push_back(eval(*item, scope));
    return e.kind == ExprKind::List ? Value::list(std::move(items))
                                    : Value::tuple(std::move(items));
  }
  case ExprKind::Dict: {
    DictBuilder dict;
    for (size_t i = 0; i + 1 < e.items.size(); i += 2) {
      Value key = eval(*e.items[i], scope);
      dict.set(std::move(key), eval(*e.items[i + 1], scope));
    }
    return dict.build();
  }
  case ExprKind::Getattr:
    return getAttr(eval(*e.a, scope), e.name);
  case ExprKind::Getitem: {
    Value obj = eval(*e.a, scope);
    if (e.b->kind == ExprKind::Slice) {
      const Expr &s = *e.b;
      auto part = [&](const ExprPtr &p) {
        return p ? eval(*p, scope) : Value::none();
      };
      Value start = part(s.a), stop = part(s.b), stride = part(s.c);
      if (obj.isUndefined())
        failUndefined(obj);
      return slice(obj, start, stop, stride);
    }
    return getItem(obj, eval(*e.b, scope));
  }
  case ExprKind::Slice:
    fail("a slice outside a subscript");
  case ExprKind::Call: {
    Value callee = eval(*e.a, scope);
    CallArgs args;
    collectArgs(e, scope, args);
    return call(callee, args);
  }
  case ExprKind::Filter:
    return applyFilter(e, eval(*e.a, scope), scope);
  case ExprKind::Test: {
    Value operand = eval(*e.a, scope);
    CallArgs args;
    collectArgs(e, scope, args);
    if (!e.builtin)
      fail("No test named " + reprString(e.name) + " found.");
    return Value::boolean(e.builtin->test(*this, operand, args));
  }
  case ExprKind::Neg:
    return negate(eval(*e.a, scope));
  case ExprKind::Plus:
    return unaryPlus(eval(*e.a, scope));
  case ExprKind::Not:
    return Value::boolean(!eval(*e.a, scope).truthy());
  case ExprKind::Binary: {
    Value left = eval(*e.a, scope);
    return binaryOp(e.binop, left, eval(*e.b, scope));
  }
  case ExprKind::Concat: {
    std::string out;
    for (const ExprPtr &item : e.items) {
      out += toStr(eval(*item, scope));
      checkStringSize(out.size());
    }
    return Value::string(std::move(out));
  }
  case ExprKind::Compare:
    return evalCompare(e, scope);
  case ExprKind::And: {
    Value left = eval(*e.a, scope);
    return left.truthy() ? eval(*e.b, scope) : left;
  }
  case ExprKind::Or: {
    Value left = eval(*e.a, scope);
    return left.truthy() ? left : eval(*e.b, scope);
  }
  case ExprKind::CondExpr:
    if (eval(*e.a, scope).truthy())
      return eval(*e.b, scope);
    if (e.c)
      return eval(*e.c, scope);
    return Value::undefined(
        "the inline if-expression on line " + std::to_string(e.pos.line) +
        " evaluated to false and no else section was defined.");
  }
  fail("unknown expression");
}

//===----------------------------------------------------------------------===//
// Objects
//===----------------------------------------------------------------------===//

std::string MacroObject::str() const {
  return "<Macro " + reprString(name) + ">";
}

Value MacroObject::getAttr(std::string_view attr) const {
  if (attr == "name")
    return Value::string(name);
  if (attr == "arguments") {
    std::vector<Value> names;
    for (const Param &p : def.params)
      names.push_back(Value::string(p.name));
    return Value::tuple(std::move(names));
  }
  if (attr == "catch_kwargs")
    return Value::boolean(def.usesKwargs);
  if (attr == "catch_varargs")
    return Value::boolean(def.usesVarargs);
  if (attr == "caller")
    return Value::boolean(def.usesCaller);
  return Value();
}

namespace {
// loop.cycle(...) and loop.changed(...).
class LoopMethod : public Object {
public:
  LoopMethod(std::shared_ptr<const LoopObject> loop, bool isCycle)
      : loop(std::move(loop)), isCycle(isCycle) {}
  const char *typeName() const override { return "method"; }
  bool isCallable() const override { return true; }
  Value call(Interpreter &, CallArgs &args) const override {
    if (isCycle) {
      if (args.positional.empty())
        fail("no items for cycling given");
      return args.positional[loop->index0 % args.positional.size()];
    }
    Value current = Value::tuple(args.positional);
    if (loop->hasLastChanged && equals(loop->lastChanged, current))
      return Value::boolean(false);
    loop->hasLastChanged = true;
    loop->lastChanged = current;
    return Value::boolean(true);
  }

private:
  std::shared_ptr<const LoopObject> loop;
  bool isCycle;
};
} // namespace

Value LoopObject::getAttr(std::string_view name) const {
  int64_t length = static_cast<int64_t>(items->size());
  int64_t i = static_cast<int64_t>(index0);
  if (name == "index")
    return Value::integer(i + 1);
  if (name == "index0")
    return Value::integer(i);
  if (name == "revindex")
    return Value::integer(length - i);
  if (name == "revindex0")
    return Value::integer(length - i - 1);
  if (name == "first")
    return Value::boolean(i == 0);
  if (name == "last")
    return Value::boolean(i == length - 1);
  if (name == "length")
    return Value::integer(length);
  if (name == "depth")
    return Value::integer(depth0 + 1);
  if (name == "depth0")
    return Value::integer(depth0);
  if (name == "previtem")
    return i > 0 ? (*items)[i - 1]
                 : Value::undefined("there is no previous item");
  if (name == "nextitem")
    return i + 1 < length ? (*items)[i + 1]
                          : Value::undefined("there is no next item");
  if (name == "cycle" || name == "changed") {
    return Value::object(
        std::make_shared<LoopMethod>(self.lock(), name == "cycle"));
  }
  return Value();
}

Value LoopObject::call(Interpreter &interp, CallArgs &args) const {
  if (args.positional.size() != 1 || !args.keyword.empty())
    fail("Loop.__call__() takes exactly one argument");
  return Value::string(interp.runLoop(*this, args.positional[0]));
}

std::string LoopObject::str() const {
  return "<LoopContext " + std::to_string(index0 + 1) + "/" +
         std::to_string(items->size()) + ">";
}

} // namespace chat
} // namespace sits
