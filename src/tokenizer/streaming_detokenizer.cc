// StreamingDetokenizer: decodes a growing id sequence window by window. The window restarts
// only at boundaries where everything decoded so far is final (no incomplete UTF-8, no open
// byte-fallback group, nothing a trailing Strip could still remove), so the concatenated
// output equals Decode(all ids) while each Push costs O(window).
#include <algorithm>

#include "base/utf8.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_state.h"

namespace tessera {

namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";

// Length of the prefix of `text` that cannot change when more tokens arrive.
size_t StableLength(const std::string& text, const std::vector<char32_t>& end_strip_chars) {
  size_t len = CompleteUtf8PrefixLength(text);
  while (true) {
    std::string_view head(text.data(), len);
    // A trailing U+FFFD may be the start of a character whose remaining bytes are still to come.
    if (head.size() >= 3 && head.substr(head.size() - 3) == kReplacement) {
      len -= 3;
      continue;
    }
    if (len > 0 && !end_strip_chars.empty()) {
      size_t start = len - 1;
      while (start > 0 && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
      size_t p = start;
      char32_t cp;
      NextCodepoint(head, &p, &cp);
      if (std::find(end_strip_chars.begin(), end_strip_chars.end(), cp) != end_strip_chars.end()) {
        len = start;
        continue;
      }
    }
    return len;
  }
}

}  // namespace

StreamingDetokenizer::StreamingDetokenizer(const Tokenizer& tokenizer, bool skip_special_tokens)
    : tokenizer_(tokenizer), skip_special_tokens_(skip_special_tokens) {}

std::string StreamingDetokenizer::DecodeWindow(size_t count, bool at_end) const {
  const Tokenizer::State& st = *tokenizer_.state_;
  std::vector<std::string> tokens;
  tokens.reserve(count);
  for (size_t i = 0; i < count; ++i) tokens.push_back(st.id_to_token[window_[i]]);
  return st.decoder->Decode(std::move(tokens), at_start_, at_end);
}

Expected<std::string> StreamingDetokenizer::Push(int32_t id) {
  const Tokenizer::State& st = *tokenizer_.state_;
  if (!st.Known(id)) {
    return OutOfRange("token id " + std::to_string(id) +
                      " is not in the vocabulary (valid ids are 0.." +
                      std::to_string(tokenizer_.vocab_size() - 1) + ")");
  }
  if (skip_special_tokens_ && st.Special(id)) return std::string();
  window_.push_back(id);
  std::string full = DecodeWindow(window_.size(), /*at_end=*/false);
  size_t stable = StableLength(full, st.decoder->end_strip_chars());

  // ByteFallback turns a whole run of byte tokens into U+FFFDs if the run ends up invalid, so
  // text from an unfinished run is held back until a non-byte token closes it.
  bool open_byte_run = false;
  if (st.decoder->has_byte_fallback()) {
    size_t run_start = window_.size();
    unsigned char byte;
    while (run_start > 0 && tok::ParseByteToken(st.id_to_token[window_[run_start - 1]], &byte)) {
      --run_start;
    }
    if (run_start < window_.size()) {
      open_byte_run = true;
      std::string before = DecodeWindow(run_start, /*at_end=*/false);
      bool is_prefix = full.compare(0, before.size(), before) == 0;
      stable = std::min(stable,
                        is_prefix ? StableLength(before, st.decoder->end_strip_chars()) : emitted_);
    }
  }

  std::string out;
  if (stable > emitted_) {
    out = full.substr(emitted_, stable - emitted_);
    emitted_ = stable;
  }
  // Everything decoded is final: start a fresh window. At the very start the window must have
  // produced text first, so that a leading Strip has consumed what it will consume.
  if (!open_byte_run && stable == full.size() && (!at_start_ || !full.empty())) {
    window_.clear();
    emitted_ = 0;
    at_start_ = false;
  }
  return out;
}

std::string StreamingDetokenizer::Finish() {
  std::string full = DecodeWindow(window_.size(), /*at_end=*/true);
  std::string out = full.size() > emitted_ ? full.substr(emitted_) : std::string();
  window_.clear();
  emitted_ = 0;
  at_start_ = true;
  return out;
}

}  // namespace tessera
