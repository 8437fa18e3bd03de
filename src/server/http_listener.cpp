#include "server/http_listener.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "common/error.h"
#include "server/socket_io.h"

namespace specdec::server {
namespace {

using std::chrono::milliseconds;

constexpr int kListenBacklog = 128;
constexpr size_t kReadBuffer = 16 * 1024;
// After an error response the client may still be sending (a body we refused): read and drop
// that much for that long before closing, so that our close does not turn into a reset that
// destroys the error response before the client reads it (nginx's lingering close).
constexpr milliseconds kLingerTime{500};
constexpr size_t kLingerBytes = 4 << 20;
// The 503 for a connection over the limit is written from the accept loop: never wait long.
constexpr milliseconds kRejectWriteTimeout{200};

void linger_close(int fd, const std::atomic<bool>& abort) {
  ::shutdown(fd, SHUT_WR);
  char buf[kReadBuffer];
  size_t total = 0, got = 0;
  const auto deadline = SteadyClock::now() + kLingerTime;
  while (total < kLingerBytes &&
         read_some(fd, buf, sizeof buf, got, deadline, abort) == IoResult::Ok) {
    total += got;
  }
  ::close(fd);
}

}  // namespace

HttpListener::HttpListener(HttpListenerConfig config, Handler handler, ErrorBody error_body)
    : config_(std::move(config)),
      handler_(std::move(handler)),
      error_body_(std::move(error_body)) {}

HttpListener::~HttpListener() { close_all(); }

int HttpListener::bind() {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  const std::string port = std::to_string(config_.port);
  if (const int rc = ::getaddrinfo(config_.host.c_str(), port.c_str(), &hints, &found); rc != 0) {
    fail("cannot listen on ", config_.host, ":", config_.port, ": ", ::gai_strerror(rc));
  }
  int fd = -1;
  std::string why = "no usable address";
  for (addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd, a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd, kListenBacklog) != 0) {
      why = std::strerror(errno);
      ::close(fd);
      fd = -1;
    }
  }
  ::freeaddrinfo(found);
  if (fd < 0) {
    fail("cannot listen on ", config_.host, ":", config_.port, ": ", why,
         " (address in use, or not an address of this machine)");
  }
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  const int bound = addr.ss_family == AF_INET6
                        ? ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port)
                        : ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
  listen_fd_ = fd;
  accepting_ = true;
  return bound;
}

void HttpListener::run() {
  const int lfd = listen_fd_.load();
  if (lfd < 0) return;
  while (accepting_.load()) {
    pollfd p{lfd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(kSocketPollSlice.count())) <= 0) continue;
    const int fd = ::accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;  // the listening socket was shut down, or the client already left
    reap_finished();
    std::lock_guard lock(mu_);
    if (abort_.load() || static_cast<size_t>(open_.load()) >= config_.max_connections) {
      ++rejected_;
      reject(fd, 503,
             str_cat("the server has ", config_.max_connections,
                     " connections open (--max-connections); retry later"));
      ::close(fd);
      continue;
    }
    ++accepted_;
    ++open_;
    Connection& c = connections_.emplace_back();
    c.thread = std::thread([this, fd, &c] { serve(fd, c); });
  }
  if (const int fd = listen_fd_.exchange(-1); fd >= 0) ::close(fd);
}

void HttpListener::stop_accepting() {
  draining_ = true;
  accepting_ = false;
  // Wakes run()'s poll at once and refuses new connections; run() closes the descriptor.
  if (const int fd = listen_fd_.load(); fd >= 0) ::shutdown(fd, SHUT_RDWR);
}

void HttpListener::close_all() {
  std::list<Connection> all;
  {
    std::lock_guard lock(mu_);
    abort_ = true;
    stop_accepting();
    all.swap(connections_);
  }
  for (Connection& c : all) {
    if (c.thread.joinable()) c.thread.join();
  }
}

void HttpListener::reap_finished() {
  std::list<Connection> finished;
  {
    std::lock_guard lock(mu_);
    for (auto it = connections_.begin(); it != connections_.end();) {
      auto next = std::next(it);
      if (it->done.load()) finished.splice(finished.end(), connections_, it);
      it = next;
    }
  }
  for (Connection& c : finished) c.thread.join();
}

bool HttpListener::wait_until_closed(std::chrono::milliseconds timeout) const {
  const auto deadline = SteadyClock::now() + timeout;
  while (open_.load() > 0) {
    if (SteadyClock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

HttpListenerStats HttpListener::stats() const {
  return {accepted_.load(), rejected_.load(), timeouts_.load(), malformed_.load(), open_.load()};
}

void HttpListener::reject(int fd, int status, const std::string& message) {
  HttpResponder res(fd, false, false, kRejectWriteTimeout, abort_);
  res.send(status, "application/json", error_body_(status, message));
}

void HttpListener::serve(int fd, Connection& connection) {
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  HttpRequestParser parser(config_.limits);
  std::string pending;
  char buf[kReadBuffer];
  bool lingering = false;  // an error response went out: drain what the client still sends

  for (size_t served = 0; !abort_.load(); ++served) {
    const auto idle_deadline =
        SteadyClock::now() + (served == 0 ? config_.request_timeout : config_.keep_alive_timeout);
    SteadyClock::time_point request_deadline{};
    bool sent_continue = false, gone = false;
    while (true) {
      if (!pending.empty()) {
        if (!parser.started()) request_deadline = SteadyClock::now() + config_.request_timeout;
        pending.erase(0, parser.feed(pending));
        if (parser.complete() || parser.failed()) break;
      }
      if (parser.head_complete() && parser.expects_continue() && !sent_continue) {
        sent_continue = true;
        if (write_all(fd, "HTTP/1.1 100 Continue\r\n\r\n", config_.write_timeout, abort_) !=
            IoResult::Ok) {
          gone = true;
          break;
        }
      }
      // Draining: a connection between requests closes; one inside a request may finish it.
      if (draining_.load() && !parser.started()) {
        gone = true;
        break;
      }
      const auto deadline = parser.started() ? request_deadline : idle_deadline;
      if (SteadyClock::now() >= deadline) {
        if (parser.started()) {
          ++timeouts_;
          reject(fd, 408,
                 str_cat("the request did not arrive within ", config_.request_timeout.count(),
                         " ms (--request-timeout)"));
          lingering = true;
        }
        gone = true;
        break;
      }
      size_t got = 0;
      // Short slices, so that a drain notices an idle connection soon.
      const IoResult r =
          read_some(fd, buf, sizeof buf, got,
                    std::min(deadline, SteadyClock::now() + kSocketPollSlice), abort_);
      if (r == IoResult::TimedOut) continue;
      if (r != IoResult::Ok) {
        gone = true;
        break;
      }
      pending.append(buf, got);
    }
    if (gone) break;
    if (parser.failed()) {
      ++malformed_;
      reject(fd, parser.error_status(), parser.error_message());
      lingering = true;
      break;
    }
    const HttpRequest req = parser.take();
    const bool keep =
        req.keep_alive && !draining_.load() && served + 1 < config_.max_requests_per_connection;
    HttpResponder res(fd, req.method == "HEAD", keep, config_.write_timeout, abort_);
    handler_(req, res);
    if (!res.started()) res.send(500, "application/json", error_body_(500, "no response"));
    if (!res.finished() || res.failed() || !res.keep_alive() || draining_.load()) break;
  }
  if (lingering) {
    linger_close(fd, abort_);
  } else {
    ::close(fd);
  }
  --open_;
  connection.done = true;
}

}  // namespace specdec::server
