#include "tokenizer/added_vocabulary.h"

#include <algorithm>

#include "base/utf8.h"
#include "tokenizer/unicode_util.h"

namespace tessera::tok {

AddedTokenMatcher::AddedTokenMatcher() {
  nodes_.emplace_back();
  root_children_.fill(-1);
}

int32_t AddedTokenMatcher::Child(int32_t node, unsigned char byte) const {
  if (node == 0) return root_children_[byte];
  for (const auto& [b, child] : nodes_[node].children) {
    if (b == byte) return child;
  }
  return -1;
}

void AddedTokenMatcher::Add(std::string_view pattern, int32_t token_index) {
  if (pattern.empty()) return;
  int32_t node = 0;
  for (char c : pattern) {
    auto byte = static_cast<unsigned char>(c);
    int32_t next = Child(node, byte);
    if (next < 0) {
      next = static_cast<int32_t>(nodes_.size());
      nodes_.emplace_back();
      if (node == 0) {
        root_children_[byte] = next;
      } else {
        nodes_[node].children.emplace_back(byte, next);
      }
    }
    node = next;
  }
  if (nodes_[node].token_index < 0) nodes_[node].token_index = token_index;
  empty_ = false;
}

bool OverlapsAnyRange(std::span<const std::pair<size_t, size_t>> ranges, size_t begin, size_t end) {
  // Ranges ending at or before `begin` cannot overlap; scan from the first that ends after it
  // until ranges start at or after `end`.
  auto it = std::upper_bound(
      ranges.begin(), ranges.end(), begin,
      [](size_t pos, const std::pair<size_t, size_t>& r) { return pos < r.second; });
  for (; it != ranges.end() && it->first < end; ++it) {
    if (it->first < it->second) return true;  // an empty range protects nothing
  }
  return false;
}

void AddedTokenMatcher::Split(std::string_view text, const std::vector<AddedToken>& tokens,
                              bool skip_special, std::vector<AddedSegment>* out,
                              std::span<const std::pair<size_t, size_t>> protected_ranges) const {
  size_t segment_start = 0;  // end of the last emitted token segment
  size_t pos = 0;
  while (pos < text.size() && !empty_) {
    // Longest token starting at `pos`.
    int32_t node = root_children_[static_cast<unsigned char>(text[pos])];
    if (node < 0) {
      ++pos;
      continue;
    }
    size_t best_len = 0;
    int32_t best_token = -1;
    for (size_t i = pos + 1;; ++i) {
      if (nodes_[node].token_index >= 0) {
        best_len = i - pos;
        best_token = nodes_[node].token_index;
      }
      if (i >= text.size()) break;
      node = Child(node, static_cast<unsigned char>(text[i]));
      if (node < 0) break;
    }
    if (best_token < 0) {
      ++pos;
      continue;
    }
    size_t start = pos;
    size_t end = pos + best_len;
    pos = end;  // matching resumes after the match, whether or not it is kept
    const AddedToken& token = tokens[best_token];
    if (skip_special && token.special) continue;
    if (token.special && !protected_ranges.empty() &&
        OverlapsAnyRange(protected_ranges, start, end)) {
      continue;
    }
    if (start < segment_start) continue;  // inside whitespace an rstrip already took
    if (token.single_word) {
      size_t len = 0;
      bool word_before = start > 0 && IsWordChar(LastCodepoint(text.substr(0, start), &len));
      size_t after = end;
      char32_t next_cp = 0;
      bool word_after = NextCodepoint(text, &after, &next_cp) && IsWordChar(next_cp);
      if (word_before || word_after) continue;
    }
    if (token.lstrip) {
      while (start > segment_start) {
        size_t len = 0;
        char32_t cp = LastCodepoint(text.substr(0, start), &len);
        if (!IsWhitespace(cp)) break;
        start -= len;
      }
    }
    if (token.rstrip) {
      size_t p = end;
      char32_t cp;
      while (true) {
        size_t before = p;
        if (!NextCodepoint(text, &p, &cp) || !IsWhitespace(cp)) {
          p = before;
          break;
        }
      }
      end = p;
      pos = std::max(pos, end);
    }
    if (start > segment_start) out->push_back({segment_start, start, -1});
    out->push_back({start, end, best_token});
    segment_start = end;
  }
  if (segment_start < text.size() || text.empty()) {
    out->push_back({segment_start, text.size(), -1});
  }
}

}  // namespace tessera::tok
