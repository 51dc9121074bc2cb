#include <algorithm>
#include <numeric>

#include "base/utf8.h"
#include "grammar/grammar.h"

namespace tessera {
namespace {

// Builds a trie over `ids` (sorted by their bytes) in depth-first order; each node's edges are
// contiguous so the walk reads them as one slice.
class TrieBuilder {
 public:
  TrieBuilder(const std::vector<std::string>& bytes, TokenVocabulary::Trie* trie)
      : bytes_(bytes), trie_(trie) {}

  uint32_t Build(size_t begin, size_t end, size_t depth) {
    const uint32_t id = static_cast<uint32_t>(trie_->nodes.size());
    trie_->nodes.emplace_back();
    size_t s = begin;
    while (s < end && Bytes(s).size() == depth) ++s;
    trie_->nodes[id].token_begin = static_cast<uint32_t>(begin);
    trie_->nodes[id].token_end = static_cast<uint32_t>(s);
    std::vector<std::pair<size_t, size_t>> groups;
    while (s < end) {
      size_t g = s;
      const char byte = Bytes(s)[depth];
      while (g < end && Bytes(g)[depth] == byte) ++g;
      groups.emplace_back(s, g);
      s = g;
    }
    const uint32_t first_edge = static_cast<uint32_t>(trie_->edges.size());
    trie_->nodes[id].edge_begin = first_edge;
    trie_->nodes[id].edge_end = first_edge + static_cast<uint32_t>(groups.size());
    for (const auto& [gs, ge] : groups) {
      trie_->edges.push_back({static_cast<uint8_t>(Bytes(gs)[depth]), 0});
    }
    for (size_t i = 0; i < groups.size(); ++i) {
      uint32_t child = Build(groups[i].first, groups[i].second, depth + 1);
      trie_->edges[first_edge + i].child = child;
    }
    return id;
  }

 private:
  const std::string& Bytes(size_t sorted_index) const {
    return bytes_[trie_->tokens[sorted_index]];
  }
  const std::vector<std::string>& bytes_;
  TokenVocabulary::Trie* trie_;
};

void BuildTrie(const std::vector<std::string>& bytes, std::vector<int32_t> ids,
               TokenVocabulary::Trie* trie) {
  std::sort(ids.begin(), ids.end(), [&](int32_t x, int32_t y) { return bytes[x] < bytes[y]; });
  trie->tokens = std::move(ids);
  TrieBuilder(bytes, trie).Build(0, trie->tokens.size(), 0);
}

bool IsPlainStringText(const std::string& s) {
  for (unsigned char c : s) {
    if (c < 0x20 || c == '"' || c == '\\') return false;
  }
  return IsValidUtf8(s);
}

// Text that stays inside an XML parameter's raw string whatever came before it (matcher.cc,
// Node::raw): complete UTF-8, no control byte but tab, no '<' (which could begin, or after a
// partial one complete, "</parameter>").
bool IsPlainRawText(const std::string& s) {
  for (unsigned char c : s) {
    if ((c < 0x20 && c != '\t') || c == '<') return false;
  }
  return IsValidUtf8(s);
}

uint32_t CountChars(const std::string& s) {
  uint32_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

}  // namespace

Expected<std::shared_ptr<const TokenVocabulary>> TokenVocabulary::Create(
    std::vector<std::string> token_bytes, std::span<const int32_t> special_ids,
    std::span<const int32_t> eos_ids) {
  if (token_bytes.empty() || token_bytes.size() > (1u << 24)) {
    return InvalidArgument("token vocabulary must hold 1 to 16777216 tokens");
  }
  std::shared_ptr<TokenVocabulary> v(new TokenVocabulary());
  const size_t n = token_bytes.size();
  v->bytes_ = std::move(token_bytes);
  v->kind_.assign(n, kOrdinary);
  for (int32_t id : special_ids) {
    if (id < 0 || static_cast<size_t>(id) >= n) {
      return OutOfRange("special token id " + std::to_string(id) + " is outside the vocabulary");
    }
    v->kind_[id] = kNever;
  }
  for (int32_t id : eos_ids) {
    if (id < 0 || static_cast<size_t>(id) >= n) {
      return OutOfRange("eos token id " + std::to_string(id) + " is outside the vocabulary");
    }
    v->kind_[id] = kEos;
    v->eos_ids_.push_back(id);
  }
  std::vector<int32_t> ordinary;
  // The shortcut sets: which tokens belong, then (chars, id) pairs and the others.
  struct Building {
    TokenVocabulary::PlainSet* set;
    bool (*member)(const std::string&);
    std::vector<std::pair<uint32_t, int32_t>> in;
    std::vector<int32_t> out;
  };
  Building sets[] = {
      {&v->plain_, IsPlainStringText, {}, {}},
      {&v->json_guarded_,
       [](const std::string& b) {
         return IsPlainStringText(b) && b.find('<') == std::string::npos;
       },
       {},
       {}},
      {&v->raw_, IsPlainRawText, {}, {}},
  };
  for (Building& b : sets) b.set->mask.assign(v->mask_words(), 0);
  for (size_t i = 0; i < n; ++i) {
    const std::string& b = v->bytes_[i];
    if (v->kind_[i] != kOrdinary) continue;
    if (b.empty()) {  // would let a model emit nothing forever
      v->kind_[i] = kNever;
      continue;
    }
    v->max_token_bytes_ = std::max(v->max_token_bytes_, b.size());
    const int32_t id = static_cast<int32_t>(i);
    ordinary.push_back(id);
    for (Building& s : sets) {
      if (s.member(b)) {
        s.in.emplace_back(CountChars(b), id);
        s.set->mask[i / 64] |= uint64_t{1} << (i % 64);
      } else {
        s.out.push_back(id);
      }
    }
  }
  for (Building& s : sets) {
    std::sort(s.in.begin(), s.in.end());
    for (const auto& [chars, id] : s.in) {
      s.set->chars.push_back(chars);
      s.set->by_chars.push_back(id);
      s.set->max_chars = std::max(s.set->max_chars, chars);
    }
    std::vector<int32_t>& by_first = s.set->by_first_byte;
    by_first = s.set->by_chars;
    std::stable_sort(by_first.begin(), by_first.end(), [&](int32_t a, int32_t b) {
      return static_cast<uint8_t>(v->bytes_[a][0]) < static_cast<uint8_t>(v->bytes_[b][0]);
    });
    size_t at = 0;
    for (int c = 0; c < 256; ++c) {
      s.set->first[c] = static_cast<uint32_t>(at);
      while (at < by_first.size() && static_cast<uint8_t>(v->bytes_[by_first[at]][0]) == c) ++at;
    }
    s.set->first[256] = static_cast<uint32_t>(at);
    BuildTrie(v->bytes_, std::move(s.out), &s.set->others);
  }
  BuildTrie(v->bytes_, std::move(ordinary), &v->all_);
  return std::shared_ptr<const TokenVocabulary>(std::move(v));
}

bool TokenVocabulary::is_eos(int32_t id) const {
  return id >= 0 && id < size() && kind_[id] == kEos;
}

void TokenVocabulary::MarkTextOpeners(char opener, std::span<uint64_t> mask) const {
  for (int32_t id = 0; id < size() && static_cast<size_t>(id / 64) < mask.size(); ++id) {
    bool text = kind_[id] == kEos;
    if (kind_[id] == kOrdinary) {
      const std::string& b = bytes_[static_cast<size_t>(id)];
      const size_t first = b.find_first_not_of(" \t\r\n");
      text = first != std::string::npos && b[first] != opener;
    }
    if (text) mask[static_cast<size_t>(id / 64)] |= uint64_t{1} << (id % 64);
  }
}

}  // namespace tessera
