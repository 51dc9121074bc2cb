// Notices that an HTTP client has gone away while its request is still being worked on.
// cpp-httplib hands a handler the request's addresses but not its socket, so the socket is
// found among this process's descriptors by its address pair (a TCP connection's local and
// peer address and port are unique on the host while it is open), and then only polled,
// never read or written: the connection still belongs to httplib.
//
//   ConnectionWatch watch = ConnectionWatch::Find(req.local_addr, req.local_port,
//                                                 req.remote_addr, req.remote_port);
//   while (waiting) { if (watch.PeerClosed()) { cancel; break; } ...wait a little... }
//
// Valid only while the handler that owns the connection runs (httplib closes the socket after
// the response is written, and the number may then be reused). A peer that shut down its
// sending side (FIN, also a half-close) or reset the connection counts as gone, as in Go's
// net/http and nginx.
#pragma once

#include <string>

namespace tessera::server {

class ConnectionWatch {
 public:
  ConnectionWatch() = default;

  // The TCP socket of this process whose local and peer addresses are these (numeric hosts
  // as getnameinfo(NI_NUMERICHOST) writes them). Not found: a watch that never fires.
  static ConnectionWatch Find(const std::string& local_addr, int local_port,
                              const std::string& remote_addr, int remote_port);

  bool found() const { return fd_ >= 0; }
  int fd() const { return fd_; }

  // True once the peer has closed or reset the connection; waits at most `timeout_ms`
  // (0: just looks).
  bool PeerClosed(int timeout_ms = 0) const;

 private:
  explicit ConnectionWatch(int fd) : fd_(fd) {}
  int fd_ = -1;
};

}  // namespace tessera::server
