// Chat templates of a model directory: where the template text and the special-token strings
// come from, and the render context transformers builds for apply_chat_template.
//
//   auto config = LoadChatTemplateConfig("/models/Qwen3-4B");
//   if (!config) return config.status();
//   auto tmpl = jinja::Template::Parse(config->source);
//   nlohmann::ordered_json ctx = MakeChatContext(*config, messages, /*add_generation_prompt=*/true,
//                                                {{"enable_thinking", false}});
//   auto text = tmpl->Render(ctx);
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "base/status.h"

namespace tessera {

struct ChatTemplateConfig {
  std::string source;  // the Jinja template text
  nlohmann::ordered_json special_tokens = nlohmann::ordered_json::object();  // bos_token, ...
};

// The template from DIR/chat_template.jinja if present, else tokenizer_config.json's
// `chat_template` (a string, or a list of {name, template} from which "default" is used).
// Special tokens (bos/eos/unk/pad_token, additional_special_tokens) come from
// tokenizer_config.json when it exists, in string or {"content": ...} form.
Expected<ChatTemplateConfig> LoadChatTemplateConfig(const std::string& model_dir);

// The same from already-read texts; `tokenizer_config_json` may be empty when absent.
Expected<ChatTemplateConfig> ParseChatTemplateConfig(std::string_view tokenizer_config_json,
                                                     const std::string* template_file_text);

// Variables for rendering: the special tokens, then messages and add_generation_prompt, then
// every entry of `kwargs` (which may override the others, as in transformers).
nlohmann::ordered_json MakeChatContext(const ChatTemplateConfig& config,
                                       const nlohmann::ordered_json& messages,
                                       bool add_generation_prompt,
                                       const nlohmann::ordered_json& kwargs);

}  // namespace tessera
