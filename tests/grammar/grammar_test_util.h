// Helpers shared by the grammar tests: a small synthetic byte vocabulary and matchers over it.
#pragma once

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "grammar/grammar.h"

namespace tessera::test {

// Every single byte, plus multi-byte pieces typical of JSON output ("\":", "\",\"", "true",
// " the", ...) and one eos token (the last id).
std::shared_ptr<const TokenVocabulary> SmallVocabulary();
int32_t SmallVocabularyEos();

// Feeds `text` and reports whether it was accepted and left a complete document.
struct Fed {
  bool accepted = false;
  bool complete = false;
};
Fed Feed(const std::shared_ptr<const Grammar>& grammar, const std::string& text);

// The compiled grammar, failing the test when the schema is refused.
std::shared_ptr<const Grammar> MustCompile(const std::string& schema_json);

// The real Qwen2.5 vocabulary (null when ../shared is missing), built once.
std::shared_ptr<const TokenVocabulary> QwenVocabulary();

// The single-byte tokens of `order` (a completion-seeking model's preference, closers first).
std::vector<int32_t> ClosingPreference(const TokenVocabulary& vocab, const std::string& order);
// JSON's closers first, openers last.
inline constexpr const char* kJsonClosingOrder =
    "\"}]0123456789ntfaeulrsbcdghijkmopqvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ:,-. _@\\/u+E[{";

bool Allowed(const std::vector<uint64_t>& mask, int32_t id);

struct WalkResult {
  bool finished = false;
  std::string text;
  std::string problem;
};

// A random "model" under the grammar: free random steps, then (past the budget) mostly the
// most closing allowed byte of `preference` until an eos is allowed (or, `any_token_share` of
// the time, any allowed token: multi-byte ones satisfy patterns such as "ab" sooner). Every allowed
// token must be accepted and no state may be a dead end.
WalkResult Walk(const std::shared_ptr<const Grammar>& grammar,
                const std::shared_ptr<const TokenVocabulary>& vocab,
                const std::vector<int32_t>& preference, std::mt19937& rng, int free_steps,
                double any_token_share = 0);

}  // namespace tessera::test
