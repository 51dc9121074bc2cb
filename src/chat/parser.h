// Parser: tokens (lexer.h) to a syntax tree (ast.h), following Jinja2's grammar and operator
// precedence. Nesting depth is bounded so hostile templates cannot exhaust the stack.
//
//   auto program = ParseTemplate("{% for m in messages %}{{ m.content }}{% endfor %}", 256);
//   if (!program) return program.status();   // "template line 1, column 4: ..."
#pragma once

#include <memory>
#include <string_view>

#include "base/status.h"
#include "chat/ast.h"

namespace tessera::jinja {

struct Program {
  StmtList body;
};

Expected<std::unique_ptr<Program>> ParseTemplate(std::string_view source, size_t max_depth);

}  // namespace tessera::jinja
