// Helpers shared by the grammar tests: a small synthetic byte vocabulary and matchers over it.
#pragma once

#include <memory>
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

}  // namespace tessera::test
