#include "chat/chat_template.h"

#include "base/mapped_file.h"

namespace tessera {

namespace {

// A special token is a string or an AddedToken dict {"content": ..., ...}.
const nlohmann::ordered_json* TokenString(const nlohmann::ordered_json& v) {
  if (v.is_string()) return &v;
  if (v.is_object()) {
    auto it = v.find("content");
    if (it != v.end() && it->is_string()) return &*it;
  }
  return nullptr;
}

}  // namespace

Expected<ChatTemplateConfig> ParseChatTemplateConfig(std::string_view tokenizer_config_json,
                                                     const std::string* template_file_text) {
  ChatTemplateConfig config;
  nlohmann::ordered_json tc = nlohmann::ordered_json::object();
  if (!tokenizer_config_json.empty()) {
    tc = nlohmann::ordered_json::parse(tokenizer_config_json, nullptr, false);
    if (tc.is_discarded() || !tc.is_object()) {
      return Corrupt("tokenizer_config.json is not a valid JSON object");
    }
  }
  for (const char* key : {"bos_token", "eos_token", "unk_token", "pad_token"}) {
    auto it = tc.find(key);
    if (it == tc.end()) continue;
    if (const auto* s = TokenString(*it)) config.special_tokens[key] = *s;
  }
  auto extra = tc.find("additional_special_tokens");
  if (extra != tc.end() && extra->is_array()) {
    nlohmann::ordered_json list = nlohmann::ordered_json::array();
    for (const auto& t : *extra) {
      if (const auto* s = TokenString(t)) list.push_back(*s);
    }
    config.special_tokens["additional_special_tokens"] = std::move(list);
  }
  if (template_file_text != nullptr) {
    config.source = *template_file_text;
    return config;
  }
  auto it = tc.find("chat_template");
  if (it == tc.end() || it->is_null()) {
    return NotFound(
        "the model has no chat template (no chat_template.jinja and no "
        "chat_template in tokenizer_config.json)");
  }
  if (it->is_string()) {
    config.source = it->get<std::string>();
    return config;
  }
  if (it->is_array()) {
    std::string names;
    for (const auto& entry : *it) {
      if (!entry.is_object()) continue;
      auto name = entry.find("name");
      auto text = entry.find("template");
      if (name == entry.end() || !name->is_string() || text == entry.end() || !text->is_string()) {
        continue;
      }
      if (*name == "default") {
        config.source = text->get<std::string>();
        return config;
      }
      names += (names.empty() ? "" : ", ") + name->get<std::string>();
    }
    return NotFound(
        "tokenizer_config.json chat_template has no template named 'default' (has: " + names + ")");
  }
  return Corrupt(
      "tokenizer_config.json chat_template must be a string or a list of "
      "{name, template}");
}

Expected<ChatTemplateConfig> LoadChatTemplateConfig(const std::string& model_dir) {
  std::string config_text;
  std::string config_path = model_dir + "/tokenizer_config.json";
  if (FileExists(config_path)) {
    TS_ASSIGN_OR_RETURN(config_text, ReadFileToString(config_path));
  }
  std::string jinja_path = model_dir + "/chat_template.jinja";
  if (FileExists(jinja_path)) {
    TS_ASSIGN_OR_RETURN(std::string text, ReadFileToString(jinja_path));
    return ParseChatTemplateConfig(config_text, &text);
  }
  if (config_text.empty() && !FileExists(config_path)) {
    return NotFound("no chat_template.jinja or tokenizer_config.json in " + model_dir);
  }
  return ParseChatTemplateConfig(config_text, nullptr);
}

nlohmann::ordered_json MakeChatContext(const ChatTemplateConfig& config,
                                       const nlohmann::ordered_json& messages,
                                       bool add_generation_prompt,
                                       const nlohmann::ordered_json& kwargs) {
  nlohmann::ordered_json ctx = nlohmann::ordered_json::object();
  for (auto it = config.special_tokens.begin(); it != config.special_tokens.end(); ++it) {
    ctx[it.key()] = it.value();
  }
  ctx["messages"] = messages;
  ctx["add_generation_prompt"] = add_generation_prompt;
  if (kwargs.is_object()) {
    for (auto it = kwargs.begin(); it != kwargs.end(); ++it) ctx[it.key()] = it.value();
  }
  return ctx;
}

}  // namespace tessera
