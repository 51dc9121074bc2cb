// Fuzzes the HTTP/1.1 front end's request reading (request line, headers, Content-Length and
// chunked bodies, pipelining, Expect, keep-alive) through the real Connection state machine
// (server/http_connection.cc) over an in-memory transport instead of a socket: the input is
// what a client sends, delivered in reads of a size the input chooses; the handler answers
// every request (streamed for paths under /stream, refused at the head for /screen), and the
// client's sending side ends after the input. Each input must end with the connection closed,
// on a single event-loop run without timers firing.
// Input: one byte (read size: 0 means 16 KiB, the server's own read size), then the bytes sent.
#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>

#include "server/http_connection.h"
#include "server/http_exchange.h"

namespace hi = tessera::server::http_internal;
namespace ts = tessera::server;

namespace {

class MemoryTransport final : public hi::Transport {
 public:
  MemoryTransport(hi::asio::io_context& io, std::string_view input, size_t read_size)
      : socket_(io), input_(input), read_size_(read_size) {}
  hi::tcp::socket& socket() override { return socket_; }
  void Handshake(Done done) override {
    hi::asio::post(socket_.get_executor(), [done = std::move(done)] { done({}); });
  }
  void ReadSome(hi::asio::mutable_buffer b, IoHandler h) override {
    const size_t n = std::min({b.size(), read_size_, input_.size()});
    if (n > 0) memcpy(b.data(), input_.data(), n);
    input_.remove_prefix(n);
    const hi::error_code ec = n == 0 ? hi::error_code(boost::asio::error::eof) : hi::error_code();
    hi::asio::post(socket_.get_executor(), [h = std::move(h), ec, n] { h(ec, n); });
  }
  // Takes at most read_size_ bytes a call, so partial writes are exercised too.
  void WriteSome(hi::asio::const_buffer b, IoHandler h) override {
    const size_t n = std::min(b.size(), std::max<size_t>(1, read_size_));
    written_ += n;
    hi::asio::post(socket_.get_executor(), [h = std::move(h), n] { h({}, n); });
  }
  void Shutdown(Done done) override {
    hi::asio::post(socket_.get_executor(), [done = std::move(done)] { done({}); });
  }
  bool tls() const override { return false; }

 private:
  hi::tcp::socket socket_;
  std::string_view input_;
  size_t read_size_;
  size_t written_ = 0;
};

class EchoHandler final : public ts::HttpHandler {
 public:
  std::optional<ts::HttpResponse> Screen(ts::HttpRequest& head) override {
    if (head.path == "/screen") return ts::HttpResponse::Json(403, "{\"error\":\"screened\"}");
    return std::nullopt;
  }
  void Handle(ts::HttpRequest request, std::shared_ptr<ts::HttpExchange> exchange) override {
    if (request.path.rfind("/stream", 0) == 0) {
      exchange->BeginStream(200, {{"X-Test", "1"}}, "text/event-stream");
      exchange->StreamWrite("data: " + std::to_string(request.body.size()) + "\n\n");
      exchange->EndStream();
      return;
    }
    ts::HttpResponse r =
        ts::HttpResponse::Json(200, "{\"bytes\":" + std::to_string(request.body.size()) + "}");
    r.SetHeader("X-Path", request.path);  // echoes client text into a header
    exchange->Respond(std::move(r));
  }
  ts::HttpResponse ProtocolError(int status, const std::string& code,
                                 const std::string& message) override {
    return ts::HttpResponse::Json(
        status, "{\"code\":\"" + code + "\",\"n\":" + std::to_string(message.size()) + "}");
  }
  void Completed(const ts::HttpRequest&, const std::string&, int, const ts::AccessRecord&,
                 double) override {}
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const size_t read_size = data[0] == 0 ? 16 * 1024 : data[0];
  const std::string_view input(reinterpret_cast<const char*>(data + 1), size - 1);
  static EchoHandler handler;
  hi::asio::io_context io;
  auto shared = std::make_shared<hi::FrontEndShared>();
  shared->handler = &handler;
  shared->options.max_header_bytes = 4096;  // small limits, so the fuzzer reaches them
  shared->options.max_header_fields = 20;
  shared->options.max_body_bytes = 8192;
  shared->id_prefix = "fuzz-";
  {
    auto conn = std::make_shared<hi::Connection>(
        shared, std::make_unique<MemoryTransport>(io, input, read_size), "127.0.0.1", 4242,
        hi::ConnectionSlot());
    conn->Start();
  }
  // Every read completes at once, so the connection must close without waiting for a timer.
  const auto start = std::chrono::steady_clock::now();
  io.run_for(std::chrono::seconds(5));
  if (std::chrono::steady_clock::now() - start >= std::chrono::seconds(5) || !io.stopped()) {
    fprintf(stderr, "the connection did not finish on its own\n");
    abort();
  }
  std::lock_guard<std::mutex> lock(shared->live_mu);
  if (!shared->live.empty()) {
    fprintf(stderr, "a connection outlived its input\n");
    abort();
  }
  return 0;
}
