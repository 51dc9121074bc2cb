// Pre-tokenizers from tokenizer.json ("pre_tokenizer"): ByteLevel, Split, Digits, Metaspace,
// Whitespace, WhitespaceSplit, Punctuation, BertPreTokenizer and Sequence. Each one turns a
// list of splits into a finer list, exactly as Hugging Face's PreTokenizedString::split does
// (empty pieces dropped). Internal to the tokenizer library.
//
//   TS_ASSIGN_OR_RETURN(auto pre, ParsePreTokenizer(json["pre_tokenizer"], "pre_tokenizer"));
//   std::vector<PreToken> splits = {{"Hello world", true}};
//   TS_RETURN_IF_ERROR(pre->Apply(&splits));   // GPT-2 style: "Hello", "Ġworld"
#pragma once

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "tokenizer/json_util.h"

namespace tessera::tok {

struct PreToken {
  std::string text;
  // True when this split starts at offset 0 of the original input (Metaspace "first").
  bool at_origin = false;
};

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  virtual Status Apply(std::vector<PreToken>* splits) const = 0;
};

Expected<std::unique_ptr<const PreTokenizer>> ParsePreTokenizer(const Json& json,
                                                                const std::string& where);

// GPT-2's byte-to-character table: the UTF-8 text of the character standing for each byte.
const std::array<std::string, 256>& ByteLevelAlphabet();
// The byte a byte-level character stands for, or -1 when `cp` is not in the table.
int ByteLevelByte(char32_t cp);

}  // namespace tessera::tok
