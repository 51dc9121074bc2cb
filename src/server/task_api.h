// The task endpoints' wire formats: /v1/embeddings (OpenAI), /v1/rerank and /rerank
// (Cohere/Jina), /v1/moderations (OpenAI, answered by a Qwen3Guard model), /classify (vLLM)
// and /v1/systemone (System One: questions about a state, each a choice, a score or a yes/no,
// sent as an object keyed by name (or, tessera's extension, as a list) and answered with
// probabilities under the same names (or in a list); a malformed body is a 422 naming the
// field's path, e.g. questions.team.criteria or questions[1].criteria).
// Each body is checked field by field (an unknown field is a 400 naming it) and becomes one
// task JobRequest; the worker's TaskResultMessage becomes the endpoint's response body.
//
//   auto parsed = ParseTaskRequest(TaskEndpoint::kEmbeddings, body);
//   if (auto* e = std::get_if<ApiError>(&parsed)) reply(e->status, ErrorBody(*e));
//   ... submit std::get<TaskRequest>(parsed).job, receive a TaskResultMessage ...
//   reply(200, TaskResponseBody(request, result, "model-name", id, created));
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "format/model_kind.h"
#include "server/openai_api.h"
#include "worker/protocol.h"

namespace tessera::server {

enum class TaskEndpoint { kEmbeddings, kRerank, kModerations, kClassify, kSystemOne, kDecisions };

inline constexpr size_t kMaxTaskInputs = 2048;        // inputs (or documents) per request
inline constexpr int64_t kMaxEmbeddingTokens = 4096;  // per embedding input
inline constexpr size_t kMaxSystemOneQuestions = 64;

// /v1/decisions (decisions_api.h): what an answer needs that the worker's question lacks.
struct DecisionQuestionMeta {
  std::optional<std::string> name;             // the answer's name (null when absent)
  std::vector<nlohmann::ordered_json> values;  // choice: each value as sent (string or boolean)
  std::vector<std::string> labels;             // score: each level's label, lowest first
};

struct TaskRequest {
  TaskEndpoint endpoint = TaskEndpoint::kEmbeddings;
  worker::JobRequest job;  // the endpoint's payload; model empty: the server picks one by kind
  bool base64 = false;     // embeddings: encoding_format "base64"
  int64_t top_n = -1;      // rerank: results kept (-1: all)
  bool return_documents = false;
  bool strict = false;  // moderations: Controversial is flagged too
  // System One: each question's name, in request order, when `questions` was an object (the
  // answers are then an object keyed by them); empty when it was a list (answers in a list).
  std::vector<std::string> question_names;
  std::vector<DecisionQuestionMeta> decision_questions;  // /v1/decisions: one per question
  // The request field the job's input was read from, as the client's API spells it, when it is
  // not the payload's own name (System One's "state", the other tasks' "input"): the decisions
  // API's "input", Ollama's legacy /api/embeddings "prompt". Errors about the input name it.
  std::string input_field{};
};

// The model field's name for messages ("model").
std::variant<TaskRequest, ApiError> ParseTaskRequest(TaskEndpoint endpoint,
                                                     const nlohmann::ordered_json& body);
// The body keeps its members' order (System One's answers by name come in request order).
nlohmann::ordered_json TaskResponseBody(const TaskRequest& request,
                                        const worker::TaskResultMessage& result,
                                        const std::string& model, const std::string& id,
                                        int64_t created);
// Whether a worker's result fits the request it answers, as TaskResponseBody reads it: every
// item's index inside the request's inputs (questions, for System One) and as many values as
// the question has options. The worker is a separate process; a result that does not fit is
// a bug to answer with a 500, never a read past the request.
bool TaskResultFits(const TaskRequest& request, const worker::TaskResultMessage& result);

// OpenAI's base64 embedding: the float32 values' little-endian bytes, base64-encoded.
std::string EncodeFloatsBase64(const std::vector<float>& values);

}  // namespace tessera::server
