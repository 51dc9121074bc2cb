// tessera render-chat --model DIR: renders the model's chat template for each JSON Lines request
// on stdin, {"messages": [...], "add_generation_prompt": bool, "kwargs": {...}}, and writes one
// line per request: {"rendered": "..."} or {"error": "..."}. --model FILE.gguf renders the
// file's tokenizer.chat_template with its special tokens, as `serve` does.
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <string>

#include <nlohmann/json.hpp>

#include "chat/chat_template.h"
#include "chat/jinja.h"
#include "cli_args.h"
#include "commands.h"
#include "format/gguf.h"
#include "format/json_util.h"
#include "runtime/gguf_loading.h"

namespace tessera {

namespace {

using nlohmann::ordered_json;

// One request line to its response object.
ordered_json RenderRequest(const jinja::Template& tmpl, const ChatTemplateConfig& config,
                           const std::string& line) {
  // Copies into the template context recurse: nesting is bounded before anything is parsed.
  if (NestsDeeperThan(line, kMaxCliJsonDepth)) {
    return {{"error", "request nests deeper than " + std::to_string(kMaxCliJsonDepth) + " levels"}};
  }
  ordered_json req = ordered_json::parse(line, nullptr, false);
  if (req.is_discarded() || !req.is_object()) {
    return {{"error", "request is not a JSON object"}};
  }
  auto messages = req.find("messages");
  if (messages == req.end() || !messages->is_array()) {
    return {{"error", "request needs \"messages\": a JSON array"}};
  }
  bool add_generation_prompt = false;
  auto agp = req.find("add_generation_prompt");
  if (agp != req.end() && !agp->is_null()) {
    if (!agp->is_boolean()) return {{"error", "\"add_generation_prompt\" must be true or false"}};
    add_generation_prompt = agp->get<bool>();
  }
  ordered_json kwargs = ordered_json::object();
  auto kw = req.find("kwargs");
  if (kw != req.end() && !kw->is_null()) {
    if (!kw->is_object()) return {{"error", "\"kwargs\" must be a JSON object"}};
    kwargs = *kw;
  }
  auto rendered = tmpl.Render(MakeChatContext(config, *messages, add_generation_prompt, kwargs));
  if (!rendered) return {{"error", rendered.status().message()}};
  return {{"rendered", *rendered}};
}

// A model folder's template (chat_template.jinja or tokenizer_config.json), or a GGUF file's.
Expected<ChatTemplateConfig> LoadTemplate(const std::string& model) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(model, ec)) return LoadChatTemplateConfig(model);
  TS_ASSIGN_OR_RETURN(GgufFile file, GgufFile::Open(model));
  TS_ASSIGN_OR_RETURN(GgufTokenizerData data, ReadGgufTokenizerData(file));
  TS_ASSIGN_OR_RETURN(std::optional<ChatTemplateConfig> config, GgufChatTemplate(data));
  if (!config) {
    return Unsupported(model +
                       " has no chat template (tokenizer.chat_template); it serves "
                       "completions only");
  }
  return std::move(*config);
}

}  // namespace

int RunRenderChatCommand(int argc, char** argv) {
  CliArgs args("render-chat");
  args.AddString("model",
                 "model directory (chat_template.jinja or tokenizer_config.json) or GGUF file",
                 /*required=*/true);
  if (Status st = args.Parse(argc, argv, 2); !st.ok()) return ReportError("render-chat", st);
  if (args.help_requested()) {
    std::printf("%s", args.Usage().c_str());
    return 0;
  }
  auto config = LoadTemplate(args.GetString("model"));
  if (!config) return ReportError("render-chat", config.status());
  auto tmpl = jinja::Template::Parse(config->source);
  if (!tmpl) return ReportError("render-chat", tmpl.status().WithContext("chat template"));

  std::string line;
  while (std::getline(std::cin, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    ordered_json response = RenderRequest(*tmpl, *config, line);
    std::string out = response.dump(-1, ' ', false, ordered_json::error_handler_t::replace);
    out += '\n';
    std::fwrite(out.data(), 1, out.size(), stdout);
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace tessera
