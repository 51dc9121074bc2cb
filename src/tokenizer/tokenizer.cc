#include "tokenizer/tokenizer.h"

#include <algorithm>

#include "base/mapped_file.h"
#include "base/utf8.h"
#include "format/json_util.h"
#include "tokenizer/json_util.h"
#include "tokenizer/tokenizer_state.h"

namespace tessera {

using tok::FindField;
using tok::Json;
using tok::Preview;

namespace {

Status ParseAddedTokens(const Json& root, Tokenizer::State* st) {
  const Json* list = FindField(root, "added_tokens");
  if (list == nullptr) return Status::Ok();
  if (!list->is_array()) return Corrupt("added_tokens: expected an array, found " + Preview(*list));
  for (size_t i = 0; i < list->size(); ++i) {
    const Json& item = (*list)[i];
    std::string where = "added_tokens[" + std::to_string(i) + "]";
    if (!item.is_object()) return Corrupt(where + ": expected an object, found " + Preview(item));
    tok::AddedToken t;
    const Json* id = FindField(item, "id");
    if (id == nullptr) return Corrupt(where + ": missing 'id'");
    TS_ASSIGN_OR_RETURN(t.id, tok::ToTokenId(*id, where + ".id"));
    if (t.id >= (1 << 26)) {
      return Corrupt(where + ".id: " + std::to_string(t.id) + " is implausibly large");
    }
    TS_ASSIGN_OR_RETURN(t.content, tok::GetString(item, "content", where));
    if (t.content.empty()) return Corrupt(where + ".content: must not be empty");
    if (!IsValidUtf8(t.content)) return Corrupt(where + ".content: not valid UTF-8");
    TS_ASSIGN_OR_RETURN(t.special, tok::GetBool(item, "special", false, where));
    TS_ASSIGN_OR_RETURN(t.single_word, tok::GetBool(item, "single_word", false, where));
    TS_ASSIGN_OR_RETURN(t.lstrip, tok::GetBool(item, "lstrip", false, where));
    TS_ASSIGN_OR_RETURN(t.rstrip, tok::GetBool(item, "rstrip", false, where));
    TS_ASSIGN_OR_RETURN(t.normalized, tok::GetBool(item, "normalized", !t.special, where));
    if (auto it = st->added_by_content.find(t.content); it != st->added_by_content.end()) {
      if (it->second != t.id) {
        return Corrupt(where + ": token '" + t.content + "' is listed with ids " +
                       std::to_string(it->second) + " and " + std::to_string(t.id));
      }
      continue;
    }
    for (const tok::AddedToken& other : st->added) {
      if (other.id == t.id) {
        return Corrupt(where + ": id " + std::to_string(t.id) + " is given to both '" +
                       other.content + "' and '" + t.content + "'");
      }
    }
    st->added_by_content[t.content] = t.id;
    st->added.push_back(std::move(t));
  }
  return Status::Ok();
}

// Reads a post-processor into the prefix/suffix ids it adds around a single sequence.
Status ParsePostProcessor(const Json& json, const std::string& where, Tokenizer::State* st) {
  TS_ASSIGN_OR_RETURN(std::string type, tok::GetString(json, "type", where));
  if (type == "ByteLevel") return Status::Ok();  // only adjusts offsets
  if (type == "Sequence") {
    const Json* list = FindField(json, "processors");
    if (list == nullptr || !list->is_array()) {
      return Corrupt(where + ": Sequence needs a 'processors' array");
    }
    for (size_t i = 0; i < list->size(); ++i) {
      TS_RETURN_IF_ERROR(
          ParsePostProcessor((*list)[i], where + ".processors[" + std::to_string(i) + "]", st));
    }
    return Status::Ok();
  }
  std::vector<int32_t> prefix, suffix;
  if (type == "RobertaProcessing" || type == "BertProcessing") {
    for (const char* key : {"cls", "sep"}) {
      const Json* pair = FindField(json, key);
      if (pair == nullptr || !pair->is_array() || pair->size() != 2) {
        return Corrupt(where + "." + key + ": expected [token, id]");
      }
      TS_ASSIGN_OR_RETURN(int32_t id, tok::ToTokenId((*pair)[1], where + "." + key + "[1]"));
      (std::string(key) == "cls" ? prefix : suffix).push_back(id);
    }
  } else if (type == "TemplateProcessing") {
    const Json* single = FindField(json, "single");
    if (single == nullptr || !single->is_array()) {
      return Corrupt(where + ".single: expected an array of template pieces");
    }
    const Json* specials = FindField(json, "special_tokens");
    bool seen_sequence = false;
    for (size_t i = 0; i < single->size(); ++i) {
      const Json& piece = (*single)[i];
      std::string pw = where + ".single[" + std::to_string(i) + "]";
      if (const Json* seq = FindField(piece, "Sequence"); seq != nullptr) {
        TS_ASSIGN_OR_RETURN(std::string name, tok::GetString(*seq, "id", pw + ".Sequence"));
        if (name != "A") {
          return Corrupt(pw + ": a single-sequence template may only use sequence A, found " +
                         name);
        }
        seen_sequence = true;
        continue;
      }
      const Json* special = FindField(piece, "SpecialToken");
      if (special == nullptr) {
        return Corrupt(pw + ": expected {\"Sequence\": ...} or {\"SpecialToken\": ...}, found " +
                       Preview(piece));
      }
      TS_ASSIGN_OR_RETURN(std::string name, tok::GetString(*special, "id", pw + ".SpecialToken"));
      const Json* entry = specials != nullptr ? FindField(*specials, name.c_str()) : nullptr;
      const Json* ids = entry != nullptr ? FindField(*entry, "ids") : nullptr;
      if (ids == nullptr || !ids->is_array()) {
        return Corrupt(pw + ": special token '" + name +
                       "' is not defined in special_tokens (with an 'ids' array)");
      }
      for (size_t k = 0; k < ids->size(); ++k) {
        TS_ASSIGN_OR_RETURN(int32_t id,
                            tok::ToTokenId((*ids)[k], where + ".special_tokens." + name + ".ids"));
        (seen_sequence ? suffix : prefix).push_back(id);
      }
    }
  } else {
    return Unsupported(where + ": unsupported post-processor type '" + type +
                       "'; supported: TemplateProcessing, ByteLevel, RobertaProcessing, "
                       "BertProcessing, Sequence");
  }
  // A later processor wraps the output of the earlier ones.
  st->post_prefix.insert(st->post_prefix.begin(), prefix.begin(), prefix.end());
  st->post_suffix.insert(st->post_suffix.end(), suffix.begin(), suffix.end());
  return Status::Ok();
}

Status BuildIdTables(Tokenizer::State* st) {
  const auto& model_tokens = st->model->id_to_token();
  size_t size = model_tokens.size();
  for (const tok::AddedToken& t : st->added) size = std::max(size, static_cast<size_t>(t.id) + 1);
  st->id_to_token.assign(size, std::string());
  st->id_flags.assign(size, 0);
  for (size_t id = 0; id < model_tokens.size(); ++id) {
    if (!st->model->HasId(static_cast<int32_t>(id))) continue;
    st->id_to_token[id] = model_tokens[id];
    st->id_flags[id] = Tokenizer::State::kExists;
  }
  for (const tok::AddedToken& t : st->added) {
    st->id_to_token[t.id] = t.content;
    st->id_flags[t.id] = Tokenizer::State::kExists | (t.special ? Tokenizer::State::kSpecial : 0);
  }
  for (int32_t id : st->post_prefix) {
    if (!st->Known(id)) {
      return Corrupt("post_processor: special token id " + std::to_string(id) +
                     " is not in the vocabulary");
    }
  }
  for (int32_t id : st->post_suffix) {
    if (!st->Known(id)) {
      return Corrupt("post_processor: special token id " + std::to_string(id) +
                     " is not in the vocabulary");
    }
  }
  return Status::Ok();
}

// Tokenizes ordinary (non-added-token) text that has already been normalized.
Status EncodeNormalizedText(const Tokenizer::State& st, std::string text, bool at_origin,
                            std::vector<int32_t>* ids) {
  if (text.empty()) return Status::Ok();
  std::vector<tok::PreToken> splits;
  splits.push_back({std::move(text), at_origin});
  if (st.pre_tokenizer) TS_RETURN_IF_ERROR(st.pre_tokenizer->Apply(&splits));
  for (const tok::PreToken& s : splits) TS_RETURN_IF_ERROR(st.model->Tokenize(s.text, ids));
  return Status::Ok();
}

size_t FirstInvalidUtf8Offset(std::string_view text) {
  size_t pos = 0;
  while (pos < text.size()) {
    size_t start = pos;
    char32_t cp;
    NextCodepoint(text, &pos, &cp);
    if (cp == kReplacementChar && !IsValidUtf8(text.substr(start, pos - start))) return start;
  }
  return text.size();
}

// Real tokenizer.json files nest under ten levels (a Sequence of Sequences of normalizers).
constexpr size_t kMaxTokenizerJsonDepth = 64;

}  // namespace

Expected<Tokenizer> Tokenizer::FromJson(std::string_view tokenizer_json) {
  // Bounded nesting (the Sequence parsers and error previews recurse), valid UTF-8, and the
  // byte offset of any syntax error; duplicate keys keep the last, as transformers does.
  TS_ASSIGN_OR_RETURN(Json root,
                      ParseJsonDocument(tokenizer_json, "tokenizer.json", kMaxTokenizerJsonDepth,
                                        DuplicateKeys::kKeepLast));
  if (!root.is_object()) return Corrupt("tokenizer.json: expected a JSON object at the top level");
  auto st = std::make_shared<State>();

  const Json* model = FindField(root, "model");
  if (model == nullptr || !model->is_object()) return Corrupt("tokenizer.json: missing 'model'");
  std::string type = "BPE";
  if (const Json* t = FindField(*model, "type"); t != nullptr) {
    type = t->is_string() ? t->get<std::string>() : Preview(*t);
  } else if (FindField(*model, "merges") == nullptr) {
    type = "(untyped model without merges)";
  }
  if (type != "BPE") {
    return Unsupported("unsupported tokenizer model type " + type + "; supported: BPE");
  }
  TS_ASSIGN_OR_RETURN(st->model, tok::BpeModel::FromJson(*model, "model"));
  TS_RETURN_IF_ERROR(ParseAddedTokens(root, st.get()));
  if (const Json* n = FindField(root, "normalizer"); n != nullptr) {
    TS_ASSIGN_OR_RETURN(st->normalizer, tok::ParseNormalizer(*n, "normalizer"));
  }
  if (const Json* p = FindField(root, "pre_tokenizer"); p != nullptr) {
    TS_ASSIGN_OR_RETURN(st->pre_tokenizer, tok::ParsePreTokenizer(*p, "pre_tokenizer"));
  }
  if (const Json* p = FindField(root, "post_processor"); p != nullptr) {
    TS_RETURN_IF_ERROR(ParsePostProcessor(*p, "post_processor", st.get()));
  }
  TS_ASSIGN_OR_RETURN(st->decoder, tok::Decoder::FromJson(FindField(root, "decoder")));
  return FromState(std::move(st));
}

Expected<Tokenizer> Tokenizer::FromState(std::shared_ptr<State> st) {
  if (st == nullptr || st->model == nullptr || st->decoder == nullptr) {
    return Internal("a tokenizer state needs a model and a decoder");
  }
  TS_RETURN_IF_ERROR(BuildIdTables(st.get()));

  for (size_t i = 0; i < st->added.size(); ++i) {
    const tok::AddedToken& t = st->added[i];
    if (!t.normalized) {
      st->raw_matcher.Add(t.content, static_cast<int32_t>(i));
      continue;
    }
    // Normalized tokens are matched in normalized text, so match their normalized form.
    std::string pattern = t.content;
    if (st->normalizer) {
      TS_RETURN_IF_ERROR(st->normalizer->Normalize(&pattern).WithContext(
          "normalizing added token '" + t.content + "'"));
    }
    st->normalized_matcher.Add(pattern, static_cast<int32_t>(i));
  }
  return Tokenizer(std::move(st));
}

Expected<Tokenizer> Tokenizer::FromFile(const std::string& path) {
  TS_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
  auto tokenizer = FromJson(text);
  if (!tokenizer) return tokenizer.status().WithContext(path);
  return tokenizer;
}

Expected<std::vector<int32_t>> Tokenizer::Encode(std::string_view text,
                                                 const EncodeOptions& options) const {
  const State& st = *state_;
  if (!IsValidUtf8(text)) {
    return InvalidArgument("text is not valid UTF-8 (first bad byte at offset " +
                           std::to_string(FirstInvalidUtf8Offset(text)) +
                           "); tokenizers only accept valid UTF-8");
  }
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  if (options.add_special_tokens) ids = st.post_prefix;
  bool skip_special = options.split_special_tokens;
  const std::vector<std::pair<size_t, size_t>>& protect = options.protected_ranges;
  for (size_t i = 0; i < protect.size(); ++i) {
    bool ordered = protect[i].first <= protect[i].second &&
                   (i == 0 || protect[i - 1].second <= protect[i].first);
    if (!ordered || protect[i].second > text.size()) {
      return InvalidArgument("protected_ranges[" + std::to_string(i) + "] = [" +
                             std::to_string(protect[i].first) + ", " +
                             std::to_string(protect[i].second) +
                             ") is not a sorted, non-overlapping byte range within the " +
                             std::to_string(text.size()) + "-byte text");
    }
  }

  std::vector<tok::AddedSegment> segments;
  st.raw_matcher.Split(text, st.added, skip_special, &segments, protect);
  std::vector<std::pair<size_t, size_t>> piece_protect;
  std::vector<tok::AddedSegment> inner;
  for (const tok::AddedSegment& seg : segments) {
    if (seg.token_index >= 0) {
      ids.push_back(st.added[seg.token_index].id);
      continue;
    }
    if (seg.end == seg.start) continue;
    std::string piece(text.substr(seg.start, seg.end - seg.start));
    if (st.normalizer) TS_RETURN_IF_ERROR(st.normalizer->Normalize(&piece));
    bool at_origin = seg.start == 0;
    if (st.normalized_matcher.empty()) {
      TS_RETURN_IF_ERROR(EncodeNormalizedText(st, std::move(piece), at_origin, &ids));
      continue;
    }
    // Protected ranges are offsets into the raw text. When normalization left the piece
    // unchanged they shift directly; otherwise offsets no longer line up, so a piece touching
    // any protected range is protected whole (special tokens with normalized=true are rare).
    piece_protect.clear();
    if (!protect.empty() && tok::OverlapsAnyRange(protect, seg.start, seg.end)) {
      if (std::string_view(piece) == text.substr(seg.start, seg.end - seg.start)) {
        for (const auto& [begin, end] : protect) {
          if (end <= seg.start || begin >= seg.end) continue;
          piece_protect.emplace_back(std::max(begin, seg.start) - seg.start,
                                     std::min(end, seg.end) - seg.start);
        }
      } else {
        piece_protect.emplace_back(0, piece.size());
      }
    }
    inner.clear();
    st.normalized_matcher.Split(piece, st.added, skip_special, &inner, piece_protect);
    for (const tok::AddedSegment& sub : inner) {
      if (sub.token_index >= 0) {
        ids.push_back(st.added[sub.token_index].id);
      } else {
        TS_RETURN_IF_ERROR(EncodeNormalizedText(st, piece.substr(sub.start, sub.end - sub.start),
                                                at_origin && sub.start == 0, &ids));
      }
    }
  }
  if (options.add_special_tokens) {
    ids.insert(ids.end(), st.post_suffix.begin(), st.post_suffix.end());
  }
  return ids;
}

Expected<std::string> Tokenizer::Decode(std::span<const int32_t> ids,
                                        bool skip_special_tokens) const {
  const State& st = *state_;
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    int32_t id = ids[i];
    if (!st.Known(id)) {
      return OutOfRange("token id " + std::to_string(id) + " at position " + std::to_string(i) +
                        " is not in the vocabulary (valid ids are 0.." +
                        std::to_string(vocab_size() - 1) + ")");
    }
    if (skip_special_tokens && st.Special(id)) continue;
    tokens.push_back(st.id_to_token[id]);
  }
  return st.decoder->Decode(std::move(tokens), true, true);
}

int32_t Tokenizer::vocab_size() const {
  return static_cast<int32_t>(state_->id_to_token.size());
}

std::optional<int32_t> Tokenizer::TokenToId(std::string_view token) const {
  auto it = state_->added_by_content.find(token);
  if (it != state_->added_by_content.end()) return it->second;
  return state_->model->TokenToId(token);
}

std::optional<std::string> Tokenizer::IdToToken(int32_t id) const {
  if (!state_->Known(id)) return std::nullopt;
  return state_->id_to_token[id];
}

bool Tokenizer::IsSpecial(int32_t id) const {
  return state_->Special(id);
}

}  // namespace tessera
