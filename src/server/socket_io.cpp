#include "server/socket_io.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>

namespace specdec::server {
namespace {

int slice_ms(SteadyClock::time_point deadline) {
  const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - SteadyClock::now());
  return static_cast<int>(std::clamp<int64_t>(left.count(), 0, kSocketPollSlice.count()));
}

// Waits for `events` on fd until the deadline: Ok when ready (or on an error the next call
// will report), TimedOut, or Aborted.
IoResult wait_for(int fd, short events, SteadyClock::time_point deadline,
                  const std::atomic<bool>& abort) {
  while (true) {
    if (abort.load(std::memory_order_relaxed)) return IoResult::Aborted;
    if (SteadyClock::now() >= deadline) return IoResult::TimedOut;
    pollfd p{fd, events, 0};
    const int r = ::poll(&p, 1, slice_ms(deadline));
    if (r > 0) return IoResult::Ok;
    if (r < 0 && errno != EINTR) return IoResult::Closed;
  }
}

}  // namespace

IoResult read_some(int fd, char* buffer, size_t capacity, size_t& got,
                   SteadyClock::time_point deadline, const std::atomic<bool>& abort) {
  got = 0;
  while (true) {
    const IoResult w = wait_for(fd, POLLIN, deadline, abort);
    if (w != IoResult::Ok) return w;
    const ssize_t n = ::recv(fd, buffer, capacity, MSG_DONTWAIT);
    if (n > 0) {
      got = static_cast<size_t>(n);
      return IoResult::Ok;
    }
    if (n == 0) return IoResult::Closed;
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return IoResult::Closed;
  }
}

IoResult write_all(int fd, std::string_view data, std::chrono::milliseconds stall_timeout,
                   const std::atomic<bool>& abort) {
  while (!data.empty()) {
    const IoResult w = wait_for(fd, POLLOUT, SteadyClock::now() + stall_timeout, abort);
    if (w != IoResult::Ok) return w;
    // MSG_NOSIGNAL: a peer that went away is an error return, never SIGPIPE.
    const ssize_t n = ::send(fd, data.data(), data.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n > 0) {
      data.remove_prefix(static_cast<size_t>(n));
    } else if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      return IoResult::Closed;
    }
  }
  return IoResult::Ok;
}

bool peer_hung_up(int fd) {
  pollfd p{fd, POLLRDHUP, 0};
  if (::poll(&p, 1, 0) <= 0) return false;
  return (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0;
}

}  // namespace specdec::server
