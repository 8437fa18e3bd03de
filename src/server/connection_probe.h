// Notices that an HTTP client has gone away while its request waits in the queue or generates.
//
// cpp-httplib 0.11 (Debian 12) gives a handler neither the socket nor a "connection closed"
// query, and a non-streaming handler writes nothing until the end, so a failed write cannot tell
// us either. The handler's thread owns the connection's socket for as long as the handler runs,
// so we find that socket once by its address pair (the open descriptors whose peer and local
// addresses match the request's) and then poll it for a hang-up.
#pragma once

#include <string>

namespace specdec::server {

class ConnectionProbe {
 public:
  // Looks up the socket of the connection local_port <- remote_addr:remote_port. When none is
  // found (unusual), peer_closed() always answers false and only failed writes cancel.
  ConnectionProbe(const std::string& remote_addr, int remote_port, int local_port);

  // True once the peer has closed or reset the connection. Does not consume any input.
  bool peer_closed() const;
  bool found() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

}  // namespace specdec::server
