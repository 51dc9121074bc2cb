#include "server/connection_watch.h"

#include <dirent.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <vector>

namespace tessera::server {
namespace {

// Without /proc, descriptors below this are tried one by one.
constexpr int kMaxScannedFd = 65536;

struct Endpoint {
  std::string host;
  int port = -1;
};

// The numeric host and port of an IPv4/IPv6 address, written as httplib writes them.
bool ToEndpoint(const sockaddr_storage& addr, socklen_t len, Endpoint* out) {
  if (addr.ss_family == AF_INET) {
    out->port = ntohs(reinterpret_cast<const sockaddr_in*>(&addr)->sin_port);
  } else if (addr.ss_family == AF_INET6) {
    out->port = ntohs(reinterpret_cast<const sockaddr_in6*>(&addr)->sin6_port);
  } else {
    return false;
  }
  char host[NI_MAXHOST];
  if (getnameinfo(reinterpret_cast<const sockaddr*>(&addr), len, host, sizeof host, nullptr, 0,
                  NI_NUMERICHOST) != 0) {
    return false;
  }
  out->host = host;
  return true;
}

bool LocalEndpoint(int fd, Endpoint* out) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return false;
  return ToEndpoint(addr, len, out);
}

bool PeerEndpoint(int fd, Endpoint* out) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return false;
  return ToEndpoint(addr, len, out);
}

bool IsStreamSocket(int fd) {
  int type = 0;
  socklen_t len = sizeof type;
  return ::getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) == 0 && type == SOCK_STREAM;
}

// This process's open descriptors, from /proc/self/fd; without it, every possible number.
std::vector<int> OpenDescriptors() {
  std::vector<int> fds;
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) {
    long max = ::sysconf(_SC_OPEN_MAX);
    const int limit = max <= 0 ? 1024 : static_cast<int>(std::min<long>(max, kMaxScannedFd));
    for (int fd = 0; fd < limit; ++fd) fds.push_back(fd);
    return fds;
  }
  const int own = ::dirfd(dir);
  while (const dirent* entry = ::readdir(dir)) {
    char* end = nullptr;
    errno = 0;
    const long fd = std::strtol(entry->d_name, &end, 10);
    if (end == entry->d_name || *end != '\0' || errno != 0 || fd < 0 || fd == own) continue;
    fds.push_back(static_cast<int>(fd));
  }
  ::closedir(dir);
  return fds;
}

}  // namespace

ConnectionWatch ConnectionWatch::Find(const std::string& local_addr, int local_port,
                                      const std::string& remote_addr, int remote_port) {
  if (local_addr.empty() || remote_addr.empty() || local_port <= 0 || remote_port <= 0) {
    return ConnectionWatch();
  }
  for (int fd : OpenDescriptors()) {
    Endpoint local;
    // The local port is the cheap first filter; a listening socket has no peer.
    if (!LocalEndpoint(fd, &local) || local.port != local_port || local.host != local_addr)
      continue;
    Endpoint peer;
    if (!PeerEndpoint(fd, &peer) || peer.port != remote_port || peer.host != remote_addr) continue;
    if (IsStreamSocket(fd)) return ConnectionWatch(fd);
  }
  return ConnectionWatch();
}

bool ConnectionWatch::PeerClosed(int timeout_ms) const {
  if (fd_ < 0) return false;
  // Only the hang-up conditions are asked for: unread bytes (a pipelined request) do not
  // count, and nothing is consumed from the socket.
  pollfd p{fd_, POLLRDHUP, 0};
  int n;
  do {
    n = ::poll(&p, 1, std::max(0, timeout_ms));
  } while (n < 0 && errno == EINTR);
  if (n <= 0) return false;
  return (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0;
}

}  // namespace tessera::server
