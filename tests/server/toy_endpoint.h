// A toy endpoint for the endpoint-table test: POST /v1/toy {"model": NAME, "text": T} answers
// {"id": "toy-<request id>", "model": NAME, "echo": T}, on embedding models only. It is one
// table row (ToyEndpoint) and this handler; nothing else in the server knows about it.
#pragma once

#include "server/endpoints.h"

namespace tessera::server::test {

Endpoint ToyEndpoint();

}  // namespace tessera::server::test
