// Ollama's request bodies (/api/chat, /api/generate, /api/embed, /api/embeddings) checked
// field by field and turned into the typed jobs the OpenAI endpoints also make: what maps onto
// tessera is mapped, anything else is a 400 naming the field and why.
#include <algorithm>
#include <limits>
#include <nlohmann/json.hpp>
#include <string_view>

#include "sampling/sampling_params.h"
#include "server/json_fields.h"
#include "server/ollama_api.h"
#include "server/openai_fields.h"

namespace tessera::server {
namespace {

using ojson = nlohmann::ordered_json;

constexpr std::string_view kChatFieldList[] = {"model",        "messages",   "tools",    "format",
                                               "options",      "stream",     "think",    "logprobs",
                                               "top_logprobs", "keep_alive", "truncate", "shift"};
constexpr std::string_view kGenerateFieldList[] = {
    "model",  "prompt",   "system",   "raw",          "format",     "options",
    "stream", "think",    "logprobs", "top_logprobs", "keep_alive", "truncate",
    "shift",  "template", "suffix",   "context",      "images"};
constexpr std::string_view kEmbedFieldList[] = {"model",      "input",   "dimensions",
                                                "keep_alive", "options", "truncate"};
constexpr std::string_view kEmbeddingsFieldList[] = {"model", "prompt", "keep_alive", "options"};

}  // namespace

std::optional<ApiError> RefuseUnknownOllamaFields(const ojson& body,
                                                  std::span<const std::string_view> known,
                                                  std::string_view endpoint) {
  return RefuseUnknownFields(body, known, {}, "by tessera's " + std::string(endpoint));
}

namespace {

// Go's omitempty: "", [], {} and false are the same as absent.
bool Given(const ojson* v) {
  if (v == nullptr) return false;
  if (v->is_string()) return !v->get_ref<const std::string&>().empty();
  if (v->is_array() || v->is_object()) return !v->empty();
  if (v->is_boolean()) return v->get<bool>();
  return true;
}

std::optional<ApiError> ReadModelName(const ojson& body, const std::string& default_model,
                                      const ModelKindLookup& kind_of, std::string* out) {
  const ojson* v = Field(body, "model");
  if (v == nullptr) {
    *out = default_model;
    return std::nullopt;
  }
  if (!v->is_string()) return InvalidField("model", "model must be a string naming a served model");
  *out = OllamaServedName(v->get<std::string>(), kind_of);
  return std::nullopt;
}

// keep_alive: a duration ("5m", "-1") or seconds; tessera keeps every served model loaded
// (unless --max-loaded-models evicts it), so it is checked and not otherwise used.
std::optional<ApiError> CheckKeepAlive(const ojson& body) {
  const ojson* v = Field(body, "keep_alive");
  if (v == nullptr || v->is_string() || v->is_number()) return std::nullopt;
  return InvalidField("keep_alive", "keep_alive must be a duration string or a number of seconds");
}

// The fields tessera has no counterpart for, refused when given.
std::optional<ApiError> RefuseUnsupported(const ojson& body) {
  if (Given(Field(body, "truncate"))) {
    return InvalidField("truncate",
                        "truncate: true is not supported: a prompt longer than the context is "
                        "refused, never cut; send a shorter history or truncate: false");
  }
  if (Given(Field(body, "shift"))) {
    return InvalidField("shift",
                        "shift: true is not supported: generation stops at the end of the "
                        "context; remove it");
  }
  for (const char* name : {"truncate", "shift"}) {
    if (const ojson* v = Field(body, name); v != nullptr && !v->is_boolean()) {
      return InvalidField(name, std::string(name) + " must be true or false");
    }
  }
  return CheckKeepAlive(body);
}

// think: true / false is the chat template's thinking switch (enable_thinking); the levels
// some models take ("high", "medium", "low") have no counterpart in the families tessera runs.
std::optional<ApiError> ReadThink(const ojson& body, bool templated, worker::ChatPayload* chat) {
  const ojson* v = Field(body, "think");
  if (v == nullptr) return std::nullopt;
  if (!v->is_boolean()) {
    return InvalidField("think",
                        "think must be true or false: thinking levels (\"high\", ...) "
                        "are not supported by the models tessera runs");
  }
  if (!templated) {
    return InvalidField("think",
                        "think needs the chat template: it cannot apply with raw: true "
                        "or on a completion model; remove it");
  }
  chat->enable_thinking = v->get<bool>();
  return std::nullopt;
}

std::optional<ApiError> ReadLogprobs(const ojson& body, worker::GenerationOptions* out) {
  if (auto e = ReadBool(body, "logprobs", &out->logprobs)) return e;
  const ojson* top = Field(body, "top_logprobs");
  if (top == nullptr) return std::nullopt;
  if (!top->is_number_integer() || top->get<int64_t>() < 0 ||
      top->get<int64_t>() > kMaxTopLogprobs) {
    return InvalidField("top_logprobs", "top_logprobs must be an integer from 0 to 20");
  }
  if (!out->logprobs && top->get<int64_t>() > 0)
    return InvalidField("top_logprobs", "top_logprobs needs logprobs: true");
  out->top_logprobs = static_cast<int32_t>(top->get<int64_t>());
  return std::nullopt;
}

// format: "json" (any JSON object) or a JSON schema, through OpenAI's response_format reader
// (the same constrained decoding); its errors are renamed to `format`.
std::optional<ApiError> ReadFormat(const ojson& body, bool chat, worker::ResponseFormat* out) {
  const ojson* f = Field(body, "format");
  if (f == nullptr || (f->is_string() && f->get_ref<const std::string&>().empty())) {
    return std::nullopt;
  }
  ojson response_format;
  if (f->is_string() && *f == "json") {
    response_format = {{"type", "json_object"}};
  } else if (f->is_object()) {
    response_format = {{"type", "json_schema"},
                       {"json_schema", {{"name", "format"}, {"schema", *f}}}};
  } else {
    return InvalidField("format", "format must be \"json\" or a JSON schema object");
  }
  if (auto e = ReadResponseFormat(ojson{{"response_format", response_format}}, chat, out)) {
    e->param = "format";
    return e;
  }
  return std::nullopt;
}

// One option's value into the sampling parameters; *known is false when `key` is not a
// sampling option (nothing is read then).
std::optional<ApiError> ReadSamplingOption(const std::string& key, const ojson& v,
                                           SamplingParams* p, bool* known) {
  *known = true;
  const std::string param = "options." + key;
  std::optional<double>* real = key == "temperature"         ? &p->temperature
                                : key == "top_p"             ? &p->top_p
                                : key == "min_p"             ? &p->min_p
                                : key == "repeat_penalty"    ? &p->repetition_penalty
                                : key == "presence_penalty"  ? &p->presence_penalty
                                : key == "frequency_penalty" ? &p->frequency_penalty
                                                             : nullptr;
  if (real != nullptr) {
    if (!v.is_number()) return InvalidField(param, param + " must be a number");
    *real = v.get<double>();
    return std::nullopt;
  }
  std::optional<int64_t>* integer = key == "top_k" ? &p->top_k : key == "seed" ? &p->seed : nullptr;
  if (integer != nullptr) {
    if (!v.is_number_integer() ||
        (v.is_number_unsigned() &&
         v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))) {
      return InvalidField(param, param + " must be an integer");
    }
    *integer = v.get<int64_t>();
    return std::nullopt;
  }
  *known = false;
  return std::nullopt;
}

// Why an Ollama option tessera does not take is refused.
std::string WhyNot(const std::string& key) {
  if (key == "num_ctx") {
    return "the context is set when the server starts (tessera serve --context N)";
  }
  if (key == "num_thread" || key == "num_gpu" || key == "main_gpu" || key == "num_batch" ||
      key == "use_mmap" || key == "use_mlock" || key == "low_vram" || key == "numa" ||
      key == "vocab_only" || key == "logits_all" || key == "embedding_only") {
    return "how models run is set when the server starts (tessera serve --help)";
  }
  return "tessera's sampler has no such setting";
}

}  // namespace

std::string OllamaServedName(const std::string& name, const ModelKindLookup& kind_of) {
  constexpr std::string_view kLatest = ":latest";
  if (kind_of(name) || !std::string_view(name).ends_with(kLatest)) return name;
  std::string bare = name.substr(0, name.size() - kLatest.size());
  return kind_of(bare) ? bare : name;
}

std::optional<ApiError> ReadOllamaOptions(const ojson& body, worker::GenerationOptions* out) {
  const ojson* options = Field(body, "options");
  if (options == nullptr) return std::nullopt;
  if (!options->is_object()) return InvalidField("options", "options must be an object");
  SamplingParams& p = out->sampling;
  for (auto it = options->begin(); it != options->end(); ++it) {
    const std::string& key = it.key();
    const std::string param = "options." + key;
    const ojson& v = *it;
    if (v.is_null()) continue;
    bool known = false;
    if (auto e = ReadSamplingOption(key, v, &p, &known)) return e;
    if (known) continue;
    if (key == "num_predict") {
      // -1: no limit; -2: until the context is full, which is where tessera stops anyway.
      if (!v.is_number_integer() || v.get<int64_t>() < -2 || v.get<int64_t>() == 0) {
        return InvalidField(param, param +
                                       " must be a positive integer, or -1 (no limit) or -2 "
                                       "(until the context is full)");
      }
      out->max_tokens = v.get<int64_t>() < 0 ? -1 : v.get<int64_t>();
    } else if (key == "stop") {
      std::vector<std::string> stops;
      if (v.is_string()) {
        stops.push_back(v.get<std::string>());
      } else if (v.is_array() && v.size() <= kMaxStopStrings) {
        for (const ojson& s : v) {
          if (!s.is_string()) return InvalidField(param, param + " must be a list of strings");
          stops.push_back(s.get<std::string>());
        }
      } else {
        return InvalidField(param, param + " must be a list of at most " +
                                       std::to_string(kMaxStopStrings) + " strings");
      }
      for (const std::string& s : stops) {
        if (s.size() > kMaxStopStringBytes) {
          return InvalidField(param, "each stop string must be at most " +
                                         std::to_string(kMaxStopStringBytes) + " bytes");
        }
      }
      out->stop = std::move(stops);
    } else {
      return InvalidField(param, param + " is not supported: " + WhyNot(key) + "; remove it");
    }
  }
  if (auto bad = CheckRequestedSampling(p)) {
    const std::string field(bad->field);
    const std::string name = field == "repetition_penalty" ? "repeat_penalty" : field;
    return InvalidField("options." + name, bad->status.message());
  }
  return std::nullopt;
}

namespace {

// An assistant's tool_calls in Ollama's shape ([{id?, function: {index?, name, arguments:
// {...}}}]) as the OpenAI-shaped array the chat template renders (arguments stay objects).
std::optional<ApiError> ReadToolCalls(const ojson& calls, const std::string& where,
                                      worker::ChatMessage* out) {
  const std::string param = where + ".tool_calls";
  if (out->role != "assistant")
    return InvalidField(param, "only assistant messages carry tool_calls");
  if (!calls.is_array()) return InvalidField(param, param + " must be an array");
  ojson openai = ojson::array();
  for (size_t i = 0; i < calls.size(); ++i) {
    const ojson& c = calls[i];
    const std::string at = param + "[" + std::to_string(i) + "]";
    const ojson* fn = c.is_object() ? Field(c, "function") : nullptr;
    const ojson* name = fn != nullptr && fn->is_object() ? Field(*fn, "name") : nullptr;
    const ojson* args = fn != nullptr && fn->is_object() ? Field(*fn, "arguments") : nullptr;
    if (name == nullptr || !name->is_string() || (args != nullptr && !args->is_object())) {
      return InvalidField(at, at + " must be {function: {name, arguments: {...}}}");
    }
    std::string id = "call_" + std::to_string(i);
    if (const ojson* given = Field(c, "id")) {
      if (!given->is_string()) return InvalidField(at + ".id", at + ".id must be a string");
      id = given->get<std::string>();
    }
    openai.push_back(
        {{"id", id},
         {"type", "function"},
         {"function", {{"name", *name}, {"arguments", args ? *args : ojson::object()}}}});
  }
  out->tool_calls = openai.dump();
  return std::nullopt;
}

std::optional<ApiError> ReadMessage(const ojson& m, size_t index, worker::ChatMessage* out) {
  const std::string where = "messages[" + std::to_string(index) + "]";
  if (!m.is_object()) return InvalidField(where, where + " must be an object");
  if (auto e = RefuseUnknownFields(
          m, {"role", "content", "tool_calls", "tool_name", "tool_call_id", "images", "thinking"},
          where, "in a message")) {
    return e;
  }
  const ojson* role = Field(m, "role");
  std::string r = role != nullptr && role->is_string() ? role->get<std::string>() : "";
  std::transform(r.begin(), r.end(), r.begin(), [](unsigned char c) { return std::tolower(c); });
  if (r != "system" && r != "user" && r != "assistant" && r != "tool") {
    return InvalidField(where + ".role", where + ".role must be system, user, assistant or tool");
  }
  out->role = r;
  if (Given(Field(m, "images"))) {
    return InvalidField(where + ".images",
                        "images are not supported: tessera serves text models; remove them");
  }
  if (Given(Field(m, "thinking"))) {
    return InvalidField(where + ".thinking",
                        "thinking is not supported: tessera's server has no thinking switch; "
                        "remove it");
  }
  if (const ojson* content = Field(m, "content")) {
    if (!content->is_string())
      return InvalidField(where + ".content", where + ".content must be a string");
    out->content = content->get<std::string>();
  }
  if (const ojson* calls = Field(m, "tool_calls")) {
    if (auto e = ReadToolCalls(*calls, where, out)) return e;
  }
  for (auto [key, target] :
       {std::pair{"tool_name", &out->name}, std::pair{"tool_call_id", &out->tool_call_id}}) {
    if (const ojson* v = Field(m, key)) {
      if (!v->is_string())
        return InvalidField(where + "." + key, where + "." + key + " must be a string");
      *target = v->get<std::string>();
    }
  }
  return std::nullopt;
}

// What /api/chat and /api/generate share: stream, options, logprobs, and the refusals.
std::optional<ApiError> ReadCommon(const ojson& body, bool chat, GenerationRequest* request,
                                   worker::GenerationOptions* options) {
  if (auto e = RefuseUnsupported(body)) return e;
  request->stream = true;  // Ollama streams unless told not to
  if (auto e = ReadBool(body, "stream", &request->stream)) return e;
  if (auto e = ReadOllamaOptions(body, options)) return e;
  if (auto e = ReadLogprobs(body, options)) return e;
  return ReadFormat(body, chat, &options->response_format);
}

}  // namespace

std::variant<ParsedGeneration, ApiError> ParseOllamaChat(const ojson& body,
                                                         const GenerationDefaults& defaults,
                                                         const ModelKindLookup& kind_of) {
  if (auto e = RefuseUnknownOllamaFields(body, kChatFieldList, "/api/chat")) return *e;
  ParsedGeneration p;
  if (auto e = ReadModelName(body, defaults.chat_model, kind_of, &p.request.job.model)) return *e;
  const ojson* messages = Field(body, "messages");
  if (auto e = CheckMessageList(messages)) return *e;
  worker::ChatPayload chat;
  for (size_t i = 0; i < messages->size(); ++i) {
    worker::ChatMessage msg;
    if (auto e = ReadMessage((*messages)[i], i, &msg)) return *e;
    chat.messages.push_back(std::move(msg));
  }
  if (auto e = ReadCommon(body, /*chat=*/true, &p.request, &chat.options)) return *e;
  if (auto e = ReadThink(body, /*templated=*/true, &chat)) return *e;
  if (auto e =
          ReadTools(ojson{{"tools", body.contains("tools") ? body["tools"] : ojson()}}, &chat)) {
    if (e->param == "response_format") {
      return InvalidField("format", "format with tools is not supported; use one of them");
    }
    return *e;
  }
  p.request.job.payload = std::move(chat);
  p.wire = MakeOllamaWire(/*chat=*/true);
  return p;
}

std::variant<ParsedGeneration, ApiError> ParseOllamaGenerate(const ojson& body,
                                                             const GenerationDefaults& defaults,
                                                             const ModelKindLookup& kind_of) {
  if (auto e = RefuseUnknownOllamaFields(body, kGenerateFieldList, "/api/generate")) return *e;
  // Ollama's fields with no counterpart here, refused when given.
  static constexpr std::pair<const char*, const char*> kRefused[] = {
      {"template",
       "template is not supported: tessera renders the model's own chat template (or none with "
       "raw: true); remove it"},
      {"suffix", "suffix (fill-in-the-middle) is not supported; remove it"},
      {"context",
       "context is not supported: tessera returns no context ids; send the conversation to "
       "/api/chat instead"},
      {"images", "images are not supported: tessera serves text models"}};
  for (const auto& [field, why] : kRefused) {
    if (Given(Field(body, field))) return InvalidField(field, why);
  }
  ParsedGeneration p;
  if (auto e = ReadModelName(body, defaults.completion_model, kind_of, &p.request.job.model)) {
    return *e;
  }
  const ojson* prompt = Field(body, "prompt");
  if (prompt == nullptr || !prompt->is_string()) {
    return InvalidField("prompt",
                        "prompt must be a string (tessera keeps served models loaded: there is "
                        "no load-only request)");
  }
  bool raw = false;
  if (auto e = ReadBool(body, "raw", &raw)) return *e;
  std::string system;
  if (auto e = ReadString(body, "system", &system)) return *e;
  // A model without a chat template continues the prompt as Ollama's "{{ .Prompt }}" would.
  const bool templated = !raw && kind_of(p.request.job.model) != ModelKind::kCompletion;
  if (!templated && !system.empty()) {
    return InvalidField("system", raw ? "system needs the chat template, which raw: true skips; "
                                        "put it in the prompt"
                                      : "system needs a chat template, which '" +
                                            p.request.job.model +
                                            "' has not; put it in the prompt");
  }
  worker::GenerationOptions* options = nullptr;
  if (templated) {
    worker::ChatPayload& chat = p.request.job.payload.emplace<worker::ChatPayload>();
    auto add = [&chat](std::string role, std::string content) {
      worker::ChatMessage m;
      m.role = std::move(role);
      m.content = std::move(content);
      chat.messages.push_back(std::move(m));
    };
    if (!system.empty()) add("system", system);
    add("user", prompt->get<std::string>());
    options = &chat.options;
  } else {
    worker::CompletionPayload& completion =
        p.request.job.payload.emplace<worker::CompletionPayload>();
    completion.prompt = prompt->get<std::string>();
    options = &completion.options;
  }
  if (auto e = ReadCommon(body, templated, &p.request, options)) return *e;
  p.request.input_field = "prompt";  // a chat's messages, when templated
  if (auto e = ReadThink(body, templated, std::get_if<worker::ChatPayload>(&p.request.job.payload)))
    return *e;
  p.wire = MakeOllamaWire(/*chat=*/false);
  return p;
}

std::variant<TaskRequest, ApiError> ParseOllamaEmbed(const ojson& body, bool legacy,
                                                     const ModelKindLookup& kind_of) {
  if (auto e =
          RefuseUnknownOllamaFields(body,
                                    legacy ? std::span<const std::string_view>(kEmbeddingsFieldList)
                                           : std::span<const std::string_view>(kEmbedFieldList),
                                    legacy ? "/api/embeddings" : "/api/embed")) {
    return *e;
  }
  if (auto e = CheckKeepAlive(body)) return *e;
  if (const ojson* options = Field(body, "options")) {
    if (!options->is_object()) return InvalidField("options", "options must be an object");
    for (auto it = options->begin(); it != options->end(); ++it) {
      if (it->is_null()) continue;
      return InvalidField("options." + it.key(),
                          "options." + it.key() + " has no effect on embeddings; remove it");
    }
  }
  if (const ojson* t = Field(body, "truncate")) {
    if (!t->is_boolean()) return InvalidField("truncate", "truncate must be true or false");
    if (t->get<bool>()) {
      return InvalidField("truncate", "truncate: true is not supported: an input longer than " +
                                          std::to_string(kMaxEmbeddingTokens) +
                                          " tokens is refused, never cut; send truncate: false");
    }
  }
  // The OpenAI embeddings body this is: its parser checks the input and dimensions.
  ojson openai = ojson::object();
  if (const ojson* model = Field(body, "model")) {
    openai["model"] =
        model->is_string() ? ojson(OllamaServedName(model->get<std::string>(), kind_of)) : *model;
  }
  const char* input_name = legacy ? "prompt" : "input";
  const ojson* input = Field(body, input_name);
  const bool strings =
      input != nullptr &&
      (input->is_string() ||
       (input->is_array() &&
        std::all_of(input->begin(), input->end(), [](const ojson& s) { return s.is_string(); })));
  if (!strings) {
    return InvalidField(input_name, legacy ? "prompt must be a string"
                                           : "input must be a string or a list of strings");
  }
  openai["input"] = *input;
  if (const ojson* dims = Field(body, "dimensions")) openai["dimensions"] = *dims;
  auto parsed = ParseTaskRequest(TaskEndpoint::kEmbeddings, openai);
  if (auto* e = std::get_if<ApiError>(&parsed); e != nullptr && legacy && e->param == "input") {
    e->param = "prompt";
  }
  if (auto* request = std::get_if<TaskRequest>(&parsed)) request->input_field = input_name;
  return parsed;
}

}  // namespace tessera::server
