// Normalizers from tokenizer.json ("normalizer"): NFC/NFD/NFKC/NFKD, Lowercase, Strip,
// Prepend, Replace (String or Regex pattern) and Sequence. Internal to the tokenizer library.
//
//   TS_ASSIGN_OR_RETURN(auto norm, ParseNormalizer(json["normalizer"], "normalizer"));
//   std::string text = "A\u030a";
//   TS_RETURN_IF_ERROR(norm->Normalize(&text));   // NFC: "\u00c5"
#pragma once

#include <memory>
#include <string>

#include "base/status.h"
#include "tokenizer/json_util.h"

namespace tessera::tok {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  // Rewrites `text` (valid UTF-8) in place; the result is valid UTF-8.
  virtual Status Normalize(std::string* text) const = 0;
};

// Parses one normalizer object; `where` names it in error messages.
Expected<std::unique_ptr<const Normalizer>> ParseNormalizer(const Json& json,
                                                            const std::string& where);

class Regex;
// Reads the {"String": s} or {"Regex": r} object under obj["pattern"]; sets exactly one of
// *literal / *regex.
Status ParsePattern(const Json& obj, const std::string& where, std::string* literal,
                    std::shared_ptr<const Regex>* regex);

// Replaces every occurrence of `from` (non-empty) in `text` with `to`.
void ReplaceAll(std::string* text, std::string_view from, std::string_view to);

}  // namespace tessera::tok
