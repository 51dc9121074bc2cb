// AddedTokenMatcher: finds added tokens (tokenizer.json "added_tokens") in text the way Hugging
// Face's AddedVocabulary does: leftmost-longest matching over all token strings, then the
// single_word / lstrip / rstrip rules. Internal to the tokenizer library.
//
//   AddedTokenMatcher m;
//   m.Add("<|im_start|>", /*token_index=*/0);
//   std::vector<AddedSegment> segs;
//   m.Split("<|im_start|>user", tokens, /*skip_special=*/false, &segs);  // token, then text
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tessera::tok {

struct AddedToken {
  int32_t id = 0;
  std::string content;
  bool single_word = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = false;
  bool special = false;
};

struct AddedSegment {
  size_t start;
  size_t end;
  int32_t token_index;  // index into the AddedToken list, or -1 for ordinary text
};

// True when [begin, end) shares at least one byte with a range of `ranges` (sorted,
// non-overlapping).
bool OverlapsAnyRange(std::span<const std::pair<size_t, size_t>> ranges, size_t begin, size_t end);

class AddedTokenMatcher {
 public:
  AddedTokenMatcher();
  // Registers `pattern` (non-empty) as the text of tokens[token_index]. A repeated pattern
  // keeps its first registration.
  void Add(std::string_view pattern, int32_t token_index);
  bool empty() const { return empty_; }

  // Splits `text` into ordinary-text segments and added-token segments, covering all of it
  // (segments may be empty only when `text` is). With skip_special, special tokens are
  // not matched (split_special_tokens=true). A special token whose match overlaps one of
  // `protected_ranges` (sorted, non-overlapping; offsets into `text`) is not matched either.
  void Split(std::string_view text, const std::vector<AddedToken>& tokens, bool skip_special,
             std::vector<AddedSegment>* out,
             std::span<const std::pair<size_t, size_t>> protected_ranges = {}) const;

 private:
  struct Node {
    int32_t token_index = -1;
    std::vector<std::pair<unsigned char, int32_t>> children;
  };
  int32_t Child(int32_t node, unsigned char byte) const;
  std::vector<Node> nodes_;
  std::array<int32_t, 256> root_children_;
  bool empty_ = true;
};

}  // namespace tessera::tok
