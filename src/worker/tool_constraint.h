// How a chat job's tools shape its reply: the tool-call syntax its replies are parsed with,
// and, for tool_choice "required", a named function or strict functions under "auto", the
// grammar a call is constrained by, the text that opens a forced call (appended to the
// prompt) and closes it, and when the grammar starts (at the token that opens a call, or at
// a first token that may open a bare JSON call). The schemas come from grammar/.
//
//   auto plan = PlanToolCalls(chat_payload, job.model, model);
//   if (auto* refused = std::get_if<JobFailure>(&plan)) return *refused;
//   ToolCallPlan& tools = std::get<ToolCallPlan>(plan);
//   kwargs["tools"] = tools.tools;                       // when tools.syntax != kNone
//   prompt_ids += model.EncodeText(tools.forced_opening);
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <variant>

#include "chat/tool_calls.h"
#include "grammar/grammar.h"
#include "runtime/loaded_model.h"
#include "worker/generation_job.h"
#include "worker/protocol.h"

namespace tessera::worker {

struct ToolCallPlan {
  ToolCallSyntax syntax = ToolCallSyntax::kNone;  // kNone: no tools (or tool_choice none)
  nlohmann::ordered_json tools;                   // the request's tools, for the template
  std::shared_ptr<const Grammar> grammar;         // null: calls are not constrained
  std::string forced_opening;                     // the reply starts with it (a forced call)
  std::string forced_closing;                     // closes a constrained call for the parser
  int32_t lazy_trigger = -1;       // the grammar starts after this token (auto, tagged calls)
  bool bare_call_opening = false;  // the first token may open a bare JSON call or begin text
};

// Refusals name the field: "tools" or "tool_choice". `model_name` is what the request called
// the model (for messages).
std::variant<ToolCallPlan, JobFailure> PlanToolCalls(const ChatPayload& chat,
                                                     const std::string& model_name,
                                                     LoadedModel& model);

}  // namespace tessera::worker
