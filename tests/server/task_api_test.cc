// Task endpoints' request parsing and response building (task_api.h), without a model: bad
// input parts are 400s naming the part, and a worker result that does not fit its request is
// recognised before the response is built from it.
#include "server/task_api.h"

#include <gtest/gtest.h>

#include <variant>

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
  EXPECT_EQ(std::get<TaskRequest>(parsed).job.inputs, std::vector<std::string>{"hello"});
}

TaskItem Item(int32_t index, std::vector<float> values) {
  TaskItem item;
  item.index = index;
  item.values = std::move(values);
  return item;
}

TEST(TaskApi, AWorkerResultMustFitItsRequest) {
  TaskRequest rerank;
  rerank.endpoint = TaskEndpoint::kRerank;
  rerank.return_documents = true;
  rerank.job.inputs = {"first", "second"};
  TaskResultMessage result;
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
  Question choice;
  choice.type = QuestionType::kChoice;
  choice.options = {"red", "green", "blue"};
  choice.descriptions = {"", "", ""};
  Question noul;
  noul.type = QuestionType::kNoul;
  noul.options = {"yes", "no"};
  noul.descriptions = {"", ""};
  system_one.job.questions = {choice, noul};
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

}  // namespace
}  // namespace tessera::server
