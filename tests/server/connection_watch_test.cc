#include "server/connection_watch.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <functional>
#include <string>

namespace tessera::server {
namespace {

// A loopback TCP connection: `client` connected to `accepted`, as a server would hold it.
struct Connection {
  int listener = -1;
  int client = -1;
  int accepted = -1;
  int server_port = 0;
  int client_port = 0;
  bool listening = false;
  std::string host;  // as httplib writes it

  explicit Connection(int family = AF_INET) : host(family == AF_INET ? "127.0.0.1" : "::1") {
    sockaddr_storage addr{};
    socklen_t len;
    if (family == AF_INET) {
      auto* a = reinterpret_cast<sockaddr_in*>(&addr);
      a->sin_family = AF_INET;
      a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      len = sizeof *a;
    } else {
      auto* a = reinterpret_cast<sockaddr_in6*>(&addr);
      a->sin6_family = AF_INET6;
      a->sin6_addr = in6addr_loopback;
      len = sizeof *a;
    }
    auto* sa = reinterpret_cast<sockaddr*>(&addr);
    listener = ::socket(family, SOCK_STREAM, 0);
    if (listener < 0 || ::bind(listener, sa, len) != 0 || ::listen(listener, 4) != 0 ||
        ::getsockname(listener, sa, &len) != 0) {
      return;
    }
    listening = true;
    client = ::socket(family, SOCK_STREAM, 0);
    if (client < 0 || ::connect(client, sa, len) != 0) return;
    accepted = ::accept(listener, nullptr, nullptr);
    server_port = PortOf(listener);
    client_port = PortOf(client);
  }
  ~Connection() {
    for (int fd : {listener, client, accepted}) {
      if (fd >= 0) ::close(fd);
    }
  }
  static int PortOf(int fd) {
    sockaddr_storage addr{};
    socklen_t len = sizeof addr;
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return 0;
    return addr.ss_family == AF_INET ? ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port)
                                     : ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port);
  }
  bool ok() const { return accepted >= 0 && server_port > 0 && client_port > 0; }
  ConnectionWatch Watch() const {
    return ConnectionWatch::Find(host, server_port, host, client_port);
  }
};

void CloseClient(Connection& c) {
  ::close(c.client);
  c.client = -1;
}

// Connects, finds the server side by its addresses, hangs the client up with `hang_up` and
// expects the watch to see it.
void ExpectHangUpSeen(int family, const std::function<void(Connection&)>& hang_up) {
  Connection c(family);
  ASSERT_TRUE(c.ok());
  ConnectionWatch watch = c.Watch();
  ASSERT_TRUE(watch.found());
  EXPECT_EQ(watch.fd(), c.accepted);  // not the client's end, not the listener
  EXPECT_FALSE(watch.PeerClosed());
  hang_up(c);
  EXPECT_TRUE(watch.PeerClosed(5000));  // returns as soon as the FIN or RST is in
}

TEST(ConnectionWatch, FindsTheServerSideSocketAndSeesTheClientClose) {
  ExpectHangUpSeen(AF_INET, CloseClient);
}

TEST(ConnectionWatch, WorksOverIpv6) {
  if (!Connection(AF_INET6).listening) GTEST_SKIP() << "no IPv6 loopback on this machine";
  ExpectHangUpSeen(AF_INET6, CloseClient);
}

TEST(ConnectionWatch, SeesAResetWithDataPending) {
  ExpectHangUpSeen(AF_INET, [](Connection& c) {
    const char junk[] = "partial";
    ASSERT_GT(::send(c.client, junk, sizeof junk - 1, 0), 0);
    linger hard{1, 0};  // close with RST instead of FIN
    ASSERT_EQ(::setsockopt(c.client, SOL_SOCKET, SO_LINGER, &hard, sizeof hard), 0);
    CloseClient(c);
  });
}

TEST(ConnectionWatch, AHalfCloseCountsAsGone) {
  ExpectHangUpSeen(AF_INET, [](Connection& c) { ASSERT_EQ(::shutdown(c.client, SHUT_WR), 0); });
}

TEST(ConnectionWatch, UnknownAddressesWatchNothing) {
  Connection c;
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE(
      ConnectionWatch::Find("127.0.0.1", c.server_port, "127.0.0.1", c.client_port + 1).found());
  EXPECT_FALSE(
      ConnectionWatch::Find("127.0.0.2", c.server_port, "127.0.0.1", c.client_port).found());
  EXPECT_FALSE(ConnectionWatch::Find("", -1, "", -1).found());
  ConnectionWatch none;
  EXPECT_FALSE(none.PeerClosed(10));
}

TEST(ConnectionWatch, UnreadBytesAreNotAHangUp) {
  Connection c;
  ASSERT_TRUE(c.ok());
  ConnectionWatch watch = c.Watch();
  ASSERT_TRUE(watch.found());
  // A pipelined next request waits in the socket; the watch neither fires nor consumes it.
  const char next[] = "GET /health HTTP/1.1\r\n\r\n";
  ASSERT_EQ(::send(c.client, next, sizeof next - 1, 0), static_cast<ssize_t>(sizeof next - 1));
  EXPECT_FALSE(watch.PeerClosed(20));
  char buf[64];
  EXPECT_EQ(::recv(c.accepted, buf, sizeof buf, MSG_DONTWAIT),
            static_cast<ssize_t>(sizeof next - 1));
}

}  // namespace
}  // namespace tessera::server
