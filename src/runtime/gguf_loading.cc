#include "runtime/gguf_loading.h"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace tessera {
namespace {

// Reads `key` with `read` into *out when present; absent keys leave *out as it is.
template <typename T, typename Read>
Status ReadIfPresent(const GgufFile& gguf, std::string_view key, Read read, T* out) {
  if (!gguf.Has(key)) return Status::Ok();
  auto value = read(key);
  if (!value) return value.status();
  *out = std::move(*value);
  return Status::Ok();
}

}  // namespace

Expected<GgufTokenizerData> ReadGgufTokenizerData(const GgufFile& gguf) {
  GgufTokenizerData d;
  auto str = [&](std::string_view k) -> Expected<std::string> {
    TS_ASSIGN_OR_RETURN(std::string_view s, gguf.GetString(k));
    return std::string(s);
  };
  auto strings = [&](std::string_view k) -> Expected<std::vector<std::string>> {
    TS_ASSIGN_OR_RETURN(std::span<const std::string_view> items, gguf.GetStringArray(k));
    return std::vector<std::string>(items.begin(), items.end());
  };
  auto id = [&](std::string_view k) -> Expected<std::optional<uint32_t>> {
    TS_ASSIGN_OR_RETURN(uint32_t v, gguf.GetU32(k));
    return std::optional<uint32_t>(v);
  };
  auto flag = [&](std::string_view k) -> Expected<std::optional<bool>> {
    TS_ASSIGN_OR_RETURN(bool v, gguf.GetBool(k));
    return std::optional<bool>(v);
  };
  auto f32s = [&](std::string_view k) { return gguf.GetF32Array(k); };
  auto i32s = [&](std::string_view k) { return gguf.GetI32Array(k); };
  TS_RETURN_IF_ERROR(ReadIfPresent(gguf, "tokenizer.ggml.model", str, &d.model));
  TS_RETURN_IF_ERROR(ReadIfPresent(gguf, "tokenizer.ggml.pre", str, &d.pre));
  TS_RETURN_IF_ERROR(ReadIfPresent(gguf, "tokenizer.ggml.tokens", strings, &d.tokens));
  TS_RETURN_IF_ERROR(ReadIfPresent(gguf, "tokenizer.ggml.scores", f32s, &d.scores));
  TS_RETURN_IF_ERROR(ReadIfPresent(gguf, "tokenizer.ggml.token_type", i32s, &d.token_types));
  TS_RETURN_IF_ERROR(ReadIfPresent(gguf, "tokenizer.ggml.merges", strings, &d.merges));
  TS_RETURN_IF_ERROR(ReadIfPresent(gguf, "tokenizer.ggml.bos_token_id", id, &d.bos_id));
  TS_RETURN_IF_ERROR(ReadIfPresent(gguf, "tokenizer.ggml.eos_token_id", id, &d.eos_id));
  TS_RETURN_IF_ERROR(ReadIfPresent(gguf, "tokenizer.ggml.eot_token_id", id, &d.eot_id));
  TS_RETURN_IF_ERROR(ReadIfPresent(gguf, "tokenizer.ggml.eom_token_id", id, &d.eom_id));
  TS_RETURN_IF_ERROR(ReadIfPresent(gguf, "tokenizer.ggml.unknown_token_id", id, &d.unk_id));
  TS_RETURN_IF_ERROR(ReadIfPresent(gguf, "tokenizer.ggml.seperator_token_id", id, &d.sep_id));
  TS_RETURN_IF_ERROR(ReadIfPresent(gguf, "tokenizer.ggml.padding_token_id", id, &d.pad_id));
  TS_RETURN_IF_ERROR(ReadIfPresent(gguf, "tokenizer.ggml.mask_token_id", id, &d.mask_id));
  TS_RETURN_IF_ERROR(ReadIfPresent(gguf, "tokenizer.ggml.add_bos_token", flag, &d.add_bos_token));
  TS_RETURN_IF_ERROR(ReadIfPresent(gguf, "tokenizer.ggml.add_eos_token", flag, &d.add_eos_token));
  TS_RETURN_IF_ERROR(
      ReadIfPresent(gguf, "tokenizer.ggml.add_space_prefix", flag, &d.add_space_prefix));
  auto template_text = [&](std::string_view k) -> Expected<std::optional<std::string>> {
    TS_ASSIGN_OR_RETURN(std::string s, str(k));
    return std::optional<std::string>(std::move(s));
  };
  TS_RETURN_IF_ERROR(
      ReadIfPresent(gguf, "tokenizer.chat_template", template_text, &d.chat_template));
  if (d.model.empty()) {
    return Unsupported(gguf.path() +
                       " has no tokenizer (tokenizer.ggml.model); tessera needs the tokenizer "
                       "in the GGUF file, as llama.cpp's converter writes it");
  }
  return d;
}

Expected<std::optional<ChatTemplateConfig>> GgufChatTemplate(const GgufTokenizerData& data) {
  if (!data.chat_template || data.chat_template->empty()) {
    return std::optional<ChatTemplateConfig>();
  }
  // The special tokens as tokenizer_config.json names them, so templates that print
  // bos_token (Llama 3, Gemma) render as they do from a Hugging Face checkpoint.
  nlohmann::ordered_json config = nlohmann::ordered_json::object();
  auto token_of = [&](const char* key, const std::optional<uint32_t>& id) {
    if (id && *id < data.tokens.size()) config[key] = data.tokens[*id];
  };
  token_of("bos_token", data.bos_id);
  token_of("eos_token", data.eos_id);
  token_of("unk_token", data.unk_id);
  token_of("pad_token", data.pad_id);
  config["chat_template"] = *data.chat_template;
  TS_ASSIGN_OR_RETURN(ChatTemplateConfig parsed, ParseChatTemplateConfig(config.dump(), nullptr));
  return std::optional<ChatTemplateConfig>(std::move(parsed));
}

std::vector<int32_t> GgufStopIds(const GgufTokenizerData& data, int64_t vocab_size) {
  std::vector<int32_t> ids;
  for (const std::optional<uint32_t>& id : {data.eos_id, data.eot_id, data.eom_id}) {
    if (!id || static_cast<int64_t>(*id) >= vocab_size) continue;
    const int32_t v = static_cast<int32_t>(*id);
    if (std::find(ids.begin(), ids.end(), v) == ids.end()) ids.push_back(v);
  }
  return ids;
}

Expected<ModelKindInfo> DetectGgufModelKind(const std::string& gguf_path) {
  TS_ASSIGN_OR_RETURN(GgufFile gguf, GgufFile::Open(gguf_path));
  ModelKindInfo info;
  const bool chat = gguf.Has("tokenizer.chat_template");
  info.kind = chat ? ModelKind::kChat : ModelKind::kCompletion;
  info.evidence = chat ? "GGUF with tokenizer.chat_template" : "GGUF without a chat template";
  return info;
}

}  // namespace tessera
