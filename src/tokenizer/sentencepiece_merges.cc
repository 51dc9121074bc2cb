#include "tokenizer/sentencepiece_merges.h"

#include <algorithm>
#include <cstdint>

#include "base/utf8.h"
#include "tokenizer/bpe_model.h"

namespace tessera::tok {

std::vector<std::pair<int32_t, int32_t>> DeriveSentencePieceMerges(
    std::span<const std::string> pieces, std::span<const float> scores) {
  TokenMap ids;
  ids.reserve(pieces.size());
  for (size_t id = 0; id < pieces.size(); ++id) {
    if (!pieces[id].empty()) ids.emplace(pieces[id], static_cast<int32_t>(id));
  }
  struct Candidate {
    int32_t left;
    int32_t right;
    float score;
    int32_t left_chars;
    int32_t right_chars;
  };
  std::vector<Candidate> all;
  std::vector<Candidate> local;
  std::vector<size_t> bounds;  // byte offsets of the code point boundaries inside a piece
  for (size_t id = 0; id < pieces.size() && id < scores.size(); ++id) {
    std::string_view piece = pieces[id];
    if (piece.empty()) continue;
    bounds.clear();
    size_t pos = 0;
    char32_t cp;
    while (pos < piece.size()) {
      NextCodepoint(piece, &pos, &cp);
      if (pos < piece.size()) bounds.push_back(pos);
    }
    local.clear();
    int32_t total_chars = static_cast<int32_t>(bounds.size()) + 1;
    for (size_t k = 0; k < bounds.size(); ++k) {
      auto l = ids.find(piece.substr(0, bounds[k]));
      if (l == ids.end()) continue;
      auto r = ids.find(piece.substr(bounds[k]));
      if (r == ids.end()) continue;
      int32_t left_chars = static_cast<int32_t>(k) + 1;
      local.push_back({l->second, r->second, scores[id], left_chars, total_chars - left_chars});
    }
    std::sort(local.begin(), local.end(), [](const Candidate& a, const Candidate& b) {
      return a.left != b.left ? a.left < b.left : a.right < b.right;
    });
    all.insert(all.end(), local.begin(), local.end());
  }
  // Python's sorted(..., key=(score, len(left), len(right)), reverse=True) is stable.
  std::stable_sort(all.begin(), all.end(), [](const Candidate& a, const Candidate& b) {
    if (a.score != b.score) return a.score > b.score;
    if (a.left_chars != b.left_chars) return a.left_chars > b.left_chars;
    return a.right_chars > b.right_chars;
  });
  std::vector<std::pair<int32_t, int32_t>> merges;
  merges.reserve(all.size());
  for (const Candidate& c : all) merges.emplace_back(c.left, c.right);
  return merges;
}

}  // namespace tessera::tok
