// What the HTTP front end (http_front_end.h) and the API service (api_service.h) say to each
// other, with no HTTP library in sight: a parsed request, a response, and the exchange through
// which one request is answered (whole, or as a stream) from any thread.
//
//   class Hello : public HttpHandler {
//     std::optional<HttpResponse> Screen(HttpRequest& head) override {
//       return std::nullopt;  // or a 401/404/429 sent before the body is read
//     }
//     void Handle(HttpRequest request, std::shared_ptr<HttpExchange> exchange) override {
//       exchange->Respond(HttpResponse::Json(200, R"({"hello":"world"})"));
//     }
//   };
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tessera::server {

struct HttpHeader {
  std::string name;
  std::string value;
};

// Case-insensitive ASCII comparison, as HTTP field names and auth schemes compare.
bool EqualsIgnoreCase(std::string_view a, std::string_view b);

struct HttpRequest {
  std::string method;  // as sent, e.g. "GET"
  std::string target;  // as sent, e.g. "/v1/models?x=1"
  std::string path;    // the target's path (origin form), without the query
  int version = 11;    // 10 or 11
  std::vector<HttpHeader> headers;
  std::string body;         // empty until the whole request has been read
  bool has_body = false;    // the head announced a body (Content-Length > 0 or chunked)
  std::string remote_addr;  // numeric
  int remote_port = 0;
  // Set by HttpHandler::Screen: the name of the API key the request authenticated with (never
  // the key); empty when it needed none.
  std::string api_key_name;

  // The first field with this name (case-insensitive), or empty.
  std::string_view Header(std::string_view name) const;
};

struct HttpResponse {
  int status = 200;
  std::vector<HttpHeader> headers;  // besides Content-Type/Length, Date and Connection
  std::string content_type = "application/json";
  std::string body;

  static HttpResponse Json(int status, std::string body) {
    HttpResponse r;
    r.status = status;
    r.body = std::move(body);
    return r;
  }
  void SetHeader(std::string name, std::string value) {
    headers.push_back({std::move(name), std::move(value)});
  }
  std::string_view Header(std::string_view name) const;
};

// What the access log says about one request; the handler fills what it knows.
struct AccessRecord {
  std::string model;
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  double queue_ms = 0;
  double ttft_ms = 0;
  std::string finish;  // finish reason, or how the request was cut short
  // The model's scheduler when the job ended (for /metrics); `known` is false for requests
  // that ran no generation job.
  struct Scheduler {
    bool known = false;
    int32_t slots = 0, slots_in_use = 0, sequences_waiting = 0;
    int64_t kv_blocks = 0, kv_blocks_free = 0, kv_blocks_cached = 0;
  } scheduler;
};

// One request's answer channel. Every method may be called from any thread; the front end
// performs the writes on the connection's own event-loop strand, in call order. Exactly one
// of Respond() or BeginStream()..EndStream() answers a request; an exchange dropped without
// an answer is answered 500.
class HttpExchange {
 public:
  virtual ~HttpExchange() = default;

  virtual const std::string& request_id() const = 0;  // also sent as X-Request-Id
  virtual void Respond(HttpResponse response) = 0;
  // Starts a streamed 200-class response: chunked for HTTP/1.1, close-delimited for HTTP/1.0.
  virtual void BeginStream(int status, std::vector<HttpHeader> headers,
                           const std::string& content_type) = 0;
  // Queues bytes of the stream; false once the client is gone (nothing more will be sent).
  virtual bool StreamWrite(std::string data) = 0;
  virtual void EndStream() = 0;
  // True once the client closed or reset the connection, a write failed, or the front end cut
  // a client that did not read (client_stalled). A half-close (the client shut down its
  // sending side) counts as gone, as in Go's net/http and nginx.
  virtual bool client_gone() const = 0;
  // True when the client is gone because it stopped reading: no write progress for the stall
  // timeout, or a stream's unsent output past its bound.
  virtual bool client_stalled() const { return false; }
  // Edits the access-log record of this request (under a lock).
  virtual void Note(const std::function<void(AccessRecord&)>& edit) = 0;
};

class HttpHandler {
 public:
  virtual ~HttpHandler() = default;
  // Called on the event loop when a request's head is complete, before its body is read.
  // A response refuses the request without reading its body (auth, rate limit, unknown
  // route, draining); the connection is then closed if a body was announced. It may note who
  // the request is (head.api_key_name); Handle and Completed see the same head.
  virtual std::optional<HttpResponse> Screen(HttpRequest& head) = 0;
  // Called on the event loop with the whole request. Must not block: anything that waits
  // answers later, from another thread, through `exchange`.
  virtual void Handle(HttpRequest request, std::shared_ptr<HttpExchange> exchange) = 0;
  // A response the front end makes itself (413, 400, 408, 431, ...), in the service's error
  // shape. `param` may be empty.
  virtual HttpResponse ProtocolError(int status, const std::string& code,
                                     const std::string& message) = 0;
  // Once per request that got a head, when its answer has been written or can no longer be
  // (the client left): for the access log. `head` has no body; `status` is 499 for a request
  // whose client left before anything was sent.
  virtual void Completed(const HttpRequest& head, const std::string& request_id, int status,
                         const AccessRecord& record, double total_ms) = 0;
};

}  // namespace tessera::server
