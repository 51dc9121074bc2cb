// Chat templates of a model directory: where the template text and the special-token strings
// come from, and the render context transformers builds for apply_chat_template.
//
//   auto config = LoadChatTemplateConfig("/models/Qwen3-4B");
//   if (!config) return config.status();
//   auto tmpl = jinja::Template::Parse(config->source);
//   nlohmann::ordered_json ctx = MakeChatContext(*config, messages, /*add_generation_prompt=*/true,
//                                                {{"enable_thinking", false}});
//   auto text = tmpl->Render(ctx);
//
// With tools (OpenAI request shapes in, transformers' apply_chat_template(messages, tools=...)
// context out):
//   TS_ASSIGN_OR_RETURN(nlohmann::ordered_json ctx,
//                       MakeToolChatContext(*config, request["messages"], true,
//                                           request["tools"], {}));
//   // The reply is parsed in the model's tool-call syntax (chat/tool_call_syntax.h chooses it:
//   // declared by flag or catalog, else guessed from config->source).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "chat/tool_calls.h"

namespace tessera {

struct ChatTemplateConfig {
  std::string source;  // the Jinja template text
  nlohmann::ordered_json special_tokens = nlohmann::ordered_json::object();  // bos_token, ...
  // The template reads a `tools` variable. When false (gemma-3, Llama 3.0) tools passed to it
  // are silently ignored, as in transformers; the caller must describe them some other way.
  bool renders_tools = false;
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

// `tools` as transformers hands them to templates: a list of
// {"type": "function", "function": {"name", "description", "parameters"}}. An entry that
// already has a "function" object is kept as it is (transformers passes dicts through); a bare
// function spec {"name", ...} is wrapped as {"type": "function", "function": spec}, which is
// what transformers' get_json_schema makes of a Python function. InvalidArgument for anything
// else. null stays null.
Expected<nlohmann::ordered_json> ToolsForTemplate(const nlohmann::ordered_json& tools);

// Messages with OpenAI tool-call fields made template-ready, as a transformers user would
// before apply_chat_template:
//   - tool_calls[i].function.arguments (or tool_calls[i].arguments) that is a string holding a
//     JSON object becomes that object, so `arguments | tojson` prints it as JSON rather than a
//     quoted string (Qwen2.5, Llama 3.x) and every template sees the same value; a string that
//     is not a JSON object, or nests deeper than kMaxToolArgumentsDepth, is left as it is.
//   - an assistant message with tool_calls and "content": null (what OpenAI clients send) gets
//     content "", since templates such as Qwen3's test `'</think>' in message.content`, which
//     fails on None.
// Everything else (role "tool" with content, tool_call_id and name) is passed unchanged.
Expected<nlohmann::ordered_json> MessagesForTemplate(const nlohmann::ordered_json& messages);
inline constexpr size_t kMaxToolArgumentsDepth = 64;

// MakeChatContext with `messages` through MessagesForTemplate and `tools` through
// ToolsForTemplate; tools become the `tools` variable unless null or empty (an empty list is
// no tools, as in the OpenAI API; transformers would pass [] and Llama 3.x templates would then
// announce an ipython environment). kwargs["tools"] is used (normalized the same way) when
// `tools` is null; InvalidArgument when both are given.
Expected<nlohmann::ordered_json> MakeToolChatContext(const ChatTemplateConfig& config,
                                                     const nlohmann::ordered_json& messages,
                                                     bool add_generation_prompt,
                                                     const nlohmann::ordered_json& tools,
                                                     const nlohmann::ordered_json& kwargs);

}  // namespace tessera
