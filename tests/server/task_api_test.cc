// Task endpoints' request parsing and response building (task_api.h), without a model: bad
// input parts are 400s naming the part, and a worker result that does not fit its request is
// recognised before the response is built from it.
#include "server/task_api.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>
#include <variant>
#include <vector>

namespace tessera::server {
namespace {

using ojson = nlohmann::ordered_json;

TEST(TaskApi, ModerationInputPartsOfTheWrongShapeAreRefusedByName) {
  for (const char* part : {R"({"type": 5, "text": "x"})", R"({"type": {"a": 1}})",
                           R"({"type": null, "text": "x"})", R"({"text": "x"})"}) {
    const ojson body = {{"model", "guard"}, {"input", ojson::array({"ok", ojson::parse(part)})}};
    auto parsed = ParseTaskRequest(TaskEndpoint::kModerations, body);
    ASSERT_TRUE(std::holds_alternative<ApiError>(parsed)) << part;
    EXPECT_EQ(std::get<ApiError>(parsed).status, 400) << part;
    EXPECT_EQ(std::get<ApiError>(parsed).param, "input[1]") << part;
  }
  const ojson good = {{"model", "guard"},
                      {"input", ojson::array({ojson{{"type", "text"}, {"text", "hello"}}})}};
  auto parsed = ParseTaskRequest(TaskEndpoint::kModerations, good);
  ASSERT_TRUE(std::holds_alternative<TaskRequest>(parsed));
  EXPECT_EQ(
      std::get<worker::ModeratePayload>(std::get<TaskRequest>(parsed).job.payload).inputs.texts,
      std::vector<std::string>{"hello"});
}

// Every task endpoint runs prompts through the prefix cache, so each takes cache_salt.
TEST(TaskApi, EveryTaskEndpointTakesACacheSalt) {
  const std::pair<TaskEndpoint, ojson> bodies[] = {
      {TaskEndpoint::kEmbeddings, {{"input", "a"}}},
      {TaskEndpoint::kRerank, {{"query", "q"}, {"documents", {"d"}}}},
      {TaskEndpoint::kModerations, {{"input", "a"}}},
      {TaskEndpoint::kClassify, {{"input", "a"}}},
      {TaskEndpoint::kSystemOne,
       {{"state", "s"},
        {"questions",
         {{"q", {{"type", "choice"}, {"instructions", "i"}, {"criteria", {"x", "y"}}}}}}}}};
  for (auto [endpoint, body] : bodies) {
    body["cache_salt"] = "tenant-7";
    auto parsed = ParseTaskRequest(endpoint, body);
    ASSERT_TRUE(std::holds_alternative<TaskRequest>(parsed))
        << body.dump() << ": " << std::get<ApiError>(parsed).message;
    EXPECT_EQ(std::get<TaskRequest>(parsed).job.cache_scope.salt, "tenant-7");
    body["cache_salt"] = "";
    parsed = ParseTaskRequest(endpoint, body);
    ASSERT_TRUE(std::holds_alternative<ApiError>(parsed)) << body.dump();
    EXPECT_EQ(std::get<ApiError>(parsed).status, 400);
    EXPECT_EQ(std::get<ApiError>(parsed).param, "cache_salt");
  }
}

worker::TaskItem Item(int32_t index, std::vector<float> values) {
  worker::TaskItem item;
  item.index = index;
  item.values = std::move(values);
  return item;
}

TEST(TaskApi, AWorkerResultMustFitItsRequest) {
  TaskRequest rerank;
  rerank.endpoint = TaskEndpoint::kRerank;
  rerank.return_documents = true;
  rerank.job.payload = worker::RerankPayload{"q", {{"first", "second"}, {}, 0}, ""};
  worker::TaskResultMessage result;
  result.items = {Item(1, {0.9f}), Item(0, {0.1f})};
  ASSERT_TRUE(TaskResultFits(rerank, result));
  const auto body = TaskResponseBody(rerank, result, "m", "id", 0);
  EXPECT_EQ(body["results"][0]["document"]["text"], "second");
  result.items.push_back(Item(2, {0.5f}));  // no third document
  EXPECT_FALSE(TaskResultFits(rerank, result));
  result.items.back().index = -1;
  EXPECT_FALSE(TaskResultFits(rerank, result));

  TaskRequest system_one;
  system_one.endpoint = TaskEndpoint::kSystemOne;
  worker::Question choice;
  choice.type = worker::QuestionType::kChoice;
  choice.options = {"red", "green", "blue"};
  choice.descriptions = {"", "", ""};
  worker::Question noul;
  noul.type = worker::QuestionType::kNoul;
  noul.options = {"yes", "no"};
  noul.descriptions = {"", ""};
  system_one.job.payload = worker::SystemOnePayload{"state", {choice, noul}};
  result.items = {Item(0, {0.2f, 0.3f, 0.5f}), Item(1, {0.7f, 0.3f})};
  ASSERT_TRUE(TaskResultFits(system_one, result));
  EXPECT_EQ(TaskResponseBody(system_one, result, "m", "id", 0)["answers"].size(), 2u);
  result.items[0].values.pop_back();  // a probability short of the options
  EXPECT_FALSE(TaskResultFits(system_one, result));
  result.items[0] = Item(2, {0.2f, 0.3f, 0.5f});  // no third question
  EXPECT_FALSE(TaskResultFits(system_one, result));
  result.items[0] = Item(0, {0.2f, 0.3f, 0.5f});
  result.items[1].values.clear();
  EXPECT_FALSE(TaskResultFits(system_one, result));
}

// docs/tasks.md's System One example: questions as an object keyed by name.
const char* kNamedQuestions = R"({
  "model": "decider", "state": "Customer: my parcel arrived broken and nobody answers my emails!",
  "questions": {
    "team":   {"type": "choice", "instructions": "Which team should handle this?",
               "criteria": {"billing": "payments, refunds", "shipping": "deliveries, damage",
                            "support": "everything else"}},
    "anger":  {"type": "score", "instructions": "How angry is the customer?",
               "criteria": ["calm", "annoyed", "furious"]},
    "refund": {"type": "noul", "instructions": "Does the customer ask for a refund?"}
  }})";

ojson NamedBody() {
  return ojson::parse(kNamedQuestions);
}

std::variant<TaskRequest, ApiError> ParseSystemOne(const ojson& body) {
  return ParseTaskRequest(TaskEndpoint::kSystemOne, body);
}

TEST(TaskApi, SystemOneQuestionsByNameKeepTheirNamesAndOrder) {
  auto parsed = ParseSystemOne(NamedBody());
  ASSERT_TRUE(std::holds_alternative<TaskRequest>(parsed)) << std::get<ApiError>(parsed).message;
  const TaskRequest& r = std::get<TaskRequest>(parsed);
  const worker::SystemOnePayload& rj = std::get<worker::SystemOnePayload>(r.job.payload);
  EXPECT_EQ(r.question_names, (std::vector<std::string>{"team", "anger", "refund"}));
  ASSERT_EQ(rj.questions.size(), 3u);
  const worker::Question& team = rj.questions[0];
  EXPECT_EQ(team.type, worker::QuestionType::kChoice);
  EXPECT_EQ(team.instructions, "Which team should handle this?");
  EXPECT_EQ(team.options, (std::vector<std::string>{"billing", "shipping", "support"}));
  EXPECT_EQ(team.descriptions[1], "deliveries, damage");
  const worker::Question& anger = rj.questions[1];
  EXPECT_EQ(anger.type, worker::QuestionType::kScore);
  EXPECT_EQ(anger.options, (std::vector<std::string>{"0", "1", "2"}));
  EXPECT_EQ(anger.descriptions, (std::vector<std::string>{"calm", "annoyed", "furious"}));
  EXPECT_EQ(rj.questions[2].type, worker::QuestionType::kNoul);
  EXPECT_EQ(rj.questions[2].options, (std::vector<std::string>{"yes", "no"}));
  EXPECT_EQ(r.job.model, "decider");
  EXPECT_EQ(rj.state, "Customer: my parcel arrived broken and nobody answers my emails!");

  // The same questions as a list: the same job, no names.
  ojson list = NamedBody();
  ojson questions = ojson::array();
  for (const ojson& q : list["questions"]) questions.push_back(q);
  list["questions"] = questions;
  auto listed = ParseSystemOne(list);
  ASSERT_TRUE(std::holds_alternative<TaskRequest>(listed));
  const TaskRequest& l = std::get<TaskRequest>(listed);
  const worker::SystemOnePayload& lj = std::get<worker::SystemOnePayload>(l.job.payload);
  EXPECT_TRUE(l.question_names.empty());
  ASSERT_EQ(lj.questions.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(lj.questions[i].type, rj.questions[i].type) << i;
    EXPECT_EQ(lj.questions[i].instructions, rj.questions[i].instructions) << i;
    EXPECT_EQ(lj.questions[i].options, rj.questions[i].options) << i;
    EXPECT_EQ(lj.questions[i].descriptions, rj.questions[i].descriptions) << i;
  }
}

// Refuses `body` with a 422 naming `param`.
void ExpectRefused(const ojson& body, const std::string& param) {
  auto parsed = ParseSystemOne(body);
  ASSERT_TRUE(std::holds_alternative<ApiError>(parsed)) << body.dump();
  const ApiError& e = std::get<ApiError>(parsed);
  EXPECT_EQ(e.status, 422) << body.dump();
  EXPECT_EQ(e.code, "invalid_field") << body.dump();
  EXPECT_EQ(e.param, param) << body.dump();
  EXPECT_EQ(e.message.rfind(param + " ", 0), 0u) << e.message;
}

TEST(TaskApi, SystemOneErrorsNameTheQuestionByName) {
  struct Case {
    const char* name;
    ojson question;
    std::string param;
  };
  const Case cases[] = {
      {"team",
       {{"type", "choice"}, {"instructions", "q"}, {"criteria", ojson::array({"a"})}},
       "questions.team.criteria"},
      {"team",
       {{"type", "choice"}, {"instructions", "q"}, {"criteria", {{"a", 1}, {"b", "x"}}}},
       "questions.team.criteria.a"},
      {"anger",
       {{"type", "score"}, {"instructions", "q"}, {"criteria", ojson::array({"calm", ""})}},
       "questions.anger.criteria[1]"},
      {"anger",
       {{"type", "score"}, {"instructions", "q"}, {"criteria", "calm"}},
       "questions.anger.criteria"},
      {"refund", {{"type", "guess"}, {"instructions", "q"}}, "questions.refund.type"},
      {"refund", {{"type", "noul"}, {"instructions", ""}}, "questions.refund.instructions"},
      {"refund", {{"type", "noul"}}, "questions.refund.instructions"},
      {"refund",
       {{"type", "noul"}, {"instructions", "q"}, {"weight", 2}},
       "questions.refund.weight"},
      {"refund",
       {{"type", "noul"}, {"instructions", "q"}, {"criteria", 3}},
       "questions.refund.criteria"},
      {"refund", ojson::array({"noul"}), "questions.refund"},
  };
  for (const Case& c : cases) {
    ojson body = NamedBody();
    body["questions"][c.name] = c.question;  // replaces the named question, in its place
    ExpectRefused(body, c.param);
  }
  // The list form names the index, as before.
  ojson list = NamedBody();
  list["questions"] = ojson::array(
      {NamedBody()["questions"]["team"],
       ojson{{"type", "choice"}, {"instructions", "q"}, {"criteria", ojson::array({"a"})}}});
  ExpectRefused(list, "questions[1].criteria");
}

TEST(TaskApi, SystemOneQuestionsMustBeNamedAndBetween1And64) {
  ojson body = NamedBody();
  const ojson refund = body["questions"]["refund"];
  body["questions"][""] = refund;
  ExpectRefused(body, "questions");
  body["questions"] = ojson::object();
  ExpectRefused(body, "questions");
  body["questions"] = "team";
  ExpectRefused(body, "questions");
  ojson many = ojson::object();
  for (size_t i = 0; i <= kMaxSystemOneQuestions; ++i) {
    many["q" + std::to_string(i)] = refund;
  }
  body["questions"] = many;
  ExpectRefused(body, "questions");
  many.erase("q0");
  body["questions"] = many;
  auto parsed = ParseSystemOne(body);
  ASSERT_TRUE(std::holds_alternative<TaskRequest>(parsed));
  EXPECT_EQ(std::get<TaskRequest>(parsed).question_names.size(), kMaxSystemOneQuestions);
  EXPECT_EQ(std::get<TaskRequest>(parsed).question_names.front(), "q1");
}

// A JSON object cannot hold a name twice; a body that repeats one anyway is read by the
// server's body parser as nlohmann reads it: the last definition, in the first one's place.
TEST(TaskApi, SystemOneRepeatedNameIsOneQuestionTheLastDefinitionInTheFirstPlace) {
  const std::string text = R"({"state": "s", "questions": {
      "a": {"type": "noul", "instructions": "first"},
      "b": {"type": "noul", "instructions": "middle"},
      "a": {"type": "choice", "instructions": "last", "criteria": ["x", "y"]}}})";
  auto doc = ParseJsonBody(text);
  ASSERT_TRUE(std::holds_alternative<ojson>(doc));
  auto parsed = ParseSystemOne(std::get<ojson>(doc));
  ASSERT_TRUE(std::holds_alternative<TaskRequest>(parsed));
  const TaskRequest& r = std::get<TaskRequest>(parsed);
  EXPECT_EQ(r.question_names, (std::vector<std::string>{"a", "b"}));
  ASSERT_EQ(std::get<worker::SystemOnePayload>(r.job.payload).questions.size(), 2u);
  EXPECT_EQ(std::get<worker::SystemOnePayload>(r.job.payload).questions[0].type,
            worker::QuestionType::kChoice);
  EXPECT_EQ(std::get<worker::SystemOnePayload>(r.job.payload).questions[0].instructions, "last");
  EXPECT_EQ(std::get<worker::SystemOnePayload>(r.job.payload).questions[1].instructions, "middle");
}

TEST(TaskApi, SystemOneAnswersAreKeyedByNameInRequestOrderEachWithItsType) {
  auto parsed = ParseSystemOne(NamedBody());
  ASSERT_TRUE(std::holds_alternative<TaskRequest>(parsed));
  TaskRequest request = std::get<TaskRequest>(parsed);
  worker::TaskResultMessage result;
  // The worker's items out of order: the answers still follow the request.
  result.items = {Item(2, {0.8f, 0.2f}), Item(0, {0.1f, 0.6f, 0.3f}), Item(1, {0.5f, 0.3f, 0.2f})};
  result.items[1].label = "shipping";
  ASSERT_TRUE(TaskResultFits(request, result));
  const ojson answers = TaskResponseBody(request, result, "decider", "id", 0)["answers"];
  ASSERT_TRUE(answers.is_object()) << answers.dump();
  std::vector<std::string> names;
  for (auto it = answers.begin(); it != answers.end(); ++it) names.push_back(it.key());
  EXPECT_EQ(names, request.question_names);

  const ojson& team = answers.at("team");
  EXPECT_EQ(team.at("type"), "choice");
  EXPECT_EQ(team.at("index"), 0);
  EXPECT_EQ(team.at("choice"), "shipping");
  EXPECT_EQ(team.at("probabilities").at("shipping").get<double>(), result.items[1].values[1]);
  EXPECT_EQ(team.at("confidence").get<double>(), result.items[1].values[1]);
  const ojson& anger = answers.at("anger");
  EXPECT_EQ(anger.at("type"), "score");
  EXPECT_EQ(anger.at("legend").at("2"), "furious");
  const auto& v = result.items[2].values;
  EXPECT_DOUBLE_EQ(anger.at("score").get<double>(), 1.0 * v[1] + 2.0 * v[2]);
  EXPECT_EQ(anger.at("confidence").get<double>(), v[0]);
  const ojson& refund = answers.at("refund");
  EXPECT_EQ(refund.at("type"), "noul");
  EXPECT_EQ(refund.at("noul").get<double>(), result.items[0].values[0]);
  EXPECT_EQ(refund.at("probability"), refund.at("noul"));
  EXPECT_EQ(refund.at("confidence").get<double>(), result.items[0].values[0]);

  // The list form answers in a list, each answer the same as by name.
  TaskRequest listed = request;
  listed.question_names.clear();
  std::sort(result.items.begin(), result.items.end(),
            [](const worker::TaskItem& a, const worker::TaskItem& b) { return a.index < b.index; });
  const ojson list = TaskResponseBody(listed, result, "decider", "id", 0)["answers"];
  ASSERT_TRUE(list.is_array());
  ASSERT_EQ(list.size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(list[i], answers.at(request.question_names[i])) << i;

  request.question_names.pop_back();  // a name short: the result does not fit
  EXPECT_FALSE(TaskResultFits(request, result));
}

// ---- /v1/decisions (decisions_api.h)

std::variant<TaskRequest, ApiError> ParseDecisionsBody(const ojson& body) {
  return ParseTaskRequest(TaskEndpoint::kDecisions, body);
}

TEST(DecisionsApi, QuestionsBecomeSystemOneQuestionsAndTheStateIsTheInput) {
  auto parsed = ParseDecisionsBody(ojson::parse(R"({
    "model": "m", "input": "my invoice is wrong", "prompt_cache_key": "tenant-7",
    "questions": [
      {"type": "predicate", "instructions": "Angry?"},
      {"type": "choice", "name": "team", "instructions": [{"type": "input_text", "text": "Team?"}],
       "choices": [{"value": "billing", "description": "money"}, {"value": false}]},
      {"type": "score", "name": "urgency", "instructions": "Urgent?",
       "levels": [{"label": "low"}, {"label": "high", "description": "today"}]}]})"));
  ASSERT_TRUE(std::holds_alternative<TaskRequest>(parsed)) << std::get<ApiError>(parsed).message;
  const TaskRequest& r = std::get<TaskRequest>(parsed);
  const auto& s1 = std::get<worker::SystemOnePayload>(r.job.payload);
  EXPECT_EQ(s1.state, "my invoice is wrong");
  EXPECT_EQ(r.job.cache_scope.salt, "tenant-7");
  ASSERT_EQ(s1.questions.size(), 3u);
  EXPECT_EQ(s1.questions[0].type, worker::QuestionType::kNoul);
  EXPECT_EQ(s1.questions[1].options, (std::vector<std::string>{"billing", "false"}));
  EXPECT_EQ(s1.questions[1].descriptions, (std::vector<std::string>{"money", ""}));
  EXPECT_EQ(s1.questions[1].instructions, "Team?");
  EXPECT_EQ(s1.questions[2].options, (std::vector<std::string>{"0", "1"}));
  EXPECT_EQ(s1.questions[2].descriptions, (std::vector<std::string>{"low", "high: today"}));
  ASSERT_EQ(r.decision_questions.size(), 3u);
  EXPECT_FALSE(r.decision_questions[0].name.has_value());
  EXPECT_EQ(r.decision_questions[1].values[1], ojson(false));
  EXPECT_EQ(r.decision_questions[2].labels, (std::vector<std::string>{"low", "high"}));
}

TEST(DecisionsApi, AConversationIsTheStateAsJsonAndToolOutputsMustAnswerACall) {
  const ojson items = ojson::parse(R"([
    {"role": "user", "content": [{"type": "input_text", "text": "refund?"},
                                 {"type": "input_json", "data": {"order": 7}}]},
    {"type": "function_call", "call_id": "c1", "name": "lookup", "arguments": "{}"},
    {"type": "function_call_output", "call_id": "c1", "output": "paid twice"}])");
  ojson body = {{"input", items}, {"questions", {{{"type", "predicate"}, {"instructions", "q"}}}}};
  auto parsed = ParseDecisionsBody(body);
  ASSERT_TRUE(std::holds_alternative<TaskRequest>(parsed)) << std::get<ApiError>(parsed).message;
  const ojson state = ojson::parse(
      std::get<worker::SystemOnePayload>(std::get<TaskRequest>(parsed).job.payload).state);
  EXPECT_EQ(state[0]["content"], "refund?\n{\"order\":7}");
  EXPECT_EQ(state[2]["output"], "paid twice");
  body["input"][2]["call_id"] = "c2";
  auto refused = ParseDecisionsBody(body);
  ASSERT_TRUE(std::holds_alternative<ApiError>(refused));
  EXPECT_EQ(std::get<ApiError>(refused).param, "input[2].call_id");
}

TEST(DecisionsApi, AnswersKeepNamesOrderAndTypedValues) {
  auto parsed = ParseDecisionsBody(ojson::parse(R"({"input": "s", "questions": [
      {"type": "choice", "name": "yes_no", "instructions": "q", "choices": [{"value": true}, {"value": "maybe"}]},
      {"type": "score", "instructions": "r", "levels": [{"label": "a"}, {"label": "b"}, {"label": "c"}]}]})"));
  ASSERT_TRUE(std::holds_alternative<TaskRequest>(parsed));
  const TaskRequest& r = std::get<TaskRequest>(parsed);
  worker::TaskResultMessage m;
  m.prompt_tokens = 12;
  m.items.resize(2);
  m.items[0].index = 1;  // the worker's order need not be the questions'
  m.items[0].values = {0.2f, 0.3f, 0.5f};
  m.items[1].index = 0;
  m.items[1].values = {0.25f, 0.75f};
  ASSERT_TRUE(TaskResultFits(r, m));
  const ojson body = TaskResponseBody(r, m, "m", "dec-1", 0);
  ASSERT_EQ(body["answers"].size(), 2u);
  const ojson& choice = body["answers"][0];
  EXPECT_EQ(choice["name"], "yes_no");
  EXPECT_EQ(choice["choice"], "maybe");
  EXPECT_EQ(choice["probabilities"][0]["value"], true);
  EXPECT_FLOAT_EQ(choice["confidence"].get<float>(), 0.75f);
  const ojson& score = body["answers"][1];
  EXPECT_TRUE(score["name"].is_null());
  EXPECT_NEAR(score["score"].get<double>(), 0.3 + 2 * 0.5, 1e-6);
  EXPECT_EQ(score["probabilities"][2]["label"], "c");
  EXPECT_EQ(body["usage"]["input_tokens"], 12);
  // A result with fewer values than the question has options does not fit.
  m.items[1].values.pop_back();
  EXPECT_FALSE(TaskResultFits(r, m));
}

TEST(DecisionsApi, RefusalsNameTheirPath) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"questions": [{"type": "predicate", "instructions": "q"}]})", "input"},
      {R"({"input": "s", "questions": []})", "questions"},
      {R"({"input": "s", "questions": [{"type": "noul", "instructions": "q"}]})",
       "questions[0].type"},
      {R"({"input": [{"role": "tool", "content": "x"}], "questions": [{"type": "predicate", "instructions": "q"}]})",
       "input[0].role"},
      {R"({"input": "s", "questions": [{"type": "choice", "instructions": "q", "choices": [{"value": 1}, {"value": "b"}]}]})",
       "questions[0].choices[0].value"},
      {R"({"input": "s", "safety_identifier": "u", "questions": [{"type": "predicate", "instructions": "q"}]})",
       "safety_identifier"},
      {R"({"input": "s", "cache_salt": "x", "questions": [{"type": "predicate", "instructions": "q"}]})",
       "cache_salt"},
  };
  for (const auto& [body, param] : cases) {
    auto parsed = ParseDecisionsBody(ojson::parse(body));
    ASSERT_TRUE(std::holds_alternative<ApiError>(parsed)) << body;
    EXPECT_EQ(std::get<ApiError>(parsed).param, param) << body;
    EXPECT_EQ(std::get<ApiError>(parsed).status, 400) << body;
  }
}

}  // namespace
}  // namespace tessera::server
