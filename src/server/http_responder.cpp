#include "server/http_responder.h"

#include <cstdio>

#include "server/socket_io.h"

namespace specdec::server {

const char* http_reason(int status) {
  switch (status) {
    case 100:
      return "Continue";
    case 200:
      return "OK";
    case 204:
      return "No Content";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 413:
      return "Content Too Large";
    case 414:
      return "URI Too Long";
    case 417:
      return "Expectation Failed";
    case 431:
      return "Request Header Fields Too Large";
    case 499:
      return "Client Closed Request";
    case 500:
      return "Internal Server Error";
    case 501:
      return "Not Implemented";
    case 503:
      return "Service Unavailable";
    case 505:
      return "HTTP Version Not Supported";
    default:
      return "Unknown";
  }
}

HttpResponder::HttpResponder(int fd, bool head_only, bool keep_alive,
                             std::chrono::milliseconds write_timeout,
                             const std::atomic<bool>& abort)
    : fd_(fd),
      head_only_(head_only),
      keep_alive_(keep_alive),
      write_timeout_(write_timeout),
      abort_(abort) {}

void HttpResponder::set_header(std::string name, std::string value) {
  headers_.emplace_back(std::move(name), std::move(value));
}

std::string HttpResponder::head(int status, std::string_view content_type,
                                const std::string& framing) const {
  std::string h = "HTTP/1.1 " + std::to_string(status) + " " + http_reason(status) + "\r\n";
  if (!content_type.empty()) {
    h += "Content-Type: ";
    h += content_type;
    h += "\r\n";
  }
  if (!framing.empty()) h += framing + "\r\n";
  h += keep_alive_ ? "Connection: keep-alive\r\n" : "Connection: close\r\n";
  for (const auto& [name, value] : headers_) h += name + ": " + value + "\r\n";
  h += "\r\n";
  return h;
}

bool HttpResponder::put(std::string_view bytes) {
  if (failed_) return false;
  if (write_all(fd_, bytes, write_timeout_, abort_) != IoResult::Ok) failed_ = true;
  return !failed_;
}

bool HttpResponder::send(int status, std::string_view content_type, std::string_view body) {
  if (started_) return false;
  started_ = true;
  status_ = status;
  // 204 has neither a body nor its framing (RFC 9110 8.6).
  if (status == 204) {
    finished_ = put(head(status, "", ""));
    return finished_;
  }
  std::string out = head(status, content_type, "Content-Length: " + std::to_string(body.size()));
  if (!head_only_) out += body;
  finished_ = put(out);
  return finished_;
}

bool HttpResponder::begin_stream(int status, std::string_view content_type) {
  if (started_) return false;
  started_ = streaming_ = true;
  status_ = status;
  return put(head(status, content_type, "Transfer-Encoding: chunked"));
}

bool HttpResponder::write(std::string_view data) {
  if (!streaming_ || finished_) return false;
  if (data.empty() || head_only_) return !failed_;  // an empty chunk would end the stream
  char size[24];
  const int n = std::snprintf(size, sizeof size, "%zx\r\n", data.size());
  std::string chunk(size, static_cast<size_t>(n));
  chunk += data;
  chunk += "\r\n";
  return put(chunk);
}

bool HttpResponder::end_stream() {
  if (!streaming_ || finished_) return false;
  finished_ = head_only_ ? !failed_ : put("0\r\n\r\n");
  return finished_;
}

bool HttpResponder::peer_closed() const { return peer_hung_up(fd_); }

}  // namespace specdec::server
