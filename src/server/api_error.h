// What a request is refused with: its HTTP status and OpenAI's error fields. Each endpoint's
// dialect shapes the body (generation_wire.h: ErrorBodyIn). Light on purpose: most server
// headers name it, few build JSON.
//
//   if (bad) return InvalidField("top_p", "top_p must be in (0, 1]");   // a 400 naming it
#pragma once

#include <string>

namespace tessera::server {

struct ApiError {
  int status = 400;
  std::string type = "invalid_request_error";
  std::string message;
  std::string param;  // empty: null
  std::string code;   // empty: null
};

ApiError InvalidField(const std::string& param, const std::string& message);

}  // namespace tessera::server
