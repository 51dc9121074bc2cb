#include "server/openai_api.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "sampling/sampling_params.h"
#include "server/guards.h"
#include "server/json_fields.h"
#include "server/openai_fields.h"

namespace tessera::server {

using nlohmann::json;
using ojson = nlohmann::ordered_json;  // request bodies keep their member order (schemas)

ApiError InvalidField(const std::string& param, const std::string& message) {
  ApiError e;
  e.message = message;
  e.param = param;
  return e;
}

json ErrorBody(const ApiError& error) {
  json inner = {{"message", error.message}, {"type", error.type}};
  inner["param"] = error.param.empty() ? json(nullptr) : json(error.param);
  inner["code"] = error.code.empty() ? json(nullptr) : json(error.code);
  return {{"error", inner}};
}

std::variant<ojson, ApiError> ParseJsonBody(const std::string& body) {
  auto parsed = ParseOrderedJson(body, kRequestJsonLimits, "the body");
  if (!parsed) return InvalidField("", parsed.status().message());
  if (!parsed->is_object()) return InvalidField("", "the body must be a JSON object");
  return std::move(*parsed);
}

namespace {

std::optional<ApiError> ReadModel(const ojson& body, const std::string& default_model,
                                  std::string* model) {
  const ojson* v = Field(body, "model");
  if (v == nullptr) {
    *model = default_model;
    return std::nullopt;
  }
  if (!v->is_string()) return InvalidField("model", "model must be a string naming a served model");
  *model = v->get<std::string>();
  return std::nullopt;
}

std::optional<ApiError> ReadDouble(const ojson& body, const char* name,
                                   std::optional<double>* out) {
  const ojson* v = Field(body, name);
  if (v == nullptr) return std::nullopt;
  if (!v->is_number()) return InvalidField(name, std::string(name) + " must be a number");
  *out = v->get<double>();
  return std::nullopt;
}

std::optional<ApiError> ReadInt(const ojson& body, const char* name, std::optional<int64_t>* out) {
  const ojson* v = Field(body, name);
  if (v == nullptr) return std::nullopt;
  if (!v->is_number_integer()) return InvalidField(name, std::string(name) + " must be an integer");
  if (v->is_number_unsigned() &&
      v->get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return InvalidField(name, std::string(name) + " is too large");
  }
  *out = v->get<int64_t>();
  return std::nullopt;
}

// Fields shared by chat and text completions.
std::optional<ApiError> ReadGenerationFields(const ojson& body, bool chat, GenerationRequest* out,
                                             worker::GenerationOptions* options) {
  worker::GenerationOptions& job = *options;
  if (const ojson* n = Field(body, "n")) {
    if (!n->is_number_integer() || n->get<int64_t>() < 1 ||
        n->get<int64_t>() > worker::kMaxChoices) {
      return InvalidField("n",
                          "n must be an integer from 1 to " + std::to_string(worker::kMaxChoices));
    }
    job.n = static_cast<int32_t>(n->get<int64_t>());
  }
  if (auto e = ReadResponseFormat(body, chat, &job.response_format)) return e;
  if (const ojson* bias = Field(body, "logit_bias")) {
    // {"token id": bias}: ids as decimal strings (checked against the vocabulary by the
    // worker), biases from -100 to 100.
    if (!bias->is_object() || bias->size() > worker::kMaxLogitBias) {
      return InvalidField("logit_bias", "logit_bias must be an object of at most " +
                                            std::to_string(worker::kMaxLogitBias) +
                                            " {\"token id\": bias} entries");
    }
    for (auto it = bias->begin(); it != bias->end(); ++it) {
      const std::string& key = it.key();
      int64_t id = -1;
      const auto [end, ec] = std::from_chars(key.data(), key.data() + key.size(), id);
      if (ec != std::errc() || end != key.data() + key.size() || id < 0 || id > INT32_MAX) {
        return InvalidField("logit_bias",
                            "logit_bias keys must be token ids, got '" + key.substr(0, 32) + "'");
      }
      if (!it->is_number() || !(it->get<double>() >= -100.0 && it->get<double>() <= 100.0)) {
        return InvalidField("logit_bias", "logit_bias values must be numbers from -100 to 100");
      }
      job.logit_bias.emplace_back(static_cast<int32_t>(id), it->get<double>());
    }
  }
  if (Field(body, "max_tokens") != nullptr && Field(body, "max_completion_tokens") != nullptr) {
    return InvalidField("max_tokens",
                        "send max_completion_tokens or max_tokens (its older name), not both");
  }
  for (const char* name : {"max_tokens", "max_completion_tokens"}) {
    std::optional<int64_t> v;
    if (auto e = ReadInt(body, name, &v)) return e;
    if (v) {
      if (*v < 1)
        return InvalidField(name,
                            std::string(name) + " must be at least 1, got " + std::to_string(*v));
      job.max_tokens = *v;
    }
  }
  if (const ojson* stop = Field(body, "stop")) {
    std::vector<std::string> stops;
    if (stop->is_string()) {
      stops.push_back(stop->get<std::string>());
    } else if (stop->is_array()) {
      if (stop->size() > kMaxStopStrings) {
        return InvalidField("stop",
                            "stop takes at most " + std::to_string(kMaxStopStrings) + " strings");
      }
      for (const ojson& s : *stop) {
        if (!s.is_string())
          return InvalidField("stop", "stop must be a string or an array of strings");
        stops.push_back(s.get<std::string>());
      }
    } else {
      return InvalidField("stop", "stop must be a string or an array of strings");
    }
    for (const std::string& s : stops) {
      if (s.size() > kMaxStopStringBytes) {
        return InvalidField("stop", "each stop string must be at most " +
                                        std::to_string(kMaxStopStringBytes) + " bytes");
      }
    }
    job.stop = std::move(stops);
  }
  SamplingParams& p = job.sampling;
  if (auto e = ReadDouble(body, "temperature", &p.temperature)) return e;
  if (auto e = ReadInt(body, "top_k", &p.top_k)) return e;
  if (auto e = ReadDouble(body, "top_p", &p.top_p)) return e;
  if (auto e = ReadDouble(body, "min_p", &p.min_p)) return e;
  if (auto e = ReadDouble(body, "repetition_penalty", &p.repetition_penalty)) return e;
  if (auto e = ReadDouble(body, "presence_penalty", &p.presence_penalty)) return e;
  if (auto e = ReadDouble(body, "frequency_penalty", &p.frequency_penalty)) return e;
  if (auto e = ReadInt(body, "seed", &p.seed)) return e;
  // Every value the request gave is checked exactly as the worker will check it, so a bad
  // one is refused here with the field's name.
  if (auto bad = CheckRequestedSampling(p)) {
    return InvalidField(std::string(bad->field), bad->status.message());
  }
  if (auto e = ReadBool(body, "stream", &out->stream)) return e;
  if (const ojson* opts = Field(body, "stream_options")) {
    if (!opts->is_object())
      return InvalidField("stream_options", "stream_options must be an object");
    if (auto e = ReadBool(*opts, "include_usage", &out->include_usage)) {
      e->param = "stream_options.include_usage";
      return e;
    }
  }
  return std::nullopt;
}

std::optional<ApiError> ReadContent(const ojson& content, size_t index, std::string* out) {
  const std::string param = "messages[" + std::to_string(index) + "].content";
  if (content.is_string()) {
    *out = content.get<std::string>();
    return std::nullopt;
  }
  if (content.is_array()) {
    for (const ojson& part : content) {
      if (!part.is_object() || !part.contains("type") || part["type"] != "text" ||
          !part.contains("text") || !part["text"].is_string()) {
        return InvalidField(
            param,
            param +
                " parts must be {\"type\": \"text\", \"text\": \"...\"}; only text is supported");
      }
      out->append(part["text"].get<std::string>());
    }
    return std::nullopt;
  }
  return InvalidField(param, param + " must be a string or an array of text parts");
}

}  // namespace

const worker::GenerationOptions& GenerationRequest::options() const {
  if (const auto* chat = std::get_if<worker::ChatPayload>(&job.payload)) return chat->options;
  return std::get<worker::CompletionPayload>(job.payload).options;
}

std::variant<GenerationRequest, ApiError> ParseChatRequest(const ojson& body,
                                                           const std::string& default_model) {
  GenerationRequest out;
  worker::ChatPayload chat;
  if (auto e = RefuseUnknownFields(body, kChatFields)) return *e;
  if (auto e = ReadModel(body, default_model, &out.job.model)) return *e;
  if (auto e = ReadCacheSalt(body, &out.job.cache_scope.salt)) return *e;
  const ojson* messages = Field(body, "messages");
  if (auto e = CheckMessageList(messages)) return *e;
  for (size_t i = 0; i < messages->size(); ++i) {
    const ojson& m = (*messages)[i];
    const std::string where = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) return InvalidField(where, where + " must be an object");
    const ojson* role = Field(m, "role");
    static const char* kRoles[] = {"system", "developer", "user", "assistant", "tool"};
    bool known = false;
    if (role != nullptr && role->is_string()) {
      for (const char* r : kRoles) known = known || *role == r;
    }
    if (!known)
      return InvalidField(where + ".role",
                          where + ".role must be system, developer, user, assistant or tool");
    worker::ChatMessage msg;
    msg.role = role->get<std::string>();
    if (msg.role == "developer") msg.role = "system";  // chat templates know system
    if (auto e = ReadMessageToolFields(m, where, &msg)) return *e;
    const ojson* content = Field(m, "content");
    if (content == nullptr && msg.tool_calls.empty()) {
      return InvalidField(where + ".content", where + ".content is missing");
    }
    if (content != nullptr) {
      if (auto e = ReadContent(*content, i, &msg.content)) return *e;
    }
    chat.messages.push_back(std::move(msg));
  }
  if (auto e = ReadGenerationFields(body, /*chat=*/true, &out, &chat.options)) return *e;
  if (auto e = ReadTools(body, &chat)) return *e;
  if (auto e = ReadBool(body, "logprobs", &chat.options.logprobs)) return *e;
  std::optional<int64_t> top;
  if (auto e = ReadInt(body, "top_logprobs", &top)) return *e;
  if (top) {
    if (*top < 0 || *top > kMaxTopLogprobs) {
      return InvalidField("top_logprobs",
                          "top_logprobs must be between 0 and 20, got " + std::to_string(*top));
    }
    if (!chat.options.logprobs && *top > 0)
      return InvalidField("top_logprobs", "top_logprobs needs logprobs: true");
    chat.options.top_logprobs = static_cast<int32_t>(*top);
  }
  out.job.payload = std::move(chat);
  return out;
}

std::variant<GenerationRequest, ApiError> ParseCompletionRequest(const ojson& body,
                                                                 const std::string& default_model) {
  GenerationRequest out;
  worker::CompletionPayload completion;
  if (auto e = RefuseUnknownFields(body, kCompletionFields)) return *e;
  if (auto e = ReadModel(body, default_model, &out.job.model)) return *e;
  if (auto e = ReadCacheSalt(body, &out.job.cache_scope.salt)) return *e;
  const ojson* prompt = Field(body, "prompt");
  if (prompt != nullptr && prompt->is_array() && prompt->size() == 1 && (*prompt)[0].is_string()) {
    prompt = &(*prompt)[0];
  }
  if (prompt == nullptr || !prompt->is_string())
    return InvalidField("prompt", "prompt must be a string");
  completion.prompt = prompt->get<std::string>();
  if (auto e = ReadGenerationFields(body, /*chat=*/false, &out, &completion.options)) return *e;
  if (const ojson* echo = Field(body, "echo"); echo != nullptr && *echo != false) {
    return InvalidField("echo", "echo is not supported");
  }
  std::optional<int64_t> logprobs;
  if (auto e = ReadInt(body, "logprobs", &logprobs)) return *e;
  if (logprobs) {
    if (*logprobs < 0 || *logprobs > kMaxTopLogprobs) {
      return InvalidField("logprobs",
                          "logprobs must be between 0 and 20, got " + std::to_string(*logprobs));
    }
    completion.options.logprobs = true;
    completion.options.top_logprobs = static_cast<int32_t>(*logprobs);
  }
  out.job.payload = std::move(completion);
  return out;
}

std::variant<worker::JobRequest, ApiError> ParseTokenizeRequest(const ojson& body,
                                                                const std::string& default_model) {
  worker::JobRequest job;
  worker::TokenizePayload tokenize;
  if (auto e = ReadModel(body, default_model, &job.model)) return *e;
  const ojson* text = Field(body, "prompt");
  if (text == nullptr) text = Field(body, "text");
  if (text == nullptr || !text->is_string())
    return InvalidField("prompt", "prompt must be a string");
  tokenize.text = text->get<std::string>();
  if (auto e = ReadBool(body, "add_special_tokens", &tokenize.add_special_tokens)) return *e;
  job.payload = std::move(tokenize);
  return job;
}

std::variant<worker::JobRequest, ApiError> ParseDetokenizeRequest(
    const ojson& body, const std::string& default_model) {
  worker::JobRequest job;
  worker::DetokenizePayload detokenize;
  if (auto e = ReadModel(body, default_model, &job.model)) return *e;
  const ojson* tokens = Field(body, "tokens");
  if (tokens == nullptr || !tokens->is_array())
    return InvalidField("tokens", "tokens must be an array of token ids");
  for (const ojson& t : *tokens) {
    if (!t.is_number_integer() || t.get<int64_t>() < 0 ||
        t.get<int64_t>() > std::numeric_limits<int32_t>::max()) {
      return InvalidField("tokens", "tokens must hold non-negative integer ids");
    }
    detokenize.ids.push_back(static_cast<int32_t>(t.get<int64_t>()));
  }
  job.payload = std::move(detokenize);
  return job;
}

UsageCounts CountUsage(const JobOutcome& outcome) {
  UsageCounts u;
  u.prompt_tokens = outcome.done      ? outcome.done->prompt_tokens
                    : outcome.started ? outcome.started->prompt_tokens
                                      : outcome.refused_prompt_tokens;
  u.completion_tokens =
      outcome.done ? outcome.done->completion_tokens : outcome.completion_tokens_so_far;
  return u;
}

json UsageJson(const JobOutcome& outcome) {
  const UsageCounts u = CountUsage(outcome);
  json usage = {{"prompt_tokens", u.prompt_tokens},
                {"completion_tokens", u.completion_tokens},
                {"total_tokens", u.prompt_tokens + u.completion_tokens}};
  // Prompt tokens whose cache was reused rather than computed (the prefix cache).
  usage["prompt_tokens_details"] = {
      {"cached_tokens", outcome.done ? outcome.done->cached_tokens : 0}};
  return usage;
}

json StatsJson(const JobOutcome& outcome, double queue_ms) {
  json stats = {{"queue_wait_ms", queue_ms}};
  if (outcome.done) {
    const worker::DoneMessage& d = *outcome.done;
    stats["ttft_ms"] = d.ttft_ms;
    stats["prefill_ms"] = d.prefill_ms;
    stats["decode_ms"] = d.decode_ms;
    stats["prefill_tok_s"] = d.prefill_tok_s;
    stats["decode_tok_s"] = d.decode_tok_s;
    // Only for the request that waited for its model to load (and warm).
    if (d.load_ms > 0) stats["model_load_ms"] = d.load_ms;
    stats["cached_tokens"] = d.cached_tokens;
    stats["worker_queue_ms"] = d.queue_ms;
    stats["slots"] = {{"total", d.slots},
                      {"in_use", d.slots_in_use},
                      {"waiting", d.sequences_waiting},
                      {"kv_blocks", d.kv_blocks},
                      {"kv_blocks_free", d.kv_blocks_free},
                      {"kv_blocks_cached", d.kv_blocks_cached}};
  } else {
    const bool any = outcome.ttft_ms_seen >= 0;
    const double decode_ms = any ? outcome.elapsed_ms_seen - outcome.ttft_ms_seen : 0;
    const int64_t n = outcome.completion_tokens_so_far;
    stats["partial"] = true;
    stats["ttft_ms"] = any ? json(outcome.ttft_ms_seen) : json(nullptr);
    stats["prefill_ms"] = nullptr;
    stats["decode_ms"] = any ? json(decode_ms) : json(nullptr);
    stats["prefill_tok_s"] = nullptr;
    stats["decode_tok_s"] = any && n > 1 && decode_ms > 0
                                ? json(1000.0 * static_cast<double>(n - 1) / decode_ms)
                                : json(nullptr);
  }
  if (outcome.started) {
    const ResolvedSamplingParams& s = outcome.started->sampling;
    stats["sampling"] = {{"mode", s.mode == SamplingMode::kSample ? "sample" : "greedy"},
                         {"seed", s.seed},
                         {"seed_generated", s.seed_was_generated},
                         {"temperature", s.temperature},
                         {"top_k", s.top_k},
                         {"top_p", s.top_p},
                         {"min_p", s.min_p},
                         {"repetition_penalty", s.repetition_penalty},
                         {"presence_penalty", s.presence_penalty},
                         {"frequency_penalty", s.frequency_penalty}};
  }
  return stats;
}

namespace {
json TokenBytes(const std::string& token) {
  json bytes = json::array();
  for (unsigned char c : token) bytes.push_back(static_cast<int>(c));
  return bytes;
}

// JSON numbers cannot be infinite; a token the model gives no chance gets a very low value.
double FiniteLogprob(float v) {
  return std::isfinite(v) ? static_cast<double>(v) : -9999.0;
}
}  // namespace

json LogprobsContentJson(const std::vector<worker::TokenLogprobEntry>& entries) {
  json content = json::array();
  for (const worker::TokenLogprobEntry& e : entries) {
    json top = json::array();
    for (const worker::TopLogprob& t : e.top) {
      top.push_back({{"token", t.token},
                     {"logprob", FiniteLogprob(t.logprob)},
                     {"bytes", TokenBytes(t.token)}});
    }
    content.push_back({{"token", e.token},
                       {"logprob", FiniteLogprob(e.logprob)},
                       {"bytes", TokenBytes(e.token)},
                       {"top_logprobs", top}});
  }
  return {{"content", content}};
}

namespace {
json LegacyLogprobsJson(const std::vector<worker::TokenLogprobEntry>& entries) {
  json tokens = json::array(), token_logprobs = json::array(), top = json::array(),
       offsets = json::array();
  size_t offset = 0;
  for (const worker::TokenLogprobEntry& e : entries) {
    tokens.push_back(e.token);
    token_logprobs.push_back(FiniteLogprob(e.logprob));
    json alternatives = json::object();
    for (const worker::TopLogprob& t : e.top) alternatives[t.token] = FiniteLogprob(t.logprob);
    top.push_back(alternatives);
    offsets.push_back(offset);
    offset += e.token.size();
  }
  return {{"tokens", tokens},
          {"token_logprobs", token_logprobs},
          {"top_logprobs", top},
          {"text_offset", offsets}};
}

}  // namespace

std::string ChoiceFinishReason(const JobOutcome& outcome, size_t i) {
  if (!outcome.done) return "stop";
  const auto& all = outcome.done->choice_finish_reasons;
  return std::string(
      worker::FinishReasonName(i < all.size() ? all[i] : outcome.done->finish_reason));
}

void ChoiceOutcome::Add(const worker::DeltaMessage& delta) {
  text += delta.text;
  logprobs.insert(logprobs.end(), delta.logprobs.begin(), delta.logprobs.end());
  for (const worker::ToolCallFragment& f : delta.tool_calls) {
    auto it = std::find_if(tool_calls.begin(), tool_calls.end(),
                           [&](const worker::ToolCallFragment& c) { return c.index == f.index; });
    if (it == tool_calls.end()) {
      tool_calls.push_back(f);
    } else {
      it->arguments += f.arguments;
      if (!f.id.empty()) it->id = f.id;
      if (!f.name.empty()) it->name = f.name;
    }
  }
}

json ToolCallsJson(const std::vector<worker::ToolCallFragment>& calls, bool stream) {
  json out = json::array();
  for (const worker::ToolCallFragment& c : calls) {
    json call = json::object();
    if (stream) call["index"] = c.index;
    json function = json::object();
    if (!c.id.empty() || !stream) {
      call["id"] = c.id;
      call["type"] = "function";
    }
    if (!c.name.empty() || !stream) function["name"] = c.name;
    function["arguments"] = c.arguments;
    call["function"] = function;
    out.push_back(call);
  }
  return out;
}

json ChatCompletionBody(const ResponseMeta& meta, const JobOutcome& outcome) {
  json choices = json::array();
  for (size_t i = 0; i < outcome.choices.size(); ++i) {
    const ChoiceOutcome& c = outcome.choices[i];
    json message = {{"role", "assistant"}, {"content", c.text}};
    if (!c.tool_calls.empty()) {
      if (c.text.empty()) message["content"] = nullptr;
      message["tool_calls"] = ToolCallsJson(c.tool_calls, false);
    }
    choices.push_back(
        {{"index", i},
         {"message", message},
         {"logprobs", meta.logprobs ? LogprobsContentJson(c.logprobs) : json(nullptr)},
         {"finish_reason", ChoiceFinishReason(outcome, i)}});
  }
  return {{"id", meta.id},       {"object", "chat.completion"}, {"created", meta.created},
          {"model", meta.model}, {"choices", choices},          {"usage", UsageJson(outcome)}};
}

json TextCompletionBody(const ResponseMeta& meta, const JobOutcome& outcome) {
  json choices = json::array();
  for (size_t i = 0; i < outcome.choices.size(); ++i) {
    const ChoiceOutcome& c = outcome.choices[i];
    choices.push_back({{"index", i},
                       {"text", c.text},
                       {"logprobs", meta.logprobs ? LegacyLogprobsJson(c.logprobs) : json(nullptr)},
                       {"finish_reason", ChoiceFinishReason(outcome, i)}});
  }
  return {{"id", meta.id},       {"object", "text_completion"}, {"created", meta.created},
          {"model", meta.model}, {"choices", choices},          {"usage", UsageJson(outcome)}};
}

json ChatChunk(const ResponseMeta& meta, const json& delta, const std::string& finish_reason,
               const std::vector<worker::TokenLogprobEntry>* logprobs, int index) {
  json choice = {{"index", index},
                 {"delta", delta},
                 {"logprobs", logprobs != nullptr ? LogprobsContentJson(*logprobs) : json(nullptr)},
                 {"finish_reason", finish_reason.empty() ? json(nullptr) : json(finish_reason)}};
  return {{"id", meta.id},
          {"object", "chat.completion.chunk"},
          {"created", meta.created},
          {"model", meta.model},
          {"choices", json::array({choice})}};
}

json TextChunk(const ResponseMeta& meta, const std::string& text, const std::string& finish_reason,
               const std::vector<worker::TokenLogprobEntry>* logprobs, int index) {
  json choice = {{"index", index},
                 {"text", text},
                 {"logprobs", logprobs != nullptr ? LegacyLogprobsJson(*logprobs) : json(nullptr)},
                 {"finish_reason", finish_reason.empty() ? json(nullptr) : json(finish_reason)}};
  return {{"id", meta.id},
          {"object", "text_completion"},
          {"created", meta.created},
          {"model", meta.model},
          {"choices", json::array({choice})}};
}

json ModelBody(const std::string& name, int64_t created) {
  return {{"id", name}, {"object", "model"}, {"created", created}, {"owned_by", "tessera"}};
}

json ModelsListBody(const std::vector<std::string>& names, int64_t created) {
  json data = json::array();
  for (const std::string& n : names) data.push_back(ModelBody(n, created));
  return {{"object", "list"}, {"data", data}};
}

}  // namespace tessera::server
