// TextStream: what a client sees of one sequence's generated ids. It detokenizes in the
// prompt's context (a SentencePiece leading space depends on what came before), cuts at stop
// strings (holding back text that could still become one), and reports each token's logprob
// and top alternatives with their texts. The terminal commands and the server use the same
// stream, so they show the same text for the same tokens.
//
//   TextStream stream(tokenizer, prompt_ids, {.stop = {"\n\n"}, .top_logprobs = 2}, stop_ids);
//   TokenDelta d = stream.Push(id, logits);   // logits: that step's raw row, or empty
//   print(d.text); if (d.stopped) break;
//   print(stream.Finish());                   // text held back at the end
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "runtime/stop_strings.h"
#include "tokenizer/tokenizer.h"

namespace tessera {

struct TextStreamOptions {
  std::vector<std::string> stop;  // stop strings (cut, never shown)
  bool logprobs = false;          // report each token's logprob
  int top_logprobs = 0;           // and this many alternatives (with logprobs)
  bool skip_special_tokens = true;
};

struct TokenLogprobText {
  std::string token;  // the token's text in context
  float logprob = 0;
  std::vector<std::pair<std::string, float>> top;  // highest first
};

struct TokenDelta {
  std::string text;                         // safe to show now
  bool stopped = false;                     // a stop string ended the text here
  std::optional<TokenLogprobText> logprob;  // with TextStreamOptions::logprobs
};

class TextStream {
 public:
  TextStream(const Tokenizer& tokenizer, std::span<const int32_t> prompt_ids,
             TextStreamOptions options, std::vector<int32_t> stop_ids);

  // One generated id; `logits` is the step's raw row (needed for logprobs). A stop id adds
  // no text.
  TokenDelta Push(int32_t id, std::span<const float> logits);
  // The text held back when the sequence ends without a stop string.
  std::string Finish();
  bool stopped() const { return stopped_; }
  // The stop string that ended the text, or empty.
  const std::string& matched_stop() const { return filter_.matched(); }

 private:
  std::string TextAfter(const StreamingDetokenizer& detok, int32_t id) const;

  const Tokenizer& tokenizer_;
  TextStreamOptions options_;
  std::vector<int32_t> stop_ids_;
  StreamingDetokenizer detok_;
  StreamingDetokenizer logprob_detok_;  // token texts for logprobs, decoded in context
  StopStringFilter filter_;
  bool stopped_ = false;
};

}  // namespace tessera
