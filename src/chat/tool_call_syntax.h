// Which markup a chat model writes its tool calls in (ToolCallSyntax), by name, and how a
// model's syntax is chosen: declared for the run (--tool-call-syntax), else declared by the
// catalog entry, else guessed from the chat template's text, with a log line saying so.
//
//   TS_ASSIGN_OR_RETURN(ToolCallSyntax flag, ToolCallSyntaxFromName("--tool-call-syntax", arg));
//   ToolCallSyntaxChoice c = ChooseToolCallSyntax(flag, entry ? entry->tool_call_syntax
//                                                             : std::nullopt,
//                                                 &chat_template_config, log);
//   // c.syntax: kHermes; c.source: kOption; c.Describe(): "hermes (--tool-call-syntax)"
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "base/status.h"

namespace tessera {

// What the model writes (chat/tool_calls.h describes each form and parses it).
enum class ToolCallSyntax { kNone, kHermes, kLlama3Json, kGemmaJson, kQwen3Xml };

// "none", "hermes", "llama3_json", "gemma_json", "qwen3_xml".
const char* ToolCallSyntaxName(ToolCallSyntax syntax);
// Those names, as a message lists them: "none, hermes, llama3_json, gemma_json or qwen3_xml".
std::string ToolCallSyntaxNames();
// The syntax of a name; InvalidArgument naming `what` (e.g. "--tool-call-syntax") and the
// valid names otherwise.
Expected<ToolCallSyntax> ToolCallSyntaxFromName(std::string_view name,
                                                std::string_view what = "tool-call syntax");

// A guess from the template's own text markers: "<function=" with "<parameter=" → kQwen3Xml,
// else "<tool_call>" → kHermes, else "<|python_tag|>" or "<|start_header_id|>" → kLlama3Json,
// else "<start_of_turn>" → kGemmaJson, else kNone. Only the fallback of ChooseToolCallSyntax.
ToolCallSyntax DetectToolCallSyntax(std::string_view template_source);

// Where a model's syntax came from.
enum class ToolCallSyntaxSource {
  kOption,      // --tool-call-syntax (ModelLoadOptions::tool_call_syntax)
  kCatalog,     // the catalog entry's "tool_call_syntax"
  kTemplate,    // guessed from the chat template (DetectToolCallSyntax)
  kNoTemplate,  // no chat template (a completion model): no tool calls
};
const char* ToolCallSyntaxSourceName(ToolCallSyntaxSource source);

struct ToolCallSyntaxChoice {
  ToolCallSyntax syntax = ToolCallSyntax::kNone;
  ToolCallSyntaxSource source = ToolCallSyntaxSource::kTemplate;
  // "hermes (catalog)", "none (guessed from the chat template)".
  std::string Describe() const;
};

struct ChatTemplateConfig;  // chat/chat_template.h

// The one place a model's syntax is chosen: `option` when given, else `declared` (the catalog
// entry's) when given, else DetectToolCallSyntax on the template's text (kNone without a
// template). Lines through `log` (may be empty), only where tools can reach the model: a guess
// over a template that renders tools says so and how to declare the syntax; a declaration is
// kept but logged when the template renders no tools or its markers suggest another syntax.
ToolCallSyntaxChoice ChooseToolCallSyntax(std::optional<ToolCallSyntax> option,
                                          std::optional<ToolCallSyntax> declared,
                                          const ChatTemplateConfig* chat_template,
                                          const std::function<void(const std::string&)>& log);

}  // namespace tessera
