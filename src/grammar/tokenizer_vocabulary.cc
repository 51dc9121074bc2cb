#include "grammar/tokenizer_vocabulary.h"

#include <string>
#include <vector>

#include "base/utf8.h"
#include "tokenizer/pre_tokenizer.h"

namespace tessera {
namespace {

constexpr std::string_view kReplacementUtf8 = "\xEF\xBF\xBD";
constexpr std::string_view kMetaspaceUtf8 = "\xE2\x96\x81";  // U+2581, SentencePiece's space

// The GPT-2 byte alphabet read backwards; nullopt when a character is outside it.
std::optional<std::string> ByteLevelBytes(const std::string& token) {
  std::string out;
  size_t pos = 0;
  char32_t cp;
  while (NextCodepoint(token, &pos, &cp)) {
    int b = tok::ByteLevelByte(cp);
    if (b < 0) return std::nullopt;
    out += static_cast<char>(b);
  }
  return out;
}

int ByteFallback(const std::string& token) {
  if (token.size() != 6 || token.compare(0, 3, "<0x") != 0 || token[5] != '>') return -1;
  int v = 0;
  for (int i = 3; i < 5; ++i) {
    char h = token[i];
    int d = (h >= '0' && h <= '9') ? h - '0' : (h >= 'A' && h <= 'F') ? h - 'A' + 10 : -1;
    if (d < 0) return -1;
    v = v * 16 + d;
  }
  return v;
}

}  // namespace

Expected<std::shared_ptr<const TokenVocabulary>> VocabularyFromTokenizer(
    const Tokenizer& tokenizer, std::span<const int32_t> eos_ids) {
  const int32_t n = tokenizer.vocab_size();
  std::vector<std::string> bytes(static_cast<size_t>(n));
  std::vector<int32_t> special;
  for (int32_t id = 0; id < n; ++id) {
    std::optional<std::string> token = tokenizer.IdToToken(id);
    if (!token) continue;  // a hole in the id space: empty, never allowed
    if (tokenizer.IsSpecial(id)) {
      special.push_back(id);
      continue;
    }
    const int32_t one[] = {id};
    Expected<std::string> text = tokenizer.Decode(one, /*skip_special_tokens=*/false);
    if (text && text->find(kReplacementUtf8) == std::string::npos) {
      // A lone SentencePiece token loses its leading space when decoded at the start.
      if (token->compare(0, kMetaspaceUtf8.size(), kMetaspaceUtf8) == 0 &&
          (text->empty() || (*text)[0] != ' ')) {
        text->insert(0, " ");
      }
      bytes[id] = std::move(text).value();
    } else if (int b = ByteFallback(*token); b >= 0) {
      bytes[id] = std::string(1, static_cast<char>(b));
    } else if (auto raw = ByteLevelBytes(*token)) {
      bytes[id] = std::move(*raw);
    } else if (text) {
      bytes[id] = std::move(text).value();
    }
  }
  return TokenVocabulary::Create(std::move(bytes), special, eos_ids);
}

}  // namespace tessera
