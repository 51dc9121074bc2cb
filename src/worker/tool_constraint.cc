#include "worker/tool_constraint.h"

#include <algorithm>
#include <optional>
#include <string_view>

#include "format/ordered_json.h"
#include "grammar/tool_call_schema.h"

namespace tessera::worker {
namespace {

using ojson = nlohmann::ordered_json;

bool IsJsonSyntax(ToolCallSyntax s) {
  return s == ToolCallSyntax::kHermes || s == ToolCallSyntax::kLlama3Json ||
         s == ToolCallSyntax::kGemmaJson;
}

// The key a JSON call's arguments go under ("parameters" in the Llama 3 form).
std::string_view ArgumentsKey(ToolCallSyntax syntax) {
  return syntax == ToolCallSyntax::kLlama3Json ? "parameters" : "arguments";
}

// A call that may be any of more functions than a grammar follows at once (JSON forms; the
// XML grammar refuses them itself).
std::string TooMany(const char* advice) {
  return "tools: at most " + std::to_string(kMaxGrammarAlternatives) +
         " functions can be constrained at once; " + advice;
}

// tool_choice "required" or a named function: the reply starts as a call.
std::variant<ToolCallPlan, JobFailure> PlanForcedCall(const ChatPayload& chat,
                                                      const std::string& model_name,
                                                      ToolCallPlan plan) {
  const bool named = chat.tool_choice.mode == ToolChoiceMode::kFunction;
  const std::string& function = chat.tool_choice.function;
  if (plan.syntax == ToolCallSyntax::kQwen3Xml) {
    // As Qwen3.5 writes calls: its name constrained to the functions' unless named, its
    // parameters to their schemas.
    auto compiled = CompileXmlToolCalls(plan.tools, named ? function : "",
                                        named ? std::nullopt : std::optional<std::string_view>(""));
    if (!compiled) return Refusal("tools", compiled.status().message());
    plan.grammar = *compiled;
    plan.forced_opening = "<tool_call>\n<function=" + (named ? function + ">\n" : "");
    plan.forced_closing = "\n</tool_call>";
    return plan;
  }
  if (!IsJsonSyntax(plan.syntax)) {
    return InvalidRequest("tool_choice", "forced calls are not supported for the " +
                                             std::string(ToolCallSyntaxName(plan.syntax)) +
                                             " tool-call format of '" + model_name + "'; use auto");
  }
  const std::string only = named ? function : "";
  if (only.empty() && plan.tools.size() > kMaxGrammarAlternatives) {
    return Refusal("tools", TooMany("name one with tool_choice"));
  }
  auto compiled =
      CompileJsonSchema(ForcedToolCallSchema(plan.tools, only, ArgumentsKey(plan.syntax)));
  if (!compiled) return InvalidRequest("tools", compiled.status().message());
  plan.grammar = *compiled;
  if (plan.syntax == ToolCallSyntax::kHermes) {
    plan.forced_opening = "<tool_call>\n";
    plan.forced_closing = "\n</tool_call>";
  }
  return plan;
}

// tool_choice auto with strict functions: a call the model opens is constrained to the
// schemas, from the one token that opens it or, for a bare JSON call, from the first token.
std::variant<ToolCallPlan, JobFailure> PlanStrictAutoCall(const std::string& model_name,
                                                          LoadedModel& model, ToolCallPlan plan) {
  std::optional<int32_t> trigger = model.tokenizer().TokenToId("<tool_call>");
  const ToolCallSyntax syntax = plan.syntax;
  const bool bare = syntax == ToolCallSyntax::kLlama3Json || syntax == ToolCallSyntax::kGemmaJson;
  const bool tagged = syntax == ToolCallSyntax::kHermes || syntax == ToolCallSyntax::kQwen3Xml;
  if (!bare && (!tagged || !trigger)) {
    return InvalidRequest("tools",
                          "strict functions with tool_choice auto are constrained only where a "
                          "call opens with the one token <tool_call> or is a bare JSON object; '" +
                              model_name + "' uses " + std::string(ToolCallSyntaxName(syntax)) +
                              " without that token: use strict false");
  }
  if (syntax == ToolCallSyntax::kQwen3Xml) {
    // After the <tool_call> token: "\n<function=NAME>\n" and the parameters.
    auto compiled =
        CompileXmlToolCalls(plan.tools, "", std::optional<std::string_view>("\n<function="),
                            /*relax_non_strict=*/true);
    if (!compiled) return Refusal("tools", compiled.status().message());
    plan.grammar = *compiled;
  } else {
    auto schema = AutoToolCallSchema(plan.tools, ArgumentsKey(syntax));
    if (!schema) return Refusal("tools", TooMany("drop strict from some"));
    auto compiled = CompileJsonSchema(*schema);
    if (!compiled) return InvalidRequest("tools", compiled.status().message());
    plan.grammar = *compiled;
  }
  if (bare) {
    plan.bare_call_opening = true;
  } else {
    plan.lazy_trigger = *trigger;
    plan.forced_closing = "\n</tool_call>";
  }
  return plan;
}

}  // namespace

std::variant<ToolCallPlan, JobFailure> PlanToolCalls(const ChatPayload& chat,
                                                     const std::string& model_name,
                                                     LoadedModel& model) {
  ToolCallPlan plan;
  if (chat.tools.empty() || chat.tool_choice.mode == ToolChoiceMode::kNone) return plan;
  // The definitions as the client wrote them: the template renders them, key order included.
  plan.tools = ojson::array();
  for (size_t i = 0; i < chat.tools.size(); ++i) {
    const std::string at = "tools[" + std::to_string(i) + "]";
    auto tool = ParseOrderedJson(chat.tools[i].definition, {}, at);
    if (!tool) return InvalidRequest("tools", tool.status().message());
    plan.tools.push_back(std::move(*tool));
  }
  if (!ToolsWellFormed(plan.tools)) {
    return InvalidRequest("tools", "expected an array of {\"function\": {\"name\": <string>}}");
  }
  // Declared by --tool-call-syntax or the catalog, else guessed from the template (logged).
  auto usable = model.ToolCallSyntaxForTools(model_name);
  if (!usable) return InvalidRequest("tools", usable.status().message());
  plan.syntax = *usable;
  if (chat.tool_choice.mode != ToolChoiceMode::kAuto) {
    return PlanForcedCall(chat, model_name, std::move(plan));
  }
  const bool any_strict = std::any_of(chat.tools.begin(), chat.tools.end(),
                                      [](const ToolDefinition& t) { return t.strict; });
  if (any_strict) return PlanStrictAutoCall(model_name, model, std::move(plan));
  return plan;
}

}  // namespace tessera::worker
