#include "tokenizer/bpe_model.h"

#include <algorithm>
#include <cstdio>

#include "base/utf8.h"

namespace tessera::tok {

void MergeTable::Reserve(size_t count) {
  size_t capacity = 16;
  shift_ = 60;
  while (capacity < count * 2) {
    capacity <<= 1;
    --shift_;
  }
  entries_.assign(capacity, Entry{});
  mask_ = capacity - 1;
}

void MergeTable::Insert(int32_t left, int32_t right, int32_t rank, int32_t merged_id) {
  uint64_t key = Key(left, right);
  for (size_t i = Slot(key);; i = (i + 1) & mask_) {
    Entry& e = entries_[i];
    if (e.key == key || e.key == kEmpty) {
      e = Entry{key, rank, merged_id};
      return;
    }
  }
}

bool WordCache::Lookup(std::string_view word, std::vector<int32_t>* out) const {
  size_t h = StringHash{}(word);
  Shard& shard = shards_[h % kShards];
  std::lock_guard<std::mutex> lock(shard.mu);
  auto it = shard.map.find(word);
  if (it == shard.map.end()) return false;
  out->insert(out->end(), it->second.begin(), it->second.end());
  return true;
}

void WordCache::Insert(std::string_view word, const int32_t* ids, size_t count) const {
  size_t h = StringHash{}(word);
  Shard& shard = shards_[h % kShards];
  std::lock_guard<std::mutex> lock(shard.mu);
  if (shard.map.size() >= capacity_per_shard_) return;  // full: stop caching, stay bounded
  shard.map.emplace(std::string(word), std::vector<int32_t>(ids, ids + count));
}

namespace {

Status ParseMerge(const Json& entry, size_t index, std::string* left, std::string* right) {
  if (entry.is_string()) {
    const std::string& s = entry.get_ref<const std::string&>();
    size_t space = s.find(' ');
    if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos) {
      return Corrupt("model.merges[" + std::to_string(index) +
                     "]: expected \"left right\" with exactly one space, found " + Preview(entry));
    }
    *left = s.substr(0, space);
    *right = s.substr(space + 1);
    return Status::Ok();
  }
  if (entry.is_array() && entry.size() == 2 && entry[0].is_string() && entry[1].is_string()) {
    *left = entry[0].get<std::string>();
    *right = entry[1].get<std::string>();
    return Status::Ok();
  }
  return Corrupt("model.merges[" + std::to_string(index) +
                 "]: expected \"left right\" or [\"left\", \"right\"], found " + Preview(entry));
}

}  // namespace

Status BpeModel::IndexVocab(const std::string& where) {
  int32_t max_id = -1;
  for (const auto& [token, id] : vocab_) max_id = std::max(max_id, id);
  if (max_id >= (1 << 26)) {
    return Corrupt(where + ".vocab: id " + std::to_string(max_id) +
                   " is implausibly large (limit 67108863)");
  }
  id_to_token_.assign(static_cast<size_t>(max_id + 1), std::string());
  has_id_.assign(static_cast<size_t>(max_id + 1), false);
  bmp_char_id_.assign(0x10000, -1);
  for (const auto& [token, id] : vocab_) {
    if (has_id_[id] && id_to_token_[id] != token) {
      return Corrupt(where + ".vocab: id " + std::to_string(id) + " is used by both '" +
                     id_to_token_[id] + "' and '" + token + "'");
    }
    id_to_token_[id] = token;
    has_id_[id] = true;
    size_t pos = 0;
    char32_t cp;
    if (NextCodepoint(token, &pos, &cp) && pos == token.size() && cp < 0x10000) {
      bmp_char_id_[cp] = id;
    }
  }
  byte_token_id_.fill(-1);
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    auto it = vocab_.find(std::string_view(name));
    if (it != vocab_.end()) byte_token_id_[b] = it->second;
  }
  return Status::Ok();
}

void BpeModel::SetUnkToken(std::string token) {
  unk_token_ = std::move(token);
  has_unk_ = true;
  if (auto id = TokenToId(unk_token_)) unk_id_ = *id;
}

Status BpeModel::AddMerge(const std::string& left, const std::string& right, int32_t rank,
                          const std::string& where) {
  auto l = TokenToId(left);
  auto r = TokenToId(right);
  if (!l || !r) {
    return Corrupt(where + ": token '" + (l ? right : left) + "' is not in the vocab");
  }
  // The merged token drops the right side's continuing_subword_prefix.
  std::string merged = left;
  if (right.compare(0, prefix_.size(), prefix_) == 0) {
    merged.append(right, prefix_.size(), std::string::npos);
  } else {
    merged += right;
  }
  auto m = TokenToId(merged);
  if (!m) return Corrupt(where + ": merged token '" + merged + "' is not in the vocab");
  merges_.Insert(*l, *r, rank, *m);
  return Status::Ok();
}

Status BpeModel::AddMergeIds(int32_t left, int32_t right, int32_t rank, const std::string& where) {
  if (!HasId(left) || !HasId(right)) {
    return Corrupt(where + ": token id " + std::to_string(HasId(left) ? right : left) +
                   " is not in the vocab");
  }
  std::string merged = id_to_token_[left] + id_to_token_[right];
  auto m = TokenToId(merged);
  if (!m) return Corrupt(where + ": merged token '" + merged + "' is not in the vocab");
  merges_.Insert(left, right, rank, *m);
  return Status::Ok();
}

Expected<std::unique_ptr<BpeModel>> BpeModel::FromJson(const Json& model,
                                                       const std::string& where) {
  std::unique_ptr<BpeModel> bpe(new BpeModel());
  const Json* vocab = FindField(model, "vocab");
  if (vocab == nullptr || !vocab->is_object()) {
    return Corrupt(where + ".vocab: missing or not an object of token -> id");
  }
  bpe->vocab_.reserve(vocab->size());
  for (auto it = vocab->begin(); it != vocab->end(); ++it) {
    TS_ASSIGN_OR_RETURN(int32_t id, ToTokenId(it.value(), where + ".vocab[\"" + it.key() + "\"]"));
    if (!IsValidUtf8(it.key())) {
      return Corrupt(where + ".vocab: a token is not valid UTF-8 (id " + std::to_string(id) + ")");
    }
    bpe->vocab_[it.key()] = id;
  }
  TS_RETURN_IF_ERROR(bpe->IndexVocab(where));

  if (const Json* dropout = FindField(model, "dropout"); dropout != nullptr) {
    if (!dropout->is_number() || dropout->get<double>() != 0.0) {
      return Unsupported(where + ".dropout: BPE dropout " + Preview(*dropout) +
                         " is not supported for inference; set it to null");
    }
  }
  TS_ASSIGN_OR_RETURN(bpe->fuse_unk_, GetBool(model, "fuse_unk", false, where));
  TS_ASSIGN_OR_RETURN(bpe->byte_fallback_, GetBool(model, "byte_fallback", false, where));
  TS_ASSIGN_OR_RETURN(bpe->ignore_merges_, GetBool(model, "ignore_merges", false, where));
  TS_ASSIGN_OR_RETURN(bpe->prefix_, GetStringOr(model, "continuing_subword_prefix", "", where));
  TS_ASSIGN_OR_RETURN(bpe->suffix_, GetStringOr(model, "end_of_word_suffix", "", where));
  if (FindField(model, "unk_token") != nullptr) {
    TS_ASSIGN_OR_RETURN(std::string unk, GetString(model, "unk_token", where));
    bpe->SetUnkToken(std::move(unk));
  }

  const Json* merges = FindField(model, "merges");
  if (merges != nullptr && !merges->is_array()) {
    return Corrupt(where + ".merges: expected an array, found " + Preview(*merges));
  }
  if (merges != nullptr) {
    bpe->merges_.Reserve(merges->size());
    std::string left, right;
    for (size_t i = 0; i < merges->size(); ++i) {
      TS_RETURN_IF_ERROR(ParseMerge((*merges)[i], i, &left, &right));
      TS_RETURN_IF_ERROR(bpe->AddMerge(left, right, static_cast<int32_t>(i),
                                       where + ".merges[" + std::to_string(i) + "]"));
    }
  }
  return bpe;
}

Expected<std::unique_ptr<BpeModel>> BpeModel::FromSpec(const Spec& spec, const std::string& where) {
  std::unique_ptr<BpeModel> bpe(new BpeModel());
  bpe->vocab_.reserve(spec.id_to_token.size());
  for (size_t id = 0; id < spec.id_to_token.size(); ++id) {
    const std::string& token = spec.id_to_token[id];
    if (token.empty()) continue;
    auto [it, inserted] = bpe->vocab_.emplace(token, static_cast<int32_t>(id));
    if (!inserted) {
      return Corrupt(where + ": token '" + token + "' is listed with ids " +
                     std::to_string(it->second) + " and " + std::to_string(id));
    }
  }
  TS_RETURN_IF_ERROR(bpe->IndexVocab(where));
  bpe->fuse_unk_ = spec.fuse_unk;
  bpe->byte_fallback_ = spec.byte_fallback;
  bpe->ignore_merges_ = spec.ignore_merges;
  if (spec.unk_token) bpe->SetUnkToken(*spec.unk_token);
  bpe->merges_.Reserve(spec.merges.size());
  for (size_t i = 0; i < spec.merges.size(); ++i) {
    const auto& [left, right] = spec.merges[i];
    TS_RETURN_IF_ERROR(bpe->AddMergeIds(left, right, static_cast<int32_t>(i),
                                        where + ".merges[" + std::to_string(i) + "]"));
  }
  return bpe;
}

std::optional<int32_t> BpeModel::TokenToId(std::string_view token) const {
  auto it = vocab_.find(token);
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

int32_t BpeModel::CharId(std::string_view ch, bool first, bool last) const {
  if ((prefix_.empty() || first) && (suffix_.empty() || !last)) {
    size_t pos = 0;
    char32_t cp = 0;
    NextCodepoint(ch, &pos, &cp);
    if (cp < 0x10000) return bmp_char_id_[cp];
    auto it = vocab_.find(ch);
    return it == vocab_.end() ? -1 : it->second;
  }
  std::string s;
  if (!first) s += prefix_;
  s += ch;
  if (last) s += suffix_;
  auto it = vocab_.find(std::string_view(s));
  return it == vocab_.end() ? -1 : it->second;
}

Status BpeModel::Tokenize(std::string_view word, std::vector<int32_t>* out) const {
  if (word.empty()) return Status::Ok();
  bool cacheable = word.size() <= kMaxCachedWordBytes;
  if (cacheable && cache_.Lookup(word, out)) return Status::Ok();
  size_t before = out->size();
  auto whole = ignore_merges_ ? vocab_.find(word) : vocab_.end();
  if (whole != vocab_.end()) {
    out->push_back(whole->second);
  } else {
    TS_RETURN_IF_ERROR(MergeWord(word, out));
  }
  if (cacheable) cache_.Insert(word, out->data() + before, out->size() - before);
  return Status::Ok();
}

Status BpeModel::MergeWord(std::string_view word, std::vector<int32_t>* out) const {
  struct Symbol {
    int32_t id;
    int32_t prev;
    int32_t next;
  };
  std::vector<Symbol> symbols;
  symbols.reserve(word.size());
  auto add = [&symbols](int32_t id) {
    int32_t index = static_cast<int32_t>(symbols.size());
    symbols.push_back({id, index - 1, -1});
    if (index > 0) symbols[index - 1].next = index;
  };
  bool pending_unk = false;
  size_t pos = 0;
  while (pos < word.size()) {
    size_t start = pos;
    char32_t cp;
    NextCodepoint(word, &pos, &cp);
    std::string_view ch = word.substr(start, pos - start);
    int32_t id = CharId(ch, start == 0, pos == word.size());
    if (id >= 0) {
      if (pending_unk) {
        add(unk_id_);
        pending_unk = false;
      }
      add(id);
      continue;
    }
    if (byte_fallback_) {
      // HF looks up the bytes of the affixed piece; ids are added before any pending unk.
      std::string piece;
      if (start != 0) piece += prefix_;
      piece += ch;
      if (pos == word.size()) piece += suffix_;
      bool all = true;
      for (char c : piece) all = all && byte_token_id_[static_cast<unsigned char>(c)] >= 0;
      if (all) {
        for (char c : piece) add(byte_token_id_[static_cast<unsigned char>(c)]);
        continue;
      }
    }
    if (has_unk_) {
      if (unk_id_ < 0) {
        return InvalidArgument("cannot encode '" + std::string(ch) + "': model.unk_token '" +
                               unk_token_ + "' is not in the vocab");
      }
      if (pending_unk && !fuse_unk_) add(unk_id_);
      pending_unk = true;
    }
    // Without an unk token HF silently drops characters it cannot represent.
  }
  if (pending_unk) add(unk_id_);

  struct Candidate {
    int32_t rank;
    int32_t pos;
    bool operator>(const Candidate& o) const {
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };
  std::vector<Candidate> heap;
  heap.reserve(symbols.size());
  for (size_t i = 0; i + 1 < symbols.size(); ++i) {
    if (const auto* m = merges_.Find(symbols[i].id, symbols[i + 1].id)) {
      heap.push_back({m->rank, static_cast<int32_t>(i)});
    }
  }
  auto cmp = std::greater<Candidate>();
  std::make_heap(heap.begin(), heap.end(), cmp);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), cmp);
    Candidate top = heap.back();
    heap.pop_back();
    Symbol& left = symbols[top.pos];
    if (left.id < 0 || left.next < 0) continue;
    Symbol& right = symbols[left.next];
    const auto* m = merges_.Find(left.id, right.id);
    if (m == nullptr || m->rank != top.rank) continue;  // stale: a neighbour changed
    left.id = m->merged_id;
    right.id = -1;
    left.next = right.next;
    if (left.next >= 0) symbols[left.next].prev = top.pos;
    if (left.prev >= 0) {
      if (const auto* pm = merges_.Find(symbols[left.prev].id, left.id)) {
        heap.push_back({pm->rank, left.prev});
        std::push_heap(heap.begin(), heap.end(), cmp);
      }
    }
    if (left.next >= 0) {
      if (const auto* nm = merges_.Find(left.id, symbols[left.next].id)) {
        heap.push_back({nm->rank, top.pos});
        std::push_heap(heap.begin(), heap.end(), cmp);
      }
    }
  }
  for (int32_t i = symbols.empty() ? -1 : 0; i >= 0; i = symbols[i].next) {
    out->push_back(symbols[i].id);
  }
  return Status::Ok();
}

}  // namespace tessera::tok
