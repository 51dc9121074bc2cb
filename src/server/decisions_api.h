// OpenAI's decisions API (POST /v1/decisions) on tessera's System One job: the input (a
// string, or messages and tool items) becomes the state, each question (predicate, choice or
// score) a System One question, and the probabilities come back in OpenAI's typed answers:
// predicate {probability}, choice {choice, confidence, probabilities [{value, probability}]}
// with choice values kept typed (a boolean stays a boolean), score {score (the expected level,
// levels counted from 0), confidence, probabilities [{label, value, probability}]}.
// tessera's limits, stated in errors: 1 to 64 questions, 2 to 10 choices or levels; images
// are refused until the vision tower lands.
//
//   TaskRequest r;
//   if (auto e = ParseDecisions(body, &r)) return *e;   // r.job holds a SystemOnePayload
//   ... submit r.job, receive a TaskResultMessage m ...
//   reply(200, DecisionsBody(r, m, "qwen3-0.6b"));
#pragma once

#include <optional>

#include <nlohmann/json.hpp>

#include "server/openai_api.h"
#include "server/task_api.h"

namespace tessera::server {

// The fields /v1/decisions reads (beside them, a non-null member is refused by name).
std::span<const std::string_view> DecisionsFields();

// Fills r->job's SystemOnePayload and r->decision_questions from the body; 400 naming the
// field's path (questions[1].choices[0].value) when it is malformed or beyond tessera's limits.
std::optional<ApiError> ParseDecisions(const nlohmann::ordered_json& body, TaskRequest* r);

// OpenAI's Decision object: {model, answers (in question order), usage}.
nlohmann::ordered_json DecisionsBody(const TaskRequest& request,
                                     const worker::TaskResultMessage& result,
                                     const std::string& model);

}  // namespace tessera::server
