// A tiny byte-level GGUF tokenizer for the GGUF tokenizer tests.
#pragma once

#include <string>

#include "tokenizer/gguf_tokenizer.h"

namespace tessera::test {

// A tiny byte-level vocabulary: the GPT-2 byte alphabet plus "12" (merge "1 2").
inline GgufTokenizerData TinyByteLevel(const std::string& pre) {
  GgufTokenizerData g;
  g.model = "gpt2";
  g.pre = pre;
  int next = 256;
  for (int b = 0; b < 256; ++b) {
    // GPT-2's byte-to-character table: printable Latin-1 bytes stand for themselves, the
    // others for U+0100 onwards in byte order.
    bool self = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
    char32_t cp = self ? static_cast<char32_t>(b) : static_cast<char32_t>(next++);
    std::string s;
    if (cp < 0x80) {
      s = std::string(1, static_cast<char>(cp));
    } else {
      s += static_cast<char>(0xC0 | (cp >> 6));
      s += static_cast<char>(0x80 | (cp & 0x3F));
    }
    g.tokens.push_back(s);
    g.token_types.push_back(static_cast<int32_t>(GgufTokenType::kNormal));
  }
  g.tokens.push_back("12");
  g.token_types.push_back(static_cast<int32_t>(GgufTokenType::kNormal));
  g.merges = {"1 2"};
  g.tokens.push_back("<|endoftext|>");
  g.token_types.push_back(static_cast<int32_t>(GgufTokenType::kControl));
  g.eos_id = 257;
  return g;
}

}  // namespace tessera::test
