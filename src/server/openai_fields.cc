#include "server/openai_fields.h"

#include <algorithm>
#include <array>
#include <nlohmann/json.hpp>
#include <set>
#include <vector>

#include "format/json_util.h"
#include "grammar/grammar.h"
#include "server/decision_format.h"
#include "server/json_fields.h"

namespace tessera::server {
namespace {

using ojson = nlohmann::ordered_json;

// What both generation endpoints implement, then each one's own fields.
constexpr std::array<std::string_view, 17> kGenerationFieldList = {"model",
                                                                   "max_tokens",
                                                                   "stop",
                                                                   "temperature",
                                                                   "top_k",
                                                                   "top_p",
                                                                   "min_p",
                                                                   "repetition_penalty",
                                                                   "presence_penalty",
                                                                   "frequency_penalty",
                                                                   "seed",
                                                                   "stream",
                                                                   "stream_options",
                                                                   "n",
                                                                   "response_format",
                                                                   "logit_bias",
                                                                   "cache_salt"};
constexpr auto kChatFieldList = JoinFieldLists(
    kGenerationFieldList,
    std::array<std::string_view, 7>{"messages", "max_completion_tokens", "logprobs", "top_logprobs",
                                    "tools", "tool_choice", "parallel_tool_calls"});
constexpr auto kCompletionFieldList = JoinFieldLists(
    kGenerationFieldList, std::array<std::string_view, 3>{"prompt", "logprobs", "echo"});

}  // namespace

bool ValidFunctionName(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-';
  });
}

const std::span<const std::string_view> kChatFields(kChatFieldList);
const std::span<const std::string_view> kCompletionFields(kCompletionFieldList);

std::optional<ApiError> ReadResponseFormat(const ojson& body, bool chat,
                                           worker::ResponseFormat* out) {
  const ojson* format = Field(body, "response_format");
  if (format == nullptr) return std::nullopt;
  if (!format->is_object() || !format->contains("type") || !(*format)["type"].is_string()) {
    return InvalidField("response_format",
                        "response_format must be an object with a type: text, json_object or "
                        "json_schema");
  }
  const std::string type = (*format)["type"].get<std::string>();
  if (type == "text") return std::nullopt;
  auto grammar = CompileResponseFormat(*format);
  if (!grammar) {
    const std::string param =
        type == "json_schema" ? "response_format.json_schema.schema" : "response_format";
    return InvalidField(param, grammar.status().message());
  }
  // A chat's choice among a few values is answered by scoring them (a decision).
  if (chat) {
    if (std::optional<worker::ResponseFormat> decision = DecisionFormat(*format)) {
      *out = std::move(*decision);
      return std::nullopt;
    }
  }
  const ojson* spec = type == "json_schema" ? Field(*format, "json_schema") : nullptr;
  const ojson* schema = spec != nullptr ? Field(*spec, "schema") : nullptr;
  if (schema == nullptr) {
    out->kind = worker::ResponseFormatKind::kJsonObject;  // OpenAI: no schema is any object
  } else {
    out->kind = worker::ResponseFormatKind::kJsonSchema;
    out->schema = schema->dump();
  }
  return std::nullopt;
}

std::optional<ApiError> ReadTools(const ojson& body, worker::ChatPayload* chat) {
  const ojson* tools = Field(body, "tools");
  const ojson* choice = Field(body, "tool_choice");
  if (const ojson* parallel = Field(body, "parallel_tool_calls")) {
    if (!parallel->is_boolean()) {
      return InvalidField("parallel_tool_calls", "parallel_tool_calls must be true or false");
    }
    if (!parallel->get<bool>()) {
      return InvalidField("parallel_tool_calls",
                          "parallel_tool_calls false is not supported: the model may call "
                          "several tools in one reply");
    }
  }
  std::set<std::string> names;
  // Each function with a parameter schema: where it is, its name, whether it is strict.
  struct Schema {
    std::string where, name;
    const ojson* params;
    bool strict;
  };
  std::vector<Schema> schemas;
  if (tools != nullptr) {
    if (!tools->is_array()) return InvalidField("tools", "tools must be an array of tools");
    if (tools->size() > 128) return InvalidField("tools", "tools holds more than 128 tools");
    for (size_t i = 0; i < tools->size(); ++i) {
      const ojson& t = (*tools)[i];
      const std::string where = "tools[" + std::to_string(i) + "]";
      if (!t.is_object() || !t.contains("type") || t["type"] != "function") {
        return InvalidField(where + ".type", where + ".type must be \"function\"");
      }
      const ojson* fn = Field(t, "function");
      if (fn == nullptr || !fn->is_object())
        return InvalidField(where + ".function", where + ".function must be an object");
      const ojson* name = Field(*fn, "name");
      if (name == nullptr || !name->is_string() || !ValidFunctionName(name->get<std::string>())) {
        return InvalidField(where + ".function.name",
                            where + ".function.name must be 1-64 letters, digits, _ or -");
      }
      if (!names.insert(name->get<std::string>()).second) {
        return InvalidField(where + ".function.name",
                            "two tools are named '" + name->get<std::string>() + "'");
      }
      if (const ojson* d = Field(*fn, "description"); d != nullptr && !d->is_string()) {
        return InvalidField(where + ".function.description",
                            where + ".function.description must be a string");
      }
      if (auto e = RefuseUnknownFields(*fn, {"name", "description", "parameters", "strict"},
                                       where + ".function", "in a function")) {
        return e;
      }
      if (const ojson* params = Field(*fn, "parameters")) {
        if (!params->is_object()) {
          return InvalidField(where + ".function.parameters",
                              where + ".function.parameters must be a JSON schema object");
        }
      }
      bool strict = false;
      if (const ojson* s = Field(*fn, "strict")) {
        if (!s->is_boolean())
          return InvalidField(where + ".function.strict",
                              where + ".function.strict must be a boolean");
        strict = s->get<bool>();
      }
      if (const ojson* params = Field(*fn, "parameters")) {
        schemas.push_back({where, name->get<std::string>(), params, strict});
      }
      // The definition travels as the client wrote it: the template renders it.
      chat->tools.push_back({name->get<std::string>(), strict, t.dump()});
    }
  }
  using worker::ToolChoiceMode;
  worker::ToolChoice& chosen = chat->tool_choice;
  chosen.mode = chat->tools.empty() ? ToolChoiceMode::kNone : ToolChoiceMode::kAuto;
  if (choice != nullptr) {
    if (choice->is_string()) {
      const std::string mode = choice->get<std::string>();
      if (mode == "none") {
        chosen.mode = ToolChoiceMode::kNone;
      } else if (mode == "auto") {
        chosen.mode = ToolChoiceMode::kAuto;
      } else if (mode == "required") {
        chosen.mode = ToolChoiceMode::kRequired;
      } else {
        return InvalidField("tool_choice",
                            "tool_choice must be none, auto, required or a named function");
      }
    } else if (choice->is_object() && choice->contains("function") &&
               (*choice)["function"].is_object() && (*choice)["function"].contains("name") &&
               (*choice)["function"]["name"].is_string()) {
      chosen.mode = ToolChoiceMode::kFunction;
      chosen.function = (*choice)["function"]["name"].get<std::string>();
      if (names.count(chosen.function) == 0) {
        return InvalidField("tool_choice", "tool_choice names '" + chosen.function +
                                               "', which is not one of the tools");
      }
    } else {
      return InvalidField("tool_choice",
                          "tool_choice must be none, auto, required or "
                          "{\"type\": \"function\", \"function\": {\"name\": ...}}");
    }
    if (chat->tools.empty() && chosen.mode != ToolChoiceMode::kNone) {
      return InvalidField("tool_choice", "tool_choice needs tools");
    }
  }
  if (!chat->tools.empty() &&
      chat->options.response_format.kind != worker::ResponseFormatKind::kText &&
      chosen.mode != ToolChoiceMode::kNone) {
    return InvalidField("response_format",
                        "response_format with tools is not supported; use one of them");
  }
  // The schemas the constrained decoder will enforce are compiled here, so one it cannot
  // enforce is named now: a strict function's, and under required (or a named function) the
  // candidates'. A non-strict function's schema under auto promises nothing, so an
  // unsupported keyword in it ("format", say) is no reason to refuse the request.
  if (chosen.mode != ToolChoiceMode::kNone) {
    for (const Schema& f : schemas) {
      if (!f.strict && chosen.mode != ToolChoiceMode::kRequired &&
          !(chosen.mode == ToolChoiceMode::kFunction && chosen.function == f.name)) {
        continue;
      }
      if (auto g = CompileJsonSchema(*f.params); !g) {
        return InvalidField(f.where + ".function.parameters", g.status().message());
      }
    }
  }
  return std::nullopt;
}

std::optional<ApiError> CheckMessageList(const ojson* messages) {
  if (messages == nullptr || !messages->is_array() || messages->empty()) {
    return InvalidField("messages",
                        "messages must be a non-empty array of {role, content} objects");
  }
  if (messages->size() > kMaxMessages) {
    return InvalidField("messages",
                        "messages has more than " + std::to_string(kMaxMessages) + " entries");
  }
  return std::nullopt;
}

std::optional<ApiError> ReadMessageToolFields(const ojson& m, const std::string& where,
                                              worker::ChatMessage* out) {
  if (const ojson* calls = Field(m, "tool_calls")) {
    if (out->role != "assistant") {
      return InvalidField(where + ".tool_calls", "only assistant messages carry tool_calls");
    }
    if (!calls->is_array()) {
      return InvalidField(where + ".tool_calls", where + ".tool_calls must be an array");
    }
    for (size_t i = 0; i < calls->size(); ++i) {
      const ojson& c = (*calls)[i];
      const std::string at = where + ".tool_calls[" + std::to_string(i) + "]";
      const ojson* fn = c.is_object() ? Field(c, "function") : nullptr;
      if (fn == nullptr || !fn->is_object() || !fn->contains("name") ||
          !(*fn)["name"].is_string() || !fn->contains("arguments") ||
          !(*fn)["arguments"].is_string()) {
        return InvalidField(at, at + " must be {id, type: \"function\", function: {name, "
                                     "arguments (a JSON string)}}");
      }
      // The body's own limits do not look inside strings, and the template parses these: a
      // text past them is refused (a text that is not JSON stays a string).
      auto arguments = ParseOrderedJson((*fn)["arguments"].get_ref<const std::string&>(),
                                        kRequestJsonLimits, at + ".function.arguments");
      if (!arguments && arguments.status().code() == ErrorCode::kResourceExhausted) {
        return InvalidField(at + ".function.arguments", arguments.status().message());
      }
    }
    out->tool_calls = calls->dump();
  }
  if (out->role == "tool") {
    const ojson* id = Field(m, "tool_call_id");
    if (id == nullptr || !id->is_string()) {
      return InvalidField(where + ".tool_call_id", "a tool message needs its tool_call_id");
    }
    out->tool_call_id = id->get<std::string>();
  }
  if (const ojson* name = Field(m, "name")) {
    if (!name->is_string()) return InvalidField(where + ".name", where + ".name must be a string");
    out->name = name->get<std::string>();
  }
  return RefuseUnknownFields(m, {"role", "content", "tool_calls", "tool_call_id", "name"}, where,
                             "in a message");
}

}  // namespace tessera::server
