// The HTTP/1.1 transport of `specdec serve`: a listening socket, one thread per connection (at
// most max_connections; beyond that a connection gets an immediate 503 and is closed), bounded
// request parsing (http_request_parser.h) and deadlines that keep slow or hostile clients from
// holding resources:
//
//   request_timeout     a request's head and body must arrive within this time of its first
//                       byte (slowloris: trickling headers or body earns a 408 and a close)
//   keep_alive_timeout  an idle connection waits this long for its next request, then closes
//   write_timeout       a write may stall this long (a client that stops reading a stream)
//
// Shutdown is two steps: stop_accepting() closes the listening socket and lets idle
// connections go while requests in progress carry on (SIGTERM's drain); close_all() then aborts
// whatever is left and joins every connection thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "server/http_request_parser.h"
#include "server/http_responder.h"

namespace specdec::server {

struct HttpListenerConfig {
  std::string host = "127.0.0.1";
  int port = 8080;  // 0: any free port
  HttpLimits limits;
  size_t max_connections = 64;
  std::chrono::milliseconds request_timeout{20'000};
  std::chrono::milliseconds keep_alive_timeout{5'000};
  std::chrono::milliseconds write_timeout{15'000};
  size_t max_requests_per_connection = 1000;
};

struct HttpListenerStats {
  int64_t connections = 0;           // accepted and served
  int64_t rejected_connections = 0;  // over max_connections: 503 and closed
  int64_t request_timeouts = 0;      // requests not complete within request_timeout (408)
  int64_t malformed_requests = 0;    // refused by the parser (4xx/5xx)
  int64_t open_connections = 0;
};

class HttpListener {
 public:
  using Handler = std::function<void(const HttpRequest&, HttpResponder&)>;
  // The body of a response the transport sends by itself (malformed request, timeout, overload):
  // the application's error format. Returns the JSON text.
  using ErrorBody = std::function<std::string(int status, const std::string& message)>;

  HttpListener(HttpListenerConfig config, Handler handler, ErrorBody error_body);
  ~HttpListener();  // close_all()
  HttpListener(const HttpListener&) = delete;
  HttpListener& operator=(const HttpListener&) = delete;

  // Binds and listens; returns the port. Throws specdec::Error when it cannot.
  int bind();
  // Accepts connections until stop_accepting() (or close_all()); then returns. Connections
  // already open keep being served by their threads.
  void run();
  // Thread-safe. Closes the listening socket; idle connections close, requests in progress
  // finish and their connections close after the response.
  void stop_accepting();
  // Thread-safe. Waits up to `timeout` for every connection to close (after stop_accepting(),
  // requests in progress finish and idle connections go); true when none is left open.
  bool wait_until_closed(std::chrono::milliseconds timeout) const;
  // Thread-safe. Aborts every connection's reads and writes and joins all connection threads.
  void close_all();

  HttpListenerStats stats() const;

 private:
  struct Connection {
    std::thread thread;
    std::atomic<bool> done{false};
  };
  void serve(int fd, Connection& connection);
  void reject(int fd, int status, const std::string& message);
  void reap_finished();

  const HttpListenerConfig config_;
  Handler handler_;
  ErrorBody error_body_;
  std::atomic<int> listen_fd_{-1};
  std::atomic<bool> accepting_{false}, draining_{false}, abort_{false};
  mutable std::mutex mu_;
  std::list<Connection> connections_;
  std::atomic<int64_t> accepted_{0}, rejected_{0}, timeouts_{0}, malformed_{0}, open_{0};
};

}  // namespace specdec::server
