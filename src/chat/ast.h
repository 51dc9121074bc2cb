// Syntax tree of a parsed Jinja template. Produced by ParseTemplate (parser.h) and walked by
// the interpreter; a node keeps its template line and column for error messages.
//
//   // {{ name | upper }} becomes
//   // Stmt{kPrint, expr = Expr{kFilter, name = "upper", target = Expr{kName, name = "name"}}}
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "chat/value.h"

namespace tessera::jinja {

struct Expr;
struct Stmt;
using ExprPtr = std::unique_ptr<Expr>;
using StmtPtr = std::unique_ptr<Stmt>;
using StmtList = std::vector<StmtPtr>;

enum class ExprKind {
  kLiteral,    // literal
  kName,       // name
  kList,       // args = elements
  kTuple,      // args = elements
  kDict,       // args = key0, value0, key1, value1, ...
  kAttr,       // target.name
  kSubscript,  // target[args[0]]
  kSlice,      // target[args[0]:args[1]:args[2]], missing parts are null
  kCall,       // target(args..., kwargs...)
  kFilter,     // target | name(args..., kwargs...); target null inside {% filter %}
  kTest,       // target is [not] name(args...)
  kUnary,      // name is "-", "+" or "not"; args[0]
  kBinary,     // name is the operator; args[0], args[1]
  kAnd,        // args[0] and args[1]
  kOr,         // args[0] or args[1]
  kCompare,    // args[0] ops[0] args[1] ops[1] args[2] ... (chained like Python)
  kCondition,  // args[1] if args[0] else args[2] (args[2] may be null)
};

struct Expr {
  ExprKind kind;
  int line = 0;
  int column = 0;
  std::string name;
  Value literal;
  ExprPtr target;
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  std::vector<std::string> ops;  // kCompare operators: ==, !=, <, >, <=, >=, in, notin
  bool negated = false;          // kTest with "is not"
};

enum class StmtKind {
  kOutput,       // text
  kPrint,        // {{ expr }}
  kIf,           // if expr: body else else_body (elif is a nested kIf in else_body)
  kFor,          // for targets in expr [if condition]: body else else_body
  kSet,          // targets = expr (several targets unpack a sequence)
  kSetAttr,      // targets[0].targets[1] = expr (namespace attribute)
  kSetBlock,     // targets[0] = rendered body, optionally through filter (an kFilter chain)
  kMacro,        // macro name(params) body
  kCallBlock,    // call(params) expr (a kCall) with body as caller()
  kFilterBlock,  // filter: render body, then apply filter chain
  kWith,         // with params: body
  kBreak,
  kContinue,
  kScope,  // body rendered inline ({% generation %})
};

struct Stmt {
  StmtKind kind;
  int line = 0;
  int column = 0;
  std::string text;
  std::string name;
  ExprPtr expr;
  ExprPtr condition;
  ExprPtr filter;
  std::vector<std::string> targets;
  std::vector<std::pair<std::string, ExprPtr>> params;  // macro / caller / with
  StmtList body;
  StmtList else_body;
};

}  // namespace tessera::jinja
