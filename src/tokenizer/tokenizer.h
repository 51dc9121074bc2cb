// Tokenizer: Hugging Face `tokenizers`-compatible encoding and decoding from a tokenizer.json
// (BPE models: byte-level like GPT-2/Qwen/Llama-3 and SentencePiece-style like Llama-2/Gemma).
//
//   TS_ASSIGN_OR_RETURN(Tokenizer tok, Tokenizer::FromFile(dir + "/tokenizer.json"));
//   TS_ASSIGN_OR_RETURN(std::vector<int32_t> ids, tok.Encode("Hello world"));
//   TS_ASSIGN_OR_RETURN(std::string text, tok.Decode(ids, /*skip_special_tokens=*/false));
//
//   StreamingDetokenizer stream(tok, /*skip_special_tokens=*/true);
//   for (int32_t id : generated) { TS_ASSIGN_OR_RETURN(std::string piece, stream.Push(id)); ... }
//   std::string rest = stream.Finish();
//
// Input text must be valid UTF-8: Encode rejects anything else with InvalidArgument (naming the
// byte offset) rather than guessing, because no replacement would round-trip like HF does.
// A Tokenizer is immutable after loading, cheap to copy (shared state) and safe to use from
// many threads at once.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"

namespace tessera {

struct EncodeOptions {
  // Apply the post-processor (e.g. Gemma/Llama-2 prepend <bos>).
  bool add_special_tokens = false;
  // Treat special-token strings in the text as ordinary text (HF split_special_tokens=true);
  // use this for untrusted content such as chat messages.
  bool split_special_tokens = false;
  // Byte ranges [begin, end) of the input, sorted and non-overlapping, whose special-token
  // strings are ordinary text: a special-token match overlapping one is not taken, as if
  // split_special_tokens were true only there. Chat prompts use this for message content so
  // that the template's own control tokens still match. Empty ranges are allowed and
  // protect nothing; a range past the end of the text is InvalidArgument.
  std::vector<std::pair<size_t, size_t>> protected_ranges = {};
};

class Tokenizer {
 public:
  static Expected<Tokenizer> FromJson(std::string_view tokenizer_json);
  static Expected<Tokenizer> FromFile(const std::string& path);
  // The tokenizer described by GGUF metadata: see tokenizer/gguf_tokenizer.h.

  struct State;  // immutable loaded tokenizer, shared between copies
  // Completes a state assembled by a loader (model, added tokens, normalizer, pre-tokenizer,
  // post-processor ids, decoder): builds the id tables and the added-token matchers.
  static Expected<Tokenizer> FromState(std::shared_ptr<State> state);

  Expected<std::vector<int32_t>> Encode(std::string_view text,
                                        const EncodeOptions& options = {}) const;
  // Decodes with the tokenizer.json decoder only (no clean_up_tokenization_spaces). Every id
  // must be in [0, vocab_size()) and name a token; otherwise OutOfRange.
  Expected<std::string> Decode(std::span<const int32_t> ids, bool skip_special_tokens) const;

  // Max id + 1 over the model vocab and the added tokens.
  int32_t vocab_size() const;
  std::optional<int32_t> TokenToId(std::string_view token) const;
  std::optional<std::string> IdToToken(int32_t id) const;
  // True for added tokens marked special=true.
  bool IsSpecial(int32_t id) const;

 private:
  friend class StreamingDetokenizer;
  explicit Tokenizer(std::shared_ptr<const State> state) : state_(std::move(state)) {}
  std::shared_ptr<const State> state_;
};

// Turns ids into text incrementally. Push returns only newly completed text: never half a
// UTF-8 character, and the concatenation of every Push plus Finish equals
// tokenizer.Decode(all ids, skip_special_tokens). Not thread-safe; use one per stream.
class StreamingDetokenizer {
 public:
  StreamingDetokenizer(const Tokenizer& tokenizer, bool skip_special_tokens);

  // OutOfRange for an id the tokenizer does not know (the stream is left unchanged).
  Expected<std::string> Push(int32_t id);
  // Flushes text held back (e.g. an incomplete byte sequence) and resets for a new stream.
  std::string Finish();

 private:
  std::string DecodeWindow(size_t count, bool at_end) const;
  Tokenizer tokenizer_;
  bool skip_special_tokens_;
  std::vector<int32_t> window_;  // ids not yet known to be final, starting at a clean boundary
  size_t emitted_ = 0;           // bytes of the window's decoded text already returned
  bool at_start_ = true;         // the window begins the sequence
};

}  // namespace tessera
