// BpeModel: the Hugging Face "BPE" model of tokenizer.json — vocab, ranked merges,
// byte-level (GPT-2/Qwen/Llama-3, incl. ignore_merges) and SentencePiece-style (byte_fallback,
// unk_token, fuse_unk) variants. Internal to the tokenizer library.
//
//   TS_ASSIGN_OR_RETURN(auto bpe, BpeModel::FromJson(json["model"], "model"));
//   std::vector<int32_t> ids;
//   TS_RETURN_IF_ERROR(bpe->Tokenize("Ġhello", &ids));
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/status.h"
#include "tokenizer/json_util.h"

namespace tessera::tok {

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using TokenMap = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

// Maps a pair of token ids to the merge rank and the merged token id (open addressing).
class MergeTable {
 public:
  struct Entry {
    uint64_t key = kEmpty;
    int32_t rank = 0;
    int32_t merged_id = 0;
  };
  static constexpr uint64_t kEmpty = ~0ULL;

  void Reserve(size_t count);
  // A later merge of the same pair overwrites the earlier one, as in HF's HashMap collect.
  void Insert(int32_t left, int32_t right, int32_t rank, int32_t merged_id);
  const Entry* Find(int32_t left, int32_t right) const {
    if (entries_.empty()) return nullptr;
    uint64_t key = Key(left, right);
    for (size_t i = Slot(key);; i = (i + 1) & mask_) {
      const Entry& e = entries_[i];
      if (e.key == key) return &e;
      if (e.key == kEmpty) return nullptr;
    }
  }

 private:
  static uint64_t Key(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
  size_t Slot(uint64_t key) const { return (key * 0x9E3779B97F4A7C15ULL) >> shift_; }
  std::vector<Entry> entries_;
  size_t mask_ = 0;
  int shift_ = 64;
};

// Thread-safe cache of word -> ids, sharded to keep lock contention low.
class WordCache {
 public:
  explicit WordCache(size_t capacity) : capacity_per_shard_(capacity / kShards + 1) {}
  bool Lookup(std::string_view word, std::vector<int32_t>* out) const;
  void Insert(std::string_view word, const int32_t* ids, size_t count) const;

 private:
  static constexpr size_t kShards = 16;
  struct Shard {
    mutable std::mutex mu;
    std::unordered_map<std::string, std::vector<int32_t>, StringHash, std::equal_to<>> map;
  };
  size_t capacity_per_shard_;
  mutable std::array<Shard, kShards> shards_;
};

class BpeModel {
 public:
  static Expected<std::unique_ptr<BpeModel>> FromJson(const Json& model, const std::string& where);

  // A model from plain parts (the GGUF loader): no continuing_subword_prefix/end_of_word_suffix.
  struct Spec {
    std::vector<std::string> id_to_token;             // index = id; "" = no token at that id
    std::vector<std::pair<int32_t, int32_t>> merges;  // ids of the two parts; rank = index
    std::optional<std::string> unk_token = std::nullopt;
    bool fuse_unk = false;
    bool byte_fallback = false;
    bool ignore_merges = false;
  };
  // `where` names the source in errors (e.g. "tokenizer.ggml").
  static Expected<std::unique_ptr<BpeModel>> FromSpec(const Spec& spec, const std::string& where);

  // Appends the ids of one pre-tokenized word (valid UTF-8).
  Status Tokenize(std::string_view word, std::vector<int32_t>* out) const;

  std::optional<int32_t> TokenToId(std::string_view token) const;
  // Tokens by id; ids with no token hold an empty string and `has_id` false.
  const std::vector<std::string>& id_to_token() const { return id_to_token_; }
  bool HasId(int32_t id) const {
    return id >= 0 && static_cast<size_t>(id) < has_id_.size() && has_id_[id];
  }
  int32_t id_end() const { return static_cast<int32_t>(id_to_token_.size()); }

 private:
  BpeModel() : cache_(kCacheCapacity) {}
  // Builds the id tables from vocab_ (shared by both constructors).
  Status IndexVocab(const std::string& where);
  void SetUnkToken(std::string token);
  Status AddMerge(const std::string& left, const std::string& right, int32_t rank,
                  const std::string& where);
  Status AddMergeIds(int32_t left, int32_t right, int32_t rank, const std::string& where);
  int32_t CharId(std::string_view ch, bool first, bool last) const;
  Status MergeWord(std::string_view word, std::vector<int32_t>* out) const;

  static constexpr size_t kCacheCapacity = 1 << 17;
  static constexpr size_t kMaxCachedWordBytes = 256;

  TokenMap vocab_;
  std::vector<std::string> id_to_token_;
  std::vector<bool> has_id_;
  std::vector<int32_t> bmp_char_id_;  // id of each single-character token below U+10000
  MergeTable merges_;
  std::array<int32_t, 256> byte_token_id_;  // "<0xHH>" tokens for byte_fallback
  std::string unk_token_;
  int32_t unk_id_ = -1;
  bool has_unk_ = false;
  bool fuse_unk_ = false;
  bool byte_fallback_ = false;
  bool ignore_merges_ = false;
  std::string prefix_;  // continuing_subword_prefix
  std::string suffix_;  // end_of_word_suffix
  WordCache cache_;
};

}  // namespace tessera::tok
