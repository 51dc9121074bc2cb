// Lexer for Jinja templates, configured like transformers' environment: trim_blocks and
// lstrip_blocks on, one trailing newline removed, \r\n and \r normalized to \n.
//
//   auto tokens = Lex("{% if x %}a{% endif %}");
//   // kBlockBegin, kName "if", kName "x", kBlockEnd, kData "a", kBlockBegin, ...
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace tessera::jinja {

enum class TokenKind {
  kData,        // literal template text (already whitespace-controlled)
  kVarBegin,    // {{
  kVarEnd,      // }}
  kBlockBegin,  // {%
  kBlockEnd,    // %}
  kName,
  kString,  // text holds the decoded value
  kInteger,
  kFloat,
  kOperator,  // text holds the operator, e.g. "//", "(", "|"
  kEnd,
};

struct Token {
  TokenKind kind;
  std::string text;
  int line = 1;
  int column = 1;
};

// Whitespace as Python's str.isspace() defines it, for one code point.
bool IsPythonSpace(char32_t cp);
// str.strip()/lstrip()/rstrip() with no argument.
std::string_view StripPythonSpace(std::string_view s, bool left, bool right);

// Lexes `source`; a malformed template gives an error naming line and column. `max_tokens`
// bounds the work done on hostile input.
Expected<std::vector<Token>> Lex(std::string_view source, size_t max_tokens = 4'000'000);

}  // namespace tessera::jinja
