// OpenAI's decisions API on the System One job (decisions_api.h).
#include "server/decisions_api.h"

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "server/json_fields.h"

namespace tessera::server {

using ojson = nlohmann::ordered_json;

namespace {

constexpr std::string_view kFields[] = {"model", "input", "questions", "prompt_cache_key",
                                        "safety_identifier"};
constexpr size_t kMaxOptions = 10;  // System One scores one token per option

std::optional<ApiError> ImagesNotYet(const std::string& at) {
  return InvalidField(at, at + ": input_image is not supported yet (tessera's vision tower is "
                               "not served); send text or input_json");
}

// A content part as text: input_text / output_text as written, input_json as its JSON, a
// refusal as its text. `text_only`: the part may only be input_text (developer/system, and a
// tool output's parts besides images).
std::optional<ApiError> PartText(const ojson& part, const std::string& at, bool allow_json,
                                 std::string* out) {
  if (!part.is_object() || !part.contains("type") || !part["type"].is_string()) {
    return InvalidField(at, at + " must be a content part {type, ...}");
  }
  const std::string type = part["type"].get<std::string>();
  if (type == "input_image") return ImagesNotYet(at);
  if (type == "input_text" || type == "output_text") {
    if (auto e = RefuseUnknownFields(part, {"type", "text", "prompt_cache_breakpoint"}, at, "here"))
      return e;
    if (!part.contains("text") || !part["text"].is_string()) {
      return InvalidField(at + ".text", at + ".text must be a string");
    }
    *out = part["text"].get<std::string>();
    return std::nullopt;
  }
  if (type == "refusal") {
    if (auto e = RefuseUnknownFields(part, {"type", "refusal"}, at, "here")) return e;
    if (!part.contains("refusal") || !part["refusal"].is_string()) {
      return InvalidField(at + ".refusal", at + ".refusal must be a string");
    }
    *out = part["refusal"].get<std::string>();
    return std::nullopt;
  }
  if (type == "input_json" && allow_json) {
    if (auto e = RefuseUnknownFields(part, {"type", "data"}, at, "here")) return e;
    if (!part.contains("data") || !(part["data"].is_object() || part["data"].is_array())) {
      return InvalidField(at + ".data", at + ".data must be a JSON object or an array of them");
    }
    *out = part["data"].dump();
    return std::nullopt;
  }
  return InvalidField(at + ".type", at + ".type '" + type + "' is not a content part here");
}

// A string, or a list of parts joined by new lines.
std::optional<ApiError> ContentText(const ojson& content, const std::string& at, bool allow_json,
                                    std::string* out) {
  if (content.is_string()) {
    *out = content.get<std::string>();
    return std::nullopt;
  }
  if (!content.is_array() || content.empty()) {
    return InvalidField(at, at + " must be a string or a non-empty list of content parts");
  }
  out->clear();
  for (size_t i = 0; i < content.size(); ++i) {
    std::string text;
    if (auto e = PartText(content[i], at + "[" + std::to_string(i) + "]", allow_json, &text))
      return e;
    if (i > 0) out->push_back('\n');
    *out += text;
  }
  return std::nullopt;
}

// One input item, normalized to {role, content} or a tool call / output with text fields.
std::optional<ApiError> ReadItem(const ojson& item, const std::string& at,
                                 std::set<std::string>* call_ids, ojson* out) {
  if (!item.is_object()) return InvalidField(at, at + " must be an object");
  const std::string type =
      item.contains("type") && item["type"].is_string() ? item["type"].get<std::string>() : "";
  if (type.empty() || type == "message") {
    if (auto e = RefuseUnknownFields(item, {"type", "role", "content", "phase"}, at, "here"))
      return e;
    static const std::set<std::string> kRoles = {"user", "developer", "system", "assistant"};
    if (!item.contains("role") || !item["role"].is_string() ||
        !kRoles.contains(item["role"].get<std::string>())) {
      return InvalidField(
          at + ".role", at + ".role must be \"user\", \"developer\", \"system\" or \"assistant\"");
    }
    const std::string role = item["role"].get<std::string>();
    if (!item.contains("content"))
      return InvalidField(at + ".content", at + ".content is required");
    std::string text;
    if (auto e = ContentText(item["content"], at + ".content", role == "user", &text)) return e;
    *out = {{"role", role}, {"content", text}};
    return std::nullopt;
  }
  const bool call = type == "function_call" || type == "custom_tool_call";
  const bool output = type == "function_call_output" || type == "custom_tool_call_output";
  if (!call && !output) {
    return InvalidField(at + ".type", at + ".type '" + type +
                                          "' is not an input item; use message, function_call, "
                                          "function_call_output, custom_tool_call or "
                                          "custom_tool_call_output");
  }
  if (!item.contains("call_id") || !item["call_id"].is_string()) {
    return InvalidField(at + ".call_id", at + ".call_id must be a string");
  }
  const std::string call_id = item["call_id"].get<std::string>();
  if (call) {
    const char* body = type == "function_call" ? "arguments" : "input";
    if (auto e = RefuseUnknownFields(
            item, {"type", "call_id", "name", body, "id", "namespace", "status"}, at, "here"))
      return e;
    if (!item.contains("name") || !item["name"].is_string())
      return InvalidField(at + ".name", at + ".name must be a string");
    if (!item.contains(body) || !item[body].is_string()) {
      return InvalidField(at + "." + body, at + "." + body + " must be a string");
    }
    call_ids->insert(call_id);
    *out = {{"type", type}, {"call_id", call_id}, {"name", item["name"]}, {body, item[body]}};
    return std::nullopt;
  }
  if (auto e = RefuseUnknownFields(item, {"type", "call_id", "output", "id", "status"}, at, "here"))
    return e;
  if (!call_ids->contains(call_id)) {
    return InvalidField(at + ".call_id",
                        at + ".call_id '" + call_id + "' matches no earlier call in the input");
  }
  if (!item.contains("output")) return InvalidField(at + ".output", at + ".output is required");
  std::string text;
  if (auto e = ContentText(item["output"], at + ".output", false, &text)) return e;
  *out = {{"type", type}, {"call_id", call_id}, {"output", text}};
  return std::nullopt;
}

// The state the questions are asked about: a string as is, one user message's text as is,
// anything else as the JSON of its normalized items.
std::optional<ApiError> ReadInput(const ojson& body, std::string* state) {
  const ojson* input = Field(body, "input");
  if (input == nullptr) return InvalidField("input", "input is required (a string or items)");
  if (input->is_string()) {
    *state = input->get<std::string>();
    return std::nullopt;
  }
  if (!input->is_array() || input->empty() || input->size() > kMaxMessages) {
    return InvalidField("input", "input must be a string or a list of 1 to " +
                                     std::to_string(kMaxMessages) + " items");
  }
  ojson items = ojson::array();
  std::set<std::string> call_ids;
  for (size_t i = 0; i < input->size(); ++i) {
    ojson item;
    if (auto e = ReadItem((*input)[i], "input[" + std::to_string(i) + "]", &call_ids, &item))
      return e;
    items.push_back(std::move(item));
  }
  if (items.size() == 1 && items[0].value("role", "") == "user") {
    *state = items[0]["content"].get<std::string>();
  } else {
    *state = items.dump();
  }
  return std::nullopt;
}

std::optional<ApiError> ReadOptionList(const ojson& q, const char* key, const std::string& at,
                                       size_t* count) {
  if (!q.contains(key) || !q[key].is_array() || q[key].size() < 2 || q[key].size() > kMaxOptions) {
    return InvalidField(at + "." + key, at + "." + key + " must list 2 to " +
                                            std::to_string(kMaxOptions) +
                                            " entries (tessera's limit)");
  }
  *count = q[key].size();
  return std::nullopt;
}

std::optional<ApiError> ReadChoices(const ojson& q, const std::string& at, worker::Question* out,
                                    DecisionQuestionMeta* meta) {
  size_t n = 0;
  if (auto e = ReadOptionList(q, "choices", at, &n)) return e;
  for (size_t k = 0; k < n; ++k) {
    const ojson& c = q["choices"][k];
    const std::string where = at + ".choices[" + std::to_string(k) + "]";
    if (!c.is_object()) return InvalidField(where, where + " must be {value, description?}");
    if (auto e = RefuseUnknownFields(c, {"value", "description"}, where, "here")) return e;
    if (!c.contains("value") || !(c["value"].is_string() || c["value"].is_boolean())) {
      return InvalidField(where + ".value", where + ".value must be a string or a boolean");
    }
    const std::string text =
        c["value"].is_string() ? c["value"].get<std::string>() : c["value"].dump();
    if (text.empty()) return InvalidField(where + ".value", where + ".value must not be empty");
    // The model reads the values as text: "true" and true would be the same option to it.
    if (std::find(out->options.begin(), out->options.end(), text) != out->options.end()) {
      return InvalidField(where + ".value",
                          where + ".value '" + text + "' reads the same as an earlier choice");
    }
    std::string description;
    if (auto e = ReadString(c, "description", &description)) {
      return InvalidField(where + ".description", where + ".description must be a string");
    }
    out->options.push_back(text);
    out->descriptions.push_back(description);
    meta->values.push_back(c["value"]);
  }
  return std::nullopt;
}

std::optional<ApiError> ReadLevels(const ojson& q, const std::string& at, worker::Question* out,
                                   DecisionQuestionMeta* meta) {
  size_t n = 0;
  if (auto e = ReadOptionList(q, "levels", at, &n)) return e;
  for (size_t k = 0; k < n; ++k) {
    const ojson& l = q["levels"][k];
    const std::string where = at + ".levels[" + std::to_string(k) + "]";
    if (!l.is_object()) return InvalidField(where, where + " must be {label, description?}");
    if (auto e = RefuseUnknownFields(l, {"label", "description"}, where, "here")) return e;
    if (!l.contains("label") || !l["label"].is_string() || l["label"].get<std::string>().empty()) {
      return InvalidField(where + ".label", where + ".label must be a non-empty string");
    }
    std::string description;
    if (auto e = ReadString(l, "description", &description)) {
      return InvalidField(where + ".description", where + ".description must be a string");
    }
    const std::string label = l["label"].get<std::string>();
    out->options.push_back(std::to_string(k));
    out->descriptions.push_back(description.empty() ? label : label + ": " + description);
    meta->labels.push_back(label);
  }
  return std::nullopt;
}

std::optional<ApiError> ReadQuestion(const ojson& q, const std::string& at, worker::Question* out,
                                     DecisionQuestionMeta* meta) {
  if (!q.is_object()) return InvalidField(at, at + " must be a question object");
  const std::string type =
      q.contains("type") && q["type"].is_string() ? q["type"].get<std::string>() : "";
  const char* list = type == "choice" ? "choices" : "levels";
  if (type == "predicate") {
    if (auto e = RefuseUnknownFields(q, {"type", "name", "instructions"}, at, "here")) return e;
  } else if (type == "choice" || type == "score") {
    if (auto e = RefuseUnknownFields(q, {"type", "name", "instructions", list}, at, "here"))
      return e;
  } else {
    return InvalidField(at + ".type", at + ".type must be \"predicate\", \"choice\" or \"score\"");
  }
  if (const ojson* name = Field(q, "name")) {
    if (!name->is_string() || name->get<std::string>().empty()) {
      return InvalidField(at + ".name", at + ".name must be a non-empty string");
    }
    meta->name = name->get<std::string>();
  }
  if (!q.contains("instructions")) {
    return InvalidField(at + ".instructions", at + ".instructions is required");
  }
  if (auto e = ContentText(q["instructions"], at + ".instructions", true, &out->instructions))
    return e;
  if (out->instructions.empty()) {
    return InvalidField(at + ".instructions", at + ".instructions must not be empty");
  }
  if (type == "predicate") {
    out->type = worker::QuestionType::kNoul;
    out->options = {"yes", "no"};
    out->descriptions = {"", ""};
    return std::nullopt;
  }
  if (type == "choice") {
    out->type = worker::QuestionType::kChoice;
    return ReadChoices(q, at, out, meta);
  }
  out->type = worker::QuestionType::kScore;
  return ReadLevels(q, at, out, meta);
}

ojson NameOf(const DecisionQuestionMeta& meta) {
  return meta.name ? ojson(*meta.name) : ojson();
}

ojson Answer(const worker::Question& q, const DecisionQuestionMeta& meta,
             const worker::TaskItem& item) {
  double top = 0;
  size_t best = 0;
  for (size_t k = 0; k < item.values.size(); ++k) {
    if (item.values[k] > top) {
      top = item.values[k];
      best = k;
    }
  }
  switch (q.type) {
    case worker::QuestionType::kNoul:
      return {{"type", "predicate"}, {"name", NameOf(meta)}, {"probability", item.values[0]}};
    case worker::QuestionType::kChoice: {
      ojson probabilities = ojson::array();
      for (size_t k = 0; k < q.options.size(); ++k) {
        probabilities.push_back({{"value", meta.values[k]}, {"probability", item.values[k]}});
      }
      return {{"type", "choice"},
              {"name", NameOf(meta)},
              {"choice", meta.values[best]},
              {"confidence", top},
              {"probabilities", std::move(probabilities)}};
    }
    case worker::QuestionType::kScore: {
      ojson probabilities = ojson::array();
      double expected = 0;
      for (size_t k = 0; k < q.options.size(); ++k) {
        probabilities.push_back(
            {{"label", meta.labels[k]}, {"value", k}, {"probability", item.values[k]}});
        expected += static_cast<double>(k) * item.values[k];
      }
      return {{"type", "score"},
              {"name", NameOf(meta)},
              {"score", expected},
              {"confidence", top},
              {"probabilities", std::move(probabilities)}};
    }
  }
  return ojson::object();
}

}  // namespace

std::span<const std::string_view> DecisionsFields() {
  return kFields;
}

std::optional<ApiError> ParseDecisions(const ojson& body, TaskRequest* r) {
  worker::SystemOnePayload& payload = r->job.payload.emplace<worker::SystemOnePayload>();
  if (const ojson* key = Field(body, "prompt_cache_key")) {
    // tessera's cache scope: requests with different keys never share cached prefixes.
    if (!key->is_string())
      return InvalidField("prompt_cache_key", "prompt_cache_key must be a string");
    r->job.cache_scope.salt = key->get<std::string>();
  }
  if (Field(body, "safety_identifier") != nullptr) {
    return InvalidField("safety_identifier",
                        "safety_identifier is not supported: tessera keeps no per-user abuse "
                        "records; leave it out");
  }
  if (auto e = ReadInput(body, &payload.state)) return e;
  const ojson* questions = Field(body, "questions");
  if (questions == nullptr || !questions->is_array() || questions->empty() ||
      questions->size() > kMaxSystemOneQuestions) {
    return InvalidField("questions", "questions must be a list of 1 to " +
                                         std::to_string(kMaxSystemOneQuestions) +
                                         " questions (tessera's limit)");
  }
  std::set<std::string> names;
  for (size_t i = 0; i < questions->size(); ++i) {
    const std::string at = "questions[" + std::to_string(i) + "]";
    worker::Question question;
    DecisionQuestionMeta meta;
    if (auto e = ReadQuestion((*questions)[i], at, &question, &meta)) return e;
    if (meta.name && !names.insert(*meta.name).second) {
      return InvalidField(at + ".name",
                          at + ".name '" + *meta.name + "' names an earlier question");
    }
    payload.questions.push_back(std::move(question));
    r->decision_questions.push_back(std::move(meta));
  }
  return std::nullopt;
}

ojson DecisionsBody(const TaskRequest& request, const worker::TaskResultMessage& result,
                    const std::string& model) {
  const auto& questions = std::get<worker::SystemOnePayload>(request.job.payload).questions;
  std::vector<const worker::TaskItem*> by_question(questions.size(), nullptr);
  for (const worker::TaskItem& item : result.items)
    by_question[static_cast<size_t>(item.index)] = &item;
  ojson answers = ojson::array();
  for (size_t q = 0; q < questions.size(); ++q) {
    if (by_question[q] == nullptr) continue;
    answers.push_back(Answer(questions[q], request.decision_questions[q], *by_question[q]));
  }
  const int64_t tokens = result.prompt_tokens;
  return {{"model", model},
          {"answers", std::move(answers)},
          {"usage",
           {{"input_tokens", tokens},
            {"input_tokens_details",
             {{"cache_write_tokens", 0}, {"cached_tokens", result.cached_tokens}}},
            {"output_tokens", 0},
            {"output_tokens_details", {{"reasoning_tokens", 0}}},
            {"total_tokens", tokens}}}};
}

}  // namespace tessera::server
