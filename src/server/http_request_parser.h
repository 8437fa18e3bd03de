// HTTP/1.1 request parsing (RFC 9112), incremental and bounded: bytes go in as they arrive, a
// complete request (or an error status) comes out. It never buffers more than its limits allow,
// so a client that sends endless header lines, a line without an end, or a body larger than
// declared costs at most those limits in memory, never an unbounded allocation.
//
// We parse HTTP ourselves because Debian 12's cpp-httplib (0.11) checks a header line's length
// only after reading all of it and does not bound the number of header lines: one client sending
// headers for 8 seconds grew the server to 1.2 GiB. The parser is pure (no sockets), which is also
// what makes it a fuzz target.
//
// Accepted: request-line "METHOD SP target SP HTTP/1.x", header fields, a body framed by
// Content-Length or by chunked transfer coding (chunk extensions and trailers are read and
// ignored). Refused, with the status a client should see:
//   400 malformed request line, header field, chunk size or framing; both Content-Length and
//       Transfer-Encoding, or conflicting Content-Length values (request smuggling guards)
//   413 a body over max_body (declared or as it arrives)
//   414 a request line over max_request_line
//   417 an Expect other than 100-continue
//   431 a header line over max_header_line, more than max_headers fields, or all header lines
//       together over max_header_bytes
//   501 a transfer coding other than chunked
//   505 an HTTP version other than 1.0 and 1.1
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace specdec::server {

struct HttpLimits {
  size_t max_request_line = 8 * 1024;
  size_t max_header_line = 8 * 1024;
  size_t max_header_bytes = 32 * 1024;  // every header line of one request together
  size_t max_headers = 64;
  size_t max_body = 1 << 20;
};

struct HttpRequest {
  std::string method;  // as sent (methods are case-sensitive)
  std::string target;  // request-target as sent
  std::string path;    // target up to '?'
  int version_minor = 1;
  std::vector<std::pair<std::string, std::string>> headers;  // names lowercased, values trimmed
  std::string body;                                          // chunked bodies already decoded
  bool keep_alive = true;         // the client allows another request on this connection
  bool expects_continue = false;  // "Expect: 100-continue"

  // The first value of a header (name in lowercase), or "" when absent.
  std::string_view header(std::string_view lowercase_name) const;
};

// The value of `name` in a request target's query ("/slots/0?action=save" gives "save" for
// "action"), percent-decoded ('+' as a space); "" for a name without '=', nullopt when absent.
std::optional<std::string> query_value(std::string_view target, std::string_view name);

class HttpRequestParser {
 public:
  explicit HttpRequestParser(HttpLimits limits) : limits_(limits) {}

  // Consumes a prefix of `data` and returns its length: everything, unless the request ended
  // inside `data` (the rest belongs to the next, pipelined request) or an error was found.
  size_t feed(std::string_view data);

  bool started() const { return started_; }          // any byte of a request seen
  bool head_complete() const { return head_done_; }  // request line and header fields parsed
  bool expects_continue() const { return request_.expects_continue; }
  bool complete() const { return state_ == State::Done; }
  bool failed() const { return state_ == State::Failed; }
  int error_status() const { return error_status_; }
  const std::string& error_message() const { return error_message_; }

  // The complete request; the parser is then ready for the next one on the same connection.
  HttpRequest take();

 private:
  enum class State {
    RequestLine,
    Headers,
    Body,
    ChunkSize,
    ChunkData,
    ChunkDataEnd,
    Trailers,
    Done,
    Failed
  };

  // Appends to line_ up to the next '\n'. True when a whole line (without CR LF) is in line_.
  bool take_line(std::string_view data, size_t& pos, size_t limit, int status_over_limit,
                 const char* what);
  void fail(int status, std::string message);
  void on_request_line();
  void on_header_line();
  void on_head_end();
  void on_chunk_size_line();
  void on_trailer_line();

  HttpLimits limits_;
  State state_ = State::RequestLine;
  bool started_ = false, head_done_ = false;
  std::string line_;
  size_t header_bytes_ = 0, blank_lines_ = 0;
  uint64_t remaining_ = 0;  // body or chunk bytes still to come
  HttpRequest request_;
  int error_status_ = 0;
  std::string error_message_;
};

}  // namespace specdec::server
