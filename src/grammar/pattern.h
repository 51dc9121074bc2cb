// A regular-expression subset (ECMA-262 syntax, as JSON Schema `pattern` uses) compiled to a
// DFA over the characters a generated string may contain: printable ASCII except '"' and '\'.
// A match of the DFA always matches the pattern; characters outside that set are never
// generated (so `.` and negated classes produce ASCII only). Unanchored patterns match
// anywhere in the string, as JSON Schema says.
//
// Supported: literals, `.`, classes `[a-z_]` and `[^...]`, `\d \D \w \W \s \S`, escaped
// punctuation, groups `(...)` and `(?:...)`, `|`, quantifiers `* + ? {n} {n,} {n,m}` (lazy
// forms too), `^` at the start and `$` at the end. Anything else is an error naming it.
#pragma once

#include <string_view>

#include "base/status.h"
#include "grammar/grammar_internal.h"

namespace tessera {

// Errors read "<what> (...)" and are prefixed by the caller with the keyword and its path.
Expected<grammar_internal::PatternDfa> CompilePattern(std::string_view pattern);

// Fills dist_to_accept and drops the transitions into states that cannot reach acceptance
// (after transitions were removed, e.g. a character the output may not hold); an error when
// the start state cannot reach it.
Status PruneToAcceptance(grammar_internal::PatternDfa& dfa);

}  // namespace tessera
