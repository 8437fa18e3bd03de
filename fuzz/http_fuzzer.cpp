// HTTP/1.1 request parser fuzz target (the server's own transport, server/http_request_parser.h).
// Input: one flag byte, then the bytes a client sends on one connection (pipelined requests).
//   bits 0-2  how the bytes arrive: in pieces of kPieces[i] bytes (7: all at once)
//   bits 3-4  the limits (kLimits: the server's defaults, or small ones that inputs can exceed)
// The stream is parsed twice, once as it arrives in pieces and once in a single feed; both must
// give the same requests and the same error (the parser is incremental, so where a read ends
// must not matter). Every request must be well formed as the header promises (method a token,
// a target without spaces or controls, path = target up to '?', HTTP/1.0 or 1.1, lowercase
// header names, trimmed values without controls, body within max_body and as long as its
// Content-Length), every error one of the documented statuses, and each feed must make
// progress.
#include <charconv>
#include <string>
#include <vector>

#include "fuzz_support.h"
#include "fuzz_targets.h"
#include "server/http_request_parser.h"

namespace specdec::fuzz {
namespace {

using server::HttpLimits;
using server::HttpRequest;
using server::HttpRequestParser;

constexpr size_t kPieces[] = {1, 2, 3, 7, 16, 100, 1000, static_cast<size_t>(-1)};

HttpLimits limits_for(int which) {
  HttpLimits l;  // 0: the server's defaults
  if (which == 1) l = {16, 16, 64, 4, 32};
  if (which == 2) l = {64, 32, 256, 8, 256};
  if (which == 3) l = {4096, 4096, 4096, 16, 0};
  return l;
}

bool is_tchar(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

// One line per request and one for the error, so that two parses can be compared.
std::string describe(const HttpRequest& r) {
  std::string out = r.method + ' ' + r.target + " 1." + std::to_string(r.version_minor);
  for (const auto& [name, value] : r.headers) out += '|' + name + ':' + value;
  out += "|body=" + r.body;
  out += r.keep_alive ? "|keep-alive" : "|close";
  return out;
}

void check_request(const HttpRequest& r, const HttpLimits& limits) {
  FUZZ_CHECK(!r.method.empty());
  for (char c : r.method) FUZZ_CHECK(is_tchar(c));
  FUZZ_CHECK(!r.target.empty());
  for (char c : r.target) FUZZ_CHECK(static_cast<unsigned char>(c) > 0x20 && c != 0x7f);
  FUZZ_CHECK(r.path == r.target.substr(0, r.target.find('?')));
  FUZZ_CHECK(r.version_minor == 0 || r.version_minor == 1);
  FUZZ_CHECK(r.headers.size() <= limits.max_headers);
  for (const auto& [name, value] : r.headers) {
    FUZZ_CHECK(!name.empty());
    for (char c : name) FUZZ_CHECK(is_tchar(c) && !(c >= 'A' && c <= 'Z'));
    if (!value.empty()) {
      FUZZ_CHECK(value.front() != ' ' && value.front() != '\t');
      FUZZ_CHECK(value.back() != ' ' && value.back() != '\t');
    }
    for (char c : value) {
      const auto u = static_cast<unsigned char>(c);
      FUZZ_CHECK((u >= 0x20 || u == '\t') && u != 0x7f);
    }
  }
  FUZZ_CHECK(r.body.size() <= limits.max_body);
  // Content-Length (its first field; a repeated or listed value must be the same number).
  const std::string_view length = r.header("content-length");
  if (!length.empty()) {
    uint64_t n = 0;
    const std::string_view first = length.substr(0, length.find(','));
    const auto [end, ec] = std::from_chars(first.data(), first.data() + first.size(), n);
    if (ec == std::errc() && end == first.data() + first.size()) FUZZ_CHECK(r.body.size() == n);
  }
  if (r.header("transfer-encoding").empty() && length.empty()) FUZZ_CHECK(r.body.empty());
}

std::vector<std::string> parse(std::string_view stream, size_t piece, const HttpLimits& limits) {
  std::vector<std::string> out;
  HttpRequestParser p(limits);
  size_t at = 0;
  while (at < stream.size()) {
    const std::string_view chunk = stream.substr(at, std::min(piece, stream.size() - at));
    size_t used = 0;
    while (used < chunk.size()) {
      const size_t n = p.feed(chunk.substr(used));
      FUZZ_CHECK(n <= chunk.size() - used);
      used += n;
      if (p.failed()) break;
      if (p.complete()) {
        const HttpRequest r = p.take();
        check_request(r, limits);
        out.push_back(describe(r));
        FUZZ_CHECK(!p.started() && !p.complete());
      } else {
        FUZZ_CHECK(n > 0);  // a parser that wants more data has taken all it was given
      }
    }
    if (p.failed()) {
      const int s = p.error_status();
      FUZZ_CHECK(s == 400 || s == 413 || s == 414 || s == 417 || s == 431 || s == 501 || s == 505);
      FUZZ_CHECK(!p.error_message().empty());
      out.push_back("error " + std::to_string(s) + ' ' + p.error_message());
      return out;
    }
    at += chunk.size();
  }
  out.push_back(p.started() ? (p.head_complete() ? "incomplete body" : "incomplete head") : "idle");
  return out;
}

}  // namespace

int fuzz_one_http(const uint8_t* data, size_t size) {
  FuzzInput in(data, size);
  const uint8_t flags = in.byte();
  const size_t piece = kPieces[flags & 7];
  const HttpLimits limits = limits_for((flags >> 3) & 3);
  const std::string_view stream = in.rest();
  const std::vector<std::string> pieces = parse(stream, piece, limits);
  const std::vector<std::string> whole = parse(stream, stream.size() + 1, limits);
  FUZZ_CHECK(pieces == whole);
  return 0;
}

}  // namespace specdec::fuzz
