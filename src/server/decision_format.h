// Decisions on /v1/chat/completions are recognised here, in the HTTP process: a
// response_format json_schema whose schema is a choice among a few values (an enum; a
// oneOf/anyOf of {const, description}; {"type": "boolean"}; or an object with one property
// holding one of those) becomes a typed ResponseFormat of kind kDecision, which the worker
// answers by scoring every option (worker/decision_job.h) instead of generating.
//
//   if (auto decision = DecisionFormat(body["response_format"])) job.options.response_format =
//   *decision; else  // a schema to generate under
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <optional>

#include "worker/protocol.h"

namespace tessera::server {

// The decision `format` (the request's response_format) asks for, or nullopt when its schema
// is not one of the decision shapes.
std::optional<worker::ResponseFormat> DecisionFormat(const nlohmann::ordered_json& format);

}  // namespace tessera::server
