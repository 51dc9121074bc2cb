#include "server/task_api.h"

#include "server/decisions_api.h"

#include "format/json_util.h"
#include "server/json_fields.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <numeric>
#include <string_view>

namespace tessera::server {
namespace {

using ojson = nlohmann::ordered_json;

// What each endpoint implements; any other non-null field is a 400 naming it.
constexpr std::string_view kEmbeddingFields[] = {
    "model", "input", "encoding_format", "dimensions", "prompt_name", "user", "cache_salt"};
constexpr std::string_view kRerankFields[] = {"model",
                                              "query",
                                              "documents",
                                              "top_n",
                                              "instruction",
                                              "return_documents",
                                              "max_chunks_per_doc",
                                              "cache_salt"};
constexpr std::string_view kModerationFields[] = {"model", "input", "messages", "strict",
                                                  "cache_salt"};
constexpr std::string_view kSystemOneFields[] = {"model", "state", "questions", "cache_salt"};
constexpr std::string_view kClassifyFields[] = {
    "model", "input",     "use_activation", "truncate_prompt_tokens", "add_special_tokens",
    "user",  "cache_salt"};

std::span<const std::string_view> FieldsOf(TaskEndpoint e) {
  switch (e) {
    case TaskEndpoint::kEmbeddings:
      return kEmbeddingFields;
    case TaskEndpoint::kRerank:
      return kRerankFields;
    case TaskEndpoint::kModerations:
      return kModerationFields;
    case TaskEndpoint::kClassify:
      return kClassifyFields;
    case TaskEndpoint::kSystemOne:
      return kSystemOneFields;
    case TaskEndpoint::kDecisions:
      return DecisionsFields();
  }
  return {};
}

std::optional<ApiError> ReadInt(const ojson& body, const char* name, int64_t lo, int64_t hi,
                                std::optional<int64_t>* out) {
  const ojson* v = Field(body, name);
  if (v == nullptr) return std::nullopt;
  if (!v->is_number_integer() ||
      (v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(hi)) ||
      v->get<int64_t>() < lo || v->get<int64_t>() > hi) {
    return InvalidField(name, std::string(name) + " must be an integer from " + std::to_string(lo) +
                                  " to " + std::to_string(hi));
  }
  *out = v->get<int64_t>();
  return std::nullopt;
}

std::optional<ApiError> TooMany(const char* name, size_t n) {
  if (n == 0) return InvalidField(name, std::string(name) + " must not be empty");
  if (n > kMaxTaskInputs) {
    return InvalidField(name, std::string(name) + " has " + std::to_string(n) +
                                  " entries, more than the limit of " +
                                  std::to_string(kMaxTaskInputs) + " per request; split it");
  }
  return std::nullopt;
}

bool IsTokenId(const ojson& v) {
  return v.is_number_integer() && v.get<int64_t>() >= 0 &&
         v.get<int64_t>() <= std::numeric_limits<int32_t>::max();
}

// `input` as a string, a list of strings, a list of token ids, or a list of token-id lists.
std::optional<ApiError> ReadInputs(const ojson& body, worker::TaskInputs* job, bool allow_ids) {
  const ojson* v = Field(body, "input");
  if (v == nullptr) return InvalidField("input", "input is required");
  const char* shapes = allow_ids
                           ? "input must be a string, a list of strings, a list of token ids or "
                             "a list of token-id lists"
                           : "input must be a string or a list of strings";
  if (v->is_string()) {
    job->texts.push_back(v->get<std::string>());
    return std::nullopt;
  }
  if (!v->is_array()) return InvalidField("input", shapes);
  if (auto e = TooMany("input", v->size())) return e;
  if (allow_ids && (*v)[0].is_number()) {  // one input as token ids
    if (v->size() > static_cast<size_t>(kMaxEmbeddingTokens) * 16) {
      return InvalidField("input", "input holds too many token ids");
    }
    std::vector<int32_t> ids;
    for (const ojson& t : *v) {
      if (!IsTokenId(t)) return InvalidField("input", "token ids must be non-negative integers");
      ids.push_back(static_cast<int32_t>(t.get<int64_t>()));
    }
    job->ids.push_back(std::move(ids));
    return std::nullopt;
  }
  for (size_t i = 0; i < v->size(); ++i) {
    const ojson& item = (*v)[i];
    const std::string at = "input[" + std::to_string(i) + "]";
    if (item.is_string() && job->ids.empty()) {
      job->texts.push_back(item.get<std::string>());
    } else if (allow_ids && item.is_array() && job->texts.empty()) {
      std::vector<int32_t> ids;
      for (const ojson& t : item) {
        if (!IsTokenId(t))
          return InvalidField(at, at + ": token ids must be non-negative integers");
        ids.push_back(static_cast<int32_t>(t.get<int64_t>()));
      }
      if (ids.empty()) return InvalidField(at, at + " is an empty token list");
      job->ids.push_back(std::move(ids));
    } else {
      return InvalidField(at, std::string(shapes) + " (all entries of one kind)");
    }
  }
  return std::nullopt;
}

std::optional<ApiError> ParseEmbeddings(const ojson& body, TaskRequest* r) {
  worker::EmbedPayload& embed = r->job.payload.emplace<worker::EmbedPayload>();
  if (auto e = ReadInputs(body, &embed.inputs, true)) return e;
  embed.inputs.max_input_tokens = kMaxEmbeddingTokens;
  std::string format = "float";
  if (auto e = ReadString(body, "encoding_format", &format)) return e;
  if (format != "float" && format != "base64") {
    return InvalidField("encoding_format", "encoding_format must be \"float\" or \"base64\"");
  }
  r->base64 = format == "base64";
  std::optional<int64_t> dims;
  if (auto e = ReadInt(body, "dimensions", 32, 1024, &dims)) return e;
  embed.dimensions = static_cast<int32_t>(dims.value_or(0));
  std::string prompt;
  if (auto e = ReadString(body, "prompt_name", &prompt)) return e;
  if (!prompt.empty() && prompt != "query" && prompt != "document") {
    return InvalidField("prompt_name", "prompt_name must be \"query\" or \"document\"");
  }
  embed.prompt_name = prompt;
  std::string user;
  return ReadString(body, "user", &user);  // accepted: an end-user id for abuse tracking
}

std::optional<ApiError> ParseRerank(const ojson& body, TaskRequest* r) {
  worker::RerankPayload& rerank = r->job.payload.emplace<worker::RerankPayload>();
  const ojson* query = Field(body, "query");
  if (query == nullptr || !query->is_string()) {
    return InvalidField("query", "query is required and must be a string");
  }
  rerank.query = query->get<std::string>();
  const ojson* docs = Field(body, "documents");
  if (docs == nullptr || !docs->is_array()) {
    return InvalidField("documents", "documents is required: a list of strings or {\"text\"}");
  }
  if (auto e = TooMany("documents", docs->size())) return e;
  for (size_t i = 0; i < docs->size(); ++i) {
    const ojson& d = (*docs)[i];
    const std::string at = "documents[" + std::to_string(i) + "]";
    if (d.is_string()) {
      rerank.documents.texts.push_back(d.get<std::string>());
    } else if (d.is_object() && d.contains("text") && d["text"].is_string() && d.size() == 1) {
      rerank.documents.texts.push_back(d["text"].get<std::string>());
    } else {
      return InvalidField(at, at + " must be a string or {\"text\": string}");
    }
  }
  std::optional<int64_t> top_n;
  if (auto e = ReadInt(body, "top_n", 1, std::numeric_limits<int32_t>::max(), &top_n)) return e;
  r->top_n = top_n.value_or(-1);
  if (auto e = ReadBool(body, "return_documents", &r->return_documents)) return e;
  if (auto e = ReadString(body, "instruction", &rerank.instruction)) return e;
  std::optional<int64_t> chunks;
  if (auto e = ReadInt(body, "max_chunks_per_doc", 1, 1, &chunks)) return e;  // one chunk only
  rerank.documents.max_input_tokens = 8192;
  return std::nullopt;
}

std::optional<ApiError> ParseModerations(const ojson& body, TaskRequest* r) {
  worker::ModeratePayload& moderate = r->job.payload.emplace<worker::ModeratePayload>();
  if (auto e = ReadBool(body, "strict", &r->strict)) return e;
  moderate.inputs.max_input_tokens = 8192;
  const ojson* messages = Field(body, "messages");
  const ojson* input = Field(body, "input");
  if ((messages == nullptr) == (input == nullptr)) {
    return InvalidField(messages ? "messages" : "input",
                        "give exactly one of input (text to judge) and messages (a conversation)");
  }
  if (messages != nullptr) {
    if (!messages->is_array() || messages->empty() || messages->size() > kMaxMessages) {
      return InvalidField("messages", "messages must be a non-empty list of {role, content}");
    }
    for (size_t i = 0; i < messages->size(); ++i) {
      const ojson& m = (*messages)[i];
      const std::string at = "messages[" + std::to_string(i) + "]";
      if (!m.is_object() || !m.contains("role") || !m["role"].is_string() ||
          !m.contains("content") || !m["content"].is_string()) {
        return InvalidField(at, at + " must be {\"role\": string, \"content\": string}");
      }
      const std::string role = m["role"].get<std::string>();
      if (role != "system" && role != "user" && role != "assistant") {
        return InvalidField(at + ".role", at + ".role must be system, user or assistant");
      }
      for (const auto& [key, value] : m.items()) {
        if (key != "role" && key != "content" && !value.is_null()) {
          return InvalidField(at + "." + key, at + "." + key + " is not supported here");
        }
      }
      moderate.messages.push_back({role, m["content"].get<std::string>(), "", "", ""});
    }
    // Judge the assistant's reply when it is last, else the conversation up to the last user
    // message.
    auto& msgs = moderate.messages;
    if (msgs.back().role != "assistant") {
      while (!msgs.empty() && msgs.back().role != "user") msgs.pop_back();
      if (msgs.empty()) return InvalidField("messages", "messages hold no user message to judge");
    }
    moderate.inputs.texts.push_back("");  // one result
    return std::nullopt;
  }
  if (input->is_string()) {
    moderate.inputs.texts.push_back(input->get<std::string>());
    return std::nullopt;
  }
  if (!input->is_array()) {
    return InvalidField("input", "input must be a string, a list of strings or of text parts");
  }
  if (auto e = TooMany("input", input->size())) return e;
  for (size_t i = 0; i < input->size(); ++i) {
    const ojson& item = (*input)[i];
    const std::string at = "input[" + std::to_string(i) + "]";
    if (item.is_string()) {
      moderate.inputs.texts.push_back(item.get<std::string>());
    } else if (StringOr(item, "type") == "text" && item.contains("text") &&
               item["text"].is_string()) {
      moderate.inputs.texts.push_back(item["text"].get<std::string>());
    } else if (StringOr(item, "type") == "image_url") {
      return InvalidField(at, at + ": images are not supported; the guard model reads text");
    } else {
      return InvalidField(at, at + " must be a string or {\"type\": \"text\", \"text\": string}");
    }
  }
  return std::nullopt;
}

std::optional<ApiError> ParseClassify(const ojson& body, TaskRequest* r) {
  worker::ClassifyPayload& classify = r->job.payload.emplace<worker::ClassifyPayload>();
  if (auto e = ReadInputs(body, &classify.inputs, true)) return e;
  if (auto e = ReadBool(body, "use_activation", &classify.use_activation)) return e;
  if (auto e = ReadBool(body, "add_special_tokens", &classify.add_special_tokens)) return e;
  std::optional<int64_t> truncate;
  if (auto e = ReadInt(body, "truncate_prompt_tokens", -1, std::numeric_limits<int32_t>::max(),
                       &truncate)) {
    return e;
  }
  if (truncate && *truncate == 0) {
    return InvalidField("truncate_prompt_tokens", "truncate_prompt_tokens must be -1 or >= 1");
  }
  classify.truncate_prompt_tokens = static_cast<int32_t>(truncate.value_or(-1));
  std::string user;
  return ReadString(body, "user", &user);
}

// System One's refusals are 422s naming the field's path.
// System One's refusals of a field are 422 invalid_field.
ApiError AsUnprocessable(ApiError e) {
  e.status = 422;
  e.code = "invalid_field";
  return e;
}

ApiError Unprocessable(const std::string& path, const std::string& message) {
  return AsUnprocessable(InvalidField(path, path + " " + message));
}

// Options as strings, distinct and non-empty, 2..10 of them.
std::optional<ApiError> CheckOptions(const std::string& at, const std::vector<std::string>& o) {
  if (o.size() < 2 || o.size() > 10) {
    return Unprocessable(at, "must give 2 to 10 options, found " + std::to_string(o.size()));
  }
  for (size_t i = 0; i < o.size(); ++i) {
    if (o[i].empty()) return Unprocessable(at, "has an empty option");
    for (size_t j = 0; j < i; ++j) {
      if (o[i] == o[j]) return Unprocessable(at, "names the option '" + o[i] + "' twice");
    }
  }
  return std::nullopt;
}

std::optional<ApiError> ReadQuestionType(const ojson& q, const std::string& at,
                                         worker::Question* out) {
  const std::string type = q.value("type", ojson()).is_string() ? q["type"].get<std::string>() : "";
  if (type == "choice") {
    out->type = worker::QuestionType::kChoice;
  } else if (type == "score") {
    out->type = worker::QuestionType::kScore;
  } else if (type == "noul") {
    out->type = worker::QuestionType::kNoul;
  } else {
    return Unprocessable(at + ".type", "must be \"choice\", \"score\" or \"noul\"");
  }
  return std::nullopt;
}

// A choice's criteria: {option: description} or a list of options.
std::optional<ApiError> ReadChoiceCriteria(const ojson& criteria, const std::string& where,
                                           worker::Question* question) {
  if (criteria.is_object()) {
    for (const auto& [name, description] : criteria.items()) {
      if (!description.is_string()) {
        return Unprocessable(where + "." + name, "must be a string describing the option");
      }
      question->options.push_back(name);
      question->descriptions.push_back(description.get<std::string>());
    }
  } else if (criteria.is_array()) {
    for (const ojson& name : criteria) {
      if (!name.is_string()) return Unprocessable(where, "must list option names (strings)");
      question->options.push_back(name.get<std::string>());
      question->descriptions.emplace_back();
    }
  } else {
    return Unprocessable(where, "must be a map of option to description, or a list of options");
  }
  return CheckOptions(where, question->options);
}

// A score's criteria: its levels' descriptions, lowest first; levels are scored as numbers.
std::optional<ApiError> ReadScoreCriteria(const ojson& criteria, const std::string& where,
                                          worker::Question* question) {
  if (!criteria.is_array()) {
    return Unprocessable(where, "must be a list of 2 to 10 level descriptions, lowest first");
  }
  for (size_t k = 0; k < criteria.size(); ++k) {
    if (!criteria[k].is_string() || criteria[k].get<std::string>().empty()) {
      return Unprocessable(where + "[" + std::to_string(k) + "]", "must describe a level");
    }
    question->options.push_back(std::to_string(k));
    question->descriptions.push_back(criteria[k].get<std::string>());
  }
  return CheckOptions(where, question->options);
}

// A noul's criteria: optional, what yes means.
std::optional<ApiError> ReadNoulCriteria(const ojson& criteria, const std::string& where,
                                         worker::Question* question) {
  if (!criteria.is_null()) {
    if (!criteria.is_string()) return Unprocessable(where, "must be a string (what yes means)");
    question->instructions += "\n" + criteria.get<std::string>();
  }
  question->options = {"yes", "no"};
  question->descriptions = {"", ""};
  return std::nullopt;
}

// One question {type, instructions, criteria}; `at` is its path in errors ("questions[1]" in
// the list form, "questions.team" in the object form).
std::optional<ApiError> ReadQuestion(const ojson& q, const std::string& at,
                                     worker::Question* question) {
  if (!q.is_object()) return Unprocessable(at, "must be an object {type, instructions, criteria}");
  if (auto e = RefuseUnknownFields(q, {"type", "instructions", "criteria"}, at, "in a question")) {
    return AsUnprocessable(*e);
  }
  if (auto e = ReadQuestionType(q, at, question)) return e;
  if (!q.contains("instructions") || !q["instructions"].is_string() ||
      q["instructions"].get<std::string>().empty()) {
    return Unprocessable(at + ".instructions", "must be a non-empty string: the question");
  }
  question->instructions = q["instructions"].get<std::string>();
  const std::string where = at + ".criteria";
  const ojson criteria = q.value("criteria", ojson());
  switch (question->type) {
    case worker::QuestionType::kChoice:
      return ReadChoiceCriteria(criteria, where, question);
    case worker::QuestionType::kScore:
      return ReadScoreCriteria(criteria, where, question);
    case worker::QuestionType::kNoul:
      return ReadNoulCriteria(criteria, where, question);
  }
  return std::nullopt;
}

// `questions`: an object keyed by each question's name (System One's form; the answers are
// keyed by the same names), or a list (tessera's extension; the answers are a list). A JSON
// object holds each name once: a body that repeats a name reaches here with one question under
// it (ParseJsonBody keeps the last definition, at the first one's place).
std::optional<ApiError> ReadQuestions(const ojson& body, TaskRequest* r,
                                      worker::SystemOnePayload* payload) {
  const ojson* questions = Field(body, "questions");
  if (questions == nullptr || !(questions->is_object() || questions->is_array()) ||
      questions->empty() || questions->size() > kMaxSystemOneQuestions) {
    return Unprocessable("questions", "must be an object of 1 to " +
                                          std::to_string(kMaxSystemOneQuestions) +
                                          " questions keyed by name (or a list of them)");
  }
  const bool named = questions->is_object();
  size_t i = 0;
  for (const auto& [key, q] : questions->items()) {
    if (named && key.empty()) {
      return Unprocessable("questions", "names a question \"\"; a name must be non-empty");
    }
    worker::Question question;
    const std::string at = named ? "questions." + key : "questions[" + std::to_string(i++) + "]";
    if (auto e = ReadQuestion(q, at, &question)) return e;
    payload->questions.push_back(std::move(question));
    if (named) r->question_names.push_back(key);
  }
  return std::nullopt;
}

std::optional<ApiError> ParseSystemOne(const ojson& body, TaskRequest* r) {
  worker::SystemOnePayload& systemone = r->job.payload.emplace<worker::SystemOnePayload>();
  const ojson* state = Field(body, "state");
  if (state == nullptr) return Unprocessable("state", "is required (a string, or JSON)");
  systemone.state = state->is_string() ? state->get<std::string>() : state->dump();
  return ReadQuestions(body, r, &systemone);
}

// OpenAI's moderation categories: a guard model does not score them, so all are false / 0.
constexpr const char* kOpenAiCategories[] = {"harassment",
                                             "harassment/threatening",
                                             "hate",
                                             "hate/threatening",
                                             "illicit",
                                             "illicit/violent",
                                             "self-harm",
                                             "self-harm/intent",
                                             "self-harm/instructions",
                                             "sexual",
                                             "sexual/minors",
                                             "violence",
                                             "violence/graphic"};

// One question's answer: its index and type, then the fields of that type. A noul's
// probability of yes is both `probability` (tessera's name) and `noul` (System One's name).
ojson SystemOneAnswer(const worker::Question& q, const worker::TaskItem& item) {
  const double top =
      item.values.empty() ? 0.0 : *std::max_element(item.values.begin(), item.values.end());
  ojson a = {{"index", item.index}};
  switch (q.type) {
    case worker::QuestionType::kChoice: {
      ojson p = ojson::object();
      for (size_t k = 0; k < q.options.size(); ++k) p[q.options[k]] = item.values[k];
      a["type"] = "choice";
      a["choice"] = item.label;
      a["probabilities"] = std::move(p);
      break;
    }
    case worker::QuestionType::kScore: {
      ojson p = ojson::object(), legend = ojson::object();
      double expected = 0;
      for (size_t k = 0; k < q.options.size(); ++k) {
        p[q.options[k]] = item.values[k];
        legend[q.options[k]] = q.descriptions[k];
        expected += static_cast<double>(k) * item.values[k];
      }
      a["type"] = "score";
      a["score"] = expected;
      a["legend"] = std::move(legend);
      a["probabilities"] = std::move(p);
      break;
    }
    case worker::QuestionType::kNoul:
      a["type"] = "noul";
      a["noul"] = item.values[0];  // options are {yes, no}
      a["probability"] = item.values[0];
      break;
  }
  a["confidence"] = top;
  return a;
}

// The answers: a list in the worker's order, or (questions sent by name) an object keyed by
// the names in request order.
ojson SystemOneAnswers(const TaskRequest& request, const worker::TaskResultMessage& result) {
  const std::vector<worker::Question>& questions =
      std::get<worker::SystemOnePayload>(request.job.payload).questions;
  if (request.question_names.empty()) {
    ojson answers = ojson::array();
    for (const worker::TaskItem& item : result.items) {
      answers.push_back(SystemOneAnswer(questions[static_cast<size_t>(item.index)], item));
    }
    return answers;
  }
  std::vector<const worker::TaskItem*> by_question(questions.size(), nullptr);
  for (const worker::TaskItem& item : result.items)
    by_question[static_cast<size_t>(item.index)] = &item;
  ojson answers = ojson::object();
  for (size_t q = 0; q < questions.size(); ++q) {
    if (by_question[q] == nullptr) continue;
    answers[request.question_names[q]] = SystemOneAnswer(questions[q], *by_question[q]);
  }
  return answers;
}

}  // namespace

std::variant<TaskRequest, ApiError> ParseTaskRequest(TaskEndpoint endpoint, const ojson& body) {
  if (auto e = RefuseUnknownFields(body, FieldsOf(endpoint), {}, "by this endpoint")) {
    return endpoint == TaskEndpoint::kSystemOne ? AsUnprocessable(*e) : *e;
  }
  TaskRequest r;
  r.endpoint = endpoint;
  if (const ojson* model = Field(body, "model")) {
    if (!model->is_string()) return InvalidField("model", "model must be a string");
    r.job.model = model->get<std::string>();
  }
  if (auto salt_error = ReadCacheSalt(body, &r.job.cache_scope.salt)) return *salt_error;
  std::optional<ApiError> e;
  switch (endpoint) {
    case TaskEndpoint::kEmbeddings:
      e = ParseEmbeddings(body, &r);
      break;
    case TaskEndpoint::kRerank:
      e = ParseRerank(body, &r);
      break;
    case TaskEndpoint::kModerations:
      e = ParseModerations(body, &r);
      // OpenAI's own moderation models name no model served here: the guard answers.
      if (r.job.model.find("moderation") != std::string::npos) r.job.model.clear();
      break;
    case TaskEndpoint::kClassify:
      e = ParseClassify(body, &r);
      break;
    case TaskEndpoint::kSystemOne:
      e = ParseSystemOne(body, &r);
      break;
    case TaskEndpoint::kDecisions:
      e = ParseDecisions(body, &r);
      r.input_field = "input";  // a System One payload's state
      break;
  }
  if (e) return *e;
  return r;
}

std::string EncodeFloatsBase64(const std::vector<float>& values) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string bytes(values.size() * 4, '\0');
  for (size_t i = 0; i < values.size(); ++i) {
    uint32_t bits;
    std::memcpy(&bits, &values[i], 4);
    for (int b = 0; b < 4; ++b) bytes[i * 4 + b] = static_cast<char>((bits >> (8 * b)) & 0xff);
  }
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    uint32_t chunk = static_cast<uint8_t>(bytes[i]) << 16;
    const size_t n = std::min<size_t>(3, bytes.size() - i);
    if (n > 1) chunk |= static_cast<uint8_t>(bytes[i + 1]) << 8;
    if (n > 2) chunk |= static_cast<uint8_t>(bytes[i + 2]);
    out.push_back(kAlphabet[(chunk >> 18) & 63]);
    out.push_back(kAlphabet[(chunk >> 12) & 63]);
    out.push_back(n > 1 ? kAlphabet[(chunk >> 6) & 63] : '=');
    out.push_back(n > 2 ? kAlphabet[chunk & 63] : '=');
  }
  return out;
}

bool TaskResultFits(const TaskRequest& request, const worker::TaskResultMessage& result) {
  static const std::vector<worker::Question> kNone;
  static const worker::TaskInputs kNoInputs;
  const auto* systemone = std::get_if<worker::SystemOnePayload>(&request.job.payload);
  const auto* rerank = std::get_if<worker::RerankPayload>(&request.job.payload);
  const std::vector<worker::Question>& questions = systemone ? systemone->questions : kNone;
  const worker::TaskInputs& documents = rerank ? rerank->documents : kNoInputs;
  const bool questions_asked =
      request.endpoint == TaskEndpoint::kSystemOne || request.endpoint == TaskEndpoint::kDecisions;
  if (questions_asked && systemone == nullptr) return false;
  if (request.endpoint == TaskEndpoint::kDecisions) {
    if (request.decision_questions.size() != questions.size()) return false;
    for (size_t q = 0; q < questions.size(); ++q) {
      const DecisionQuestionMeta& meta = request.decision_questions[q];
      if (questions[q].type == worker::QuestionType::kChoice &&
          meta.values.size() != questions[q].options.size())
        return false;
      if (questions[q].type == worker::QuestionType::kScore &&
          meta.labels.size() != questions[q].options.size())
        return false;
    }
  }
  if (request.endpoint == TaskEndpoint::kRerank && rerank == nullptr) return false;
  if (!request.question_names.empty() && request.question_names.size() != questions.size()) {
    return false;  // a name for every question, or none
  }
  for (const worker::TaskItem& item : result.items) {
    if (item.index < 0) return false;
    const size_t i = static_cast<size_t>(item.index);
    if (request.endpoint == TaskEndpoint::kRerank && i >= documents.texts.size()) return false;
    if (!questions_asked) continue;
    if (i >= questions.size()) return false;
    const worker::Question& q = questions[i];
    const size_t needed = q.type == worker::QuestionType::kNoul ? 1 : q.options.size();
    if (item.values.size() < needed) return false;
    if (q.type == worker::QuestionType::kScore && q.descriptions.size() < q.options.size())
      return false;
  }
  return true;
}

ojson TaskResponseBody(const TaskRequest& request, const worker::TaskResultMessage& result,
                       const std::string& model, const std::string& id, int64_t created) {
  const int64_t tokens = result.prompt_tokens;
  ojson body;
  switch (request.endpoint) {
    case TaskEndpoint::kEmbeddings: {
      ojson data = ojson::array();
      for (const worker::TaskItem& item : result.items) {
        ojson e = {{"object", "embedding"}, {"index", item.index}};
        if (request.base64) {
          e["embedding"] = EncodeFloatsBase64(item.values);
        } else {
          e["embedding"] = item.values;
        }
        data.push_back(std::move(e));
      }
      body = {{"object", "list"},
              {"data", std::move(data)},
              {"model", model},
              {"usage", {{"prompt_tokens", tokens}, {"total_tokens", tokens}}}};
      break;
    }
    case TaskEndpoint::kRerank: {
      std::vector<size_t> order(result.items.size());
      std::iota(order.begin(), order.end(), size_t{0});
      auto score = [&](size_t i) {
        return result.items[i].values.empty() ? 0.0f : result.items[i].values[0];
      };
      std::stable_sort(order.begin(), order.end(),
                       [&](size_t a, size_t b) { return score(a) > score(b); });
      if (request.top_n > 0 && static_cast<size_t>(request.top_n) < order.size()) {
        order.resize(static_cast<size_t>(request.top_n));
      }
      ojson results = ojson::array();
      for (size_t i : order) {
        const worker::TaskItem& item = result.items[i];
        ojson r = {{"index", item.index}, {"relevance_score", score(i)}};
        if (request.return_documents) {
          const auto& documents = std::get<worker::RerankPayload>(request.job.payload).documents;
          r["document"] = {{"text", documents.texts[static_cast<size_t>(item.index)]}};
        }
        results.push_back(std::move(r));
      }
      body = {{"id", id},
              {"model", model},
              {"results", std::move(results)},
              {"usage", {{"prompt_tokens", tokens}, {"total_tokens", tokens}}}};
      break;
    }
    case TaskEndpoint::kModerations: {
      ojson results = ojson::array();
      for (const worker::TaskItem& item : result.items) {
        ojson label_scores = ojson::object();
        for (size_t k = 0; k < result.labels.size() && k < item.values.size(); ++k) {
          label_scores[result.labels[k]] = item.values[k];
        }
        ojson categories = ojson::object(), scores = ojson::object();
        for (const char* c : kOpenAiCategories) {
          categories[c] = false;
          scores[c] = 0.0;
        }
        const bool flagged =
            item.label == "Unsafe" || (request.strict && item.label == "Controversial");
        results.push_back({{"flagged", flagged},
                           {"label", item.label},
                           {"label_scores", std::move(label_scores)},
                           {"guard_categories", item.categories},
                           {"categories", std::move(categories)},
                           {"category_scores", std::move(scores)}});
      }
      body = {{"id", id}, {"model", model}, {"results", std::move(results)}};
      break;
    }
    case TaskEndpoint::kSystemOne:
      body = {{"id", id},
              {"object", "systemone.answers"},
              {"created", created},
              {"model", model},
              {"answers", SystemOneAnswers(request, result)},
              {"usage", {{"prompt_tokens", tokens}, {"total_tokens", tokens}}}};
      break;
    case TaskEndpoint::kDecisions:
      body = DecisionsBody(request, result, model);
      break;
    case TaskEndpoint::kClassify: {
      ojson data = ojson::array();
      for (const worker::TaskItem& item : result.items) {
        data.push_back({{"index", item.index},
                        {"label", item.label},
                        {"probs", item.values},
                        {"num_classes", item.values.size()}});
      }
      body = {{"id", id},
              {"object", "list"},
              {"created", created},
              {"model", model},
              {"data", std::move(data)},
              {"usage",
               {{"prompt_tokens", tokens}, {"completion_tokens", 0}, {"total_tokens", tokens}}}};
      break;
    }
  }
  return body;
}

}  // namespace tessera::server
