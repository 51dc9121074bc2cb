#include "chat/parser.h"

#include <charconv>
#include <cstdlib>
#include <set>

#include "chat/builtins.h"
#include "chat/lexer.h"

namespace tessera::jinja {

namespace {

struct ParseError {
  std::string message;
  int line;
  int column;
};

class Parser {
 public:
  Parser(std::vector<Token> tokens, size_t max_depth)
      : tokens_(std::move(tokens)), max_depth_(max_depth) {}

  StmtList ParseAll() {
    StmtList body = ParseBody({});
    if (Cur().kind != TokenKind::kEnd) {
      // ParseBody only stops early at a block whose name the caller expects.
      Error("unexpected '" + Peek(1).text + "' without a matching opening tag", Peek(1));
    }
    return body;
  }

 private:
  // ---- token helpers ----
  const Token& Cur() const { return tokens_[pos_]; }
  const Token& Peek(size_t n) const { return tokens_[std::min(pos_ + n, tokens_.size() - 1)]; }
  void Advance() {
    if (pos_ + 1 < tokens_.size()) ++pos_;
  }
  [[noreturn]] void Error(const std::string& message, const Token& at) const {
    throw ParseError{message, at.line, at.column};
  }
  bool IsOp(const char* op) const { return Cur().kind == TokenKind::kOperator && Cur().text == op; }
  bool IsName(const char* name) const {
    return Cur().kind == TokenKind::kName && Cur().text == name;
  }
  bool SkipOp(const char* op) {
    if (!IsOp(op)) return false;
    Advance();
    return true;
  }
  bool SkipName(const char* name) {
    if (!IsName(name)) return false;
    Advance();
    return true;
  }
  std::string Describe(const Token& t) const {
    switch (t.kind) {
      case TokenKind::kEnd:
        return "end of template";
      case TokenKind::kBlockEnd:
        return "'%}'";
      case TokenKind::kVarEnd:
        return "'}}'";
      case TokenKind::kData:
        return "template text";
      case TokenKind::kString:
        return "string literal";
      default:
        return "'" + t.text + "'";
    }
  }
  void ExpectOp(const char* op) {
    if (!SkipOp(op)) Error(std::string("expected '") + op + "', got " + Describe(Cur()), Cur());
  }
  std::string ExpectName() {
    if (Cur().kind != TokenKind::kName) Error("expected a name, got " + Describe(Cur()), Cur());
    std::string name = Cur().text;
    Advance();
    return name;
  }
  void ExpectBlockEnd() {
    if (Cur().kind != TokenKind::kBlockEnd) Error("expected '%}', got " + Describe(Cur()), Cur());
    Advance();
  }

  struct DepthGuard {
    explicit DepthGuard(Parser* p) : parser(p) {
      if (++parser->depth_ > parser->max_depth_) {
        parser->Error(
            "template is nested too deeply (limit " + std::to_string(parser->max_depth_) + ")",
            parser->Cur());
      }
    }
    ~DepthGuard() { --parser->depth_; }
    Parser* parser;
  };

  // A loop that builds a left-deep tree (a + b + c ..., x.a.b ...) counts each link as one
  // level of nesting until the whole chain has been parsed.
  struct ChainScope {
    explicit ChainScope(Parser* p) : parser(p) {}
    ~ChainScope() { parser->depth_ -= links; }
    void Deepen() {
      ++links;
      if (++parser->depth_ > parser->max_depth_) {
        parser->Error(
            "expression is nested too deeply (limit " + std::to_string(parser->max_depth_) + ")",
            parser->Cur());
      }
    }
    Parser* parser;
    size_t links = 0;
  };

  ExprPtr MakeExpr(ExprKind kind, const Token& at) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = at.line;
    e->column = at.column;
    return e;
  }
  StmtPtr MakeStmt(StmtKind kind, const Token& at) {
    auto s = std::make_unique<Stmt>();
    s->kind = kind;
    s->line = at.line;
    s->column = at.column;
    return s;
  }

  // ---- statements ----

  // Parses until a block tag whose name is in `end_names` (left unconsumed: the cursor stays
  // on that name token) or the end of the template.
  StmtList ParseBody(const std::set<std::string>& end_names) {
    DepthGuard guard(this);
    StmtList body;
    while (true) {
      const Token& t = Cur();
      switch (t.kind) {
        case TokenKind::kEnd:
          if (!end_names.empty()) {
            Error("unexpected end of template; expected '{% " + *end_names.rbegin() + " %}'", t);
          }
          return body;
        case TokenKind::kData: {
          auto s = MakeStmt(StmtKind::kOutput, t);
          s->text = t.text;
          Advance();
          body.push_back(std::move(s));
          break;
        }
        case TokenKind::kVarBegin: {
          auto s = MakeStmt(StmtKind::kPrint, t);
          Advance();
          s->expr = ParseTuple(true);
          if (Cur().kind != TokenKind::kVarEnd) {
            Error("expected '}}', got " + Describe(Cur()), Cur());
          }
          Advance();
          body.push_back(std::move(s));
          break;
        }
        case TokenKind::kBlockBegin: {
          const Token& name = Peek(1);
          if (name.kind != TokenKind::kName) Error("expected a tag name after '{%'", name);
          if (end_names.count(name.text)) {
            Advance();
            return body;
          }
          Advance();
          body.push_back(ParseStatement());
          break;
        }
        default:
          Error("unexpected " + Describe(t), t);
      }
    }
  }

  StmtPtr ParseStatement() {
    const Token& t = Cur();
    std::string tag = t.text;
    Advance();
    if (tag == "if") return ParseIf(t);
    if (tag == "for") return ParseFor(t);
    if (tag == "set") return ParseSet(t);
    if (tag == "macro") return ParseMacro(t);
    if (tag == "call") return ParseCallBlock(t);
    if (tag == "filter") return ParseFilterBlock(t);
    if (tag == "with") return ParseWith(t);
    if (tag == "break" || tag == "continue") {
      if (loop_depth_ == 0) Error("'" + tag + "' outside of a for loop", t);
      ExpectBlockEnd();
      return MakeStmt(tag == "break" ? StmtKind::kBreak : StmtKind::kContinue, t);
    }
    if (tag == "generation") {
      auto s = MakeStmt(StmtKind::kScope, t);
      ExpectBlockEnd();
      s->body = ParseBody({"endgeneration"});
      Advance();
      ExpectBlockEnd();
      return s;
    }
    static const std::set<std::string> kEndTags = {
        "endif",   "endfor", "endset", "endmacro",      "endcall", "endfilter",
        "endwith", "else",   "elif",   "endgeneration", "endraw",  "endblock"};
    if (kEndTags.count(tag)) Error("unexpected '" + tag + "' without a matching opening tag", t);
    static const std::set<std::string> kUnsupported = {"include", "import",     "from", "extends",
                                                       "block",   "autoescape", "do"};
    if (kUnsupported.count(tag)) Error("the '" + tag + "' tag is not supported", t);
    Error("unknown tag '" + tag + "'", t);
  }

  StmtPtr ParseIf(const Token& at) {
    DepthGuard guard(this);  // elif chains nest
    auto s = MakeStmt(StmtKind::kIf, at);
    s->expr = ParseExpression(true);
    ExpectBlockEnd();
    s->body = ParseBody({"elif", "else", "endif"});
    const Token& end = Cur();
    Advance();
    if (end.text == "elif") {
      s->else_body.push_back(ParseIf(end));
      return s;  // the nested if consumed the endif
    }
    if (end.text == "else") {
      ExpectBlockEnd();
      s->else_body = ParseBody({"endif"});
      Advance();
    }
    ExpectBlockEnd();
    return s;
  }

  std::vector<std::string> ParseTargets() {
    std::vector<std::string> names;
    bool paren = SkipOp("(");
    names.push_back(ExpectName());
    while (SkipOp(",")) {
      if (Cur().kind != TokenKind::kName) break;  // trailing comma
      names.push_back(ExpectName());
    }
    if (paren) ExpectOp(")");
    return names;
  }

  StmtPtr ParseFor(const Token& at) {
    auto s = MakeStmt(StmtKind::kFor, at);
    s->targets = ParseTargets();
    if (!SkipName("in")) Error("expected 'in' in for loop, got " + Describe(Cur()), Cur());
    s->expr = ParseTuple(false);
    if (SkipName("if")) s->condition = ParseExpression(true);
    if (IsName("recursive")) Error("recursive for loops are not supported", Cur());
    ExpectBlockEnd();
    ++loop_depth_;
    s->body = ParseBody({"else", "endfor"});
    --loop_depth_;
    if (Cur().text == "else") {
      Advance();
      ExpectBlockEnd();
      s->else_body = ParseBody({"endfor"});
    }
    Advance();
    ExpectBlockEnd();
    return s;
  }

  StmtPtr ParseSet(const Token& at) {
    std::string first = ExpectName();
    if (SkipOp(".")) {
      auto s = MakeStmt(StmtKind::kSetAttr, at);
      s->targets = {first, ExpectName()};
      ExpectOp("=");
      s->expr = ParseTuple(true);
      ExpectBlockEnd();
      return s;
    }
    auto s = MakeStmt(StmtKind::kSet, at);
    s->targets.push_back(first);
    while (SkipOp(",")) s->targets.push_back(ExpectName());
    if (SkipOp("=")) {
      s->expr = ParseTuple(true);
      ExpectBlockEnd();
      return s;
    }
    if (s->targets.size() != 1) Error("expected '=' after set targets", Cur());
    s->kind = StmtKind::kSetBlock;
    if (IsOp("|")) s->filter = ParseFilterChain(nullptr);
    ExpectBlockEnd();
    s->body = ParseBody({"endset"});
    Advance();
    ExpectBlockEnd();
    return s;
  }

  // (a, b=default, ...) for macros and call blocks.
  std::vector<std::pair<std::string, ExprPtr>> ParseParams() {
    std::vector<std::pair<std::string, ExprPtr>> params;
    ExpectOp("(");
    while (!IsOp(")")) {
      if (!params.empty()) ExpectOp(",");
      if (IsOp(")")) break;
      std::string name = ExpectName();
      ExprPtr def;
      if (SkipOp("=")) def = ParseExpression(true);
      params.emplace_back(std::move(name), std::move(def));
    }
    Advance();
    return params;
  }

  StmtPtr ParseMacro(const Token& at) {
    auto s = MakeStmt(StmtKind::kMacro, at);
    s->name = ExpectName();
    s->params = ParseParams();
    ExpectBlockEnd();
    int saved_loops = loop_depth_;
    loop_depth_ = 0;
    s->body = ParseBody({"endmacro"});
    loop_depth_ = saved_loops;
    Advance();
    if (Cur().kind == TokenKind::kName) Advance();  // optional macro name after endmacro
    ExpectBlockEnd();
    return s;
  }

  StmtPtr ParseCallBlock(const Token& at) {
    auto s = MakeStmt(StmtKind::kCallBlock, at);
    if (IsOp("(")) s->params = ParseParams();
    s->expr = ParseExpression(true);
    if (s->expr->kind != ExprKind::kCall) Error("expected a macro call in 'call' block", at);
    ExpectBlockEnd();
    int saved_loops = loop_depth_;
    loop_depth_ = 0;
    s->body = ParseBody({"endcall"});
    loop_depth_ = saved_loops;
    Advance();
    ExpectBlockEnd();
    return s;
  }

  StmtPtr ParseFilterBlock(const Token& at) {
    auto s = MakeStmt(StmtKind::kFilterBlock, at);
    // The first filter has no leading '|'; parse it as if it had one.
    s->filter = ParseFilterChain(nullptr, /*leading_bar=*/false);
    ExpectBlockEnd();
    s->body = ParseBody({"endfilter"});
    Advance();
    ExpectBlockEnd();
    return s;
  }

  StmtPtr ParseWith(const Token& at) {
    auto s = MakeStmt(StmtKind::kWith, at);
    while (Cur().kind != TokenKind::kBlockEnd) {
      if (!s->params.empty()) ExpectOp(",");
      std::string name = ExpectName();
      ExpectOp("=");
      s->params.emplace_back(std::move(name), ParseExpression(true));
    }
    ExpectBlockEnd();
    s->body = ParseBody({"endwith"});
    Advance();
    ExpectBlockEnd();
    return s;
  }

  // ---- expressions ----

  ExprPtr ParseTuple(bool with_condexpr) {
    const Token& at = Cur();
    ExprPtr first = ParseExpression(with_condexpr);
    if (!IsOp(",")) return first;
    auto tuple = MakeExpr(ExprKind::kTuple, at);
    tuple->args.push_back(std::move(first));
    while (SkipOp(",")) {
      if (!StartsExpression()) break;
      tuple->args.push_back(ParseExpression(with_condexpr));
    }
    return tuple;
  }

  bool StartsExpression() const {
    const Token& t = Cur();
    switch (t.kind) {
      case TokenKind::kName:
      case TokenKind::kString:
      case TokenKind::kInteger:
      case TokenKind::kFloat:
        return true;
      case TokenKind::kOperator:
        return t.text == "(" || t.text == "[" || t.text == "{" || t.text == "-" || t.text == "+";
      default:
        return false;
    }
  }

  ExprPtr ParseExpression(bool with_condexpr) {
    DepthGuard guard(this);
    const Token& at = Cur();
    ExprPtr expr = ParseOr();
    if (!with_condexpr) return expr;
    while (SkipName("if")) {
      auto cond = MakeExpr(ExprKind::kCondition, at);
      cond->args.push_back(ParseOr());
      cond->args.push_back(std::move(expr));
      cond->args.push_back(SkipName("else") ? ParseExpression(true) : nullptr);
      expr = std::move(cond);
    }
    return expr;
  }

  ExprPtr ParseOr() {
    ChainScope chain(this);
    ExprPtr left = ParseAnd();
    while (IsName("or")) {
      chain.Deepen();
      auto e = MakeExpr(ExprKind::kOr, Cur());
      Advance();
      e->args.push_back(std::move(left));
      e->args.push_back(ParseAnd());
      left = std::move(e);
    }
    return left;
  }

  ExprPtr ParseAnd() {
    ChainScope chain(this);
    ExprPtr left = ParseNot();
    while (IsName("and")) {
      chain.Deepen();
      auto e = MakeExpr(ExprKind::kAnd, Cur());
      Advance();
      e->args.push_back(std::move(left));
      e->args.push_back(ParseNot());
      left = std::move(e);
    }
    return left;
  }

  ExprPtr ParseNot() {
    if (IsName("not")) {
      DepthGuard guard(this);
      auto e = MakeExpr(ExprKind::kUnary, Cur());
      e->name = "not";
      Advance();
      e->args.push_back(ParseNot());
      return e;
    }
    return ParseCompare();
  }

  ExprPtr ParseCompare() {
    const Token& at = Cur();
    ExprPtr first = ParseMath1();
    ExprPtr cmp;
    while (true) {
      std::string op;
      if (Cur().kind == TokenKind::kOperator &&
          (Cur().text == "==" || Cur().text == "!=" || Cur().text == "<" || Cur().text == ">" ||
           Cur().text == "<=" || Cur().text == ">=")) {
        op = Cur().text;
        Advance();
      } else if (IsName("in")) {
        op = "in";
        Advance();
      } else if (IsName("not") && Peek(1).kind == TokenKind::kName && Peek(1).text == "in") {
        op = "notin";
        Advance();
        Advance();
      } else {
        break;
      }
      if (!cmp) {
        cmp = MakeExpr(ExprKind::kCompare, at);
        cmp->args.push_back(std::move(first));
      }
      cmp->ops.push_back(op);
      cmp->args.push_back(ParseMath1());
    }
    return cmp ? std::move(cmp) : std::move(first);
  }

  ExprPtr Binary(const std::string& op, ExprPtr left, ExprPtr right, const Token& at) {
    auto e = MakeExpr(ExprKind::kBinary, at);
    e->name = op;
    e->args.push_back(std::move(left));
    e->args.push_back(std::move(right));
    return e;
  }

  ExprPtr ParseMath1() {
    ChainScope chain(this);
    ExprPtr left = ParseConcat();
    while (IsOp("+") || IsOp("-")) {
      chain.Deepen();
      Token at = Cur();
      Advance();
      left = Binary(at.text, std::move(left), ParseConcat(), at);
    }
    return left;
  }

  ExprPtr ParseConcat() {
    ChainScope chain(this);
    ExprPtr left = ParseMath2();
    while (IsOp("~")) {
      chain.Deepen();
      Token at = Cur();
      Advance();
      left = Binary("~", std::move(left), ParseMath2(), at);
    }
    return left;
  }

  ExprPtr ParseMath2() {
    ChainScope chain(this);
    ExprPtr left = ParsePow();
    while (IsOp("*") || IsOp("/") || IsOp("//") || IsOp("%")) {
      chain.Deepen();
      Token at = Cur();
      Advance();
      left = Binary(at.text, std::move(left), ParsePow(), at);
    }
    return left;
  }

  ExprPtr ParsePow() {
    ChainScope chain(this);
    ExprPtr left = ParseUnary(true);
    while (IsOp("**")) {
      chain.Deepen();
      Token at = Cur();
      Advance();
      left = Binary("**", std::move(left), ParseUnary(true), at);
    }
    return left;
  }

  ExprPtr ParseUnary(bool with_filter) {
    DepthGuard guard(this);
    ExprPtr node;
    if (IsOp("-") || IsOp("+")) {
      auto e = MakeExpr(ExprKind::kUnary, Cur());
      e->name = Cur().text;
      Advance();
      e->args.push_back(ParseUnary(false));
      node = std::move(e);
    } else {
      node = ParsePrimary();
    }
    node = ParsePostfix(std::move(node));
    if (with_filter) node = ParseFilterExpr(std::move(node));
    return node;
  }

  ExprPtr ParsePrimary() {
    const Token& t = Cur();
    switch (t.kind) {
      case TokenKind::kName: {
        auto e = MakeExpr(ExprKind::kLiteral, t);
        if (t.text == "true" || t.text == "True") {
          e->literal = Value::Bool(true);
        } else if (t.text == "false" || t.text == "False") {
          e->literal = Value::Bool(false);
        } else if (t.text == "none" || t.text == "None") {
          e->literal = Value::None();
        } else {
          e->kind = ExprKind::kName;
          e->name = t.text;
        }
        Advance();
        return e;
      }
      case TokenKind::kString: {
        auto e = MakeExpr(ExprKind::kLiteral, t);
        std::string s;
        while (Cur().kind == TokenKind::kString) {  // adjacent literals concatenate
          s += Cur().text;
          Advance();
        }
        e->literal = Value::String(std::move(s));
        return e;
      }
      case TokenKind::kInteger: {
        auto e = MakeExpr(ExprKind::kLiteral, t);
        int64_t v = 0;
        auto res = std::from_chars(t.text.data(), t.text.data() + t.text.size(), v);
        if (res.ec != std::errc()) Error("integer literal '" + t.text + "' is too large", t);
        e->literal = Value::Int(v);
        Advance();
        return e;
      }
      case TokenKind::kFloat: {
        auto e = MakeExpr(ExprKind::kLiteral, t);
        e->literal = Value::Float(std::strtod(t.text.c_str(), nullptr));
        Advance();
        return e;
      }
      case TokenKind::kOperator:
        if (t.text == "(") {
          Advance();
          if (SkipOp(")")) return MakeExpr(ExprKind::kTuple, t);
          ExprPtr inner = ParseTuple(true);
          if (inner->kind == ExprKind::kTuple) {
            inner->line = t.line;
            inner->column = t.column;
          }
          ExpectOp(")");
          return inner;
        }
        if (t.text == "[") {
          auto e = MakeExpr(ExprKind::kList, t);
          Advance();
          while (!IsOp("]")) {
            if (!e->args.empty()) ExpectOp(",");
            if (IsOp("]")) break;
            e->args.push_back(ParseExpression(true));
          }
          Advance();
          return e;
        }
        if (t.text == "{") {
          auto e = MakeExpr(ExprKind::kDict, t);
          Advance();
          while (!IsOp("}")) {
            if (!e->args.empty()) ExpectOp(",");
            if (IsOp("}")) break;
            e->args.push_back(ParseExpression(true));
            ExpectOp(":");
            e->args.push_back(ParseExpression(true));
          }
          Advance();
          return e;
        }
        break;
      default:
        break;
    }
    Error("unexpected " + Describe(t) + " in expression", t);
  }

  ExprPtr ParsePostfix(ExprPtr node) {
    ChainScope chain(this);
    while (true) {
      const Token& t = Cur();
      if (IsOp(".") || IsOp("[") || IsOp("(")) chain.Deepen();
      if (IsOp(".")) {
        Advance();
        if (Cur().kind == TokenKind::kName) {
          auto e = MakeExpr(ExprKind::kAttr, t);
          e->name = Cur().text;
          e->target = std::move(node);
          Advance();
          node = std::move(e);
        } else if (Cur().kind == TokenKind::kInteger) {
          auto e = MakeExpr(ExprKind::kSubscript, t);
          auto index = MakeExpr(ExprKind::kLiteral, Cur());
          index->literal = Value::Int(std::atoll(Cur().text.c_str()));
          e->target = std::move(node);
          e->args.push_back(std::move(index));
          Advance();
          node = std::move(e);
        } else {
          Error("expected an attribute name after '.', got " + Describe(Cur()), Cur());
        }
      } else if (IsOp("[")) {
        Advance();
        node = ParseSubscript(std::move(node), t);
      } else if (IsOp("(")) {
        node = ParseCall(std::move(node));
      } else {
        return node;
      }
    }
  }

  ExprPtr ParseSubscript(ExprPtr target, const Token& at) {
    ExprPtr parts[3];
    bool is_slice = false;
    if (!IsOp(":")) parts[0] = ParseExpression(true);
    if (SkipOp(":")) {
      is_slice = true;
      if (!IsOp(":") && !IsOp("]")) parts[1] = ParseExpression(true);
      if (SkipOp(":")) {
        if (!IsOp("]")) parts[2] = ParseExpression(true);
      }
    }
    ExpectOp("]");
    auto e = MakeExpr(is_slice ? ExprKind::kSlice : ExprKind::kSubscript, at);
    e->target = std::move(target);
    if (is_slice) {
      for (auto& p : parts) e->args.push_back(std::move(p));
    } else {
      e->args.push_back(std::move(parts[0]));
    }
    return e;
  }

  // Parses "(args, name=value)" into `e`.
  void ParseArgs(Expr* e) {
    ExpectOp("(");
    bool first = true;
    while (!IsOp(")")) {
      if (!first) ExpectOp(",");
      first = false;
      if (IsOp(")")) break;
      if (IsOp("*") || IsOp("**"))
        Error("'*args' and '**kwargs' in calls are not supported", Cur());
      if (Cur().kind == TokenKind::kName && Peek(1).kind == TokenKind::kOperator &&
          Peek(1).text == "=") {
        std::string name = Cur().text;
        Advance();
        Advance();
        e->kwargs.emplace_back(std::move(name), ParseExpression(true));
      } else {
        if (!e->kwargs.empty()) Error("positional argument follows keyword argument", Cur());
        e->args.push_back(ParseExpression(true));
      }
    }
    Advance();
  }

  ExprPtr ParseCall(ExprPtr callee) {
    auto e = MakeExpr(ExprKind::kCall, Cur());
    e->target = std::move(callee);
    ParseArgs(e.get());
    return e;
  }

  // One or more "| name(args)" applied to `target` (null inside {% filter %} / {% set %}).
  ExprPtr ParseFilterChain(ExprPtr target, bool leading_bar = true) {
    ExprPtr node = std::move(target);
    bool need_bar = leading_bar;
    ChainScope chain(this);
    while (!need_bar || IsOp("|")) {
      chain.Deepen();
      if (need_bar) Advance();
      need_bar = true;
      auto e = MakeExpr(ExprKind::kFilter, Cur());
      const Token* name_token = &Cur();
      e->name = ExpectName();
      while (IsOp(".") && Peek(1).kind == TokenKind::kName) {  // dotted filter names
        Advance();
        e->name += '.';
        e->name += ExpectName();
      }
      if (!HasFilter(e->name)) Error("unknown filter '" + e->name + "'", *name_token);
      if (IsOp("(")) ParseArgs(e.get());
      e->target = std::move(node);
      node = std::move(e);
    }
    return node;
  }

  ExprPtr ParseFilterExpr(ExprPtr node) {
    ChainScope chain(this);
    while (true) {
      if (IsOp("|")) {
        chain.Deepen();
        node = ParseFilterChain(std::move(node));
      } else if (IsName("is")) {
        chain.Deepen();
        auto e = MakeExpr(ExprKind::kTest, Cur());
        Advance();
        e->negated = SkipName("not");
        const Token& name_token = Cur();
        e->name = ExpectName();
        if (!HasTest(e->name)) Error("unknown test '" + e->name + "'", name_token);
        if (IsOp("(")) {
          ParseArgs(e.get());
        } else if ((Cur().kind == TokenKind::kName || Cur().kind == TokenKind::kString ||
                    Cur().kind == TokenKind::kInteger || Cur().kind == TokenKind::kFloat ||
                    IsOp("[") || IsOp("{")) &&
                   !IsName("else") && !IsName("or") && !IsName("and") && !IsName("is") &&
                   !IsName("if") && !IsName("in") && !IsName("not")) {
          e->args.push_back(ParsePostfix(ParsePrimary()));
        }
        e->target = std::move(node);
        node = std::move(e);
      } else if (IsOp("(")) {
        chain.Deepen();
        node = ParseCall(std::move(node));
      } else {
        return node;
      }
    }
  }

  std::vector<Token> tokens_;
  size_t pos_ = 0;
  size_t max_depth_;
  size_t depth_ = 0;
  int loop_depth_ = 0;
};

}  // namespace

Expected<std::unique_ptr<Program>> ParseTemplate(std::string_view source, size_t max_depth) {
  TS_ASSIGN_OR_RETURN(std::vector<Token> tokens, Lex(source));
  Parser parser(std::move(tokens), max_depth);
  auto program = std::make_unique<Program>();
  try {
    program->body = parser.ParseAll();
  } catch (const ParseError& e) {
    return InvalidArgument("template line " + std::to_string(e.line) + ", column " +
                           std::to_string(e.column) + ": " + e.message);
  }
  return program;
}

}  // namespace tessera::jinja
