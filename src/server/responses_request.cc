// POST /v1/responses: the body checked field by field (an unknown or unsupported field is a
// 400 naming it) and turned into a chat job. Input items become chat messages; function tools,
// tool_choice and text.format become the chat's, checked by the same code (openai_fields.h),
// with their errors named as this API names the fields.
#include <algorithm>
#include <array>
#include <map>
#include <set>
#include <string_view>

#include "format/ordered_json.h"
#include "sampling/sampling_params.h"
#include "server/json_fields.h"
#include "server/openai_fields.h"
#include "server/responses_api.h"

namespace tessera::server {
namespace {

using nlohmann::json;
using ojson = nlohmann::ordered_json;

// The fields this endpoint implements (some only with their default value, checked below).
constexpr std::array<std::string_view, 18> kResponsesFields = {"model",
                                                               "input",
                                                               "instructions",
                                                               "max_output_tokens",
                                                               "stream",
                                                               "temperature",
                                                               "top_p",
                                                               "tools",
                                                               "text",
                                                               "tool_choice",
                                                               "parallel_tool_calls",
                                                               "previous_response_id",
                                                               "store",
                                                               "metadata",
                                                               "user",
                                                               "background",
                                                               "include",
                                                               "truncation"};

// OpenAI's fields tessera does not implement, and why.
struct Unsupported {
  std::string_view field;
  std::string_view reason;
};
constexpr std::array<Unsupported, 9> kUnsupportedFields = {{
    {"reasoning", "reasoning effort and summaries are not exposed by this API; remove it"},
    {"conversation",
     "conversation objects are not kept; chain responses with previous_response_id"},
    {"prompt", "stored prompt templates are not kept; send input and instructions"},
    {"prompt_cache_key", "the prefix cache is automatic, scoped by API key; remove it"},
    {"safety_identifier", "remove it"},
    {"service_tier", "tessera has one service tier; remove it"},
    {"max_tool_calls", "remove it"},
    {"top_logprobs", "use /v1/chat/completions with logprobs for token log probabilities"},
    {"stream_options", "remove it"},
}};

constexpr std::array<std::string_view, 2> kInputTextPartFields = {"type", "text"};
constexpr std::array<std::string_view, 4> kOutputTextPartFields = {"type", "text", "annotations",
                                                                   "logprobs"};

// OpenAI's limits on metadata: 16 pairs, keys up to 64 characters, values up to 512.
constexpr size_t kMaxMetadataPairs = 16;
constexpr size_t kMaxMetadataKey = 64;
constexpr size_t kMaxMetadataValue = 512;

// An unknown field is refused by name; one of OpenAI's this server does not implement, with
// the reason.
std::optional<ApiError> RefuseUnknownResponsesFields(const ojson& body) {
  std::optional<ApiError> e = RefuseUnknownFields(body, kResponsesFields);
  if (!e) return e;
  for (const Unsupported& u : kUnsupportedFields) {
    if (u.field == e->param) {
      e->message = e->param + " is not supported by this server: " + std::string(u.reason);
    }
  }
  return e;
}

// Fields accepted only with the value that means what tessera does anyway.
std::optional<ApiError> CheckDefaultOnlyFields(const ojson& body) {
  bool background = false;
  if (auto e = ReadBool(body, "background", &background)) return e;
  if (background) {
    return InvalidField("background",
                        "background is not supported: a response is generated while its request "
                        "is open; remove it");
  }
  if (const ojson* include = Field(body, "include")) {
    if (!include->is_array()) return InvalidField("include", "include must be an array");
    if (!include->empty()) {
      return InvalidField("include", "include " + (*include)[0].dump() +
                                         " is not supported: tessera has no extra output to "
                                         "include; remove it");
    }
  }
  if (const ojson* truncation = Field(body, "truncation")) {
    if (*truncation == "auto") {
      return InvalidField("truncation",
                          "truncation 'auto' is not supported: an input longer than the model's "
                          "context is refused, never cut; use 'disabled'");
    }
    if (*truncation != "disabled")
      return InvalidField("truncation", "truncation must be 'disabled'");
  }
  return std::nullopt;
}

// A message's content: a string, or text parts (input_text, output_text) joined.
std::optional<ApiError> ReadItemText(const ojson& content, const std::string& where,
                                     std::string* out) {
  if (content.is_string()) {
    *out = content.get<std::string>();
    return std::nullopt;
  }
  if (!content.is_array()) {
    return InvalidField(where, where + " must be a string or an array of input_text parts");
  }
  for (size_t i = 0; i < content.size(); ++i) {
    const ojson& part = content[i];
    const std::string at = where + "[" + std::to_string(i) + "]";
    const ojson* type = part.is_object() ? Field(part, "type") : nullptr;
    if (type == nullptr || !type->is_string()) {
      return InvalidField(at, at + " must be {\"type\": \"input_text\", \"text\": \"...\"}");
    }
    const std::string t = type->get<std::string>();
    if (t != "input_text" && t != "output_text") {
      return InvalidField(at + ".type", at + ".type '" + t +
                                            "' is not supported: tessera's models read text; "
                                            "send input_text parts");
    }
    const ojson* text = Field(part, "text");
    if (text == nullptr || !text->is_string())
      return InvalidField(at + ".text", at + ".text must be a string");
    const std::span<const std::string_view> known =
        t == "output_text" ? std::span<const std::string_view>(kOutputTextPartFields)
                           : std::span<const std::string_view>(kInputTextPartFields);
    if (auto e = RefuseUnknownFields(part, known, at, "in an " + t + " part")) return e;
    out->append(text->get<std::string>());
  }
  return std::nullopt;
}

const ojson* StringField(const ojson& item, const char* name) {
  const ojson* v = Field(item, name);
  return v != nullptr && v->is_string() ? v : nullptr;
}

// Builds chat messages from input items: function_call items join the assistant message
// before them (a reply that called several functions is one assistant message).
class MessageList {
 public:
  explicit MessageList(std::vector<worker::ChatMessage> start) : messages_(std::move(start)) {
    for (const worker::ChatMessage& m : messages_) NoteCalls(m.tool_calls);
  }

  void Add(worker::ChatMessage m) {
    Flush();
    messages_.push_back(std::move(m));
  }

  void AddCall(const std::string& call_id, const std::string& name, const std::string& arguments) {
    if (calls_.empty() && (messages_.empty() || messages_.back().role != "assistant" ||
                           !messages_.back().tool_calls.empty())) {
      worker::ChatMessage m;
      m.role = "assistant";
      messages_.push_back(std::move(m));
    }
    calls_.push_back({{"id", call_id},
                      {"type", "function"},
                      {"function", {{"name", name}, {"arguments", arguments}}}});
    names_[call_id] = name;
  }

  // The function a call id belongs to, if some earlier item made that call.
  const std::string* CallName(const std::string& call_id) const {
    auto it = names_.find(call_id);
    return it == names_.end() ? nullptr : &it->second;
  }

  std::vector<worker::ChatMessage> Take() {
    Flush();
    return std::move(messages_);
  }

 private:
  void Flush() {
    if (calls_.empty()) return;
    messages_.back().tool_calls = calls_.dump();
    calls_ = ojson::array();
  }
  void NoteCalls(const std::string& tool_calls) {
    if (tool_calls.empty()) return;
    const json calls = json::parse(tool_calls, nullptr, /*allow_exceptions=*/false);
    if (!calls.is_array()) return;
    for (const json& c : calls) {
      if (c.contains("id") && c["id"].is_string() && c.contains("function") &&
          c["function"].contains("name") && c["function"]["name"].is_string()) {
        names_[c["id"].get<std::string>()] = c["function"]["name"].get<std::string>();
      }
    }
  }

  std::vector<worker::ChatMessage> messages_;
  ojson calls_ = ojson::array();
  std::map<std::string, std::string> names_;  // call id -> function name
};

std::optional<ApiError> ReadInputItem(const ojson& item, const std::string& where,
                                      MessageList* list) {
  if (!item.is_object()) return InvalidField(where, where + " must be an object");
  std::string type = "message";  // an item without a type is a message ({role, content})
  if (const ojson* t = Field(item, "type")) {
    if (!t->is_string()) return InvalidField(where + ".type", where + ".type must be a string");
    type = t->get<std::string>();
  }
  if (type == "message") {
    if (auto e = RefuseUnknownFields(item, {"type", "role", "content", "id", "status"}, where,
                                     "in this input item"))
      return e;
    const ojson* role = StringField(item, "role");
    static constexpr std::array<std::string_view, 4> kRoles = {"user", "system", "developer",
                                                               "assistant"};
    if (role == nullptr ||
        std::find(kRoles.begin(), kRoles.end(), role->get<std::string>()) == kRoles.end()) {
      return InvalidField(where + ".role",
                          where + ".role must be user, system, developer or assistant");
    }
    worker::ChatMessage m;
    m.role = role->get<std::string>() == "developer" ? "system" : role->get<std::string>();
    const ojson* content = Field(item, "content");
    if (content == nullptr) return InvalidField(where + ".content", where + ".content is missing");
    if (auto e = ReadItemText(*content, where + ".content", &m.content)) return e;
    list->Add(std::move(m));
    return std::nullopt;
  }
  if (type == "function_call") {
    if (auto e = RefuseUnknownFields(item, {"type", "call_id", "name", "arguments", "id", "status"},
                                     where, "in this input item"))
      return e;
    const ojson* call_id = StringField(item, "call_id");
    const ojson* name = StringField(item, "name");
    const ojson* arguments = StringField(item, "arguments");
    if (call_id == nullptr || call_id->get_ref<const std::string&>().empty() || name == nullptr ||
        arguments == nullptr) {
      return InvalidField(where, where +
                                     " must be {type: \"function_call\", call_id, name, arguments "
                                     "(a JSON string)}");
    }
    // The template parses the arguments: a text past the body's limits is refused, as a chat
    // message's tool call would be.
    auto parsed = ParseOrderedJson(arguments->get_ref<const std::string&>(), kRequestJsonLimits,
                                   where + ".arguments");
    if (!parsed && parsed.status().code() == ErrorCode::kResourceExhausted) {
      return InvalidField(where + ".arguments", parsed.status().message());
    }
    list->AddCall(call_id->get<std::string>(), name->get<std::string>(),
                  arguments->get<std::string>());
    return std::nullopt;
  }
  if (type == "function_call_output") {
    if (auto e = RefuseUnknownFields(item, {"type", "call_id", "output", "id", "status"}, where,
                                     "in this input item"))
      return e;
    const ojson* call_id = StringField(item, "call_id");
    if (call_id == nullptr) return InvalidField(where + ".call_id", where + ".call_id is missing");
    const std::string* name = list->CallName(call_id->get<std::string>());
    if (name == nullptr) {
      return InvalidField(where + ".call_id",
                          "no function_call with call_id '" + call_id->get<std::string>() +
                              "' comes before " + where +
                              " (in input, or in the previous response's output)");
    }
    worker::ChatMessage m;
    m.role = "tool";
    m.tool_call_id = call_id->get<std::string>();
    m.name = *name;
    const ojson* output = Field(item, "output");
    if (output == nullptr) return InvalidField(where + ".output", where + ".output is missing");
    if (auto e = ReadItemText(*output, where + ".output", &m.content)) return e;
    list->Add(std::move(m));
    return std::nullopt;
  }
  if (type == "item_reference") {
    return InvalidField(where + ".type",
                        where +
                            ".type 'item_reference' is not supported: send the item itself, "
                            "or continue a stored response with previous_response_id");
  }
  return InvalidField(where + ".type", where + ".type '" + type +
                                           "' is not supported: input items are messages, "
                                           "function_call and function_call_output");
}

std::optional<ApiError> ReadInput(const ojson& body, MessageList* list) {
  const ojson* input = Field(body, "input");
  if (input == nullptr) return std::nullopt;
  if (input->is_string()) {
    worker::ChatMessage m;
    m.role = "user";
    m.content = input->get<std::string>();
    list->Add(std::move(m));
    return std::nullopt;
  }
  if (!input->is_array()) {
    return InvalidField("input", "input must be a string or an array of input items");
  }
  if (input->size() > kMaxMessages) {
    return InvalidField("input", "input has more than " + std::to_string(kMaxMessages) + " items");
  }
  for (size_t i = 0; i < input->size(); ++i) {
    if (auto e = ReadInputItem((*input)[i], "input[" + std::to_string(i) + "]", list)) return e;
  }
  return std::nullopt;
}

// The chat layer's names for a function tool's fields ("tools[0].function.parameters") become
// this API's ("tools[0].parameters"), in the param and in the message.
ApiError AsResponsesToolError(ApiError e) {
  if (e.param == "response_format") {
    e.param = "text.format";
    e.message = "text.format with tools is not supported; use one of them (or tool_choice none)";
  }
  for (std::string* s : {&e.param, &e.message}) {
    for (size_t at; (at = s->find("].function.")) != std::string::npos;) {
      s->replace(at, std::string_view("].function.").size(), "].");
    }
  }
  if (e.message.find(e.param) == std::string::npos) e.message = e.param + ": " + e.message;
  return e;
}

// tools (function tools only), tool_choice and parallel_tool_calls: reshaped as the chat's and
// read by ReadTools. `echo` gets the tools and tool_choice as a response repeats them.
std::optional<ApiError> ReadResponsesTools(const ojson& body, worker::ChatPayload* chat,
                                           json* echo) {
  ojson chat_body = ojson::object();
  json echo_tools = json::array();
  if (const ojson* tools = Field(body, "tools")) {
    if (!tools->is_array()) return InvalidField("tools", "tools must be an array of tools");
    ojson chat_tools = ojson::array();
    for (size_t i = 0; i < tools->size(); ++i) {
      const ojson& t = (*tools)[i];
      const std::string where = "tools[" + std::to_string(i) + "]";
      const ojson* type = t.is_object() ? StringField(t, "type") : nullptr;
      if (type == nullptr) {
        return InvalidField(where + ".type", where + ".type must be \"function\"");
      }
      if (*type != "function") {
        return InvalidField(where + ".type",
                            where + ".type '" + type->get<std::string>() +
                                "' is not supported: tessera runs no built-in tools; declare "
                                "function tools and run them yourself");
      }
      if (auto e = RefuseUnknownFields(t, {"type", "name", "description", "parameters", "strict"},
                                       where, "in a function tool")) {
        return e;
      }
      ojson function = ojson::object();
      for (auto it = t.begin(); it != t.end(); ++it) {
        if (it.key() != "type" && !it->is_null()) function[it.key()] = *it;
      }
      chat_tools.push_back({{"type", "function"}, {"function", function}});
      json shown = {
          {"type", "function"},
          {"name", t.contains("name") ? json::parse(t["name"].dump()) : json(nullptr)},
          {"parameters",
           t.contains("parameters") ? json::parse(t["parameters"].dump()) : json(nullptr)},
          {"strict", t.contains("strict") ? json::parse(t["strict"].dump()) : json(false)}};
      if (const ojson* d = Field(t, "description")) shown["description"] = json::parse(d->dump());
      echo_tools.push_back(std::move(shown));
    }
    chat_body["tools"] = std::move(chat_tools);
  }
  json echo_choice = "auto";
  if (const ojson* choice = Field(body, "tool_choice")) {
    if (choice->is_string()) {
      chat_body["tool_choice"] = *choice;
      echo_choice = choice->get<std::string>();
    } else if (const ojson* type = choice->is_object() ? Field(*choice, "type") : nullptr;
               type != nullptr && *type == "function") {
      const ojson* name = StringField(*choice, "name");
      if (name == nullptr) {
        return InvalidField("tool_choice", "tool_choice {\"type\": \"function\"} needs a name");
      }
      chat_body["tool_choice"] = {{"type", "function"}, {"function", {{"name", *name}}}};
      echo_choice = {{"type", "function"}, {"name", name->get<std::string>()}};
    } else if (type != nullptr) {
      return InvalidField("tool_choice", "tool_choice type " + type->dump() +
                                             " is not supported: use none, auto, required or "
                                             "{\"type\": \"function\", \"name\": ...}");
    } else {
      return InvalidField("tool_choice",
                          "tool_choice must be none, auto, required or "
                          "{\"type\": \"function\", \"name\": ...}");
    }
  }
  if (const ojson* parallel = Field(body, "parallel_tool_calls"))
    chat_body["parallel_tool_calls"] = *parallel;
  if (auto e = ReadTools(chat_body, chat)) return AsResponsesToolError(*e);
  (*echo)["tools"] = std::move(echo_tools);
  (*echo)["tool_choice"] = std::move(echo_choice);
  (*echo)["parallel_tool_calls"] = true;
  return std::nullopt;
}

// text: {format: {type: text | json_object | json_schema (name, schema, strict?,
// description?)}}, compiled as the chat's response_format.
std::optional<ApiError> ReadTextFormat(const ojson& body, worker::ChatPayload* chat, json* echo) {
  (*echo)["text"] = {{"format", {{"type", "text"}}}};
  const ojson* text = Field(body, "text");
  if (text == nullptr) return std::nullopt;
  if (!text->is_object()) return InvalidField("text", "text must be an object: {format: ...}");
  if (auto e = RefuseUnknownFields(*text, {"format"}, "text")) return e;
  const ojson* format = Field(*text, "format");
  if (format == nullptr) return std::nullopt;
  const ojson* type = format->is_object() ? StringField(*format, "type") : nullptr;
  if (type == nullptr || (*type != "text" && *type != "json_object" && *type != "json_schema")) {
    return InvalidField("text.format",
                        "text.format must be {\"type\": \"text\"}, {\"type\": \"json_object\"} or "
                        "{\"type\": \"json_schema\", \"name\", \"schema\", \"strict\"?}");
  }
  ojson response_format = {{"type", *type}};
  if (*type == "json_schema") {
    if (auto e = RefuseUnknownFields(*format, {"type", "name", "schema", "strict", "description"},
                                     "text.format", "in text.format")) {
      return e;
    }
    ojson spec = ojson::object();
    for (auto it = format->begin(); it != format->end(); ++it) {
      if (it.key() != "type" && !it->is_null()) spec[it.key()] = *it;
    }
    if (!spec.contains("name") || !spec["name"].is_string())
      return InvalidField("text.format.name", "text.format.name must be a string");
    if (!spec.contains("schema") || !spec["schema"].is_object())
      return InvalidField("text.format.schema", "text.format.schema must be a JSON schema object");
    if (spec.contains("strict") && !spec["strict"].is_boolean())
      return InvalidField("text.format.strict", "text.format.strict must be true or false");
    if (spec.contains("description") && !spec["description"].is_string())
      return InvalidField("text.format.description", "text.format.description must be a string");
    response_format["json_schema"] = std::move(spec);
  } else {
    if (auto e = RefuseUnknownFields(*format, {"type"}, "text.format",
                                     "in text.format " + type->dump())) {
      return e;
    }
  }
  const ojson chat_body = {{"response_format", response_format}};
  if (auto e = ReadResponseFormat(chat_body, /*chat=*/true, &chat->options.response_format)) {
    e->param = *type == "json_schema" ? "text.format.schema" : "text.format";
    e->message = e->param + ": " + e->message;
    return e;
  }
  (*echo)["text"] = {{"format", json::parse(format->dump())}};
  return std::nullopt;
}

std::optional<ApiError> ReadMetadata(const ojson& body, json* echo) {
  (*echo)["metadata"] = json::object();
  const ojson* metadata = Field(body, "metadata");
  if (metadata == nullptr) return std::nullopt;
  const std::string limits = "metadata must be an object of at most " +
                             std::to_string(kMaxMetadataPairs) + " string values (keys up to " +
                             std::to_string(kMaxMetadataKey) + " characters, values up to " +
                             std::to_string(kMaxMetadataValue) + ")";
  if (!metadata->is_object() || metadata->size() > kMaxMetadataPairs) {
    return InvalidField("metadata", limits);
  }
  for (auto it = metadata->begin(); it != metadata->end(); ++it) {
    if (it.key().size() > kMaxMetadataKey || !it->is_string() ||
        it->get_ref<const std::string&>().size() > kMaxMetadataValue) {
      return InvalidField("metadata", limits);
    }
  }
  (*echo)["metadata"] = json::parse(metadata->dump());
  return std::nullopt;
}

std::optional<ApiError> ReadSampling(const ojson& body, worker::GenerationOptions* options,
                                     json* echo) {
  for (const char* name : {"temperature", "top_p"}) {
    const ojson* v = Field(body, name);
    (*echo)[name] = nullptr;
    if (v == nullptr) continue;
    if (!v->is_number()) return InvalidField(name, std::string(name) + " must be a number");
    (name == std::string_view("temperature") ? options->sampling.temperature
                                             : options->sampling.top_p) = v->get<double>();
    (*echo)[name] = v->get<double>();
  }
  if (auto bad = CheckRequestedSampling(options->sampling)) {
    return InvalidField(std::string(bad->field), bad->status.message());
  }
  (*echo)["max_output_tokens"] = nullptr;
  if (const ojson* max = Field(body, "max_output_tokens")) {
    if (!max->is_number_integer() || max->get<int64_t>() < 1) {
      return InvalidField("max_output_tokens",
                          "max_output_tokens must be an integer of at least 1");
    }
    options->max_tokens = max->get<int64_t>();
    (*echo)["max_output_tokens"] = options->max_tokens;
  }
  return std::nullopt;
}

}  // namespace

ApiError StoredResponseNotFound(const std::string& id, const ResponseStore& store,
                                const std::string& param) {
  ApiError e = InvalidField(
      param, (param.empty() ? std::string() : param + " ") + "'" + id +
                 "' names no stored response of this API key: it was never stored (store: "
                 "false), was deleted, or was dropped (the server keeps at most " +
                 std::to_string(store.limits().max_responses) + " responses for " +
                 std::to_string(store.limits().lifetime.count()) + " s)");
  e.status = 404;
  e.code = param.empty() ? "not_found" : "previous_response_not_found";
  return e;
}

std::variant<ParsedResponsesRequest, ApiError> ParseResponsesRequest(
    const ojson& body, const std::string& default_model, ResponseStore& store,
    const std::string& tenant) {
  if (auto e = RefuseUnknownResponsesFields(body)) return *e;
  if (auto e = CheckDefaultOnlyFields(body)) return *e;
  ParsedResponsesRequest out;
  json& echo = out.context.echo;
  out.request.job.model = default_model;
  if (const ojson* model = Field(body, "model")) {
    if (!model->is_string())
      return InvalidField("model", "model must be a string naming a served model");
    out.request.job.model = model->get<std::string>();
  }
  if (auto e = ReadBool(body, "stream", &out.request.stream)) return *e;
  if (auto e = ReadBool(body, "store", &out.context.store)) return *e;
  echo["store"] = out.context.store;
  std::string instructions, user, previous;
  if (auto e = ReadString(body, "instructions", &instructions)) return *e;
  if (auto e = ReadString(body, "user", &user)) return *e;
  if (auto e = ReadString(body, "previous_response_id", &previous)) return *e;
  echo["instructions"] = Field(body, "instructions") ? json(instructions) : json(nullptr);
  if (Field(body, "user") != nullptr) echo["user"] = user;
  echo["previous_response_id"] = previous.empty() ? json(nullptr) : json(previous);
  echo["truncation"] = "disabled";
  if (auto e = ReadMetadata(body, &echo)) return *e;

  std::vector<worker::ChatMessage> earlier;
  if (!previous.empty()) {
    std::shared_ptr<const StoredResponse> kept = store.Get(tenant, previous);
    if (kept == nullptr) {
      ApiError e = StoredResponseNotFound(previous, store, "previous_response_id");
      e.message += "; send the whole conversation as input instead";
      return e;
    }
    earlier = kept->conversation;
  }
  if (Field(body, "input") == nullptr && previous.empty()) {
    return InvalidField("input", "input is missing: send a string or an array of input items");
  }
  MessageList list(std::move(earlier));
  if (auto e = ReadInput(body, &list)) return *e;
  out.context.conversation = list.Take();
  if (out.context.conversation.empty()) {
    return InvalidField("input", "input is empty: send at least one message");
  }

  worker::ChatPayload chat;
  if (!instructions.empty()) chat.messages.push_back({"system", instructions, "", "", ""});
  chat.messages.insert(chat.messages.end(), out.context.conversation.begin(),
                       out.context.conversation.end());
  if (auto e = ReadSampling(body, &chat.options, &echo)) return *e;
  if (auto e = ReadTextFormat(body, &chat, &echo)) return *e;
  if (auto e = ReadResponsesTools(body, &chat, &echo)) return *e;
  out.request.job.payload = std::move(chat);
  out.request.input_field = "input";
  return out;
}

}  // namespace tessera::server
