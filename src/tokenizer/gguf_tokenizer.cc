#include "tokenizer/gguf_tokenizer.h"

#include <cmath>
#include <memory>
#include <string_view>
#include <utility>

#include "base/utf8.h"
#include "tokenizer/json_util.h"
#include "tokenizer/sentencepiece_merges.h"
#include "tokenizer/tokenizer_state.h"

namespace tessera {

namespace {

// The Hugging Face tokenizer.json pieces of a byte-level BPE family, keyed by the pre name
// llama.cpp's converter writes for it (convert_hf_to_gguf.py get_vocab_base_pre).
struct BytePreTokenizer {
  std::string_view name;
  std::string_view normalizer;  // JSON; empty = none
  std::string_view pre_tokenizer;
  bool ignore_merges;       // model.ignore_merges of the family's tokenizer.json
  bool add_bos_by_default;  // llama.cpp's add_bos when tokenizer.ggml.add_bos_token is absent
};

constexpr std::string_view kQwen2PreTokenizer = R"({"type": "Sequence", "pretokenizers": [
  {"type": "Split", "pattern": {"Regex": "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}, "behavior": "Isolated", "invert": false},
  {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false}]})";
constexpr std::string_view kQwen35PreTokenizer = R"({"type": "Sequence", "pretokenizers": [
  {"type": "Split", "pattern": {"Regex": "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}, "behavior": "Isolated", "invert": false},
  {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false}]})";
constexpr std::string_view kLlama3PreTokenizer = R"({"type": "Sequence", "pretokenizers": [
  {"type": "Split", "pattern": {"Regex": "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}, "behavior": "Isolated", "invert": false},
  {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false}]})";
constexpr std::string_view kSmolLmPreTokenizer = R"({"type": "Sequence", "pretokenizers": [
  {"type": "Digits", "individual_digits": true},
  {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true}]})";
constexpr std::string_view kNfc = R"({"type": "NFC"})";

constexpr BytePreTokenizer kBytePreTokenizers[] = {
    {"qwen2", kNfc, kQwen2PreTokenizer, false, false},
    {"qwen35", kNfc, kQwen35PreTokenizer, false, false},
    {"llama-bpe", "", kLlama3PreTokenizer, true, true},
    {"llama3", "", kLlama3PreTokenizer, true, true},
    {"llama-v3", "", kLlama3PreTokenizer, true, true},
    {"smollm", "", kSmolLmPreTokenizer, false, false},
    // StarCoder's and Refact's tokenizers split like SmolLM's (llama.cpp maps all three to one
    // pre-tokenizer type); checked on llama.cpp's ggml-vocab-{starcoder,refact}.gguf vectors.
    {"starcoder", "", kSmolLmPreTokenizer, false, false},
    {"refact", "", kSmolLmPreTokenizer, false, false},
};

constexpr std::string_view kByteLevelDecoder = R"({"type": "ByteLevel"})";
constexpr std::string_view kSentencePieceDecoder = R"({"type": "Sequence", "decoders": [
  {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
  {"type": "ByteFallback"}, {"type": "Fuse"}]})";
constexpr std::string_view kSentencePieceSpacePrefixDecoder = R"({"type": "Sequence", "decoders": [
  {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
  {"type": "ByteFallback"}, {"type": "Fuse"},
  {"type": "Strip", "content": " ", "start": 1, "stop": 0}]})";
// SentencePiece escapes spaces as "▁"; with add_space_prefix every text segment gets one in
// front (Hugging Face's legacy Llama normalizer; llama.cpp prefixes text after special tokens).
constexpr std::string_view kSentencePieceNormalizer =
    R"({"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"})";
constexpr std::string_view kSentencePieceSpacePrefixNormalizer =
    R"({"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "\u2581"},
        {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]})";

constexpr std::string_view kSpaceEscape = "\xe2\x96\x81";  // "▁"

Expected<tok::Json> ParseBuiltinJson(std::string_view text) {
  tok::Json json = tok::Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) return Internal("built-in tokenizer configuration is not valid JSON");
  return json;
}

std::string IdKeyError(const char* key, uint32_t id, size_t count) {
  return std::string("tokenizer.ggml.") + key + " = " + std::to_string(id) +
         " is outside the vocabulary of " + std::to_string(count) + " tokens";
}

// Sizes, token texts, token types and special ids, common to both models.
Status CheckMetadata(const GgufTokenizerData& gguf) {
  size_t n = gguf.tokens.size();
  if (n == 0) return Corrupt("tokenizer.ggml.tokens is missing or empty");
  if (n >= (size_t{1} << 26)) {
    return Corrupt("tokenizer.ggml.tokens has " + std::to_string(n) +
                   " tokens, implausibly many (limit 67108863)");
  }
  if (gguf.token_types.size() != n) {
    return Corrupt("tokenizer.ggml.token_type has " + std::to_string(gguf.token_types.size()) +
                   " entries for " + std::to_string(n) +
                   " tokens; tessera needs one type per token to find the special tokens");
  }
  for (size_t i = 0; i < n; ++i) {
    const std::string& t = gguf.tokens[i];
    std::string where = "tokenizer.ggml.tokens[" + std::to_string(i) + "]";
    if (t.empty()) return Corrupt(where + " is empty");
    if (!IsValidUtf8(t)) return Corrupt(where + " is not valid UTF-8");
    int32_t type = gguf.token_types[i];
    if (type < static_cast<int32_t>(GgufTokenType::kNormal) ||
        type > static_cast<int32_t>(GgufTokenType::kByte)) {
      return Corrupt("tokenizer.ggml.token_type[" + std::to_string(i) +
                     "] = " + std::to_string(type) +
                     " is not a llama.cpp token type (1 normal, 2 unknown, 3 control, 4 "
                     "user-defined, 5 unused, 6 byte)");
    }
  }
  const std::pair<const char*, const std::optional<uint32_t>*> ids[] = {
      {"bos_token_id", &gguf.bos_id},     {"eos_token_id", &gguf.eos_id},
      {"eot_token_id", &gguf.eot_id},     {"eom_token_id", &gguf.eom_id},
      {"unknown_token_id", &gguf.unk_id}, {"seperator_token_id", &gguf.sep_id},
      {"padding_token_id", &gguf.pad_id}, {"mask_token_id", &gguf.mask_id},
  };
  for (const auto& [key, id] : ids) {
    if (id->has_value() && **id >= n) return Corrupt(IdKeyError(key, **id, n));
  }
  return Status::Ok();
}

bool IsAddedType(int32_t type) {
  return type == static_cast<int32_t>(GgufTokenType::kControl) ||
         type == static_cast<int32_t>(GgufTokenType::kUserDefined);
}

// The BOS/EOS ids the post-processor puts around a sequence.
// `id_to_token` is the vocabulary built ("" = an id without a token).
Status SetPostProcessor(const GgufTokenizerData& gguf, bool add_bos_default, const char* why_bos,
                        const std::vector<std::string>& id_to_token, Tokenizer::State* st) {
  bool add_bos = gguf.add_bos_token.value_or(add_bos_default);
  bool add_eos = gguf.add_eos_token.value_or(false);
  auto check = [&](const char* what, const std::optional<uint32_t>& id,
                   const std::string& why) -> Status {
    std::string flag = std::string("tokenizer.ggml.add_") + what + "_token is true" + why;
    std::string key = std::string("tokenizer.ggml.") + what + "_token_id";
    if (!id) return Corrupt(flag + " but " + key + " is not set");
    if (id_to_token[*id].empty()) {
      return Corrupt(flag + " but " + key + " = " + std::to_string(*id) +
                     " is an unused filler id, not a token");
    }
    return Status::Ok();
  };
  if (add_bos) {
    TS_RETURN_IF_ERROR(check("bos", gguf.bos_id, gguf.add_bos_token ? "" : why_bos));
    st->post_prefix.push_back(static_cast<int32_t>(*gguf.bos_id));
  }
  if (add_eos) {
    TS_RETURN_IF_ERROR(check("eos", gguf.eos_id, ""));
    st->post_suffix.push_back(static_cast<int32_t>(*gguf.eos_id));
  }
  return Status::Ok();
}

void AddAddedTokens(const GgufTokenizerData& gguf, const std::vector<std::string>& texts,
                    Tokenizer::State* st) {
  for (size_t id = 0; id < texts.size(); ++id) {
    int32_t type = gguf.token_types[id];
    if (!IsAddedType(type)) continue;
    tok::AddedToken t;
    t.id = static_cast<int32_t>(id);
    t.content = texts[id];
    t.special = type == static_cast<int32_t>(GgufTokenType::kControl);
    t.normalized = false;  // llama.cpp matches them in the raw text
    st->added_by_content[t.content] = t.id;
    st->added.push_back(std::move(t));
  }
}

Expected<Tokenizer> BuildByteLevel(const GgufTokenizerData& gguf) {
  const BytePreTokenizer* pre = nullptr;
  for (const BytePreTokenizer& p : kBytePreTokenizers) {
    if (p.name == gguf.pre) pre = &p;
  }
  if (pre == nullptr) {
    std::string name = gguf.pre.empty() ? "is missing" : "'" + gguf.pre + "' is not supported";
    return Unsupported("tokenizer.ggml.pre " + name + " for tokenizer.ggml.model 'gpt2'; " +
                       SupportedGgufTokenizers());
  }
  if (gguf.merges.empty()) return Corrupt("tokenizer.ggml.merges is missing or empty");

  tok::BpeModel::Spec spec;
  spec.id_to_token.resize(gguf.tokens.size());
  for (size_t id = 0; id < gguf.tokens.size(); ++id) {
    // The converter's "[PAD<id>]" fillers: ids the Hugging Face tokenizer does not have.
    if (gguf.token_types[id] == static_cast<int32_t>(GgufTokenType::kUnused)) continue;
    spec.id_to_token[id] = gguf.tokens[id];
  }
  tok::TokenMap ids;
  ids.reserve(gguf.tokens.size());
  for (size_t id = 0; id < spec.id_to_token.size(); ++id) {
    if (!spec.id_to_token[id].empty()) ids.emplace(spec.id_to_token[id], static_cast<int32_t>(id));
  }
  spec.merges.reserve(gguf.merges.size());
  for (size_t i = 0; i < gguf.merges.size(); ++i) {
    std::string_view m = gguf.merges[i];
    auto where = [i] { return "tokenizer.ggml.merges[" + std::to_string(i) + "]"; };
    size_t space = m.size() > 1 ? m.find(' ', 1) : std::string::npos;  // as llama.cpp splits
    if (space == std::string::npos || space + 1 >= m.size()) {
      return Corrupt(where() + ": expected \"left right\", found \"" +
                     std::string(m.substr(0, 60)) + "\"");
    }
    auto left = ids.find(m.substr(0, space));
    auto right = ids.find(m.substr(space + 1));
    if (left == ids.end() || right == ids.end()) {
      std::string_view missing = left == ids.end() ? m.substr(0, space) : m.substr(space + 1);
      return Corrupt(where() + ": token '" + std::string(missing) + "' is not in the vocab");
    }
    spec.merges.emplace_back(left->second, right->second);
  }
  spec.ignore_merges = pre->ignore_merges;

  auto st = std::make_shared<Tokenizer::State>();
  TS_ASSIGN_OR_RETURN(st->model, tok::BpeModel::FromSpec(spec, "tokenizer.ggml"));
  if (!pre->normalizer.empty()) {
    TS_ASSIGN_OR_RETURN(tok::Json json, ParseBuiltinJson(pre->normalizer));
    TS_ASSIGN_OR_RETURN(st->normalizer, tok::ParseNormalizer(json, "normalizer"));
  }
  TS_ASSIGN_OR_RETURN(tok::Json pre_json, ParseBuiltinJson(pre->pre_tokenizer));
  TS_ASSIGN_OR_RETURN(st->pre_tokenizer, tok::ParsePreTokenizer(pre_json, "pre_tokenizer"));
  TS_ASSIGN_OR_RETURN(tok::Json decoder_json, ParseBuiltinJson(kByteLevelDecoder));
  TS_ASSIGN_OR_RETURN(st->decoder, tok::Decoder::FromJson(&decoder_json));
  AddAddedTokens(gguf, spec.id_to_token, st.get());
  TS_RETURN_IF_ERROR(SetPostProcessor(gguf, pre->add_bos_by_default,
                                      " (llama.cpp's default for this pre-tokenizer)",
                                      spec.id_to_token, st.get()));
  return Tokenizer::FromState(std::move(st));
}

Expected<Tokenizer> BuildSentencePiece(const GgufTokenizerData& gguf) {
  if (!gguf.pre.empty() && gguf.pre != "default") {
    return Unsupported("tokenizer.ggml.pre '" + gguf.pre +
                       "' is not supported for tokenizer.ggml.model 'llama'; " +
                       SupportedGgufTokenizers());
  }
  size_t n = gguf.tokens.size();
  if (gguf.scores.size() != n) {
    return Corrupt("tokenizer.ggml.scores has " + std::to_string(gguf.scores.size()) +
                   " entries for " + std::to_string(n) +
                   " tokens; a SentencePiece (\"llama\") tokenizer needs one score per token");
  }
  tok::BpeModel::Spec spec;
  spec.id_to_token = gguf.tokens;
  std::vector<float> scores = gguf.scores;
  bool has_byte_tokens = false;
  for (size_t id = 0; id < n; ++id) {
    if (!std::isfinite(scores[id])) {
      return Corrupt("tokenizer.ggml.scores[" + std::to_string(id) + "] is not a finite number");
    }
    int32_t type = gguf.token_types[id];
    has_byte_tokens = has_byte_tokens || type == static_cast<int32_t>(GgufTokenType::kByte);
    if (!IsAddedType(type)) continue;
    // The converter wrote -1000 for these; SentencePiece scores user-defined and control
    // pieces 0, and Hugging Face derived its merges from those scores.
    scores[id] = 0.0f;
    if (type == static_cast<int32_t>(GgufTokenType::kUserDefined)) {
      // The converter "pre-normalized" user-defined spaces: "▁" became " ". Undo it.
      std::string& text = spec.id_to_token[id];
      tok::ReplaceAll(&text, " ", kSpaceEscape);
    }
  }
  spec.merges = tok::DeriveSentencePieceMerges(spec.id_to_token, scores);
  spec.byte_fallback = has_byte_tokens;
  spec.fuse_unk = true;
  if (gguf.unk_id) spec.unk_token = spec.id_to_token[*gguf.unk_id];

  bool space_prefix = gguf.add_space_prefix.value_or(true);  // llama.cpp's SPM default
  auto st = std::make_shared<Tokenizer::State>();
  TS_ASSIGN_OR_RETURN(st->model, tok::BpeModel::FromSpec(spec, "tokenizer.ggml"));
  TS_ASSIGN_OR_RETURN(tok::Json norm_json,
                      ParseBuiltinJson(space_prefix ? kSentencePieceSpacePrefixNormalizer
                                                    : kSentencePieceNormalizer));
  TS_ASSIGN_OR_RETURN(st->normalizer, tok::ParseNormalizer(norm_json, "normalizer"));
  TS_ASSIGN_OR_RETURN(
      tok::Json decoder_json,
      ParseBuiltinJson(space_prefix ? kSentencePieceSpacePrefixDecoder : kSentencePieceDecoder));
  TS_ASSIGN_OR_RETURN(st->decoder, tok::Decoder::FromJson(&decoder_json));
  AddAddedTokens(gguf, spec.id_to_token, st.get());
  TS_RETURN_IF_ERROR(SetPostProcessor(
      gguf, true, " (llama.cpp's default for a \"llama\" tokenizer)", spec.id_to_token, st.get()));
  return Tokenizer::FromState(std::move(st));
}

}  // namespace

std::string SupportedGgufTokenizers() {
  std::string names;
  for (const BytePreTokenizer& p : kBytePreTokenizers) {
    names += (names.empty() ? "" : ", ") + std::string(p.name);
  }
  return "supported: tokenizer.ggml.model 'gpt2' with tokenizer.ggml.pre " + names +
         "; 'llama' with tokenizer.ggml.pre 'default' or none";
}

Expected<Tokenizer> TokenizerFromGguf(const GgufTokenizerData& gguf) {
  if (gguf.model != "gpt2" && gguf.model != "llama") {
    std::string name = gguf.model.empty() ? "is missing" : "'" + gguf.model + "' is not supported";
    return Unsupported("tokenizer.ggml.model " + name + "; " + SupportedGgufTokenizers());
  }
  TS_RETURN_IF_ERROR(CheckMetadata(gguf));
  return gguf.model == "gpt2" ? BuildByteLevel(gguf) : BuildSentencePiece(gguf);
}

}  // namespace tessera
