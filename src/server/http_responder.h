// Writes one HTTP/1.1 response on a connection: a whole body with Content-Length, or a stream in
// chunked transfer coding (server-sent events). A handler gets one per request.
#pragma once

#include <atomic>
#include <chrono>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace specdec::server {

// The reason phrase of a status code ("OK", "Not Found", ...); "Unknown" for codes we never send.
const char* http_reason(int status);

class HttpResponder {
 public:
  // head_only: the request was HEAD (headers as for GET, no body). keep_alive: whether the
  // connection may carry another request after this one (the responder says so in its headers).
  HttpResponder(int fd, bool head_only, bool keep_alive, std::chrono::milliseconds write_timeout,
                const std::atomic<bool>& abort);

  void set_header(std::string name, std::string value);

  // The whole response. False when the write failed (the connection is then closed).
  bool send(int status, std::string_view content_type, std::string_view body);

  // A streamed response: begin_stream, any number of write (one chunk each), end_stream.
  bool begin_stream(int status, std::string_view content_type);
  bool write(std::string_view data);
  bool end_stream();

  // True once the client closed or reset the connection (a handler stops its work then).
  bool peer_closed() const;

  bool started() const { return started_; }
  bool finished() const { return finished_; }  // a complete response went out
  bool failed() const { return failed_; }      // a write failed or the stream was cut short
  int status() const { return status_; }
  bool keep_alive() const { return keep_alive_; }
  // Send "Connection: close" and close after this response (e.g. the server is draining).
  void close_after() { keep_alive_ = false; }

 private:
  std::string head(int status, std::string_view content_type, const std::string& framing) const;
  bool put(std::string_view bytes);

  int fd_;
  bool head_only_, keep_alive_;
  std::chrono::milliseconds write_timeout_;
  const std::atomic<bool>& abort_;
  std::vector<std::pair<std::string, std::string>> headers_;
  bool started_ = false, streaming_ = false, finished_ = false, failed_ = false;
  int status_ = 0;
};

}  // namespace specdec::server
