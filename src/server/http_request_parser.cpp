#include "server/http_request_parser.h"

#include <algorithm>
#include <charconv>

#include "common/error.h"

namespace specdec::server {
namespace {

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string percent_decode(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '+') {
      out += ' ';
    } else if (s[i] == '%' && i + 2 < s.size() && hex_digit(s[i + 1]) >= 0 &&
               hex_digit(s[i + 2]) >= 0) {
      out += static_cast<char>(hex_digit(s[i + 1]) * 16 + hex_digit(s[i + 2]));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

// Empty lines a client may send before a request line (RFC 9112 section 2.2 allows ignoring
// "at least one"); more is noise we do not wait for.
constexpr size_t kMaxLeadingBlankLines = 4;

// RFC 9110 tchar: the characters of a method or a header name.
bool is_tchar(unsigned char c) {
  if (c >= '0' && c <= '9') return true;
  if ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') return true;
  return std::string_view("!#$%&'*+-.^_`|~").find(static_cast<char>(c)) != std::string_view::npos;
}

bool is_token(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(),
                                   [](char c) { return is_tchar(static_cast<unsigned char>(c)); });
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::string lowercase(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

// Does a comma-separated header value contain `token` (case-insensitively)?
bool has_token(std::string_view value, std::string_view token) {
  while (!value.empty()) {
    const size_t comma = value.find(',');
    if (lowercase(trim(value.substr(0, comma))) == token) return true;
    if (comma == std::string_view::npos) break;
    value.remove_prefix(comma + 1);
  }
  return false;
}

}  // namespace

std::string_view HttpRequest::header(std::string_view lowercase_name) const {
  for (const auto& [name, value] : headers) {
    if (name == lowercase_name) return value;
  }
  return {};
}

void HttpRequestParser::fail(int status, std::string message) {
  state_ = State::Failed;
  error_status_ = status;
  error_message_ = std::move(message);
}

bool HttpRequestParser::take_line(std::string_view data, size_t& pos, size_t limit,
                                  int status_over_limit, const char* what) {
  const size_t nl = data.find('\n', pos);
  const size_t end = nl == std::string_view::npos ? data.size() : nl;
  // +1: the CR that may still precede the '\n' in a later read.
  if (line_.size() + (end - pos) > limit + 1) {
    fail(status_over_limit, str_cat(what, " longer than ", limit, " bytes"));
    return false;
  }
  line_.append(data.substr(pos, end - pos));
  if (nl == std::string_view::npos) {
    pos = data.size();
    return false;
  }
  pos = nl + 1;
  if (!line_.empty() && line_.back() == '\r') line_.pop_back();
  if (line_.size() > limit) {
    fail(status_over_limit, str_cat(what, " longer than ", limit, " bytes"));
    return false;
  }
  // A bare CR inside a line is how request-smuggling payloads hide a second line.
  if (line_.find('\r') != std::string::npos) {
    fail(400, str_cat("a bare CR in the ", what));
    return false;
  }
  return true;
}

size_t HttpRequestParser::feed(std::string_view data) {
  size_t pos = 0;
  while (pos < data.size() && state_ != State::Done && state_ != State::Failed) {
    switch (state_) {
      case State::RequestLine:
        started_ = true;
        if (!take_line(data, pos, limits_.max_request_line, 414, "request line")) break;
        on_request_line();
        break;
      case State::Headers:
        if (!take_line(data, pos, limits_.max_header_line, 431, "header line")) break;
        on_header_line();
        break;
      case State::Body:
      case State::ChunkData: {
        const size_t n = static_cast<size_t>(std::min<uint64_t>(remaining_, data.size() - pos));
        request_.body.append(data.substr(pos, n));
        pos += n;
        remaining_ -= n;
        if (remaining_ == 0) state_ = state_ == State::Body ? State::Done : State::ChunkDataEnd;
        break;
      }
      case State::ChunkDataEnd:
        // Only CR LF (or a bare LF) may follow a chunk's data.
        if (!take_line(data, pos, 0, 400, "chunk terminator")) break;
        state_ = State::ChunkSize;
        break;
      case State::ChunkSize:
        if (!take_line(data, pos, limits_.max_header_line, 400, "chunk size line")) break;
        on_chunk_size_line();
        break;
      case State::Trailers:
        if (!take_line(data, pos, limits_.max_header_line, 431, "trailer line")) break;
        on_trailer_line();
        break;
      case State::Done:
      case State::Failed:
        break;
    }
  }
  // A request whose head ends the data and that has no body is complete right here.
  return pos;
}

void HttpRequestParser::on_request_line() {
  std::string line = std::move(line_);
  line_.clear();
  if (line.empty()) {
    if (++blank_lines_ > kMaxLeadingBlankLines) fail(400, "empty lines instead of a request");
    return;
  }
  const size_t sp1 = line.find(' ');
  const size_t sp2 = sp1 == std::string::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string::npos || line.find(' ', sp2 + 1) != std::string::npos) {
    return fail(400, "malformed request line (expected: METHOD TARGET HTTP/1.1)");
  }
  const std::string_view method = std::string_view(line).substr(0, sp1);
  const std::string_view target = std::string_view(line).substr(sp1 + 1, sp2 - sp1 - 1);
  const std::string_view version = std::string_view(line).substr(sp2 + 1);
  if (!is_token(method)) return fail(400, "malformed request method");
  if (target.empty() || std::any_of(target.begin(), target.end(), [](char c) {
        const auto u = static_cast<unsigned char>(c);
        return u <= 0x20 || u == 0x7f;
      })) {
    return fail(400, "malformed request target");
  }
  if (version.size() != 8 || version.substr(0, 5) != "HTTP/" || version[6] != '.' ||
      version[5] < '0' || version[5] > '9' || version[7] < '0' || version[7] > '9') {
    return fail(400, "malformed HTTP version");
  }
  if (version[5] != '1' || (version[7] != '0' && version[7] != '1')) {
    return fail(505, str_cat("HTTP version ", version, " is not supported (1.0 and 1.1 are)"));
  }
  request_.method = std::string(method);
  request_.target = std::string(target);
  request_.path = request_.target.substr(0, request_.target.find('?'));
  request_.version_minor = version[7] - '0';
  state_ = State::Headers;
}

void HttpRequestParser::on_header_line() {
  std::string line = std::move(line_);
  line_.clear();
  if (line.empty()) return on_head_end();
  header_bytes_ += line.size() + 2;
  if (header_bytes_ > limits_.max_header_bytes) {
    return fail(431, str_cat("header fields longer than ", limits_.max_header_bytes, " bytes"));
  }
  if (request_.headers.size() >= limits_.max_headers) {
    return fail(431, str_cat("more than ", limits_.max_headers, " header fields"));
  }
  if (line.front() == ' ' || line.front() == '\t') {
    return fail(400, "obsolete header line folding is not accepted");
  }
  const size_t colon = line.find(':');
  if (colon == std::string::npos) return fail(400, "a header line without ':'");
  const std::string_view name = std::string_view(line).substr(0, colon);
  if (!is_token(name)) return fail(400, "malformed header name");
  const std::string_view value = trim(std::string_view(line).substr(colon + 1));
  if (std::any_of(value.begin(), value.end(), [](char c) {
        const auto u = static_cast<unsigned char>(c);
        return (u < 0x20 && u != '\t') || u == 0x7f;
      })) {
    return fail(400, "a control character in a header value");
  }
  request_.headers.emplace_back(lowercase(name), std::string(value));
}

void HttpRequestParser::on_head_end() {
  head_done_ = true;
  bool chunked = false, has_length = false;
  uint64_t length = 0;
  bool close = false, keep_alive = false;
  for (const auto& [name, value] : request_.headers) {
    if (name == "transfer-encoding") {
      if (chunked || lowercase(value) != "chunked") {
        return fail(501, str_cat("transfer coding '", value, "' is not supported (only chunked)"));
      }
      chunked = true;
    } else if (name == "content-length") {
      // "Content-Length: 5, 5" and repeated equal fields are allowed; different values are not.
      std::string_view rest = value;
      while (true) {
        const size_t comma = rest.find(',');
        const std::string_view item = trim(rest.substr(0, comma));
        uint64_t v = 0;
        const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
        if (item.empty() || ec != std::errc() || end != item.data() + item.size()) {
          return fail(400, str_cat("invalid Content-Length '", value, "'"));
        }
        if (has_length && v != length) return fail(400, "conflicting Content-Length values");
        has_length = true;
        length = v;
        if (comma == std::string_view::npos) break;
        rest.remove_prefix(comma + 1);
      }
    } else if (name == "connection") {
      close = close || has_token(value, "close");
      keep_alive = keep_alive || has_token(value, "keep-alive");
    } else if (name == "expect") {
      if (lowercase(value) != "100-continue") {
        return fail(417, str_cat("expectation '", value, "' is not supported"));
      }
      request_.expects_continue = true;
    }
  }
  request_.keep_alive = !close && (request_.version_minor == 1 || keep_alive);
  if (chunked && has_length) {
    return fail(400, "both Content-Length and Transfer-Encoding (ambiguous framing)");
  }
  if (has_length && length > limits_.max_body) {
    return fail(413, str_cat("the request body exceeds the limit of ", limits_.max_body, " bytes"));
  }
  if (chunked) {
    state_ = State::ChunkSize;
  } else if (length > 0) {
    remaining_ = length;
    request_.body.reserve(static_cast<size_t>(length));
    state_ = State::Body;
  } else {
    state_ = State::Done;
  }
  if (state_ == State::Done) request_.expects_continue = false;  // nothing to wait for
}

void HttpRequestParser::on_chunk_size_line() {
  const std::string line = std::move(line_);
  line_.clear();
  const std::string_view size = trim(std::string_view(line).substr(0, line.find(';')));
  uint64_t n = 0;
  const auto [end, ec] = std::from_chars(size.data(), size.data() + size.size(), n, 16);
  if (size.empty() || ec != std::errc() || end != size.data() + size.size()) {
    return fail(400, "malformed chunk size");
  }
  if (n > limits_.max_body || request_.body.size() + n > limits_.max_body) {
    return fail(413, str_cat("the request body exceeds the limit of ", limits_.max_body, " bytes"));
  }
  if (n == 0) {
    state_ = State::Trailers;
    return;
  }
  remaining_ = n;
  state_ = State::ChunkData;
}

void HttpRequestParser::on_trailer_line() {
  const std::string line = std::move(line_);
  line_.clear();
  if (line.empty()) {
    state_ = State::Done;
    return;
  }
  // Trailers are read and dropped; they count against the same header budget.
  header_bytes_ += line.size() + 2;
  if (header_bytes_ > limits_.max_header_bytes) {
    return fail(431, str_cat("header fields longer than ", limits_.max_header_bytes, " bytes"));
  }
  if (line.find(':') == std::string::npos) fail(400, "a trailer line without ':'");
}

HttpRequest HttpRequestParser::take() {
  HttpRequest out = std::move(request_);
  request_ = HttpRequest{};
  state_ = State::RequestLine;
  started_ = head_done_ = false;
  line_.clear();
  header_bytes_ = blank_lines_ = 0;
  remaining_ = 0;
  return out;
}

std::optional<std::string> query_value(std::string_view target, std::string_view name) {
  const size_t q = target.find('?');
  if (q == std::string_view::npos) return std::nullopt;
  std::string_view rest = target.substr(q + 1);
  while (!rest.empty()) {
    const size_t amp = rest.find('&');
    const std::string_view pair = rest.substr(0, amp);
    rest = amp == std::string_view::npos ? std::string_view() : rest.substr(amp + 1);
    const size_t eq = pair.find('=');
    if (percent_decode(pair.substr(0, eq)) != name) continue;
    return eq == std::string_view::npos ? std::string() : percent_decode(pair.substr(eq + 1));
  }
  return std::nullopt;
}

}  // namespace specdec::server
