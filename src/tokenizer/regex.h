// Regex: a compiled PCRE2 (UTF + UCP + JIT) pattern that behaves like the Oniguruma patterns
// found in Hugging Face tokenizer.json files. Internal to the tokenizer library.
//
//   TS_ASSIGN_OR_RETURN(auto re, Regex::Compile(R"(\p{L}+|\s+)"));
//   std::vector<RegexMatch> matches;
//   TS_RETURN_IF_ERROR(re->FindAll("hello world", &matches));  // {0,5} {5,6} {6,11}
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace tessera::tok {

struct RegexMatch {
  size_t start;
  size_t end;
};

class Regex {
 public:
  // Compiles an Oniguruma-syntax pattern. `\s`/`\S` are rewritten to the Unicode White_Space
  // set that Oniguruma uses (PCRE2's UCP \s also accepts U+180E, Oniguruma does not).
  static Expected<std::shared_ptr<const Regex>> Compile(std::string_view pattern);
  // A pattern that matches `literal` exactly (used for {"String": ...} patterns).
  static Expected<std::shared_ptr<const Regex>> Literal(std::string_view literal);

  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Appends every non-overlapping match in `text` (valid UTF-8) from left to right. After an
  // empty match the search resumes one character later, as Oniguruma's find_iter does.
  Status FindAll(std::string_view text, std::vector<RegexMatch>* out) const;

  const std::string& pattern() const { return pattern_; }

 private:
  friend struct RegexFactory;
  Regex() = default;
  std::string pattern_;
  void* code_ = nullptr;  // pcre2_code_8*
  bool jit_ = false;
};

}  // namespace tessera::tok
