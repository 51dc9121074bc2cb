#include "chat/chat_template.h"

#include <nlohmann/json.hpp>

#include "base/mapped_file.h"
#include "format/json_util.h"
#include "format/ordered_json.h"

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

bool IsIdentifierChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

// Whether the template mentions the identifier `tools` (not e.g. `custom_tools` or
// "# Tools" in a string).
bool MentionsTools(const std::string& source) {
  for (size_t p = source.find("tools"); p != std::string::npos; p = source.find("tools", p + 1)) {
    bool left = p == 0 || !IsIdentifierChar(source[p - 1]);
    bool right = p + 5 >= source.size() || !IsIdentifierChar(source[p + 5]);
    if (left && right) return true;
  }
  return false;
}

void DecideToolSupport(ChatTemplateConfig* config) {
  config->renders_tools = MentionsTools(config->source);
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
    DecideToolSupport(&config);
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
    DecideToolSupport(&config);
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
        DecideToolSupport(&config);
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

Expected<nlohmann::ordered_json> ToolsForTemplate(const nlohmann::ordered_json& tools) {
  using nlohmann::ordered_json;
  if (tools.is_null()) return tools;
  if (!tools.is_array()) return InvalidArgument("tools must be a JSON array");
  ordered_json out = ordered_json::array();
  for (size_t i = 0; i < tools.size(); ++i) {
    const ordered_json& t = tools[i];
    const std::string where = "tools[" + std::to_string(i) + "]";
    if (!t.is_object()) return InvalidArgument(where + " must be an object");
    auto fn = t.find("function");
    if (fn != t.end()) {
      if (!fn->is_object()) return InvalidArgument(where + ".function must be an object");
      out.push_back(t);
      continue;
    }
    auto name = t.find("name");
    if (name == t.end() || !name->is_string()) {
      return InvalidArgument(where + " needs a \"function\" object or a string \"name\"");
    }
    out.push_back(ordered_json{{"type", "function"}, {"function", t}});
  }
  return out;
}

Expected<nlohmann::ordered_json> MessagesForTemplate(const nlohmann::ordered_json& messages) {
  using nlohmann::ordered_json;
  if (!messages.is_array()) return InvalidArgument("messages must be a JSON array");
  ordered_json out = messages;
  for (ordered_json& m : out) {
    if (!m.is_object()) continue;
    auto calls = m.find("tool_calls");
    if (calls == m.end() || !calls->is_array()) continue;
    auto content = m.find("content");
    if (content != m.end() && content->is_null()) *content = "";
    for (ordered_json& call : *calls) {
      if (!call.is_object()) continue;
      auto fn = call.find("function");
      ordered_json& holder = fn != call.end() && fn->is_object() ? *fn : call;
      auto args = holder.find("arguments");
      if (args == holder.end() || !args->is_string()) continue;
      // Copying a parsed value recurses (MakeChatContext copies the messages), so arguments
      // nested deeper than a template could use stay a string rather than overflow the stack.
      auto parsed = ParseOrderedJson(args->get_ref<const std::string&>(),
                                     JsonParseLimits{.max_depth = kMaxToolArgumentsDepth});
      if (parsed && parsed->is_object()) *args = std::move(*parsed);
    }
  }
  return out;
}

Expected<nlohmann::ordered_json> MakeToolChatContext(const ChatTemplateConfig& config,
                                                     const nlohmann::ordered_json& messages,
                                                     bool add_generation_prompt,
                                                     const nlohmann::ordered_json& tools,
                                                     const nlohmann::ordered_json& kwargs) {
  if (!kwargs.is_null() && !kwargs.is_object()) {
    return InvalidArgument("chat template kwargs must be a JSON object");
  }
  if (kwargs.is_object() && kwargs.contains("tools") && !tools.is_null()) {
    return InvalidArgument("tools given both as an argument and in the template kwargs");
  }
  TS_ASSIGN_OR_RETURN(nlohmann::ordered_json msgs, MessagesForTemplate(messages));
  const nlohmann::ordered_json& given =
      tools.is_null() && kwargs.is_object() && kwargs.contains("tools") ? kwargs["tools"] : tools;
  TS_ASSIGN_OR_RETURN(nlohmann::ordered_json tool_list, ToolsForTemplate(given));
  nlohmann::ordered_json ctx = MakeChatContext(config, msgs, add_generation_prompt, kwargs);
  ctx.erase("tools");
  if (tool_list.is_array() && !tool_list.empty()) ctx["tools"] = std::move(tool_list);
  return ctx;
}

}  // namespace tessera
