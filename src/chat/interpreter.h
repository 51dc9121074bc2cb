// Tree-walking evaluator for parsed templates (parser.h). Internal to tessera_chat; see jinja.h
// for the public API.
//
//   Interpreter interp(program, limits);
//   std::string text = interp.Run(context_dict);   // throws TemplateError
#pragma once

#include <memory>
#include <string>
#include <unordered_map>

#include "chat/ast.h"
#include "chat/builtins.h"
#include "chat/jinja.h"
#include "chat/parser.h"

namespace tessera::jinja {

class Interpreter {
 public:
  Interpreter(const Program& program, const Limits& limits);
  // `context` is a dict whose entries become variables. Throws TemplateError.
  std::string Run(const Value& context);

 private:
  struct Frame {
    std::unordered_map<std::string, Value> vars;
    Frame* parent = nullptr;
  };
  enum class Flow { kNormal, kBreak, kContinue };
  struct DepthGuard {
    explicit DepthGuard(Interpreter* in);
    ~DepthGuard() { --interp->depth_; }
    Interpreter* interp;
  };

  Flow ExecBody(const StmtList& body, Frame& frame);
  Flow Exec(const Stmt& stmt, Frame& frame);
  Flow ExecFor(const Stmt& stmt, Frame& frame);
  void ExecCallBlock(const Stmt& stmt, Frame& frame);
  std::string Capture(const StmtList& body, Frame& frame);
  void Emit(const std::string& text);

  Value Eval(const Expr& expr, Frame& frame);
  Value EvalInner(const Expr& expr, Frame& frame);
  CallArgs EvalArgs(const Expr& expr, Frame& frame);
  Value EvalFilter(const Expr& expr, Value input, Frame& frame);
  Value EvalCompare(const Expr& expr, Frame& frame);
  Value Arithmetic(const std::string& op, const Value& a, const Value& b);

  Value Lookup(const std::string& name, Frame& frame) const;
  Value MakeMacro(const Stmt& macro);
  Value CallMacro(const Stmt& macro, CallArgs& args);
  void InstallGlobals(Frame& root);

  const Program& program_;
  Runtime rt_;
  std::string* out_ = nullptr;
  size_t depth_ = 0;
  Frame* root_ = nullptr;
};

}  // namespace tessera::jinja
