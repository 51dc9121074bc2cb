// The HTTP front end in this process, with a small handler, driven by raw loopback sockets:
// every truncation and a seeded set of corruptions of valid requests (labelled `malformed`, so
// it also runs under ASan+UBSan), framing, limits, pipelining, streams from another thread, an
// exchange dropped unanswered, connection caps and the loopback check on resolved addresses.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "server/http_front_end.h"

namespace tessera::server {
namespace {

using Clock = std::chrono::steady_clock;

class TestHandler : public HttpHandler {
 public:
  std::optional<HttpResponse> Screen(HttpRequest& head) override {
    if (head.path == "/deny") return HttpResponse::Json(401, R"({"error":"denied"})");
    return std::nullopt;
  }
  void Handle(HttpRequest request, std::shared_ptr<HttpExchange> exchange) override {
    if (request.path == "/stream") {
      // Answered from another thread, as the API's job threads do.
      std::lock_guard<std::mutex> lock(mu_);
      threads_.emplace_back([exchange] {
        exchange->BeginStream(200, {}, "text/plain");
        for (int i = 0; i < 3; ++i) exchange->StreamWrite("part" + std::to_string(i) + ";");
        exchange->EndStream();
      });
      return;
    }
    if (request.path == "/drop") return;  // never answered: the front end answers 500
    if (request.path == "/late") {        // answered when the test says so
      std::lock_guard<std::mutex> lock(mu_);
      late_ = exchange;
      late_cv_.notify_all();
      return;
    }
    exchange->Respond(HttpResponse::Json(200, "{\"path\":\"" + request.path + "\",\"body\":" +
                                                  std::to_string(request.body.size()) + "}"));
  }
  HttpResponse ProtocolError(int status, const std::string& code, const std::string&) override {
    return HttpResponse::Json(status, "{\"code\":\"" + code + "\"}");
  }
  void Completed(const HttpRequest&, const std::string&, int, const AccessRecord&,
                 double) override {}
  // The exchange of the last "/late" request, once it has arrived.
  std::shared_ptr<HttpExchange> WaitLate() {
    std::unique_lock<std::mutex> lock(mu_);
    late_cv_.wait_for(lock, std::chrono::seconds(10), [this] { return late_ != nullptr; });
    return std::exchange(late_, nullptr);
  }
  void JoinAll() {
    std::lock_guard<std::mutex> lock(mu_);
    for (std::thread& t : threads_) t.join();
    threads_.clear();
  }

 private:
  std::mutex mu_;
  std::condition_variable late_cv_;
  std::shared_ptr<HttpExchange> late_;
  std::vector<std::thread> threads_;
};

class FrontEndTest : public ::testing::Test {
 protected:
  void StartServer(HttpFrontEndOptions o = {}) {
    o.host = "127.0.0.1";
    o.port = 0;
    o.max_body_bytes = o.max_body_bytes == (1u << 20) ? 4096 : o.max_body_bytes;
    auto fe = HttpFrontEnd::Create(o, &handler_);
    ASSERT_TRUE(fe) << fe.status().message();
    fe_ = std::move(*fe);
    loop_ = std::thread([this] { fe_->Run(); });
  }
  void TearDown() override {
    handler_.JoinAll();  // the stream threads hold exchanges, which post to the loop
    if (fe_) fe_->Stop();
    if (loop_.joinable()) loop_.join();
  }

  int Connect() const {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(fe_->port()));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    return fd;
  }

  static void SendAll(int fd, const std::string& data) {
    size_t off = 0;
    while (off < data.size()) {
      ssize_t n = ::send(fd, data.data() + off, data.size() - off, MSG_NOSIGNAL);
      if (n <= 0) return;  // the server may close early (e.g. 413); that is checked by reading
      off += static_cast<size_t>(n);
    }
  }

  // Sends GET /late on `fd` and begins its stream; null if the request never arrived.
  std::shared_ptr<HttpExchange> BeginLateStream(int fd) {
    SendAll(fd, "GET /late HTTP/1.1\r\nHost: x\r\n\r\n");
    std::shared_ptr<HttpExchange> late = handler_.WaitLate();
    if (late) late->BeginStream(200, {}, "text/plain");
    return late;
  }

  // Everything the server sends until it closes, or until `seconds` pass.
  static std::string ReadUntilClose(int fd, double seconds = 5) {
    return ReadUntil(fd, "", seconds);
  }

  // What the server sends until `marker` has arrived (empty: until it closes, marked
  // "<closed>"), or until `seconds` pass.
  static std::string ReadUntil(int fd, const std::string& marker, double seconds) {
    std::string out;
    const auto deadline = Clock::now() + std::chrono::duration<double>(seconds);
    char buf[8192];
    while (Clock::now() < deadline && (marker.empty() || out.find(marker) == std::string::npos)) {
      pollfd p{fd, POLLIN, 0};
      const int left = static_cast<int>(
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count());
      if (::poll(&p, 1, std::max(1, left)) <= 0) break;
      ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0) return out + "<closed>";
      out.append(buf, static_cast<size_t>(n));
    }
    return out;
  }

  // Sends `request`, half-closes (unless `half_close` is false: a half-close counts as the
  // client leaving, which ends a stream), and returns everything the server answered.
  std::string Exchange(const std::string& request, double seconds = 5, bool half_close = true) {
    int fd = Connect();
    SendAll(fd, request);
    if (half_close) ::shutdown(fd, SHUT_WR);
    std::string out = ReadUntilClose(fd, seconds);
    ::close(fd);
    return out;
  }

  // The status of every response in `text` ("HTTP/1.x NNN " anywhere; std::regex is avoided:
  // GCC 12 warns inside it under the sanitizers).
  static std::vector<int> Statuses(const std::string& text) {
    std::vector<int> out;
    for (size_t at = text.find("HTTP/1."); at != std::string::npos;
         at = text.find("HTTP/1.", at + 1)) {
      if (at + 13 > text.size()) break;
      const char minor = text[at + 7];
      const bool shaped = (minor == '0' || minor == '1') && text[at + 8] == ' ' &&
                          text[at + 12] == ' ' && std::isdigit(text[at + 9]) &&
                          std::isdigit(text[at + 10]) && std::isdigit(text[at + 11]);
      if (shaped) out.push_back(std::stoi(text.substr(at + 9, 3)));
    }
    return out;
  }

  TestHandler handler_;
  std::unique_ptr<HttpFrontEnd> fe_;
  std::thread loop_;
};

const char kValidPost[] =
    "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    "Content-Length: 11\r\n\r\n{\"a\":\"bcd\"}";
const char kValidChunked[] =
    "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
    "5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n";

TEST_F(FrontEndTest, EveryTruncationAndCorruptionGetsAnAnswerOrAClose) {
  StartServer();
  const std::vector<int> allowed = {200, 400, 404, 405, 408, 413, 417, 431, 501, 505};
  auto check = [&](const std::string& request, const std::string& what) {
    const std::string out = Exchange(request, 5);
    ASSERT_NE(out.find("<closed>"), std::string::npos) << what << ": the server did not close";
    for (int status : Statuses(out)) {
      EXPECT_NE(std::find(allowed.begin(), allowed.end(), status), allowed.end())
          << what << ": status " << status;
    }
  };
  for (const std::string& valid : {std::string(kValidPost), std::string(kValidChunked)}) {
    for (size_t cut = 0; cut < valid.size(); ++cut) {
      check(valid.substr(0, cut), "truncated at " + std::to_string(cut));
    }
    std::mt19937 rng(1234);
    for (int i = 0; i < 150; ++i) {
      std::string bad = valid;
      const int edits = 1 + static_cast<int>(rng() % 3);
      for (int e = 0; e < edits; ++e) {
        bad[rng() % bad.size()] = static_cast<char>(rng() % 256);
      }
      check(bad, "corruption " + std::to_string(i));
    }
  }
  // Still serving.
  EXPECT_EQ(Statuses(Exchange(kValidPost)), std::vector<int>{200});
}

TEST_F(FrontEndTest, ChunkedBodyIsDecodedAndPipelinedRequestsAreAnsweredInOrder) {
  StartServer();
  const std::string out = Exchange(std::string(kValidChunked) +
                                   "GET /one HTTP/1.1\r\nHost: x\r\n\r\n"
                                   "GET /two HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(Statuses(out), (std::vector<int>{200, 200, 200}));
  const size_t echo = out.find("\"body\":11");
  const size_t one = out.find("/one");
  const size_t two = out.find("/two");
  ASSERT_NE(echo, std::string::npos) << out;
  ASSERT_NE(one, std::string::npos);
  ASSERT_NE(two, std::string::npos);
  EXPECT_LT(echo, one);
  EXPECT_LT(one, two);
}

TEST_F(FrontEndTest, AResponseThatLeftTheBodyUnreadClosesTheConnection) {
  StartServer();
  const std::string smuggled = "GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n";
  const std::string out = Exchange("POST /deny HTTP/1.1\r\nHost: x\r\nContent-Length: " +
                                   std::to_string(smuggled.size()) + "\r\n\r\n" + smuggled);
  EXPECT_EQ(Statuses(out), std::vector<int>{401});
  EXPECT_EQ(out.find("/smuggled"), std::string::npos);
  // A GET with a body: the body is read as a body, never as a request.
  const std::string get = Exchange("GET /echo HTTP/1.1\r\nHost: x\r\nContent-Length: " +
                                   std::to_string(smuggled.size()) + "\r\n\r\n" + smuggled);
  EXPECT_EQ(Statuses(get), std::vector<int>{200});
  EXPECT_EQ(get.find("/smuggled"), std::string::npos);
}

TEST_F(FrontEndTest, LimitsAndFraming) {
  StartServer();
  EXPECT_EQ(Statuses(Exchange("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000000000"
                              "\r\n\r\n")),
            std::vector<int>{413});
  std::string big_chunked = "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (int i = 0; i < 8; ++i) big_chunked += "400\r\n" + std::string(1024, 'a') + "\r\n";
  EXPECT_EQ(Statuses(Exchange(big_chunked)), std::vector<int>{413});
  EXPECT_EQ(Statuses(Exchange("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n"
                              "Content-Length: 4\r\n\r\nabcd")),
            std::vector<int>{400});
  EXPECT_EQ(Statuses(Exchange("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n"
                              "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n")),
            std::vector<int>{400});
  EXPECT_EQ(Statuses(Exchange("POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n")),
            std::vector<int>{501});
  // A coding before chunked would have to be undone: refused, not read as plain chunked.
  EXPECT_EQ(Statuses(Exchange("POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, "
                              "chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n")),
            std::vector<int>{501});
  EXPECT_EQ(Statuses(Exchange("POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: CHUNKED"
                              "\r\n\r\n3\r\nabc\r\n0\r\n\r\n")),
            std::vector<int>{200});
  EXPECT_EQ(Statuses(Exchange("GET /echo HTTP/1.1\r\n\r\n")), std::vector<int>{400});  // no Host
  std::string many = "GET /echo HTTP/1.1\r\nHost: x\r\n";
  for (int i = 0; i < 150; ++i) many += "X-" + std::to_string(i) + ": y\r\n";
  EXPECT_EQ(Statuses(Exchange(many + "\r\n")), std::vector<int>{431});
  EXPECT_EQ(Statuses(Exchange("GET /echo HTTP/1.1\r\nHost: x\r\nX-Long: " +
                              std::string(20000, 'z') + "\r\n\r\n")),
            std::vector<int>{431});
  EXPECT_EQ(Statuses(Exchange("POST /echo HTTP/1.1\r\nHost: x\r\nExpect: magic\r\n"
                              "Content-Length: 1\r\n\r\na")),
            std::vector<int>{417});
}

TEST_F(FrontEndTest, ContinueOnlyAfterTheChecks) {
  StartServer();
  int fd = Connect();
  SendAll(fd,
          "POST /deny HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n");
  std::string out = ReadUntilClose(fd, 5);
  ::close(fd);
  EXPECT_EQ(Statuses(out), std::vector<int>{401});
  fd = Connect();
  SendAll(fd,
          "POST /echo HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n");
  // The 100 arrives before any body byte is sent.
  const std::string first = ReadUntil(fd, "\r\n\r\n", 5);
  EXPECT_EQ(first.rfind("HTTP/1.1 100 Continue\r\n\r\n", 0), 0u) << first;
  SendAll(fd, "hello");
  ::shutdown(fd, SHUT_WR);
  out = ReadUntilClose(fd, 5);
  ::close(fd);
  EXPECT_EQ(Statuses(out), std::vector<int>{200});
  EXPECT_NE(out.find("\"body\":5"), std::string::npos);
}

TEST_F(FrontEndTest, StreamsAreChunkedForHttp11AndCloseDelimitedForHttp10) {
  StartServer();
  const std::string v11 =
      Exchange("GET /stream HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 5, false);
  EXPECT_NE(v11.find("Transfer-Encoding: chunked"), std::string::npos) << v11;
  EXPECT_NE(v11.find("6\r\npart0;\r\n"), std::string::npos);
  EXPECT_NE(v11.find("0\r\n\r\n"), std::string::npos);
  const std::string v10 = Exchange("GET /stream HTTP/1.0\r\n\r\n", 5, false);
  EXPECT_EQ(v10.rfind("HTTP/1.0 200", 0), 0u) << v10;
  EXPECT_EQ(v10.find("chunked"), std::string::npos);
  EXPECT_NE(v10.find("\r\n\r\npart0;part1;part2;<closed>"), std::string::npos) << v10;
}

TEST_F(FrontEndTest, ShutdownLetsTheAnswerInProgressBeWrittenThenCloses) {
  StartServer();
  int busy = Connect();
  int idle = Connect();
  SendAll(busy, "GET /late HTTP/1.1\r\nHost: x\r\n\r\n");
  std::shared_ptr<HttpExchange> late = handler_.WaitLate();
  ASSERT_NE(late, nullptr);
  std::thread shutdown([this] { fe_->Shutdown(std::chrono::seconds(10)); });
  // The idle connection is closed at once; the busy one waits for its answer.
  EXPECT_EQ(ReadUntilClose(idle, 5), "<closed>");
  late->BeginStream(200, {}, "text/plain");
  late->StreamWrite(std::string(100000, 'x'));
  late->StreamWrite("end");
  late->EndStream();
  late.reset();
  const std::string out = ReadUntilClose(busy, 10);
  shutdown.join();
  EXPECT_EQ(Statuses(out), std::vector<int>{200});
  EXPECT_NE(out.find("end\r\n0\r\n\r\n<closed>"), std::string::npos) << out.substr(0, 200);
  ::close(busy);
  ::close(idle);
}

// A client that does not read: a receive buffer of a few KiB, and nothing read. Waits (at
// most `seconds`) until the server ends the connection; true if it did.
class NonReader {
 public:
  explicit NonReader(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    const int small = 4096;  // set before connect: the window the server sees stays small
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  }
  ~NonReader() { ::close(fd_); }
  int fd() const { return fd_; }
  bool WaitCut(int seconds) const {
    pollfd p{fd_, POLLRDHUP, 0};
    return ::poll(&p, 1, seconds * 1000) == 1 && (p.revents & (POLLHUP | POLLERR | POLLRDHUP));
  }

 private:
  int fd_ = -1;
};

TEST_F(FrontEndTest, AStreamTheClientDoesNotReadIsCutPastItsUnsentBound) {
  HttpFrontEndOptions o;
  o.stall_timeout_s = 3600;  // only the bound can cut it here
  StartServer(o);
  NonReader client(fe_->port());
  std::shared_ptr<HttpExchange> late = BeginLateStream(client.fd());
  ASSERT_NE(late, nullptr);
  // The writer never waits for the socket: 4 MiB go out of this loop at once, far more than
  // the kernel and the bound take together.
  const std::string piece(16 * 1024, 'x');
  size_t written = 0;
  while (!late->client_gone() && written < (4u << 20)) {
    late->StreamWrite(piece);
    written += piece.size();
  }
  EXPECT_TRUE(client.WaitCut(10)) << "the connection of a client that never reads stayed open";
  EXPECT_TRUE(late->client_gone());
  EXPECT_TRUE(late->client_stalled());
  EXPECT_FALSE(late->StreamWrite("more"));
  late->EndStream();
}

TEST_F(FrontEndTest, AWriteWithoutProgressForTheStallTimeoutCutsTheClient) {
  HttpFrontEndOptions o;
  o.stall_timeout_s = 1;
  o.max_unsent_stream_bytes = 64u << 20;  // only the stall timeout can cut it here
  StartServer(o);
  NonReader client(fe_->port());
  std::shared_ptr<HttpExchange> late = BeginLateStream(client.fd());
  ASSERT_NE(late, nullptr);
  // More than the kernel takes for a client that does not read; then nothing more.
  EXPECT_TRUE(late->StreamWrite(std::string(1u << 20, 'x')));
  EXPECT_TRUE(client.WaitCut(10)) << "a write without progress was not cut";
  EXPECT_TRUE(late->client_gone());
  EXPECT_TRUE(late->client_stalled());
  late->EndStream();
}

TEST_F(FrontEndTest, AnExchangeDroppedUnansweredIsAnswered500) {
  StartServer();
  EXPECT_EQ(Statuses(Exchange("GET /drop HTTP/1.1\r\nHost: x\r\n\r\n")), std::vector<int>{500});
}

TEST_F(FrontEndTest, ConnectionsOverThePerClientCapAreRefused429) {
  HttpFrontEndOptions o;
  o.max_connections_per_client = 2;
  StartServer(o);
  int a = Connect();
  int b = Connect();
  // Both are served: one request each proves the server has accepted them.
  SendAll(a, "GET /a HTTP/1.1\r\nHost: x\r\n\r\n");
  SendAll(b, "GET /b HTTP/1.1\r\nHost: x\r\n\r\n");
  for (int fd : {a, b}) EXPECT_EQ(Statuses(ReadUntil(fd, "}", 5)), std::vector<int>{200});
  const std::string third = Exchange("GET /c HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(Statuses(third), std::vector<int>{429}) << third;
  EXPECT_NE(third.find("Retry-After: 1"), std::string::npos);
  ::close(a);
  ::close(b);
}

TEST(FrontEndCreate, LoopbackCheckUsesTheResolvedAddresses) {
  TestHandler handler;
  HttpFrontEndOptions o;
  o.port = 0;
  o.require_loopback = true;
  o.host = "localhost";
  EXPECT_TRUE(HttpFrontEnd::Create(o, &handler));
  o.host = "127.0.0.1";
  EXPECT_TRUE(HttpFrontEnd::Create(o, &handler));
  o.host = "0.0.0.0";
  auto refused = HttpFrontEnd::Create(o, &handler);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.status().code(), ErrorCode::kPermissionDenied);  // serve exits 2 on it
  EXPECT_NE(refused.status().message().find("not a loopback address"), std::string::npos);
}

}  // namespace
}  // namespace tessera::server
