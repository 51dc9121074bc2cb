// The event-driven HTTP/1.1 front end (Boost.Beast's strict parser on Boost.Asio, TLS through
// OpenSSL). Connections cost no thread while idle, trickling or waiting for an answer: a few
// event-loop threads serve all of them, and the handler answers from wherever it likes
// through an HttpExchange. Everything is bounded while it is read, before any work:
//   * the request head (bytes, field count) and a deadline for the whole head;
//   * the body, for every transfer coding: 413 as soon as the declared or received size passes
//     the limit, without reading the rest, then the connection closes;
//   * a deadline for the whole request (head and body) from its first byte, so a trickle is
//     cut;
//   * what a client leaves unread: the kernel holds little of a connection's unsent output
//     (TCP_NOTSENT_LOWAT), a stream's unsent output past max_unsent_stream_bytes cuts the
//     client, and so does a write that makes no progress for stall_timeout_s; the request is
//     then gone (HttpExchange::client_gone, client_stalled), so its job stops and frees its
//     place at once, while nothing on the job's side ever waits for the socket;
//   * open connections in total and per client address, idle keep-alive time.
// Framing follows RFC 9112: conflicting or duplicate lengths are 400 and close; a response
// sent without reading the announced body closes the connection; pipelined requests are
// answered in order; HTTP/1.0 streams are close-delimited. `Expect: 100-continue` is answered
// only after the handler's Screen() and the size check passed.
//
//   HttpFrontEndOptions o;  o.host = "127.0.0.1";  o.port = 0;
//   auto fe = HttpFrontEnd::Create(o, handler);        // resolves, binds, listens
//   if (!fe) { print fe.status(); return 1; }
//   std::thread loop([&] { (*fe)->Run(); });           // until Stop()
//   ...  (*fe)->Stop();  loop.join();
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "server/http_exchange.h"

namespace tessera::server {

struct HttpFrontEndOptions {
  std::string host = "127.0.0.1";  // a name is resolved; every address it has is bound
  int port = 8000;                 // 0: a free port (the same one on every address)
  bool require_loopback = false;   // refuse to start unless every bound address is loopback
  std::string tls_cert;            // both set: HTTPS only
  std::string tls_key;
  int threads = 1;             // event-loop threads
  int header_timeout_s = 10;   // the whole request head, from its first byte
  int socket_timeout_s = 120;  // the whole request (head + body)
  int stall_timeout_s = 10;    // a write without progress this long cuts the client
  // A stream's output queued in the process and not yet taken by the kernel; past it the
  // client (which is not reading) is cut.
  size_t max_unsent_stream_bytes = 256 * 1024;
  int keep_alive_timeout_s = 2;  // idle between requests (and before the first one)
  size_t max_header_bytes = 16 * 1024;
  size_t max_header_fields = 100;
  size_t max_body_bytes = 1u << 20;
  int max_connections = 1024;           // beyond: 503 and close
  int max_connections_per_client = 64;  // per remote address; beyond: 429 and close
};

struct HttpFrontEndStats {
  int64_t open_connections = 0;
  int64_t accepted = 0;
  int64_t refused_over_limit = 0;  // answered 429/503 at accept because of a connection cap
};

class HttpFrontEnd {
 public:
  // Resolves the host, checks require_loopback against every resolved address, loads the
  // TLS certificate, binds and listens (backlog: the system's maximum). The handler must
  // outlive the front end.
  static Expected<std::unique_ptr<HttpFrontEnd>> Create(const HttpFrontEndOptions& options,
                                                        HttpHandler* handler);
  virtual ~HttpFrontEnd() = default;

  // The port bound (the same on every address) and the addresses, numeric.
  virtual int port() const = 0;
  virtual std::vector<std::string> addresses() const = 0;
  // Whether every address bound is loopback (only this machine can connect).
  virtual bool loopback_only() const = 0;
  // Runs the event loop on options.threads threads (this one included) until Stop().
  virtual void Run() = 0;
  // Stops accepting, closes every connection and ends Run(). Safe from any thread.
  virtual void Stop() = 0;
  // Stops accepting, closes idle connections at once and the others as soon as the answer in
  // progress has been written, waits (at most `grace`) for all of them to end, then Stop().
  // Safe from any thread but the event loop's.
  virtual void Shutdown(std::chrono::milliseconds grace) = 0;
  virtual HttpFrontEndStats stats() const = 0;
};

}  // namespace tessera::server
