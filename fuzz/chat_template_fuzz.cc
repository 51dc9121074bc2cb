// Fuzzes Jinja chat templates the way a chat request uses them: ParseChatTemplateConfig (as for
// a chat_template.jinja file), MakeToolChatContext with a messages list, Template::Parse and
// Render with the production limits, then the tool-call parser over the rendered text.
// Input: template [ "\n\0\n" messages JSON array ]; without messages (or when they are not
// JSON) a fixed small conversation is used.
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "chat/chat_template.h"
#include "chat/jinja.h"
#include "chat/tool_calls.h"
#include "fuzz_util.h"

namespace {

const nlohmann::ordered_json& DefaultMessages() {
  static const nlohmann::ordered_json m = nlohmann::ordered_json::parse(R"([
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "What is 2+2?"},
    {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
      "function": {"name": "add", "arguments": "{\"a\": 2, \"b\": 2}"}}]},
    {"role": "tool", "tool_call_id": "c1", "name": "add", "content": "4"},
    {"role": "assistant", "content": "<think>easy</think>4"},
    {"role": "user", "content": "Thanks"}])");
  return m;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto parts = tessera::fuzz::Split(data, size, 2);
  const std::string source(parts[0]);
  nlohmann::ordered_json messages = DefaultMessages();
  if (parts.size() == 2) {
    auto parsed = nlohmann::ordered_json::parse(parts[1], nullptr, /*allow_exceptions=*/false);
    if (!parsed.is_discarded()) messages = std::move(parsed);
  }
  auto config = tessera::ParseChatTemplateConfig(
      R"({"bos_token": "<s>", "eos_token": {"content": "</s>"}})", &source);
  tessera::fuzz::Note("config", config.status().ToString());
  if (!config) return 0;
  auto tmpl = tessera::jinja::Template::Parse(config->source);
  tessera::fuzz::Note("Parse", tmpl.status().ToString());
  if (!tmpl) return 0;
  const nlohmann::ordered_json kwargs = {{"enable_thinking", false}};
  auto context = tessera::MakeToolChatContext(*config, messages, /*add_generation_prompt=*/true,
                                              nullptr, kwargs);
  tessera::fuzz::Note("context", context.status().ToString());
  if (!context) return 0;
  auto rendered = tmpl->Render(*context);
  tessera::fuzz::Note("Render", rendered.status().ToString());
  if (rendered)
    (void)tessera::ParseToolCalls(tessera::DetectToolCallSyntax(config->source), *rendered);
  return 0;
}
