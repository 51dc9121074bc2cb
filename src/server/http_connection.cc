#include "server/http_connection.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <time.h>

#include <algorithm>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/status.hpp>
#include <cstdio>

namespace tessera::server::http_internal {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;

// While a request is being answered the connection keeps reading, only to notice that the
// client left; pipelined requests wait in the buffer, up to this much.
constexpr size_t kMaxBufferedWhileAnswering = 64 * 1024;
// A closing connection reads and drops what the client still sends (so the client sees our
// answer, not a reset) for at most this long and this much.
constexpr auto kLingerTime = std::chrono::seconds(2);
constexpr size_t kMaxLingerBytes = 1 << 20;
// The kernel's share of a connection's unsent output (TCP_NOTSENT_LOWAT: the socket takes
// more only while less than this is waiting to go on the wire; what is in flight is not
// limited, so throughput is not). Without it the kernel buffers megabytes of a client that
// does not read, and a stalled write shows only after they are full.
constexpr int kKernelUnsentBytes = 16 * 1024;
constexpr size_t kReadChunk = 16 * 1024;

// Whether a Transfer-Encoding value names the chunked coding alone (RFC 9112: a list of
// case-insensitive codings; Beast has already refused a repeated header).
bool OnlyChunked(std::string_view value) {
  int codings = 0;
  bool chunked = false;
  for (const auto& coding : http::token_list(value)) {
    ++codings;
    chunked = beast::iequals(coding, "chunked");
  }
  return codings == 1 && chunked;
}

class PlainTransport final : public Transport {
 public:
  explicit PlainTransport(tcp::socket s) : socket_(std::move(s)) {}
  tcp::socket& socket() override { return socket_; }
  void Handshake(Done done) override {
    asio::post(socket_.get_executor(), [done = std::move(done)] { done({}); });
  }
  void ReadSome(asio::mutable_buffer b, IoHandler h) override {
    socket_.async_read_some(b, std::move(h));
  }
  void WriteSome(asio::const_buffer b, IoHandler h) override {
    socket_.async_write_some(b, std::move(h));
  }
  void Shutdown(Done done) override {
    error_code ec;
    socket_.shutdown(tcp::socket::shutdown_send, ec);
    asio::post(socket_.get_executor(), [done = std::move(done), ec] { done(ec); });
  }
  bool tls() const override { return false; }

 private:
  tcp::socket socket_;
};

class TlsTransport final : public Transport {
 public:
  TlsTransport(tcp::socket s, ssl::context& ctx) : stream_(std::move(s), ctx) {}
  tcp::socket& socket() override { return stream_.next_layer(); }
  void Handshake(Done done) override {
    stream_.async_handshake(ssl::stream_base::server, std::move(done));
  }
  void ReadSome(asio::mutable_buffer b, IoHandler h) override {
    stream_.async_read_some(b, std::move(h));
  }
  void WriteSome(asio::const_buffer b, IoHandler h) override {
    stream_.async_write_some(b, std::move(h));
  }
  void Shutdown(Done done) override { stream_.async_shutdown(std::move(done)); }
  bool tls() const override { return true; }

 private:
  ssl::stream<tcp::socket> stream_;
};

std::string HttpDate() {
  char buf[64];
  const time_t now = ::time(nullptr);
  struct tm tm_utc;
  gmtime_r(&now, &tm_utc);
  const size_t n = std::strftime(buf, sizeof buf, "%a, %d %b %Y %H:%M:%S GMT", &tm_utc);
  return std::string(buf, n);
}

std::string ReasonPhrase(int status) {
  if (status == 499) return "Client Closed Request";
  auto reason = http::obsolete_reason(static_cast<http::status>(status));
  return reason.empty() ? std::string("Unknown") : std::string(reason);
}

// Whether a header value would break the framing if written as is.
bool SafeHeaderText(std::string_view s) {
  return std::none_of(s.begin(), s.end(), [](char c) { return c == '\r' || c == '\n' || c == 0; });
}

// The handler's side of one request: every call is carried onto the connection's strand.
class ExchangeImpl final : public HttpExchange {
 public:
  ExchangeImpl(std::shared_ptr<Connection> conn, std::shared_ptr<ExchangeState> state)
      : conn_(std::move(conn)), state_(std::move(state)) {}
  ~ExchangeImpl() override {
    asio::post(conn_->strand(), [c = conn_, s = state_] { c->Abandoned(s); });
  }
  const std::string& request_id() const override { return state_->id; }
  void Respond(HttpResponse response) override {
    asio::post(conn_->strand(), [c = conn_, s = state_, r = std::move(response)]() mutable {
      c->SendResponse(s, std::move(r));
    });
  }
  void BeginStream(int status, std::vector<HttpHeader> headers,
                   const std::string& content_type) override {
    asio::post(conn_->strand(),
               [c = conn_, s = state_, status, h = std::move(headers), content_type]() mutable {
                 c->SendStreamHead(s, status, std::move(h), content_type);
               });
  }
  bool StreamWrite(std::string data) override {
    if (state_->gone) return false;
    asio::post(conn_->strand(), [c = conn_, s = state_, d = std::move(data)]() mutable {
      c->SendStreamData(s, std::move(d));
    });
    return !state_->gone;
  }
  void EndStream() override {
    asio::post(conn_->strand(), [c = conn_, s = state_] { c->SendStreamEnd(s); });
  }
  bool client_gone() const override { return state_->gone; }
  bool client_stalled() const override { return state_->stalled; }
  void Note(const std::function<void(AccessRecord&)>& edit) override {
    std::lock_guard<std::mutex> lock(state_->record_mu);
    edit(state_->record);
  }

 private:
  std::shared_ptr<Connection> conn_;
  std::shared_ptr<ExchangeState> state_;
};

}  // namespace

std::unique_ptr<Transport> MakePlainTransport(tcp::socket socket) {
  return std::make_unique<PlainTransport>(std::move(socket));
}

std::unique_ptr<Transport> MakeTlsTransport(tcp::socket socket, asio::ssl::context& context) {
  return std::make_unique<TlsTransport>(std::move(socket), context);
}

ConnectionSlot::ConnectionSlot(std::shared_ptr<FrontEndShared> shared, std::string client)
    : shared_(std::move(shared)), client_(std::move(client)) {}

ConnectionSlot& ConnectionSlot::operator=(ConnectionSlot&& other) noexcept {
  shared_ = std::move(other.shared_);
  client_ = std::move(other.client_);
  other.shared_.reset();
  return *this;
}

ConnectionSlot::~ConnectionSlot() {
  if (!shared_) return;
  shared_->open_connections.fetch_sub(1);
  std::lock_guard<std::mutex> lock(shared_->clients_mu);
  auto it = shared_->per_client.find(client_);
  if (it != shared_->per_client.end() && --it->second <= 0) shared_->per_client.erase(it);
}

Connection::Connection(std::shared_ptr<FrontEndShared> shared, std::unique_ptr<Transport> transport,
                       std::string client, int client_port, ConnectionSlot slot)
    : shared_(std::move(shared)),
      transport_(std::move(transport)),
      strand_(transport_->socket().get_executor()),
      client_(std::move(client)),
      client_port_(client_port),
      slot_(std::move(slot)),
      read_timer_(strand_),
      write_timer_(strand_) {}

Connection::~Connection() {
  {
    std::lock_guard<std::mutex> lock(shared_->live_mu);
    shared_->live.erase(this);
  }
  shared_->live_cv.notify_all();
}

void Connection::Register() {
  std::lock_guard<std::mutex> lock(shared_->live_mu);
  shared_->live[this] = weak_from_this();
}

void Connection::Start() {
  Register();
  if (shared_->stopping) return CloseNow();
  // Best effort: a kernel without the option buffers more, and the stall shows later.
  const int lowat = kKernelUnsentBytes;
  ::setsockopt(transport_->socket().native_handle(), IPPROTO_TCP, TCP_NOTSENT_LOWAT, &lowat,
               sizeof lowat);
  state_ = State::kHandshake;
  if (transport_->tls()) {
    ArmReadTimer(Clock::now() + std::chrono::seconds(shared_->options.header_timeout_s));
  }
  transport_->Handshake([self = shared_from_this()](const error_code& ec) {
    if (self->state_ == State::kClosed) return;
    if (ec) return self->CloseNow();
    self->state_ = State::kIdle;
    // The first request must begin within the keep-alive time, like every later one.
    self->ArmReadTimer(Clock::now() +
                       std::chrono::seconds(self->shared_->options.keep_alive_timeout_s));
    self->Process();
  });
}

void Connection::Refuse(int status, const std::string& code, const std::string& message) {
  Register();
  asio::post(strand_, [self = shared_from_this(), status, code, message] {
    if (self->transport_->tls()) return self->CloseNow();  // no handshake for a refusal
    self->state_ = State::kHead;
    self->NewExchange();
    HttpResponse r = self->shared_->handler->ProtocolError(status, code, message);
    r.SetHeader("Retry-After", "1");
    self->Reply(std::move(r), /*close=*/true);
  });
}

// ------------------------------------------------------------------------------ reading

void Connection::Process() {
  while (state_ == State::kIdle || state_ == State::kHead || state_ == State::kBody) {
    if (state_ == State::kIdle) {
      // RFC 9112 2.2: empty lines before a request line are ignored.
      while (in_.size() > 0) {
        const char c = *static_cast<const char*>(in_.data().data());
        if (c != '\r' && c != '\n') break;
        in_.consume(1);
      }
      if (in_.size() == 0) {
        if (input_ended_) return CloseNow();
        return DoRead();
      }
      StartRequest();
    }
    if (in_.size() == 0) {
      if (input_ended_) return OnEndOfInput();
      return DoRead();
    }
    error_code ec;
    const size_t used = parser_->put(in_.data(), ec);
    in_.consume(used);
    if (ec == http::error::need_more) {
      if (input_ended_) return OnEndOfInput();
      // A partial line stays in the buffer; it may not grow past the head limit.
      if (in_.size() > shared_->options.max_header_bytes + 1024) {
        return ProtocolReply(431, "header_too_large", "a request header line is too long");
      }
      return DoRead();
    }
    if (ec) return OnParseError(ec);
    if (state_ == State::kHead && parser_->is_header_done()) {
      state_ = State::kBody;
      if (!OnHead()) return;
    }
    if (state_ == State::kBody && parser_->is_done()) return OnRequestComplete();
  }
  // Answering (or closing): keep reading only to notice the client leaving, bounded.
  if (state_ == State::kHandling || state_ == State::kClosing) DoRead();
}

void Connection::NewExchange() {
  current_ = std::make_shared<ExchangeState>();
  current_->start = Clock::now();
  current_->head.remote_addr = client_;
  current_->head.remote_port = client_port_;
}

void Connection::StartRequest() {
  state_ = State::kHead;
  parser_.emplace();
  parser_->header_limit(static_cast<uint32_t>(shared_->options.max_header_bytes));
  parser_->body_limit(boost::none);  // checked in OnHead, after Screen()
  parser_->eager(false);             // stop after the head
  NewExchange();
  current_->id = shared_->id_prefix + std::to_string(++shared_->next_id);
  version_ = 11;
  keep_alive_ = true;
  head_only_ = false;
  chunked_out_ = false;
  close_after_ = false;
  const auto& o = shared_->options;
  request_deadline_ = current_->start + std::chrono::seconds(o.socket_timeout_s);
  ArmReadTimer(
      std::min(request_deadline_, current_->start + std::chrono::seconds(o.header_timeout_s)));
}

bool Connection::OnHead() {
  const auto& msg = parser_->get();
  const auto& o = shared_->options;
  HttpRequest& head = current_->head;
  head.method = std::string(msg.method_string());
  head.target = std::string(msg.target());
  head.version = msg.version();
  version_ = msg.version() == 10 ? 10 : 11;
  size_t fields = 0;
  for (const auto& f : msg) {
    head.headers.push_back({std::string(f.name_string()), std::string(f.value())});
    ++fields;
  }
  if (msg.version() != 10 && msg.version() != 11) {
    ProtocolReply(505, "http_version_not_supported", "only HTTP/1.0 and HTTP/1.1 are served");
    return false;
  }
  if (fields > o.max_header_fields) {
    ProtocolReply(431, "too_many_headers",
                  "the request has " + std::to_string(fields) + " header fields; at most " +
                      std::to_string(o.max_header_fields) + " are accepted");
    return false;
  }
  const size_t hosts = msg.count(http::field::host);
  if ((msg.version() == 11 && hosts == 0) || hosts > 1) {
    ProtocolReply(400, "bad_request", "an HTTP/1.1 request needs exactly one Host header");
    return false;
  }
  const bool has_te = msg.count(http::field::transfer_encoding) > 0;
  // Beast reads any list that ends in chunked as chunked ("gzip, chunked"); a coding before it
  // would have to be undone, which the server does not do, so only "chunked" alone passes.
  if (has_te && (!parser_->chunked() || msg.version() == 10 ||
                 !OnlyChunked(msg[http::field::transfer_encoding]))) {
    ProtocolReply(msg.version() == 10 ? 400 : 501, "unsupported_transfer_encoding",
                  "only the chunked transfer coding (HTTP/1.1) is accepted for request bodies");
    return false;
  }
  const auto length = parser_->content_length();
  head.has_body = parser_->chunked() || (length && *length > 0);
  // Origin form, or the absolute form a proxy may send; '*' only for OPTIONS.
  std::string_view target = msg.target();
  if (target.rfind("http://", 0) == 0 || target.rfind("https://", 0) == 0) {
    const size_t authority = target.find("//") + 2;
    const size_t slash = target.find('/', authority);
    target = slash == std::string_view::npos ? std::string_view("/") : target.substr(slash);
  }
  if (target.empty() || (target[0] != '/' && !(target == "*" && head.method == "OPTIONS"))) {
    ProtocolReply(400, "bad_request", "the request target must be a path such as /v1/models");
    return false;
  }
  head.path = std::string(target.substr(0, target.find('?')));
  head_only_ = head.method == "HEAD";
  keep_alive_ = msg.keep_alive();
  const std::string_view expect = msg[http::field::expect];
  const bool wants_continue = EqualsIgnoreCase(expect, "100-continue");
  if (!expect.empty() && !wants_continue) {
    ProtocolReply(417, "expectation_failed", "only 'Expect: 100-continue' is understood");
    return false;
  }
  if (auto early = shared_->handler->Screen(head)) {
    Reply(std::move(*early), /*close=*/head.has_body);
    return false;
  }
  if (length && *length > o.max_body_bytes) {
    ProtocolReply(413, "body_too_large",
                  "the request body is larger than " + std::to_string(o.max_body_bytes) +
                      " bytes (Content-Length " + std::to_string(*length) + ")");
    return false;
  }
  parser_->body_limit(static_cast<uint64_t>(o.max_body_bytes));
  ArmReadTimer(request_deadline_);
  if (wants_continue && head.has_body && msg.version() == 11) {
    Queue("HTTP/1.1 100 Continue\r\n\r\n");
  }
  return true;
}

void Connection::OnParseError(const error_code& ec) {
  if (ec == http::error::body_limit) {
    return ProtocolReply(413, "body_too_large",
                         "the request body is larger than " +
                             std::to_string(shared_->options.max_body_bytes) + " bytes");
  }
  if (ec == http::error::header_limit) {
    return ProtocolReply(431, "header_too_large",
                         "the request head is larger than " +
                             std::to_string(shared_->options.max_header_bytes) + " bytes");
  }
  std::string what = ec.message();
  if (ec == http::error::multiple_content_length || ec == http::error::bad_content_length) {
    what = "conflicting or invalid Content-Length";
  } else if (ec == http::error::bad_transfer_encoding) {
    what = "conflicting Transfer-Encoding (with Content-Length, or twice)";
  }
  ProtocolReply(400, "bad_request", "malformed HTTP request: " + what);
}

void Connection::OnEndOfInput() {
  // The client stopped sending in the middle of a request.
  if (state_ == State::kHead && in_.size() == 0 && !parser_->got_some()) return CloseNow();
  ProtocolReply(400, "bad_request",
                "the connection ended in the middle of the request (incomplete head or body)");
}

void Connection::OnRequestComplete() {
  read_timer_.cancel();
  state_ = State::kHandling;
  HttpRequest request = current_->head;
  request.body = std::move(parser_->get().body());
  auto exchange = std::make_shared<ExchangeImpl>(shared_from_this(), current_);
  shared_->handler->Handle(std::move(request), std::move(exchange));
  if (state_ == State::kHandling) DoRead();
}

void Connection::DoRead() {
  if (reading_ || input_ended_ || state_ == State::kClosed) return;
  const bool answering = state_ == State::kHandling || state_ == State::kClosing;
  if (answering && state_ == State::kHandling && in_.size() >= kMaxBufferedWhileAnswering) return;
  reading_ = true;
  auto buffer = in_.prepare(kReadChunk);
  transport_->ReadSome(
      buffer, [self = shared_from_this()](const error_code& ec, size_t n) { self->OnRead(ec, n); });
}

void Connection::OnRead(const error_code& ec, size_t n) {
  reading_ = false;
  if (state_ == State::kClosed) return;
  if (state_ == State::kClosing) {
    // Lingering: drop what arrives until the client closes or the limits pass.
    lingered_ += n;
    if (ec || lingered_ > kMaxLingerBytes) return CloseNow();
    return DoRead();
  }
  if (ec) {
    input_ended_ = true;
    if (state_ == State::kHandling) return MarkGone();
    return Process();
  }
  in_.commit(n);
  if (state_ == State::kHandling) return DoRead();
  Process();
}

void Connection::ArmReadTimer(Clock::time_point deadline) {
  read_timer_.expires_at(deadline);
  read_timer_.async_wait([self = shared_from_this()](const error_code& ec) {
    if (ec == asio::error::operation_aborted) return;
    if (self->read_timer_.expiry() > Clock::now()) return;  // re-armed meanwhile
    self->OnReadTimer();
  });
}

void Connection::OnReadTimer() {
  switch (state_) {
    case State::kHandshake:
    case State::kIdle:
      return CloseNow();  // idle past the keep-alive timeout (or a stalled TLS handshake)
    case State::kHead:
    case State::kBody:
      return ProtocolReply(408, "request_timeout",
                           "the request was not received in time (head within " +
                               std::to_string(shared_->options.header_timeout_s) +
                               " s, the whole request within " +
                               std::to_string(shared_->options.socket_timeout_s) + " s)");
    case State::kClosing:
      return CloseNow();  // the linger time is over
    default:
      return;
  }
}

// ------------------------------------------------------------------------------ writing

std::string Connection::SerializeHead(int status, const std::vector<HttpHeader>& headers,
                                      const std::string& content_type, std::optional<size_t> length,
                                      bool chunked, bool close) const {
  std::string out = version_ == 10 ? "HTTP/1.0 " : "HTTP/1.1 ";
  out += std::to_string(status) + " " + ReasonPhrase(status) + "\r\n";
  out += "Date: " + HttpDate() + "\r\n";
  if (current_ && !current_->id.empty()) out += "X-Request-Id: " + current_->id + "\r\n";
  for (const HttpHeader& h : headers) {
    if (!SafeHeaderText(h.name) || !SafeHeaderText(h.value)) continue;
    out += h.name + ": " + h.value + "\r\n";
  }
  if (!content_type.empty()) out += "Content-Type: " + content_type + "\r\n";
  if (length) out += "Content-Length: " + std::to_string(*length) + "\r\n";
  if (chunked) out += "Transfer-Encoding: chunked\r\n";
  if (close) {
    out += "Connection: close\r\n";
  } else if (version_ == 10) {
    out += "Connection: keep-alive\r\n";
  }
  out += "\r\n";
  return out;
}

void Connection::Reply(HttpResponse response, bool close) {
  read_timer_.cancel();
  if (!current_) return CloseNow();
  state_ = State::kHandling;
  current_->answered = true;
  current_->finished = true;
  current_->status = response.status;
  close_after_ = close || !keep_alive_ || shared_->stopping;
  // 204/304 have no body and no length; a HEAD answer has the length but not the body.
  const bool framed = response.status != 204 && response.status != 304;
  std::string bytes = SerializeHead(
      response.status, response.headers, framed ? response.content_type : std::string(),
      framed ? std::optional<size_t>(response.body.size()) : std::nullopt, false, close_after_);
  if (framed && !head_only_) bytes += response.body;
  Queue(std::move(bytes));
}

void Connection::ProtocolReply(int status, const std::string& code, const std::string& message) {
  if (!current_) NewExchange();
  Reply(shared_->handler->ProtocolError(status, code, message), /*close=*/true);
}

void Connection::Queue(std::string bytes) {
  if (state_ == State::kClosed) return;
  pending_ += bytes;
  DoWrite();
}

// Writes what is queued, some at a time: each completion is progress, and a write that makes
// none for the stall timeout cuts the client. Nothing outside the strand ever waits for it.
void Connection::DoWrite() {
  if (writing_ || state_ == State::kClosed) return;
  if (inflight_done_ == inflight_.size()) {
    if (pending_.empty()) return AfterResponse();
    inflight_.swap(pending_);
    pending_.clear();
    inflight_done_ = 0;
  }
  writing_ = true;
  ArmStallTimer();
  transport_->WriteSome(
      asio::buffer(inflight_.data() + inflight_done_, inflight_.size() - inflight_done_),
      [self = shared_from_this()](const error_code& ec, size_t n) { self->OnWrite(ec, n); });
}

void Connection::ArmStallTimer() {
  write_timer_.expires_after(std::chrono::seconds(shared_->options.stall_timeout_s));
  write_timer_.async_wait([self = shared_from_this()](const error_code& ec) {
    if (ec == asio::error::operation_aborted || !self->writing_) return;
    if (self->write_timer_.expiry() > Clock::now()) return;  // re-armed meanwhile
    self->CutStalled();
  });
}

void Connection::OnWrite(const error_code& ec, size_t n) {
  writing_ = false;
  write_timer_.cancel();
  if (state_ == State::kClosed) return;
  if (ec) {
    MarkGone();
    return CloseNow();
  }
  inflight_done_ += n;
  if (inflight_done_ == inflight_.size()) {
    inflight_.clear();
    inflight_done_ = 0;
  }
  DoWrite();
}

void Connection::CutStalled() {
  if (state_ == State::kClosed) return;
  if (current_) current_->stalled = true;
  MarkGone();
  // An abortive close (RST, as nginx's reset_timedout_connection): the unsent output is
  // dropped at once instead of waiting in the kernel for a reader that does not come.
  error_code ignored;
  transport_->socket().set_option(asio::socket_base::linger(true, 0), ignored);
  CloseNow();
}

// Everything queued has been written: log a finished exchange, then go on.
void Connection::AfterResponse() {
  if (!current_ || !current_->finished || state_ != State::kHandling) return;
  Log(*current_);
  current_.reset();
  if (close_after_) return BeginClose();
  state_ = State::kIdle;
  parser_.reset();
  ArmReadTimer(Clock::now() + std::chrono::seconds(shared_->options.keep_alive_timeout_s));
  Process();
}

// A client that is "gone" only because it stopped sending (a half-close) still gets what is
// answered; only a connection that failed or closed does not.
void Connection::SendResponse(const std::shared_ptr<ExchangeState>& ex, HttpResponse response) {
  if (ex != current_ || state_ == State::kClosed) {
    ex->status = response.status;
    ex->finished = true;
    Log(*ex);
    if (ex == current_ && state_ != State::kClosed) CloseNow();
    return;
  }
  Reply(std::move(response), /*close=*/false);
}

void Connection::SendStreamHead(const std::shared_ptr<ExchangeState>& ex, int status,
                                std::vector<HttpHeader> headers, const std::string& content_type) {
  ex->answered = true;
  ex->status = status;
  if (ex != current_ || state_ == State::kClosed) return;
  // HTTP/1.1: chunked. HTTP/1.0 has no chunked coding: the end of the stream is the close.
  chunked_out_ = version_ == 11;
  close_after_ = !chunked_out_ || !keep_alive_ || shared_->stopping;
  Queue(SerializeHead(status, headers, content_type, std::nullopt, chunked_out_, close_after_));
}

void Connection::SendStreamData(const std::shared_ptr<ExchangeState>& ex, std::string data) {
  if (ex != current_ || state_ == State::kClosed || data.empty()) return;
  if (chunked_out_) {
    char size[32];
    std::snprintf(size, sizeof size, "%zx\r\n", data.size());
    data = size + data + "\r\n";
  }
  // A client that lets this much of a stream pile up is not reading: cut it now rather than
  // after the stall timeout.
  if (Unsent() + data.size() > shared_->options.max_unsent_stream_bytes) return CutStalled();
  Queue(std::move(data));
}

void Connection::SendStreamEnd(const std::shared_ptr<ExchangeState>& ex) {
  ex->finished = true;
  if (ex != current_ || state_ == State::kClosed) {
    Log(*ex);
    if (ex == current_ && state_ != State::kClosed) CloseNow();
    return;
  }
  if (chunked_out_) {
    Queue("0\r\n\r\n");
  } else {
    DoWrite();  // flushes, then AfterResponse closes the connection
  }
}

void Connection::Abandoned(const std::shared_ptr<ExchangeState>& ex) {
  if (ex->finished) return;
  if (!ex->answered) {
    HttpResponse r = shared_->handler->ProtocolError(
        500, "internal_error", "internal error: the request was not answered");
    return SendResponse(ex, std::move(r));
  }
  // A stream that was never ended: end it where the framing allows, else close.
  ex->finished = true;
  Log(*ex);
  if (ex == current_ && state_ != State::kClosed) CloseNow();
}

void Connection::MarkGone() {
  input_ended_ = true;
  if (current_ && !current_->gone.exchange(true) && !current_->answered) {
    current_->status = 499;  // if it is never answered, this is what the log says
  }
}

void Connection::Log(ExchangeState& ex) {
  if (ex.logged || (ex.head.method.empty() && ex.status == 0)) return;
  ex.logged = true;
  HttpRequest head = ex.head;
  AccessRecord record;
  {
    std::lock_guard<std::mutex> lock(ex.record_mu);
    record = ex.record;
  }
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - ex.start).count();
  shared_->handler->Completed(head, ex.id, ex.status == 0 ? 499 : ex.status, record, ms);
}

// ------------------------------------------------------------------------------ closing

void Connection::BeginClose() {
  if (state_ == State::kClosed) return;
  state_ = State::kClosing;
  read_timer_.cancel();
  ArmReadTimer(Clock::now() + kLingerTime);
  // TLS: no close_notify exchange (it cannot run beside a pending read); the answer was
  // length-delimited or chunked, so the client knows it is complete.
  if (transport_->tls()) return CloseNow();
  transport_->Shutdown([self = shared_from_this()](const error_code& ec) {
    if (self->state_ == State::kClosed) return;
    if (ec) return self->CloseNow();
    self->Linger();
  });
}

void Connection::Linger() {
  if (input_ended_) return CloseNow();
  DoRead();
}

void Connection::CloseWhenIdle() {
  switch (state_) {
    case State::kHandling:
      close_after_ = true;  // AfterResponse closes once the answer is written
      return;
    case State::kClosing:
    case State::kClosed:
      return;
    default:
      return CloseNow();  // idle, or a request not yet read: a draining server takes no more
  }
}

void Connection::CloseNow() {
  if (state_ == State::kClosed) return;
  if (current_) {
    MarkGone();
    if (current_->finished) Log(*current_);
  }
  state_ = State::kClosed;
  read_timer_.cancel();
  write_timer_.cancel();
  error_code ignored;
  transport_->socket().shutdown(tcp::socket::shutdown_both, ignored);
  transport_->socket().close(ignored);
}

}  // namespace tessera::server::http_internal
