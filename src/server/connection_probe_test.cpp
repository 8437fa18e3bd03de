#include "server/connection_probe.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace specdec::server {
namespace {

int port_of(int fd, bool peer) {
  sockaddr_in a{};
  socklen_t len = sizeof a;
  if (peer) {
    getpeername(fd, reinterpret_cast<sockaddr*>(&a), &len);
  } else {
    getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  }
  return ntohs(a.sin_port);
}

TEST(ConnectionProbe, FindsTheAcceptedSocketAndSeesThePeerClose) {
  const int listener = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(listen(listener, 1), 0);
  socklen_t len = sizeof addr;
  getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len);
  const int client = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_EQ(connect(client, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  const int server = accept(listener, nullptr, nullptr);
  ASSERT_GE(server, 0);

  const ConnectionProbe probe("127.0.0.1", port_of(server, true), port_of(server, false));
  EXPECT_TRUE(probe.found());
  EXPECT_FALSE(probe.peer_closed());
  ASSERT_EQ(write(client, "GET", 3), 3);  // pending input is not a hang-up
  EXPECT_FALSE(probe.peer_closed());
  close(client);
  bool closed = false;
  for (int i = 0; i < 100 && !closed; ++i) {
    closed = probe.peer_closed();
    if (!closed) usleep(1000);
  }
  EXPECT_TRUE(closed);

  const ConnectionProbe nothing("127.0.0.1", 1, 2);
  EXPECT_FALSE(nothing.found());
  EXPECT_FALSE(nothing.peer_closed());
  close(server);
  close(listener);
}

}  // namespace
}  // namespace specdec::server
