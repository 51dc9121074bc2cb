// Internal to the HTTP front end (http_front_end.cc, http_connection.cc): one client
// connection's state machine on its own strand, and the transport under it (plain TCP or
// TLS). Only these two files include Boost.Asio/Beast, which are heavy to compile.
//
//   auto conn = std::make_shared<Connection>(shared, std::move(transport), peer, slot);
//   conn->Start();   // handshake (TLS), then read requests until the connection ends
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>

#include "server/http_front_end.h"

namespace tessera::server::http_internal {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using error_code = boost::system::error_code;
// The connection's strand, as its socket holds it.
using Strand = asio::any_io_executor;
using Clock = std::chrono::steady_clock;

// Plain TCP or TLS; every completion runs on the socket's strand.
class Transport {
 public:
  using IoHandler = std::function<void(const error_code&, size_t)>;
  using Done = std::function<void(const error_code&)>;
  virtual ~Transport() = default;
  virtual tcp::socket& socket() = 0;
  virtual void Handshake(Done done) = 0;
  virtual void ReadSome(asio::mutable_buffer buffer, IoHandler handler) = 0;
  // Completes once some of `buffer` was written (the progress the stall timeout watches).
  virtual void WriteSome(asio::const_buffer buffer, IoHandler handler) = 0;
  // Ends our sending side (TCP FIN, or TLS close_notify) so the client sees a clean end.
  virtual void Shutdown(Done done) = 0;
  virtual bool tls() const = 0;
};

std::unique_ptr<Transport> MakePlainTransport(tcp::socket socket);
std::unique_ptr<Transport> MakeTlsTransport(tcp::socket socket, asio::ssl::context& context);

// What every connection of one front end shares: options, the handler, counters and the
// registry that Stop() walks.
struct FrontEndShared {
  HttpFrontEndOptions options;
  HttpHandler* handler = nullptr;
  std::string id_prefix;
  std::atomic<uint64_t> next_id{0};
  std::atomic<int64_t> open_connections{0};
  std::atomic<int64_t> accepted{0};
  std::atomic<int64_t> refused{0};
  std::atomic<bool> stopping{false};

  // Per client address: open connections (for the per-client cap).
  std::mutex clients_mu;
  std::map<std::string, int> per_client;
  // Every live connection, so Stop() can close them; live_cv is notified as each one ends.
  std::mutex live_mu;
  std::condition_variable live_cv;
  std::map<const void*, std::weak_ptr<class Connection>> live;
};

// Holds one unit of the per-client and total connection counts while a connection lives.
class ConnectionSlot {
 public:
  ConnectionSlot() = default;
  ConnectionSlot(std::shared_ptr<FrontEndShared> shared, std::string client);
  ConnectionSlot(ConnectionSlot&& other) noexcept { *this = std::move(other); }
  ConnectionSlot& operator=(ConnectionSlot&& other) noexcept;
  ~ConnectionSlot();

 private:
  std::shared_ptr<FrontEndShared> shared_;
  std::string client_;
};

// One request as the front end and its exchange see it.
struct ExchangeState {
  std::string id;
  HttpRequest head;  // without the body
  Clock::time_point start;
  std::atomic<bool> gone{false};
  std::atomic<bool> stalled{false};  // gone because it did not read (set before `gone`)
  std::mutex record_mu;
  AccessRecord record;
  // Touched on the connection's strand only.
  int status = 0;
  bool answered = false;  // a response (or stream head) was given
  bool finished = false;  // the whole answer was queued
  bool logged = false;
};

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(std::shared_ptr<FrontEndShared> shared, std::unique_ptr<Transport> transport,
             std::string client, int client_port, ConnectionSlot slot);
  ~Connection();

  // Registers the connection, runs the TLS handshake if any, then reads requests.
  void Start();
  // A connection over a cap: answer `status` at once and close (nothing is read).
  void Refuse(int status, const std::string& code, const std::string& message);
  // On the strand (posted by the front end): close now.
  void CloseNow();
  // On the strand (posted by a draining front end): close now if no request is being answered,
  // else right after its answer has been written.
  void CloseWhenIdle();

  // Posted onto the strand by the exchange.
  void SendResponse(const std::shared_ptr<ExchangeState>& ex, HttpResponse response);
  void SendStreamHead(const std::shared_ptr<ExchangeState>& ex, int status,
                      std::vector<HttpHeader> headers, const std::string& content_type);
  void SendStreamData(const std::shared_ptr<ExchangeState>& ex, std::string data);
  void SendStreamEnd(const std::shared_ptr<ExchangeState>& ex);
  void Abandoned(const std::shared_ptr<ExchangeState>& ex);

  const Strand& strand() const { return strand_; }

 private:
  enum class State { kHandshake, kIdle, kHead, kBody, kHandling, kClosing, kClosed };

  void Process();
  // A fresh current_ for the request now starting (or answered without a head).
  void NewExchange();
  void StartRequest();
  bool OnHead();
  void OnRequestComplete();
  void OnParseError(const error_code& ec);
  void OnEndOfInput();
  void DoRead();
  void OnRead(const error_code& ec, size_t n);
  void ArmReadTimer(Clock::time_point deadline);
  void OnReadTimer();

  // Answers the current request from the front end itself (or Screen()), then continues
  // with the next request or closes.
  void Reply(HttpResponse response, bool close);
  void ProtocolReply(int status, const std::string& code, const std::string& message);
  void Queue(std::string bytes);
  void DoWrite();
  void OnWrite(const error_code& ec, size_t n);
  void AfterResponse();
  std::string SerializeHead(int status, const std::vector<HttpHeader>& headers,
                            const std::string& content_type, std::optional<size_t> length,
                            bool chunked, bool close) const;
  void MarkGone();
  // Cuts a client that does not read: the request is gone (stalled), the connection closed.
  void CutStalled();
  // Output queued in the process and not yet taken by the kernel.
  size_t Unsent() const { return pending_.size() + inflight_.size() - inflight_done_; }
  void ArmStallTimer();
  void Log(ExchangeState& ex);
  void BeginClose();
  void Linger();
  void Register();

  std::shared_ptr<FrontEndShared> shared_;
  std::unique_ptr<Transport> transport_;
  Strand strand_;
  std::string client_;
  int client_port_ = 0;
  ConnectionSlot slot_;
  State state_ = State::kHandshake;

  boost::beast::flat_buffer in_;
  std::optional<boost::beast::http::request_parser<boost::beast::http::string_body>> parser_;
  bool reading_ = false;
  bool input_ended_ = false;  // the client closed its sending side (or the socket failed)
  asio::steady_timer read_timer_;
  Clock::time_point request_deadline_;

  std::shared_ptr<ExchangeState> current_;
  int version_ = 11;
  bool keep_alive_ = true;
  bool head_only_ = false;    // a HEAD request: headers without the body
  bool chunked_out_ = false;  // the current response is a chunked stream
  bool close_after_ = false;  // the current response ends the connection

  std::string pending_;       // bytes queued behind the write in flight
  std::string inflight_;      // the buffer being written
  size_t inflight_done_ = 0;  // of inflight_, written so far
  bool writing_ = false;
  asio::steady_timer write_timer_;  // the stall timeout of the write in flight
  size_t lingered_ = 0;
};

}  // namespace tessera::server::http_internal
