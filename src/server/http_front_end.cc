#include "server/http_front_end.h"

#include <algorithm>
#include <boost/asio/ip/v6_only.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/context.hpp>
#include <random>
#include <thread>

#include "server/http_connection.h"

namespace tessera::server {

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    char x = a[i], y = b[i];
    if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z') y = static_cast<char>(y - 'A' + 'a');
    if (x != y) return false;
  }
  return true;
}

std::string_view HttpRequest::Header(std::string_view name) const {
  for (const HttpHeader& h : headers) {
    if (EqualsIgnoreCase(h.name, name)) return h.value;
  }
  return {};
}

std::string_view HttpResponse::Header(std::string_view name) const {
  for (const HttpHeader& h : headers) {
    if (EqualsIgnoreCase(h.name, name)) return h.value;
  }
  return {};
}

namespace {

using namespace http_internal;  // NOLINT: the internal types of this front end
namespace ssl = asio::ssl;

// A numeric address as clients are counted and logged: IPv4-mapped IPv6 as plain IPv4.
asio::ip::address Unmapped(const asio::ip::address& a) {
  if (a.is_v6() && a.to_v6().is_v4_mapped()) {
    return asio::ip::make_address_v4(asio::ip::v4_mapped, a.to_v6());
  }
  return a;
}

class FrontEndImpl final : public HttpFrontEnd {
 public:
  FrontEndImpl(const HttpFrontEndOptions& options, HttpHandler* handler)
      : ioc_(std::max(1, options.threads)), shared_(std::make_shared<FrontEndShared>()) {
    // (tls_ is set in Init.)
    shared_->options = options;
    shared_->handler = handler;
    std::random_device rd;
    shared_->id_prefix = "req-" + std::to_string(rd() % 1000000) + "-";
  }

  ~FrontEndImpl() override { Stop(); }

  Status Init() {
    const HttpFrontEndOptions& o = shared_->options;
    if (!o.tls_cert.empty() || !o.tls_key.empty()) {
      if (o.tls_cert.empty() || o.tls_key.empty()) {
        return InvalidArgument("--tls-cert and --tls-key must be given together");
      }
      tls_.emplace(ssl::context::tls_server);
      tls_->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                        ssl::context::no_sslv3 | ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1 |
                        ssl::context::single_dh_use);
      error_code ec;
      tls_->use_certificate_chain_file(o.tls_cert, ec);
      if (!ec) tls_->use_private_key_file(o.tls_key, ssl::context::pem, ec);
      if (ec) {
        return InvalidArgument("could not load the TLS certificate or key (" + o.tls_cert + ", " +
                               o.tls_key + "): " + ec.message());
      }
    }
    tcp::resolver resolver(ioc_);
    error_code ec;
    auto results = resolver.resolve(o.host, std::to_string(o.port),
                                    tcp::resolver::passive | tcp::resolver::numeric_service, ec);
    if (ec || results.empty()) {
      return InvalidArgument("cannot resolve --host '" + o.host +
                             "': " + (ec ? ec.message() : std::string("no address")));
    }
    std::vector<tcp::endpoint> endpoints;
    for (const auto& r : results) {
      tcp::endpoint ep = r.endpoint();
      if (std::find(endpoints.begin(), endpoints.end(), ep) == endpoints.end()) {
        endpoints.push_back(ep);
      }
    }
    if (o.require_loopback) {
      std::string outside;
      for (const tcp::endpoint& ep : endpoints) {
        if (!Unmapped(ep.address()).is_loopback()) {
          outside += (outside.empty() ? "" : ", ") + ep.address().to_string();
        }
      }
      if (!outside.empty()) {
        return PermissionDenied("'" + o.host + "' resolves to " + outside +
                                ", which is not a loopback address");
      }
    }
    int port = o.port;
    std::string failures;
    for (tcp::endpoint ep : endpoints) {
      ep.port(static_cast<unsigned short>(port));
      auto acceptor = std::make_unique<tcp::acceptor>(asio::make_strand(ioc_));
      acceptor->open(ep.protocol(), ec);
      if (!ec) acceptor->set_option(asio::socket_base::reuse_address(true), ec);
      if (!ec && ep.address().is_v6()) acceptor->set_option(asio::ip::v6_only(true), ec);
      if (!ec) acceptor->bind(ep, ec);
      if (!ec) acceptor->listen(asio::socket_base::max_listen_connections, ec);
      if (ec) {
        failures += (failures.empty() ? "" : "; ") + ep.address().to_string() + ": " + ec.message();
        continue;
      }
      if (port == 0) port = acceptor->local_endpoint().port();
      addresses_.push_back(ep.address().to_string());
      if (!Unmapped(ep.address()).is_loopback()) loopback_only_ = false;
      acceptors_.push_back(std::move(acceptor));
    }
    if (acceptors_.empty()) {
      return InvalidArgument("cannot listen on " + o.host + ":" + std::to_string(o.port) + " (" +
                             failures + ")");
    }
    port_ = port;
    for (size_t i = 0; i < acceptors_.size(); ++i) {
      retry_.push_back(std::make_unique<asio::steady_timer>(acceptors_[i]->get_executor()));
      Accept(i);
    }
    return Status::Ok();
  }

  int port() const override { return port_; }
  std::vector<std::string> addresses() const override { return addresses_; }
  bool loopback_only() const override { return loopback_only_; }

  void Run() override {
    std::vector<std::thread> extra;
    for (int i = 1; i < shared_->options.threads; ++i) extra.emplace_back([this] { ioc_.run(); });
    ioc_.run();
    for (std::thread& t : extra) t.join();
  }

  void Stop() override {
    if (stopped_.exchange(true)) return;
    {
      // Wakes a Shutdown() that waits for connections: they will not end on a stopped loop.
      std::lock_guard<std::mutex> lock(shared_->live_mu);
    }
    shared_->live_cv.notify_all();
    StopAccepting();
    ForEachConnection([](const std::shared_ptr<Connection>& c) { c->CloseNow(); });
    // The posted closes run if a loop thread gets to them; the rest close as the loop ends.
    asio::post(ioc_, [this] { ioc_.stop(); });
  }

  void Shutdown(std::chrono::milliseconds grace) override {
    StopAccepting();
    ForEachConnection([](const std::shared_ptr<Connection>& c) { c->CloseWhenIdle(); });
    {
      std::unique_lock<std::mutex> lock(shared_->live_mu);
      shared_->live_cv.wait_for(lock, grace, [this] { return shared_->live.empty() || stopped_; });
    }
    Stop();
  }

  HttpFrontEndStats stats() const override {
    HttpFrontEndStats s;
    s.open_connections = shared_->open_connections;
    s.accepted = shared_->accepted;
    s.refused_over_limit = shared_->refused;
    return s;
  }

 private:
  void StopAccepting() {
    if (shared_->stopping.exchange(true)) return;
    for (size_t i = 0; i < acceptors_.size(); ++i) {
      asio::post(acceptors_[i]->get_executor(), [this, i] {
        error_code ignored;
        acceptors_[i]->close(ignored);
        retry_[i]->cancel();
      });
    }
  }

  // Runs `action` on each live connection's strand.
  void ForEachConnection(const std::function<void(const std::shared_ptr<Connection>&)>& action) {
    std::vector<std::shared_ptr<Connection>> conns;
    {
      std::lock_guard<std::mutex> lock(shared_->live_mu);
      for (auto& [key, weak] : shared_->live) {
        if (auto c = weak.lock()) conns.push_back(std::move(c));
      }
    }
    for (auto& c : conns) asio::post(c->strand(), [c, action] { action(c); });
  }

  void Accept(size_t i) {
    acceptors_[i]->async_accept(asio::make_strand(ioc_),
                                [this, i](const error_code& ec, tcp::socket socket) {
                                  OnAccept(i, ec, std::move(socket));
                                });
  }

  void OnAccept(size_t i, const error_code& ec, tcp::socket socket) {
    if (shared_->stopping || ec == asio::error::operation_aborted) return;
    if (ec) {
      // Out of descriptors or memory: wait a little instead of spinning on the error.
      retry_[i]->expires_after(std::chrono::milliseconds(100));
      retry_[i]->async_wait([this, i](const error_code& wait_ec) {
        if (!wait_ec && !shared_->stopping) Accept(i);
      });
      return;
    }
    Accept(i);
    error_code endpoint_ec;
    const tcp::endpoint peer = socket.remote_endpoint(endpoint_ec);
    if (endpoint_ec) return;  // already gone
    socket.set_option(tcp::no_delay(true), endpoint_ec);
    const std::string client = Unmapped(peer.address()).to_string();
    ++shared_->accepted;
    int status = 0;
    ConnectionSlot slot;
    {
      std::lock_guard<std::mutex> lock(shared_->clients_mu);
      int& mine = shared_->per_client[client];
      if (shared_->open_connections >= shared_->options.max_connections) {
        status = 503;
      } else if (mine >= shared_->options.max_connections_per_client) {
        status = 429;
      } else {
        ++mine;
        ++shared_->open_connections;
      }
      if (mine == 0) shared_->per_client.erase(client);
    }
    if (status == 0) slot = ConnectionSlot(shared_, client);
    std::unique_ptr<Transport> transport =
        tls_ ? MakeTlsTransport(std::move(socket), *tls_) : MakePlainTransport(std::move(socket));
    auto conn = std::make_shared<Connection>(shared_, std::move(transport), client, peer.port(),
                                             std::move(slot));
    if (status == 0) return conn->Start();
    ++shared_->refused;
    if (status == 503) {
      conn->Refuse(503, "too_many_connections",
                   "the server has " + std::to_string(shared_->options.max_connections) +
                       " connections open; retry shortly");
    } else {
      conn->Refuse(429, "too_many_connections",
                   "this client already has " +
                       std::to_string(shared_->options.max_connections_per_client) +
                       " connections open; reuse them or close some");
    }
  }

  std::optional<ssl::context> tls_;  // before ioc_: outlives the connections it ends
  asio::io_context ioc_;
  std::shared_ptr<FrontEndShared> shared_;
  std::vector<std::unique_ptr<tcp::acceptor>> acceptors_;
  std::vector<std::unique_ptr<asio::steady_timer>> retry_;
  std::vector<std::string> addresses_;
  bool loopback_only_ = true;
  int port_ = 0;
  std::atomic<bool> stopped_{false};
};

}  // namespace

Expected<std::unique_ptr<HttpFrontEnd>> HttpFrontEnd::Create(const HttpFrontEndOptions& options,
                                                             HttpHandler* handler) {
  auto fe = std::make_unique<FrontEndImpl>(options, handler);
  if (Status st = fe->Init(); !st.ok()) return st;
  return std::unique_ptr<HttpFrontEnd>(std::move(fe));
}

}  // namespace tessera::server
