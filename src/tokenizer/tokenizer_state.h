// The loaded, immutable state behind a Tokenizer (shared by copies and by streaming
// detokenizers). Internal to the tokenizer library.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tokenizer/added_vocabulary.h"
#include "tokenizer/bpe_model.h"
#include "tokenizer/decoder.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/tokenizer.h"

namespace tessera {

struct Tokenizer::State {
  std::unique_ptr<tok::BpeModel> model;
  std::unique_ptr<const tok::Normalizer> normalizer;       // may be null
  std::unique_ptr<const tok::PreTokenizer> pre_tokenizer;  // may be null
  std::unique_ptr<const tok::Decoder> decoder;
  // A single sequence with add_special_tokens becomes post_prefix + ids + post_suffix.
  std::vector<int32_t> post_prefix;
  std::vector<int32_t> post_suffix;

  std::vector<tok::AddedToken> added;
  tok::AddedTokenMatcher raw_matcher;         // added tokens with normalized=false
  tok::AddedTokenMatcher normalized_matcher;  // normalized=true, matched after normalizing
  tok::TokenMap added_by_content;

  // Every id's token text (added tokens override the model vocab) and flags.
  std::vector<std::string> id_to_token;
  std::vector<uint8_t> id_flags;  // kExists | kSpecial
  static constexpr uint8_t kExists = 1;
  static constexpr uint8_t kSpecial = 2;

  bool Known(int32_t id) const {
    return id >= 0 && static_cast<size_t>(id) < id_flags.size() && (id_flags[id] & kExists);
  }
  bool Special(int32_t id) const { return Known(id) && (id_flags[id] & kSpecial); }
};

}  // namespace tessera
