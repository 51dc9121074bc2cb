// `tessera serve`'s HTTP side: an OpenAI-compatible HTTP/1.1 (optionally TLS) server that
// validates requests, admits them through a bounded queue and hands them to the supervised
// inference worker; it never runs a model itself. Protections are on by default: bearer auth,
// a per-client rate limit, body and JSON limits, socket timeouts, request deadlines, closed
// CORS. One JSON access-log line per request goes to stderr.
//
//   ServeOptions options;
//   options.models = {{"stories", "/models/stories260k"}};
//   options.executable = "/usr/bin/tessera";   // started again as `tessera worker`
//   options.api_key = "secret";
//   return RunServer(options);                 // until SIGTERM or SIGINT
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "server/worker.h"

namespace tessera::server {

struct ServeOptions {
  std::string host = "127.0.0.1";
  int port = 8000;                       // 0: any free port (printed at start)
  std::vector<ModelEntry> models;        // the first is the default
  std::string executable;                // this binary, for the worker
  std::vector<std::string> worker_args;  // placement, context, residency, prewarm flags
  std::string api_key;                   // empty: no authentication (--no-auth, loopback only)
  std::vector<std::string> allow_origins;
  int max_active = 1;
  int max_queued = 2;
  int rate_limit_per_minute = 30;  // 0: off
  size_t max_body_bytes = 1u << 20;
  int request_timeout_s = 120;
  int socket_timeout_s = 120;
  std::string tls_cert;  // both set: HTTPS
  std::string tls_key;
  // Each open connection holds one of `http_threads` while it is served and while it idles
  // between keep-alive requests (at most keep_alive_timeout_s); connections beyond that wait
  // for a free thread.
  int http_threads = 64;
  int keep_alive_timeout_s = 2;
};

// Runs until SIGTERM/SIGINT, then drains: new requests get 503, in-flight ones may finish
// within the request timeout, then the worker is stopped. Returns the exit code.
int RunServer(const ServeOptions& options);

}  // namespace tessera::server
