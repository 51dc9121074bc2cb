// Anthropic Messages request bodies -> the typed chat job (anthropic_api.h). Blocks become
// the OpenAI-shaped messages chat templates render: text blocks joined by a blank line, an
// assistant's tool_use blocks its tool_calls, each tool_result block a "tool" message; tools
// become function tools and tool_choice its OpenAI form, read by the same ReadTools.
#include "server/anthropic_api.h"

#include <algorithm>
#include <array>
#include <limits>
#include <map>
#include <string_view>
#include <utility>

#include "sampling/sampling_params.h"
#include "server/json_fields.h"
#include "server/openai_fields.h"

namespace tessera::server {
namespace {

using ojson = nlohmann::ordered_json;

// Anthropic allows more stop sequences than OpenAI's four; each is checked on every token.
constexpr size_t kMaxStopSequences = 16;
// Anthropic's smallest thinking budget.
constexpr int64_t kMinThinkingBudget = 1024;

constexpr std::array<std::string_view, 6> kConversationFields = {
    "model", "messages", "system", "tools", "tool_choice", "thinking"};
// cache_control is accepted wherever Anthropic puts it: tessera's prefix cache reuses every
// shared prefix on its own, so the marker asks for nothing more.
constexpr std::array<std::string_view, 8> kMessagesOnlyFields = {
    "max_tokens", "stop_sequences", "temperature", "top_p",
    "top_k",      "metadata",       "stream",      "cache_control"};
constexpr std::array<std::string_view, 1> kCountOnlyFields = {"cache_control"};
constexpr auto kMessagesFields = JoinFieldLists(kConversationFields, kMessagesOnlyFields);
constexpr auto kCountTokensFields = JoinFieldLists(kConversationFields, kCountOnlyFields);

std::string At(const std::string& where, const char* member) {
  return where + "." + member;
}

std::string Index(const std::string& where, size_t i) {
  return where + "[" + std::to_string(i) + "]";
}

// cache_control: {"type": "ephemeral", "ttl"?: "5m" | "1h"}.
std::optional<ApiError> CheckCacheControl(const ojson& object, const std::string& where) {
  const ojson* c = Field(object, "cache_control");
  if (c == nullptr) return std::nullopt;
  const std::string name = where.empty() ? "cache_control" : At(where, "cache_control");
  const ojson* type = c->is_object() ? Field(*c, "type") : nullptr;
  const ojson* ttl = c->is_object() ? Field(*c, "ttl") : nullptr;
  if (type == nullptr || *type != "ephemeral" || (ttl != nullptr && *ttl != "5m" && *ttl != "1h")) {
    return InvalidField(name,
                        name + " must be {\"type\": \"ephemeral\", \"ttl\"?: \"5m\" | \"1h\"}");
  }
  return RefuseUnknownFields(*c, {"type", "ttl"}, name, "in cache_control");
}

std::string TypeOf(const ojson& block) {
  const ojson* type = block.is_object() ? Field(block, "type") : nullptr;
  return type != nullptr && type->is_string() ? type->get<std::string>() : "";
}

// Why a block of `type` cannot be taken (tessera serves text models).
ApiError UnsupportedBlock(const std::string& where, const std::string& type) {
  const std::string param = At(where, "type");
  if (type == "image" || type == "document") {
    return InvalidField(param, type +
                                   " blocks are not supported: the models tessera serves read "
                                   "text only; send the content as text blocks");
  }
  if (type.empty()) return InvalidField(param, where + " must be an object with a string type");
  return InvalidField(param, "'" + type + "' blocks are not supported here; send text" +
                                 std::string(" blocks (and tool_use / tool_result blocks)"));
}

// A text block {type: "text", text, cache_control?, citations?: null}; its text is appended.
std::optional<ApiError> ReadTextBlock(const ojson& block, const std::string& where,
                                      std::string* out) {
  const ojson* text = Field(block, "text");
  if (text == nullptr || !text->is_string())
    return InvalidField(At(where, "text"), At(where, "text") + " must be a string");
  if (auto e = CheckCacheControl(block, where)) return e;
  if (auto e =
          RefuseUnknownFields(block, {"type", "text", "cache_control"}, where, "in a text block")) {
    return e;
  }
  if (!out->empty()) out->append("\n\n");
  out->append(text->get_ref<const std::string&>());
  return std::nullopt;
}

// A string, or an array of text blocks, joined (system prompts, system messages,
// tool_result contents).
std::optional<ApiError> ReadTextContent(const ojson& content, const std::string& where,
                                        std::string* out) {
  if (content.is_string()) {
    *out = content.get<std::string>();
    return std::nullopt;
  }
  if (!content.is_array())
    return InvalidField(where, where + " must be a string or an array of text blocks");
  for (size_t i = 0; i < content.size(); ++i) {
    const std::string at = Index(where, i);
    const std::string type = TypeOf(content[i]);
    if (type != "text") return UnsupportedBlock(at, type);
    if (auto e = ReadTextBlock(content[i], at, out)) return e;
  }
  return std::nullopt;
}

// One turn of the conversation as the template will see it; consecutive user (or assistant,
// or system) turns are one turn, as Anthropic combines them.
struct Turn {
  explicit Turn(std::string r) : role(std::move(r)) {}
  std::string role;
  std::string content;
  ojson tool_calls = ojson::array();  // assistant: OpenAI tool_calls entries
  std::string tool_call_id;           // tool: the tool_use it answers
  std::string name;                   // tool: that tool's name
};

void Push(std::vector<Turn>& turns, Turn turn) {
  if (!turns.empty() && turns.back().role == turn.role && turn.role != "tool") {
    Turn& last = turns.back();
    if (!last.content.empty() && !turn.content.empty()) last.content.append("\n\n");
    last.content.append(turn.content);
    for (ojson& call : turn.tool_calls) last.tool_calls.push_back(std::move(call));
    return;
  }
  turns.push_back(std::move(turn));
}

// The names of the tool_use blocks seen so far, by id (a tool_result must answer one).
using ToolUseNames = std::map<std::string, std::string>;

std::optional<ApiError> ReadToolUse(const ojson& block, const std::string& where,
                                    ToolUseNames* seen, Turn* turn) {
  const ojson* id = Field(block, "id");
  const ojson* name = Field(block, "name");
  const ojson* input = Field(block, "input");
  if (id == nullptr || !id->is_string() || id->get_ref<const std::string&>().empty())
    return InvalidField(At(where, "id"), At(where, "id") + " must be a non-empty string");
  if (name == nullptr || !name->is_string() || name->get_ref<const std::string&>().empty())
    return InvalidField(At(where, "name"), At(where, "name") + " must be a non-empty string");
  if (input == nullptr || !input->is_object())
    return InvalidField(At(where, "input"), At(where, "input") + " must be an object");
  if (auto e = CheckCacheControl(block, where)) return e;
  if (auto e = RefuseUnknownFields(block, {"type", "id", "name", "input", "cache_control"}, where,
                                   "in a tool_use block")) {
    return e;
  }
  (*seen)[id->get<std::string>()] = name->get<std::string>();
  ojson call = ojson::object();
  call["id"] = *id;
  call["type"] = "function";
  call["function"] = {{"name", *name}, {"arguments", input->dump()}};
  turn->tool_calls.push_back(std::move(call));
  return std::nullopt;
}

// A tool_result block: a "tool" turn answering an earlier tool_use. is_error is accepted; the
// result's text reaches the template as it is (chat templates have no error flag).
std::optional<ApiError> ReadToolResult(const ojson& block, const std::string& where,
                                       const ToolUseNames& seen, Turn* turn) {
  const ojson* id = Field(block, "tool_use_id");
  if (id == nullptr || !id->is_string())
    return InvalidField(At(where, "tool_use_id"), At(where, "tool_use_id") + " must be a string");
  auto call = seen.find(id->get<std::string>());
  if (call == seen.end()) {
    return InvalidField(At(where, "tool_use_id"),
                        At(where, "tool_use_id") + " '" + id->get<std::string>() +
                            "' answers no tool_use block of an earlier assistant message");
  }
  if (const ojson* is_error = Field(block, "is_error");
      is_error != nullptr && !is_error->is_boolean())
    return InvalidField(At(where, "is_error"), At(where, "is_error") + " must be true or false");
  if (const ojson* content = Field(block, "content")) {
    if (auto e = ReadTextContent(*content, At(where, "content"), &turn->content)) return e;
  }
  if (auto e = CheckCacheControl(block, where)) return e;
  if (auto e = RefuseUnknownFields(block,
                                   {"type", "tool_use_id", "content", "is_error", "cache_control"},
                                   where, "in a tool_result block")) {
    return e;
  }
  turn->tool_call_id = call->first;
  turn->name = call->second;
  return std::nullopt;
}

// One message of `messages` into turns.
std::optional<ApiError> ReadMessage(const ojson& m, const std::string& where, ToolUseNames* seen,
                                    std::vector<Turn>* turns) {
  if (!m.is_object()) return InvalidField(where, where + " must be an object {role, content}");
  const ojson* role = Field(m, "role");
  if (role == nullptr || (*role != "user" && *role != "assistant" && *role != "system"))
    return InvalidField(At(where, "role"), At(where, "role") + " must be user or assistant");
  if (auto e = RefuseUnknownFields(m, {"role", "content"}, where, "in a message")) {
    return e;
  }
  const std::string r = role->get<std::string>();
  const std::string content_at = At(where, "content");
  const ojson* content = Field(m, "content");
  if (content == nullptr || (!content->is_string() && !content->is_array()))
    return InvalidField(content_at, content_at + " must be a string or an array of blocks");
  if (content->is_array() && content->empty())
    return InvalidField(content_at, content_at + " must not be empty");
  if (r == "system" || content->is_string()) {
    Turn turn(r);
    if (auto e = ReadTextContent(*content, content_at, &turn.content)) return e;
    Push(*turns, std::move(turn));
    return std::nullopt;
  }
  // Blocks in order: a user's text between tool results stays between them.
  Turn pending(r);
  for (size_t i = 0; i < content->size(); ++i) {
    const ojson& block = (*content)[i];
    const std::string at = Index(content_at, i);
    const std::string type = TypeOf(block);
    if (type == "text") {
      if (auto e = ReadTextBlock(block, at, &pending.content)) return e;
    } else if (type == "tool_use" && r == "assistant") {
      if (auto e = ReadToolUse(block, at, seen, &pending)) return e;
    } else if (type == "tool_result" && r == "user") {
      if (!pending.content.empty()) Push(*turns, std::exchange(pending, Turn(r)));
      Turn result("tool");
      if (auto e = ReadToolResult(block, at, *seen, &result)) return e;
      Push(*turns, std::move(result));
    } else if (type == "tool_use" || type == "tool_result") {
      return InvalidField(
          At(at, "type"),
          type + " blocks belong in " + (type == "tool_use" ? "assistant" : "user") + " messages");
    } else {
      return UnsupportedBlock(at, type);
    }
  }
  if (!pending.content.empty() || !pending.tool_calls.empty() || r == "assistant") {
    Push(*turns, std::move(pending));
  }
  return std::nullopt;
}

// system and messages into chat->messages.
std::optional<ApiError> ReadConversation(const ojson& body, worker::ChatPayload* chat) {
  std::vector<Turn> turns;
  if (const ojson* system = Field(body, "system")) {
    Turn turn("system");
    if (auto e = ReadTextContent(*system, "system", &turn.content)) return e;
    Push(turns, std::move(turn));
  }
  const ojson* messages = Field(body, "messages");
  if (messages == nullptr || !messages->is_array() || messages->empty())
    return InvalidField("messages", "messages must be a non-empty array of {role, content}");
  if (messages->size() > kMaxMessages) {
    return InvalidField("messages",
                        "messages has more than " + std::to_string(kMaxMessages) + " entries");
  }
  ToolUseNames seen;
  for (size_t i = 0; i < messages->size(); ++i) {
    if (auto e = ReadMessage((*messages)[i], Index("messages", i), &seen, &turns)) return e;
  }
  // A reply continues a conversation that ends with the user (or a tool's result).
  if (turns.back().role == "assistant") {
    const std::string last = Index("messages", messages->size() - 1);
    return InvalidField(last, last +
                                  " is an assistant message: continuing a prefilled reply is "
                                  "not supported; end with a user message");
  }
  if (turns.back().role == "system") {
    return InvalidField("messages", "messages must hold a user message");
  }
  for (Turn& t : turns) {
    worker::ChatMessage msg;
    msg.role = t.role;
    msg.content = std::move(t.content);
    if (!t.tool_calls.empty()) msg.tool_calls = t.tool_calls.dump();
    msg.tool_call_id = std::move(t.tool_call_id);
    msg.name = std::move(t.name);
    chat->messages.push_back(std::move(msg));
  }
  return std::nullopt;
}

// One custom tool {name, description?, input_schema, strict?, cache_control?} as the OpenAI
// function tool the template renders.
std::variant<ojson, ApiError> ReadTool(const ojson& t, const std::string& where) {
  if (!t.is_object()) return InvalidField(where, where + " must be an object");
  if (const ojson* type = Field(t, "type"); type != nullptr && *type != "custom") {
    const std::string name = type->is_string() ? type->get<std::string>() : type->dump();
    return InvalidField(At(where, "type"),
                        "'" + name +
                            "' is one of Anthropic's server tools, which tessera does not run; "
                            "define a custom tool {name, description, input_schema}");
  }
  const ojson* name = Field(t, "name");
  if (name == nullptr || !name->is_string() || !ValidFunctionName(name->get<std::string>())) {
    return InvalidField(At(where, "name"),
                        At(where, "name") + " must be 1-64 letters, digits, _ or -");
  }
  const ojson* description = Field(t, "description");
  if (description != nullptr && !description->is_string())
    return InvalidField(At(where, "description"), At(where, "description") + " must be a string");
  const ojson* schema = Field(t, "input_schema");
  if (schema == nullptr || !schema->is_object() || !schema->contains("type") ||
      (*schema)["type"] != "object") {
    return InvalidField(
        At(where, "input_schema"),
        At(where, "input_schema") + " must be a JSON schema object with \"type\": \"object\"");
  }
  const ojson* strict = Field(t, "strict");
  if (strict != nullptr && !strict->is_boolean())
    return InvalidField(At(where, "strict"), At(where, "strict") + " must be true or false");
  if (auto e = CheckCacheControl(t, where)) return *e;
  if (auto e = RefuseUnknownFields(
          t, {"type", "name", "description", "input_schema", "strict", "cache_control"}, where,
          "in a tool")) {
    return *e;
  }
  ojson function = {{"name", *name}};
  if (description != nullptr) function["description"] = *description;
  function["parameters"] = *schema;
  if (strict != nullptr) function["strict"] = *strict;
  return ojson{{"type", "function"}, {"function", std::move(function)}};
}

// tool_choice {type: auto | any | tool (name) | none, disable_parallel_tool_use?} in its
// OpenAI form. disable_parallel_tool_use true holds under any and tool (a forced reply is
// exactly one call); under auto the model may call several tools, so it is refused.
std::variant<ojson, ApiError> ReadToolChoice(const ojson& choice) {
  const std::string type = choice.is_object() ? TypeOf(choice) : "";
  if (type != "auto" && type != "any" && type != "tool" && type != "none") {
    return InvalidField("tool_choice",
                        "tool_choice must be {\"type\": \"auto\" | \"any\" | \"none\"} or "
                        "{\"type\": \"tool\", \"name\": ...}");
  }
  if (auto e = RefuseUnknownFields(choice, {"type", "name", "disable_parallel_tool_use"},
                                   "tool_choice", "in tool_choice")) {
    return *e;
  }
  const ojson* name = Field(choice, "name");
  if (type == "tool" && (name == nullptr || !name->is_string()))
    return InvalidField("tool_choice.name", "tool_choice of type tool needs the tool's name");
  if (type != "tool" && name != nullptr)
    return InvalidField("tool_choice.name", "only tool_choice of type tool takes a name");
  if (const ojson* single = Field(choice, "disable_parallel_tool_use")) {
    if (!single->is_boolean()) {
      return InvalidField("tool_choice.disable_parallel_tool_use",
                          "disable_parallel_tool_use must be true or false");
    }
    if (single->get<bool>() && type == "auto") {
      return InvalidField("tool_choice.disable_parallel_tool_use",
                          "disable_parallel_tool_use with tool_choice auto is not supported: the "
                          "model may call several tools; use tool_choice any or tool, which "
                          "make exactly one call");
    }
  }
  if (type == "any") return ojson("required");
  if (type == "tool") return ojson{{"type", "function"}, {"function", {{"name", *name}}}};
  return ojson(type);
}

// tools and tool_choice, through the OpenAI reader (names, schemas, the choice's tool).
std::optional<ApiError> ReadAnthropicTools(const ojson& body, worker::ChatPayload* chat) {
  ojson shaped = ojson::object();
  if (const ojson* tools = Field(body, "tools")) {
    if (!tools->is_array()) return InvalidField("tools", "tools must be an array of tools");
    shaped["tools"] = ojson::array();
    for (size_t i = 0; i < tools->size(); ++i) {
      auto tool = ReadTool((*tools)[i], Index("tools", i));
      if (auto* e = std::get_if<ApiError>(&tool)) return *e;
      shaped["tools"].push_back(std::move(std::get<ojson>(tool)));
    }
  }
  if (const ojson* choice = Field(body, "tool_choice")) {
    auto openai = ReadToolChoice(*choice);
    if (auto* e = std::get_if<ApiError>(&openai)) return *e;
    shaped["tool_choice"] = std::move(std::get<ojson>(openai));
  }
  if (auto e = ReadTools(shaped, chat)) {
    // Its params name the OpenAI form: tools[i].function.parameters is tools[i].input_schema.
    constexpr std::string_view kFunction = ".function.";
    if (size_t at = e->param.find(kFunction); at != std::string::npos) {
      std::string member = e->param.substr(at + kFunction.size());
      e->param = e->param.substr(0, at + 1) + (member == "parameters" ? "input_schema" : member);
    }
    return e;
  }
  return std::nullopt;
}

// thinking: {type: enabled, budget_tokens >= 1024 (and below max_tokens)}, {type: disabled},
// or {type: adaptive} (the model decides how much to think: its switch on). The budget is
// checked as Anthropic checks it; the thinking counts against max_tokens.
std::optional<ApiError> ReadThinking(const ojson& body, std::optional<int64_t> max_tokens,
                                     worker::ChatPayload* chat) {
  const ojson* thinking = Field(body, "thinking");
  if (thinking == nullptr) return std::nullopt;
  const std::string type = TypeOf(*thinking);
  if (type == "disabled") {
    if (auto e =
            RefuseUnknownFields(*thinking, {"type"}, "thinking", "in thinking {type: disabled}")) {
      return e;
    }
    chat->enable_thinking = false;
    return std::nullopt;
  }
  if (type != "enabled" && type != "adaptive") {
    return InvalidField("thinking.type", "thinking.type must be enabled, adaptive or disabled");
  }
  if (auto e = RefuseUnknownFields(*thinking, {"type", "budget_tokens"}, "thinking",
                                   "in thinking (tessera shows the model's thinking as text)")) {
    return e;
  }
  const ojson* budget = Field(*thinking, "budget_tokens");
  if (type == "enabled") {
    if (budget == nullptr || !budget->is_number_integer() ||
        budget->get<int64_t>() < kMinThinkingBudget) {
      return InvalidField("thinking.budget_tokens",
                          "thinking.budget_tokens must be an integer of at least 1024");
    }
    if (max_tokens && budget->get<int64_t>() >= *max_tokens) {
      return InvalidField("thinking.budget_tokens",
                          "thinking.budget_tokens must be less than max_tokens");
    }
  } else if (budget != nullptr) {
    return InvalidField("thinking.budget_tokens", "adaptive thinking takes no budget_tokens");
  }
  chat->enable_thinking = true;
  return std::nullopt;
}

std::optional<ApiError> ReadModel(const ojson& body, std::string* model) {
  const ojson* v = Field(body, "model");
  if (v == nullptr || !v->is_string() || v->get_ref<const std::string&>().empty()) {
    return InvalidField("model",
                        "model is required: name a served model (GET /v1/models lists them)");
  }
  *model = v->get<std::string>();
  return std::nullopt;
}

// temperature and top_p: Anthropic's range is 0 to 1.
std::optional<ApiError> ReadUnitNumber(const ojson& body, const char* name,
                                       std::optional<double>* out) {
  const ojson* v = Field(body, name);
  if (v == nullptr) return std::nullopt;
  if (!v->is_number() || v->get<double>() < 0.0 || v->get<double>() > 1.0) {
    return InvalidField(name, std::string(name) + " must be a number from 0 to 1");
  }
  *out = v->get<double>();
  return std::nullopt;
}

// What /v1/messages reads beyond the conversation.
std::optional<ApiError> ReadGeneration(const ojson& body, GenerationRequest* out,
                                       worker::GenerationOptions* options) {
  const ojson* max_tokens = Field(body, "max_tokens");
  if (max_tokens == nullptr || !max_tokens->is_number_integer() || max_tokens->get<int64_t>() < 1 ||
      (max_tokens->is_number_unsigned() &&
       max_tokens->get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))) {
    return InvalidField("max_tokens", "max_tokens is required: an integer of at least 1");
  }
  options->max_tokens = max_tokens->get<int64_t>();
  if (const ojson* stops = Field(body, "stop_sequences")) {
    if (!stops->is_array() || stops->size() > kMaxStopSequences) {
      return InvalidField("stop_sequences", "stop_sequences must be an array of at most " +
                                                std::to_string(kMaxStopSequences) + " strings");
    }
    for (const ojson& s : *stops) {
      if (!s.is_string() || s.get_ref<const std::string&>().empty() ||
          s.get_ref<const std::string&>().size() > kMaxStopStringBytes) {
        return InvalidField("stop_sequences",
                            "each stop sequence must be a non-empty string of at "
                            "most " +
                                std::to_string(kMaxStopStringBytes) + " bytes");
      }
      options->stop.push_back(s.get<std::string>());
    }
  }
  SamplingParams& p = options->sampling;
  if (auto e = ReadUnitNumber(body, "temperature", &p.temperature)) return e;
  if (auto e = ReadUnitNumber(body, "top_p", &p.top_p)) return e;
  if (const ojson* top_k = Field(body, "top_k")) {
    if (!top_k->is_number_integer() || top_k->get<int64_t>() < 0)
      return InvalidField("top_k", "top_k must be an integer of at least 0");
    p.top_k = top_k->get<int64_t>();
  }
  if (auto bad = CheckRequestedSampling(p)) {
    return InvalidField(std::string(bad->field), bad->status.message());
  }
  if (const ojson* metadata = Field(body, "metadata")) {
    if (!metadata->is_object()) return InvalidField("metadata", "metadata must be an object");
    const ojson* user = Field(*metadata, "user_id");
    if (user != nullptr && !user->is_string())
      return InvalidField("metadata.user_id", "metadata.user_id must be a string");
    if (auto e = RefuseUnknownFields(*metadata, {"user_id"}, "metadata", "in metadata")) {
      return e;
    }
  }
  return ReadBool(body, "stream", &out->stream);
}

}  // namespace

std::variant<GenerationRequest, ApiError> ParseAnthropicMessages(const ojson& body) {
  GenerationRequest out;
  worker::ChatPayload chat;
  if (auto e = RefuseUnknownFields(body, kMessagesFields)) return *e;
  if (auto e = ReadModel(body, &out.job.model)) return *e;
  if (auto e = ReadGeneration(body, &out, &chat.options)) return *e;
  if (auto e = CheckCacheControl(body, "")) return *e;
  if (auto e = ReadConversation(body, &chat)) return *e;
  if (auto e = ReadAnthropicTools(body, &chat)) return *e;
  if (auto e = ReadThinking(body, chat.options.max_tokens, &chat)) return *e;
  out.job.payload = std::move(chat);
  return out;
}

std::variant<worker::JobRequest, ApiError> ParseAnthropicCountTokens(const ojson& body) {
  worker::JobRequest job;
  worker::ChatTokenizePayload count;
  if (auto e = RefuseUnknownFields(body, kCountTokensFields)) return *e;
  if (auto e = ReadModel(body, &job.model)) return *e;
  if (auto e = CheckCacheControl(body, "")) return *e;
  if (auto e = ReadConversation(body, &count.chat)) return *e;
  if (auto e = ReadAnthropicTools(body, &count.chat)) return *e;
  if (auto e = ReadThinking(body, std::nullopt, &count.chat)) return *e;
  job.payload = std::move(count);
  return job;
}

}  // namespace tessera::server
