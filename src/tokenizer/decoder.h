// Decoder: the tokenizer.json "decoder" chain (ByteLevel, ByteFallback, Fuse, Strip, Replace,
// Metaspace, Sequence) turning token strings back into text. Internal to the tokenizer library.
//
//   TS_ASSIGN_OR_RETURN(auto dec, Decoder::FromJson(FindField(json, "decoder")));
//   std::string text = dec->Decode({"Hello", "Ġworld"}, /*at_start=*/true, /*at_end=*/true);
//
// `at_start` / `at_end` say whether the tokens begin / end the whole sequence. Decode(all) is
// Decode(tokens, true, true); the streaming detokenizer decodes windows with false so that
// steps that only act at the sequence edges (Strip after Fuse, Metaspace's first token) are
// applied exactly once.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "tokenizer/json_util.h"

namespace tessera::tok {

class Regex;

class Decoder {
 public:
  // `json` may be nullptr (no decoder: tokens are joined with single spaces, like HF).
  static Expected<std::unique_ptr<const Decoder>> FromJson(const Json* json);

  std::string Decode(std::vector<std::string> tokens, bool at_start, bool at_end) const;

  // True when a ByteFallback step groups consecutive "<0xHH>" tokens.
  bool has_byte_fallback() const { return has_byte_fallback_; }
  // Characters some Strip step removes from the end of a token (held back while streaming).
  const std::vector<char32_t>& end_strip_chars() const { return end_strip_chars_; }

  enum class Kind { kByteLevel, kByteFallback, kFuse, kStrip, kReplace, kMetaspace };
  struct Step {
    Kind kind;
    std::string content;  // Strip: the character; Replace: the replacement
    char32_t ch = 0;      // Strip content / Metaspace replacement
    size_t start = 0, stop = 0;
    std::string literal;                 // Replace with a String pattern
    std::shared_ptr<const Regex> regex;  // Replace with a Regex pattern
    bool prepend = true;                 // Metaspace: prepend_scheme != never
  };

 private:
  Decoder() = default;
  static Status AddSteps(const Json& json, const std::string& where, Decoder* decoder);
  std::vector<Step> steps_;
  bool joins_with_space_ = false;
  bool has_byte_fallback_ = false;
  std::vector<char32_t> end_strip_chars_;
};

// True when `token` is a byte-fallback token "<0xHH>"; sets *byte.
bool ParseByteToken(const std::string& token, unsigned char* byte);

}  // namespace tessera::tok
