#include "runtime/text_stream.h"

#include <algorithm>

#include "sampling/stages.h"

namespace tessera {

TextStream::TextStream(const Tokenizer& tokenizer, std::span<const int32_t> prompt_ids,
                       TextStreamOptions options, std::vector<int32_t> stop_ids)
    : tokenizer_(tokenizer),
      options_(std::move(options)),
      stop_ids_(std::move(stop_ids)),
      detok_(tokenizer, options_.skip_special_tokens),
      logprob_detok_(tokenizer, options_.skip_special_tokens),
      filter_(options_.stop) {
  // Decode the completion in the prompt's context (a leading-space strip applies only at the
  // start of a sequence).
  for (int32_t id : prompt_ids) {
    if (id >= 0 && id < tokenizer.vocab_size()) (void)detok_.Push(id);
  }
  logprob_detok_ = detok_;
}

std::string TextStream::TextAfter(const StreamingDetokenizer& detok, int32_t id) const {
  if (id < 0 || id >= tokenizer_.vocab_size()) return "";
  StreamingDetokenizer probe = detok;
  auto text = probe.Push(id);
  return text ? *text : std::string();
}

TokenDelta TextStream::Push(int32_t id, std::span<const float> logits) {
  TokenDelta delta;
  const bool is_stop_id = std::find(stop_ids_.begin(), stop_ids_.end(), id) != stop_ids_.end();
  if (!stopped_ && !is_stop_id && id >= 0 && id < tokenizer_.vocab_size()) {
    if (auto piece = detok_.Push(id)) {
      StopStringFilter::Step step = filter_.Push(*piece);
      delta.text = std::move(step.text);
      stopped_ = step.stopped;
      delta.stopped = step.stopped;
    }
  }
  if (options_.logprobs && !logits.empty()) {
    // Alternatives are decoded on a copy of the in-context detokenizer, so the chosen token
    // and its own top_logprobs entry read the same.
    TokenLogprobText entry;
    if (auto lp = ComputeTokenLogprob(logits, id)) entry.logprob = *lp;
    if (options_.top_logprobs > 0) {
      if (auto top = ComputeTopLogprobs(logits, options_.top_logprobs)) {
        for (const TokenLogprob& t : *top)
          entry.top.emplace_back(TextAfter(logprob_detok_, t.id), t.logprob);
      }
    }
    entry.token = TextAfter(logprob_detok_, id);
    if (id >= 0 && id < tokenizer_.vocab_size()) (void)logprob_detok_.Push(id);
    delta.logprob = std::move(entry);
  }
  return delta;
}

std::string TextStream::Finish() {
  if (stopped_) return "";
  StopStringFilter::Step step = filter_.Push(detok_.Finish());
  stopped_ = step.stopped;
  return step.text + (step.stopped ? "" : filter_.Finish());
}

}  // namespace tessera
