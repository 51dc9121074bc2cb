// A SentencePiece vocabulary as llama.cpp's converter writes it into GGUF metadata
// (convert_hf_to_gguf.py _set_vocab_sentencepiece / _create_vocab_sentencepiece, gguf-py
// SpecialVocab), made from the tokenizer.json (+ tokenizer_config.json) such a folder ships
// beside its tokenizer.model; and the GGUF keys that hold it.
//
//   TS_ASSIGN_OR_RETURN(GgufTokenizerData g, test::SentencePieceVocab(dir, 262144));
//   g.add_space_prefix = false;  // Gemma3Model writes it
//   test::AddGgufTokenizerKeys(g, &writer);
#pragma once

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "base/mapped_file.h"
#include "support/gguf_writer.h"
#include "tokenizer/gguf_tokenizer.h"

namespace tessera::test {

// ModelBase.does_token_look_special in convert_hf_to_gguf.py.
inline bool ConverterLooksSpecial(const std::string& t) {
  auto starts = [&](const std::string& p) { return t.rfind(p, 0) == 0; };
  auto ends = [&](const std::string& s) {
    return t.size() >= s.size() && t.compare(t.size() - s.size(), s.size(), s) == 0;
  };
  return t == "<pad>" || t == "<mask>" || t == "<2mass>" || t == "[@BOS@]" ||
         (starts("<|") && ends("|>")) || (starts("<\xef\xbd\x9c") && ends("\xef\xbd\x9c>")) ||
         (starts("<unused") && ends(">"));
}

inline std::string ReplaceAllOf(std::string s, const std::string& from, const std::string& to) {
  for (size_t p = s.find(from); p != std::string::npos; p = s.find(from, p + to.size())) {
    s.replace(p, from.size(), to);
  }
  return s;
}

// gguf-py SpecialVocab: ids from tokenizer_config's *_token strings (looked up among
// tokenizer.json's added tokens), add_bos/add_eos from tokenizer_config (else from a
// TemplateProcessing post-processor), and the chat template.
inline void SetConverterSpecialVocab(const nlohmann::json& tj, const nlohmann::json& tc,
                                     GgufTokenizerData* g) {
  auto id_of = [&](const char* key) -> std::optional<uint32_t> {
    auto it = tc.find(key);
    if (it == tc.end() || it->is_null()) return std::nullopt;
    std::string content =
        it->is_string() ? it->get<std::string>() : (*it)["content"].get<std::string>();
    for (const nlohmann::json& a : tj["added_tokens"]) {
      if (a["content"] == content) return a["id"].get<uint32_t>();
    }
    return std::nullopt;
  };
  g->bos_id = id_of("bos_token");
  g->eos_id = id_of("eos_token");
  g->unk_id = id_of("unk_token");
  g->pad_id = id_of("pad_token");
  const nlohmann::json& post = tj["post_processor"];
  if (post.is_object() && post["type"] == "TemplateProcessing" && post["single"].size() > 1 &&
      post["single"][0].contains("SpecialToken")) {
    g->add_bos_token = true;
  }
  if (tc.contains("add_bos_token") && tc["add_bos_token"].is_boolean()) {
    g->add_bos_token = tc["add_bos_token"].get<bool>();
  }
  if (tc.contains("add_eos_token") && tc["add_eos_token"].is_boolean()) {
    g->add_eos_token = tc["add_eos_token"].get<bool>();
  }
  if (tc.contains("chat_template") && tc["chat_template"].is_string()) {
    g->chat_template = tc["chat_template"].get<std::string>();
  }
}

// _set_vocab_sentencepiece from the tokenizer.json in `dir` (a SentencePiece-style BPE with
// byte fallback) standing in for its tokenizer.model. SentencePiece's piece scores are not in
// tokenizer.json; they are recovered from its merges, which Hugging Face derived from them: a
// merged piece scores minus the rank of its first merge among the ordinary pieces, every other
// piece 0 (SentencePiece gives user-defined, control and byte pieces 0). Then, as the
// converter does: ids up to `vocab_size` (0: the tokenizer's own size; beyond the tokenizer
// "[PAD<id>]" UNUSED pieces scoring -10000), <unk> UNKNOWN, <0xHH> BYTE, and
// tokenizer_config's added_tokens_decoder entries below vocab_size CONTROL (special or
// special-looking) or USER_DEFINED (with "▁" turned into " "), each scoring -1000.
inline Expected<GgufTokenizerData> SentencePieceVocab(const std::string& dir,
                                                      size_t vocab_size = 0) {
  using nlohmann::json;
  auto tokenizer_json = ReadFileToString(dir + "/tokenizer.json", 64u << 20);
  if (!tokenizer_json) return tokenizer_json.status();
  const json tj = json::parse(*tokenizer_json);
  json tc = json::object();
  if (auto config = ReadFileToString(dir + "/tokenizer_config.json", 64u << 20)) {
    tc = json::parse(*config);
  }
  const json& vocab = tj["model"]["vocab"];
  if (vocab_size == 0) vocab_size = vocab.size();
  constexpr auto kUnused = static_cast<int32_t>(GgufTokenType::kUnused);
  GgufTokenizerData g;
  g.model = "llama";
  g.pre = "default";
  g.tokens.resize(vocab_size);
  g.scores.assign(vocab_size, -10000.0f);
  g.token_types.assign(vocab_size, kUnused);
  for (size_t id = 0; id < vocab_size; ++id) g.tokens[id] = "[PAD" + std::to_string(id) + "]";
  std::set<std::string> added;
  for (const json& a : tj["added_tokens"]) added.insert(a["content"].get<std::string>());
  std::map<std::string, size_t> first_merge;
  const json& merges = tj["model"]["merges"];
  for (size_t i = 0; i < merges.size(); ++i) {
    std::string merged = merges[i].is_string()
                             ? ReplaceAllOf(merges[i].get<std::string>(), " ", "")
                             : merges[i][0].get<std::string>() + merges[i][1].get<std::string>();
    first_merge.emplace(merged, i);
  }
  std::vector<std::pair<size_t, std::string>> ordinary;
  for (const auto& [piece, index] : first_merge) {
    if (!added.count(piece)) ordinary.emplace_back(index, piece);
  }
  std::sort(ordinary.begin(), ordinary.end());
  std::map<std::string, float> score;
  for (size_t rank = 0; rank < ordinary.size(); ++rank) {
    score[ordinary[rank].second] = -static_cast<float>(rank);
  }
  const std::string unk =
      tj["model"]["unk_token"].is_string() ? tj["model"]["unk_token"].get<std::string>() : "";
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    const size_t id = it.value().get<size_t>();
    if (id >= vocab_size) continue;  // the converter stops at the model's vocabulary
    const std::string& piece = it.key();
    const bool is_byte = piece.size() == 6 && piece.rfind("<0x", 0) == 0 && piece.back() == '>';
    g.tokens[id] = piece;
    g.scores[id] = score.count(piece) ? score[piece] : 0.0f;
    g.token_types[id] = static_cast<int32_t>(piece == unk ? GgufTokenType::kUnknown
                                             : is_byte    ? GgufTokenType::kByte
                                                          : GgufTokenType::kNormal);
  }
  if (tc.contains("added_tokens_decoder")) {
    for (auto it = tc["added_tokens_decoder"].begin(); it != tc["added_tokens_decoder"].end();
         ++it) {
      const size_t id = std::stoul(it.key());
      if (id >= vocab_size) continue;  // out of the config's vocab_size: skipped
      std::string token = it.value()["content"].get<std::string>();
      if (it.value()["special"].get<bool>() || ConverterLooksSpecial(token)) {
        g.token_types[id] = static_cast<int32_t>(GgufTokenType::kControl);
      } else {
        token = ReplaceAllOf(token, "\xe2\x96\x81", " ");
        g.token_types[id] = static_cast<int32_t>(GgufTokenType::kUserDefined);
      }
      g.scores[id] = -1000.0f;
      g.tokens[id] = token;
    }
  }
  SetConverterSpecialVocab(tj, tc, &g);
  return g;
}

// The tokenizer.ggml.* keys (and tokenizer.chat_template) of `g`, those it has.
inline void AddGgufTokenizerKeys(const GgufTokenizerData& g, GgufWriter* w) {
  w->AddString("tokenizer.ggml.model", g.model);
  if (!g.pre.empty()) w->AddString("tokenizer.ggml.pre", g.pre);
  w->AddStringArray("tokenizer.ggml.tokens", g.tokens);
  if (!g.scores.empty()) w->AddF32Array("tokenizer.ggml.scores", g.scores);
  w->AddI32Array("tokenizer.ggml.token_type", g.token_types);
  if (!g.merges.empty()) w->AddStringArray("tokenizer.ggml.merges", g.merges);
  const std::pair<const char*, const std::optional<uint32_t>*> ids[] = {
      {"bos_token_id", &g.bos_id},     {"eos_token_id", &g.eos_id},
      {"eot_token_id", &g.eot_id},     {"eom_token_id", &g.eom_id},
      {"unknown_token_id", &g.unk_id}, {"seperator_token_id", &g.sep_id},
      {"padding_token_id", &g.pad_id}, {"mask_token_id", &g.mask_id}};
  for (const auto& [key, id] : ids) {
    if (*id) w->AddU32(std::string("tokenizer.ggml.") + key, **id);
  }
  const std::pair<const char*, const std::optional<bool>*> flags[] = {
      {"add_bos_token", &g.add_bos_token},
      {"add_eos_token", &g.add_eos_token},
      {"add_space_prefix", &g.add_space_prefix}};
  for (const auto& [key, flag] : flags) {
    if (*flag) w->AddBool(std::string("tokenizer.ggml.") + key, **flag);
  }
  if (g.chat_template) w->AddString("tokenizer.chat_template", *g.chat_template);
}

}  // namespace tessera::test
