// `tessera serve`: the event-driven HTTP/1.1 front end (http_front_end.h) in front of the
// OpenAI-compatible API (api_service.h), which validates requests, admits them through a
// bounded queue and hands them to the supervised inference worker; this process never runs a
// model itself. Protections are on by default: bearer auth, a per-client rate limit, body,
// head and JSON limits, read deadlines, connection caps, request deadlines, closed CORS. One
// access-log line per request (readable text, or JSON with --log-format json) goes to stderr.
//
//   ServeOptions options;
//   options.models = {{"stories", "/models/stories260k"}};
//   options.executable = "/usr/bin/tessera";   // started again as `tessera worker`
//   options.api_key = "secret";
//   return RunServer(options);                 // until SIGTERM or SIGINT
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "server/api_keys.h"
#include "server/endpoints.h"
#include "worker/model_entry.h"

namespace tessera::server {

inline constexpr int kRateLimitAuto = -1;
inline constexpr int kDefaultRateLimitPerMinute = 30;

struct ServeOptions {
  std::string host = "127.0.0.1";          // a name: every address it resolves to is bound
  int port = 8000;                         // 0: any free port (printed at start)
  std::vector<worker::ModelEntry> models;  // the first is the default
  std::string executable;                  // this binary, for the worker
  std::vector<std::string> worker_args;    // placement, context, residency, prewarm flags
  // Where each model's layers run ("layers 0-11 -> xdna#0, layers 12-29 + head -> cpu#1"), by
  // model name, and the NPU those on xdna use (empty: none), for /ready and the stats.
  std::map<std::string, std::string> placements;
  std::string npu_device;
  // GET /metrics without the API key (--metrics-public); otherwise it needs the key like the
  // API routes.
  bool metrics_public = false;
  // The built-in web page at / (web_ui.h); --no-ui turns it off (then / is a 404).
  bool web_ui = true;
  // The access log: one JSON object per line ({"type":"access",...}) instead of a readable line.
  bool access_log_json = false;
  // TESSERA_API_KEY, named "default" (api_keys.h); empty: none.
  std::string api_key;
  // No key given (no TESSERA_API_KEY, --api-keys nor --no-auth): the file of the generated key
  // (saved_api_key.h), read or created once the port is bound, named "default". Until then no
  // token is accepted.
  std::string saved_api_key_file;
  // --api-keys FILE: named keys (api_keys.h), as loaded and checked before the server starts,
  // and the file, read again on SIGHUP. No key here nor in api_key: no authentication
  // (--no-auth).
  std::string api_keys_file;
  std::vector<ApiKey> api_keys;
  // --shared-prefix-cache: requests of every key share one prefix-cache scope (a request's
  // cache_salt still separates); by default each key's cached prefixes are its own.
  bool shared_prefix_cache = false;
  // --no-auth: refuse to start unless every address the host resolves to is loopback.
  bool require_loopback = false;
  std::vector<std::string> allow_origins;
  int max_active = 1;
  int max_queued = 2;
  // Requests per minute per client; 0: off; kRateLimitAuto: off when every address the server
  // listens on is loopback (one user's machine), else kDefaultRateLimitPerMinute.
  int rate_limit_per_minute = kRateLimitAuto;
  size_t max_body_bytes = 1u << 20;
  int request_timeout_s = 120;
  // A cancelled job (deadline, hang-up) must stop within this, else the worker is hung and
  // is killed (WorkerSupervisor::Options::hang_timeout).
  int hang_timeout_s = 30;
  int socket_timeout_s = 120;  // the whole request (head + body)
  int stall_timeout_s = 10;    // a write without progress this long cuts the client
  int header_timeout_s = 10;   // the whole request head
  std::string tls_cert;        // both set: HTTPS
  std::string tls_key;
  int http_threads = 1;  // event-loop threads; connections cost none while idle or waiting
  int keep_alive_timeout_s = 5;
  int max_connections = 1024;
  int max_connections_per_client = 64;
  // Endpoints beside the built-in table (endpoints.h), matched after it.
  std::vector<Endpoint> extra_endpoints;
};

// Runs until SIGTERM/SIGINT, then drains: new requests get 503, in-flight ones may finish
// within the request timeout, then the worker is stopped (exit code 0). A second signal while
// draining stops at once (exit code 1). SIGHUP reloads the --api-keys file. Returns the exit
// code.
int RunServer(const ServeOptions& options);

}  // namespace tessera::server
