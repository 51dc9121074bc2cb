#include "chat/interpreter.h"

#include <cmath>
#include <ctime>
#include <unordered_set>
#include <vector>

namespace tessera::jinja {

namespace {

// The sandbox's MAX_RANGE: Jinja2 refuses larger range() calls.
constexpr int64_t kMaxRange = 100000;

// Attaches a template position to an error that does not have one yet.
void Locate(TemplateError& e, int line, int column) {
  if (e.line == 0) {
    e.line = line;
    e.column = column;
  }
}

[[noreturn]] void FailUndefined(const Value& v) {
  Fail(v.str().empty() ? std::string("operation on an undefined value") : v.str());
}

int64_t FloorDiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

int64_t FloorMod(int64_t a, int64_t b) {
  int64_t r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

// Whether `v` is `target` or holds it somewhere inside its lists and dicts: an iterative walk
// (a deep hostile value cannot overflow the stack) that visits each shared container once (a
// list holding the same list twice, nested 30 times, is not 2^30 visits).
bool ReachesDict(const Value& v, const DictData* target) {
  std::vector<const Value*> todo = {&v};
  std::unordered_set<const void*> seen;
  while (!todo.empty()) {
    const Value* x = todo.back();
    todo.pop_back();
    if (x->is_dict()) {
      if (&x->dict() == target) return true;
      if (!seen.insert(&x->dict()).second) continue;
      for (const auto& item : x->dict().items) todo.push_back(&item.second);
    } else if (x->is_list()) {
      if (!seen.insert(&x->list()).second) continue;
      for (const Value& item : x->list().items) todo.push_back(&item);
    }
  }
  return false;
}

}  // namespace

Interpreter::DepthGuard::DepthGuard(Interpreter* in) : interp(in) {
  if (++interp->depth_ > interp->rt_.limits().max_depth) {
    Fail("template recursion or nesting is too deep (limit " +
         std::to_string(interp->rt_.limits().max_depth) + ")");
  }
}

Interpreter::Interpreter(const Program& program, const Limits& limits)
    : program_(program), rt_(limits) {}

std::string Interpreter::Run(const Value& context) {
  Frame root;
  root_ = &root;
  InstallGlobals(root);
  if (context.is_dict()) {
    for (const auto& [k, v] : context.dict().items) root.vars[k] = v;
  }
  std::string out;
  out_ = &out;
  ExecBody(program_.body, root);
  out_ = nullptr;
  root_ = nullptr;
  return out;
}

void Interpreter::Emit(const std::string& text) {
  if (out_->size() + text.size() > rt_.limits().max_output_bytes) {
    Fail("rendered output exceeds the limit of " + std::to_string(rt_.limits().max_output_bytes) +
         " bytes");
  }
  out_->append(text);
}

std::string Interpreter::Capture(const StmtList& body, Frame& frame) {
  std::string captured;
  std::string* saved = out_;
  out_ = &captured;
  try {
    ExecBody(body, frame);
  } catch (...) {
    out_ = saved;
    throw;
  }
  out_ = saved;
  return captured;
}

Interpreter::Flow Interpreter::ExecBody(const StmtList& body, Frame& frame) {
  DepthGuard guard(this);
  for (const StmtPtr& stmt : body) {
    Flow flow = Exec(*stmt, frame);
    if (flow != Flow::kNormal) return flow;
  }
  return Flow::kNormal;
}

Interpreter::Flow Interpreter::Exec(const Stmt& stmt, Frame& frame) {
  rt_.Step();
  try {
    switch (stmt.kind) {
      case StmtKind::kOutput:
        Emit(stmt.text);
        return Flow::kNormal;
      case StmtKind::kPrint: {
        Value v = Eval(*stmt.expr, frame);
        Emit(v.ToPythonStr());
        return Flow::kNormal;
      }
      case StmtKind::kIf:
        return Eval(*stmt.expr, frame).Truthy() ? ExecBody(stmt.body, frame)
                                                : ExecBody(stmt.else_body, frame);
      case StmtKind::kFor:
        return ExecFor(stmt, frame);
      case StmtKind::kSet: {
        Value v = Eval(*stmt.expr, frame);
        if (stmt.targets.size() == 1) {
          frame.vars[stmt.targets[0]] = std::move(v);
          return Flow::kNormal;
        }
        std::vector<Value> items = IterateValue(v);
        if (items.size() != stmt.targets.size()) {
          Fail("cannot unpack " + std::to_string(items.size()) + " values into " +
               std::to_string(stmt.targets.size()) + " names");
        }
        for (size_t i = 0; i < items.size(); ++i) frame.vars[stmt.targets[i]] = items[i];
        return Flow::kNormal;
      }
      case StmtKind::kSetAttr: {
        Value ns = Lookup(stmt.targets[0], frame);
        if (!ns.is_namespace()) {
          Fail("cannot assign attribute '" + stmt.targets[1] + "' on '" + stmt.targets[0] +
               "': it is not a namespace()");
        }
        Value v = Eval(*stmt.expr, frame);
        // Values are reference-counted: a namespace stored inside itself (directly or through
        // lists and dicts) would never be freed.
        if (ReachesDict(v, &ns.dict())) {
          Fail("cannot assign '" + stmt.targets[0] + "." + stmt.targets[1] +
               "': the value contains the namespace itself");
        }
        ns.dict().Set(stmt.targets[1], std::move(v));
        return Flow::kNormal;
      }
      case StmtKind::kSetBlock: {
        Value v = Value::String(Capture(stmt.body, frame));
        if (stmt.filter) v = EvalFilter(*stmt.filter, std::move(v), frame);
        frame.vars[stmt.targets[0]] = std::move(v);
        return Flow::kNormal;
      }
      case StmtKind::kFilterBlock: {
        Value v = Value::String(Capture(stmt.body, frame));
        Emit(EvalFilter(*stmt.filter, std::move(v), frame).ToPythonStr());
        return Flow::kNormal;
      }
      case StmtKind::kMacro:
        frame.vars[stmt.name] = MakeMacro(stmt);
        return Flow::kNormal;
      case StmtKind::kCallBlock:
        ExecCallBlock(stmt, frame);
        return Flow::kNormal;
      case StmtKind::kWith: {
        Frame inner;
        inner.parent = &frame;
        for (const auto& [name, expr] : stmt.params) inner.vars[name] = Eval(*expr, frame);
        return ExecBody(stmt.body, inner);
      }
      case StmtKind::kBreak:
        return Flow::kBreak;
      case StmtKind::kContinue:
        return Flow::kContinue;
      case StmtKind::kScope:
        return ExecBody(stmt.body, frame);
    }
  } catch (TemplateError& e) {
    Locate(e, stmt.line, stmt.column);
    throw;
  }
  return Flow::kNormal;
}

Interpreter::Flow Interpreter::ExecFor(const Stmt& stmt, Frame& frame) {
  Value iterable = Eval(*stmt.expr, frame);
  std::vector<Value> items = IterateValue(iterable);
  Frame loop_frame;
  loop_frame.parent = &frame;
  auto bind_targets = [&](const Value& item) {
    if (stmt.targets.size() == 1) {
      loop_frame.vars[stmt.targets[0]] = item;
      return;
    }
    std::vector<Value> parts = IterateValue(item);
    if (parts.size() != stmt.targets.size()) {
      Fail("cannot unpack " + std::to_string(parts.size()) + " values into " +
           std::to_string(stmt.targets.size()) + " loop variables");
    }
    for (size_t i = 0; i < parts.size(); ++i) loop_frame.vars[stmt.targets[i]] = parts[i];
  };
  if (stmt.condition) {
    // The inline filter runs before the loop, so loop.length counts only kept items.
    std::vector<Value> kept;
    for (const Value& item : items) {
      rt_.Step();
      bind_targets(item);
      if (Eval(*stmt.condition, loop_frame).Truthy()) kept.push_back(item);
    }
    items = std::move(kept);
  }
  const int64_t n = static_cast<int64_t>(items.size());
  // The loop object is one dict updated in place each iteration (fixed slots below); a fresh one
  // is made only when the template kept a reference to the previous one.
  enum Slot { kIndex, kIndex0, kRevindex, kRevindex0, kFirst, kLast, kLength, kPrev, kNext };
  static const char* const kSlotNames[] = {"index", "index0", "revindex", "revindex0", "first",
                                           "last",  "length", "previtem", "nextitem"};
  auto current = std::make_shared<int64_t>(0);
  Value cycle = Value::Callable("cycle", [current](CallArgs& args) {
    if (args.positional.empty()) Fail("no items for cycling given");
    return args.positional[static_cast<size_t>(*current) % args.positional.size()];
  });
  auto new_loop = [&]() {
    Value loop = Value::Dict();
    for (const char* name : kSlotNames) loop.dict().Set(name, Value());
    loop.dict().Set("depth", Value::Int(1));
    loop.dict().Set("depth0", Value::Int(0));
    loop.dict().Set("cycle", cycle);
    return loop;
  };
  Value loop = new_loop();
  loop_frame.vars["loop"] = loop;
  for (int64_t i = 0; i < n; ++i) {
    rt_.Step();
    *current = i;
    const Value& item = items[static_cast<size_t>(i)];
    bind_targets(item);
    if (loop.dict_use_count() > 2) {  // held by `loop` and the frame only
      loop = new_loop();
      loop_frame.vars["loop"] = loop;
    }
    auto& slots = loop.dict().items;
    slots[kIndex].second.AssignInt(i + 1);
    slots[kIndex0].second.AssignInt(i);
    slots[kRevindex].second.AssignInt(n - i);
    slots[kRevindex0].second.AssignInt(n - i - 1);
    slots[kFirst].second.AssignBool(i == 0);
    slots[kLast].second.AssignBool(i == n - 1);
    slots[kLength].second.AssignInt(n);
    if (i > 0) {
      slots[kPrev].second = items[static_cast<size_t>(i - 1)];
    } else {
      slots[kPrev].second = Value::Undefined("there is no previous item");
    }
    if (i + 1 < n) {
      slots[kNext].second = items[static_cast<size_t>(i + 1)];
    } else {
      slots[kNext].second = Value::Undefined("there is no next item");
    }
    Flow flow = ExecBody(stmt.body, loop_frame);
    if (flow == Flow::kBreak) break;
  }
  if (n == 0) return ExecBody(stmt.else_body, loop_frame);
  return Flow::kNormal;
}

Value Interpreter::MakeMacro(const Stmt& macro) {
  const Stmt* m = &macro;
  return Value::Callable(macro.name, [this, m](CallArgs& args) { return CallMacro(*m, args); });
}

Value Interpreter::CallMacro(const Stmt& macro, CallArgs& args) {
  DepthGuard guard(this);
  Frame frame;
  frame.parent = root_;
  std::vector<Value> varargs;
  Value kwargs = Value::Dict();
  for (size_t i = 0; i < args.positional.size(); ++i) {
    if (i < macro.params.size()) {
      frame.vars[macro.params[i].first] = args.positional[i];
    } else {
      varargs.push_back(args.positional[i]);
    }
  }
  for (auto& [key, value] : args.keyword) {
    bool is_param = false;
    for (const auto& p : macro.params) is_param = is_param || p.first == key;
    if (key == "caller" || is_param) {
      if (frame.vars.count(key)) {
        Fail("macro '" + macro.name + "' got multiple values for argument '" + key + "'");
      }
      frame.vars[key] = value;
    } else {
      kwargs.dict().Set(key, value);
    }
  }
  // Defaults are evaluated at call time, in the macro's scope (they may use earlier params).
  for (const auto& [name, def] : macro.params) {
    if (frame.vars.count(name)) continue;
    frame.vars[name] = def ? Eval(*def, frame)
                           : Value::Undefined("'" + name + "' is undefined (macro '" + macro.name +
                                              "' was called without it)");
  }
  frame.vars["varargs"] = Value::List(std::move(varargs));
  frame.vars["kwargs"] = std::move(kwargs);
  return Value::String(Capture(macro.body, frame));
}

void Interpreter::ExecCallBlock(const Stmt& stmt, Frame& frame) {
  // caller() renders the block body in the scope of the call site; the alive flag stops a
  // caller that escaped (e.g. stored in a namespace) from running after the block ended.
  auto alive = std::make_shared<bool>(true);
  const Stmt* block = &stmt;
  Frame* site = &frame;
  Value caller = Value::Callable("caller", [this, block, site, alive](CallArgs& args) {
    if (!*alive) Fail("caller() used outside of its call block");
    DepthGuard guard(this);
    Frame inner;
    inner.parent = site;
    for (size_t i = 0; i < block->params.size(); ++i) {
      const auto& [name, def] = block->params[i];
      if (i < args.positional.size()) {
        inner.vars[name] = args.positional[i];
      } else {
        inner.vars[name] =
            def ? Eval(*def, inner) : Value::Undefined("'" + name + "' is undefined");
      }
    }
    for (auto& [key, value] : args.keyword) inner.vars[key] = value;
    return Value::String(Capture(block->body, inner));
  });
  const Expr& call = *stmt.expr;
  try {
    Value callee = Eval(*call.target, frame);
    CallArgs args = EvalArgs(call, frame);
    args.keyword.emplace_back("caller", caller);
    if (!callee.is_callable()) Fail("'" + callee.TypeName() + "' object is not callable");
    Value result = callee.callable().fn(args);
    *alive = false;
    Emit(result.ToPythonStr());
  } catch (...) {
    *alive = false;
    throw;
  }
}

Value Interpreter::Lookup(const std::string& name, Frame& frame) const {
  for (Frame* f = &frame; f != nullptr; f = f->parent) {
    auto it = f->vars.find(name);
    if (it != f->vars.end()) return it->second;
  }
  return Value::Undefined("'" + name + "' is undefined");
}

Value Interpreter::Eval(const Expr& expr, Frame& frame) {
  rt_.Step();
  DepthGuard guard(this);
  try {
    return EvalInner(expr, frame);
  } catch (TemplateError& e) {
    Locate(e, expr.line, expr.column);
    throw;
  }
}

CallArgs Interpreter::EvalArgs(const Expr& expr, Frame& frame) {
  CallArgs args;
  for (const ExprPtr& a : expr.args) args.positional.push_back(Eval(*a, frame));
  for (const auto& [k, v] : expr.kwargs) args.keyword.emplace_back(k, Eval(*v, frame));
  return args;
}

Value Interpreter::EvalFilter(const Expr& expr, Value input, Frame& frame) {
  // A filter chain from {% filter %} / {% set %} has a null innermost target.
  if (expr.target) input = EvalFilter(*expr.target, std::move(input), frame);
  CallArgs args = EvalArgs(expr, frame);
  try {
    return CallFilter(rt_, expr.name, input, args);
  } catch (TemplateError& e) {
    Locate(e, expr.line, expr.column);
    throw;
  }
}

Value Interpreter::EvalInner(const Expr& expr, Frame& frame) {
  switch (expr.kind) {
    case ExprKind::kLiteral:
      return expr.literal;
    case ExprKind::kName:
      return Lookup(expr.name, frame);
    case ExprKind::kList:
    case ExprKind::kTuple: {
      rt_.CheckItems(expr.args.size());
      std::vector<Value> items;
      for (const ExprPtr& a : expr.args) items.push_back(Eval(*a, frame));
      return Value::List(std::move(items), expr.kind == ExprKind::kTuple);
    }
    case ExprKind::kDict: {
      Value d = Value::Dict();
      for (size_t i = 0; i + 1 < expr.args.size(); i += 2) {
        Value key = Eval(*expr.args[i], frame);
        d.dict().Set(key.is_string() ? key.str() : key.ToPythonStr(),
                     Eval(*expr.args[i + 1], frame));
      }
      return d;
    }
    case ExprKind::kAttr:
      return GetAttribute(rt_, Eval(*expr.target, frame), expr.name);
    case ExprKind::kSubscript: {
      Value obj = Eval(*expr.target, frame);
      return GetItem(rt_, obj, Eval(*expr.args[0], frame));
    }
    case ExprKind::kSlice: {
      Value obj = Eval(*expr.target, frame);
      Value parts[3];
      for (int i = 0; i < 3; ++i) {
        if (expr.args[static_cast<size_t>(i)])
          parts[i] = Eval(*expr.args[static_cast<size_t>(i)], frame);
      }
      auto ptr = [&](int i) { return expr.args[static_cast<size_t>(i)] ? &parts[i] : nullptr; };
      return SliceValue(rt_, obj, ptr(0), ptr(1), ptr(2));
    }
    case ExprKind::kCall: {
      Value callee = Eval(*expr.target, frame);
      CallArgs args = EvalArgs(expr, frame);
      if (callee.is_undefined()) FailUndefined(callee);
      if (!callee.is_callable()) Fail("'" + callee.TypeName() + "' object is not callable");
      return callee.callable().fn(args);
    }
    case ExprKind::kFilter: {
      Value input = Eval(*expr.target, frame);
      CallArgs args = EvalArgs(expr, frame);
      return CallFilter(rt_, expr.name, input, args);
    }
    case ExprKind::kTest: {
      Value input = Eval(*expr.target, frame);
      CallArgs args = EvalArgs(expr, frame);
      return Value::Bool(CallTest(rt_, expr.name, input, args) != expr.negated);
    }
    case ExprKind::kUnary: {
      Value v = Eval(*expr.args[0], frame);
      if (expr.name == "not") return Value::Bool(!v.Truthy());
      if (v.is_undefined()) FailUndefined(v);
      if (!v.is_number())
        Fail("bad operand type for unary " + expr.name + ": '" + v.TypeName() + "'");
      if (expr.name == "+") return v.is_float() ? v : Value::Int(v.as_int());
      if (v.is_float()) return Value::Float(-v.as_double());
      if (v.as_int() == INT64_MIN) Fail("integer overflow");
      return Value::Int(-v.as_int());
    }
    case ExprKind::kBinary: {
      Value a = Eval(*expr.args[0], frame);
      Value b = Eval(*expr.args[1], frame);
      return Arithmetic(expr.name, a, b);
    }
    case ExprKind::kAnd: {
      Value a = Eval(*expr.args[0], frame);
      return a.Truthy() ? Eval(*expr.args[1], frame) : a;
    }
    case ExprKind::kOr: {
      Value a = Eval(*expr.args[0], frame);
      return a.Truthy() ? a : Eval(*expr.args[1], frame);
    }
    case ExprKind::kCompare:
      return EvalCompare(expr, frame);
    case ExprKind::kCondition:
      if (Eval(*expr.args[0], frame).Truthy()) return Eval(*expr.args[1], frame);
      if (expr.args[2]) return Eval(*expr.args[2], frame);
      return Value::Undefined("the conditional expression had no else branch");
  }
  Fail("internal error: unknown expression kind");
}

Value Interpreter::EvalCompare(const Expr& expr, Frame& frame) {
  Value left = Eval(*expr.args[0], frame);
  for (size_t i = 0; i < expr.ops.size(); ++i) {
    Value right = Eval(*expr.args[i + 1], frame);
    const std::string& op = expr.ops[i];
    bool ok;
    if (op == "==") {
      ok = ValuesEqual(left, right);
    } else if (op == "!=") {
      ok = !ValuesEqual(left, right);
    } else if (op == "in") {
      ok = ContainsValue(right, left);
    } else if (op == "notin") {
      ok = !ContainsValue(right, left);
    } else {
      if (left.is_undefined()) FailUndefined(left);
      if (right.is_undefined()) FailUndefined(right);
      int c = CompareValues(left, right);
      ok = op == "<" ? c < 0 : op == ">" ? c > 0 : op == "<=" ? c <= 0 : c >= 0;
    }
    if (!ok) return Value::Bool(false);
    left = std::move(right);
  }
  return Value::Bool(true);
}

Value Interpreter::Arithmetic(const std::string& op, const Value& a, const Value& b) {
  if (op == "~") {
    std::string s = a.ToPythonStr();
    std::string t = b.ToPythonStr();
    rt_.CheckStringSize(s.size() + t.size());
    return Value::String(s + t);
  }
  if (a.is_undefined()) FailUndefined(a);
  if (b.is_undefined()) FailUndefined(b);
  auto unsupported = [&]() -> Value {
    Fail("unsupported operand type(s) for " + op + ": '" + a.TypeName() + "' and '" + b.TypeName() +
         "'");
  };
  if (a.is_number() && b.is_number()) {
    bool real = a.is_float() || b.is_float();
    double x = a.as_double(), y = b.as_double();
    int64_t i = a.as_int(), j = b.as_int(), r = 0;
    if (op == "+") {
      if (real) return Value::Float(x + y);
      if (__builtin_add_overflow(i, j, &r)) Fail("integer overflow");
      return Value::Int(r);
    }
    if (op == "-") {
      if (real) return Value::Float(x - y);
      if (__builtin_sub_overflow(i, j, &r)) Fail("integer overflow");
      return Value::Int(r);
    }
    if (op == "*") {
      if (real) return Value::Float(x * y);
      if (__builtin_mul_overflow(i, j, &r)) Fail("integer overflow");
      return Value::Int(r);
    }
    if (op == "/") {
      if (y == 0) Fail("division by zero");
      return Value::Float(x / y);
    }
    if (op == "//" || op == "%") {
      if (real) {
        if (y == 0) Fail("float division by zero");
        if (op == "//") return Value::Float(std::floor(x / y));
        double m = std::fmod(x, y);
        if (m != 0 && ((m < 0) != (y < 0))) m += y;
        return Value::Float(m);
      }
      if (j == 0) Fail("integer division or modulo by zero");
      if (i == INT64_MIN && j == -1) Fail("integer overflow");
      return Value::Int(op == "//" ? FloorDiv(i, j) : FloorMod(i, j));
    }
    if (op == "**") {
      if (real || j < 0) return Value::Float(std::pow(x, y));
      int64_t result = 1, base = i;
      for (int64_t e = j; e > 0; e >>= 1) {
        if ((e & 1) && __builtin_mul_overflow(result, base, &result)) Fail("integer overflow");
        if (e > 1 && __builtin_mul_overflow(base, base, &base)) {
          if (base == 0 || base == 1) break;
          Fail("integer overflow");
        }
      }
      return Value::Int(result);
    }
    return unsupported();
  }
  if (op == "+") {
    if (a.is_string() && b.is_string()) {
      rt_.CheckStringSize(a.str().size() + b.str().size());
      return Value::String(a.str() + b.str());
    }
    if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple()) {
      rt_.CheckItems(a.list().items.size() + b.list().items.size());
      std::vector<Value> items = a.list().items;
      items.insert(items.end(), b.list().items.begin(), b.list().items.end());
      return Value::List(std::move(items), a.is_tuple());
    }
    return unsupported();
  }
  if (op == "*") {
    const Value& seq = a.is_number() ? b : a;
    const Value& count = a.is_number() ? a : b;
    if (!(count.is_int() || count.is_bool()) || !(seq.is_string() || seq.is_list())) {
      return unsupported();
    }
    int64_t n = std::max<int64_t>(count.as_int(), 0);
    if (seq.is_string()) {
      if (seq.str().empty() || n == 0) return Value::String("");
      if (static_cast<uint64_t>(n) > rt_.limits().max_output_bytes / seq.str().size()) {
        rt_.CheckStringSize(rt_.limits().max_output_bytes + 1);
      }
      std::string out;
      out.reserve(seq.str().size() * static_cast<size_t>(n));
      for (int64_t k = 0; k < n; ++k) out += seq.str();
      return Value::String(std::move(out));
    }
    size_t size = seq.list().items.size();
    if (size != 0 && static_cast<uint64_t>(n) > rt_.limits().max_items / size) {
      rt_.CheckItems(rt_.limits().max_items + 1);
    }
    std::vector<Value> items;
    for (int64_t k = 0; k < n; ++k) {
      items.insert(items.end(), seq.list().items.begin(), seq.list().items.end());
    }
    rt_.Step(items.size());
    return Value::List(std::move(items), seq.is_tuple());
  }
  return unsupported();
}

void Interpreter::InstallGlobals(Frame& root) {
  root.vars["range"] = Value::Callable("range", [this](CallArgs& args) {
    if (!args.keyword.empty()) Fail("range() takes no keyword arguments");
    if (args.positional.empty() || args.positional.size() > 3) {
      Fail("range expected 1 to 3 arguments, got " + std::to_string(args.positional.size()));
    }
    int64_t v[3] = {0, 0, 1};
    for (size_t i = 0; i < args.positional.size(); ++i) {
      const Value& a = args.positional[i];
      if (!a.is_int() && !a.is_bool())
        Fail("range() arguments must be integers, not " + a.TypeName());
    }
    if (args.positional.size() == 1) {
      v[1] = args.positional[0].as_int();
    } else {
      for (size_t i = 0; i < args.positional.size(); ++i) v[i] = args.positional[i].as_int();
    }
    if (v[2] == 0) Fail("range() arg 3 must not be zero");
    // Count without overflow: (stop - start) can exceed int64 for hostile arguments.
    long double span = static_cast<long double>(v[1]) - static_cast<long double>(v[0]);
    long double count = std::ceil(span / static_cast<long double>(v[2]));
    if (count > static_cast<long double>(kMaxRange)) {
      Fail("range too big: the sandbox allows at most " + std::to_string(kMaxRange) + " items");
    }
    std::vector<Value> items;
    for (int64_t k = 0; k < static_cast<int64_t>(std::max<long double>(count, 0)); ++k) {
      items.push_back(Value::Int(v[0] + k * v[2]));
    }
    rt_.Step(items.size());
    return Value::List(std::move(items));
  });
  auto make_dict = [](Value d, CallArgs& args) {
    for (const Value& p : args.positional) {
      if (!p.is_dict()) Fail("expected a mapping as positional argument");
      for (const auto& [k, v] : p.dict().items) d.dict().Set(k, v);
    }
    for (auto& [k, v] : args.keyword) d.dict().Set(k, v);
    return d;
  };
  root.vars["namespace"] = Value::Callable(
      "namespace", [make_dict](CallArgs& args) { return make_dict(Value::Namespace(), args); });
  root.vars["dict"] = Value::Callable(
      "dict", [make_dict](CallArgs& args) { return make_dict(Value::Dict(), args); });
  root.vars["raise_exception"] = Value::Callable("raise_exception", [](CallArgs& args) -> Value {
    std::string message = args.positional.empty() ? std::string("raise_exception() called")
                                                  : args.positional[0].ToPythonStr();
    throw TemplateError{std::move(message), 0, 0, true};
  });
  root.vars["strftime_now"] = Value::Callable("strftime_now", [](CallArgs& args) {
    BoundArgs a = BindArgs("strftime_now", args, {"format"});
    Value fmt = a.Get(0, Value::None());
    if (!fmt.is_string()) Fail("strftime_now() expects a format string");
    std::time_t now = std::time(nullptr);
    std::tm local{};
    localtime_r(&now, &local);
    if (fmt.str().empty()) return Value::String("");
    for (size_t size = 256; size <= 65536; size *= 4) {
      std::string buf(size, '\0');
      size_t n = std::strftime(buf.data(), buf.size(), fmt.str().c_str(), &local);
      if (n > 0) return Value::String(buf.substr(0, n));
    }
    return Value::String("");
  });
}

}  // namespace tessera::jinja
