#include "server/http_request_parser.h"

#include <gtest/gtest.h>

#include <string>

namespace specdec::server {
namespace {

// Feeds `wire` in pieces of `step` bytes; returns the parser (complete, failed or waiting).
HttpRequestParser parse(const std::string& wire, size_t step = 1 << 20, HttpLimits limits = {}) {
  HttpRequestParser p(limits);
  for (size_t pos = 0; pos < wire.size() && !p.complete() && !p.failed(); pos += step) {
    const std::string_view piece = std::string_view(wire).substr(pos, step);
    const size_t used = p.feed(piece);
    if (used < piece.size()) break;
  }
  return p;
}

TEST(HttpRequestParser, ParsesARequestWithABodyInAnySplit) {
  const std::string wire =
      "POST /v1/completions?x=1 HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\n"
      "Content-Length: 13\r\nX-Pad:   spaced value \t\r\n\r\n{\"prompt\":\"\"}";
  for (size_t step : {1, 2, 7, 64, 4096}) {
    HttpRequestParser p = parse(wire, step);
    ASSERT_TRUE(p.complete()) << step << ": " << p.error_message();
    const HttpRequest r = p.take();
    EXPECT_EQ(r.method, "POST");
    EXPECT_EQ(r.target, "/v1/completions?x=1");
    EXPECT_EQ(r.path, "/v1/completions");
    EXPECT_EQ(r.body, "{\"prompt\":\"\"}");
    EXPECT_EQ(r.header("content-type"), "application/json");
    EXPECT_EQ(r.header("x-pad"), "spaced value");
    EXPECT_EQ(r.header("absent"), "");
    EXPECT_TRUE(r.keep_alive);
  }
}

TEST(HttpRequestParser, DecodesChunkedBodiesWithExtensionsAndTrailers) {
  const std::string wire =
      "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
      "5;ext=1\r\nhello\r\n1\r\n \r\nA\r\n0123456789\r\n0\r\nX-Trailer: t\r\n\r\n";
  for (size_t step : {1, 3, 4096}) {
    HttpRequestParser p = parse(wire, step);
    ASSERT_TRUE(p.complete()) << p.error_message();
    EXPECT_EQ(p.take().body, "hello 0123456789");
  }
}

TEST(HttpRequestParser, LeavesAPipelinedRequestForTheNextCall) {
  const std::string first = "GET /health HTTP/1.1\r\n\r\n";
  const std::string second = "GET /metrics HTTP/1.0\r\nConnection: keep-alive\r\n\r\n";
  HttpRequestParser p(HttpLimits{});
  const std::string wire = first + second;
  const size_t used = p.feed(wire);
  ASSERT_TRUE(p.complete());
  EXPECT_EQ(used, first.size());
  EXPECT_EQ(p.take().path, "/health");
  EXPECT_EQ(p.feed(std::string_view(wire).substr(used)), second.size());
  ASSERT_TRUE(p.complete());
  const HttpRequest r = p.take();
  EXPECT_EQ(r.path, "/metrics");
  EXPECT_EQ(r.version_minor, 0);
  EXPECT_TRUE(r.keep_alive);
}

TEST(HttpRequestParser, ConnectionSemanticsFollowTheVersion) {
  EXPECT_FALSE(parse("GET / HTTP/1.0\r\n\r\n").take().keep_alive);
  EXPECT_FALSE(parse("GET / HTTP/1.1\r\nConnection: foo, Close\r\n\r\n").take().keep_alive);
  HttpRequestParser p =
      parse("POST / HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n");
  EXPECT_TRUE(p.head_complete());
  EXPECT_TRUE(p.expects_continue());
  EXPECT_FALSE(p.complete());
}

struct BadCase {
  const char* name;
  std::string wire;
  int status;
};

TEST(HttpRequestParser, RefusesMalformedAndOversizedRequestsWithTheRightStatus) {
  HttpLimits small;
  small.max_request_line = 64;
  small.max_header_line = 64;
  small.max_header_bytes = 200;
  small.max_headers = 4;
  small.max_body = 16;
  const std::string many_headers = "GET / HTTP/1.1\r\nA: 1\r\nB: 2\r\nC: 3\r\nD: 4\r\nE: 5\r\n\r\n";
  std::string big_headers = "GET / HTTP/1.1\r\n";
  for (int i = 0; i < 4; ++i)
    big_headers.append("H").append(std::to_string(i)).append(": ").append(55, 'x').append("\r\n");
  big_headers += "\r\n";
  const BadCase cases[] = {
      {"garbage", std::string("\x00\xff garbage\r\n\r\n", 14), 400},
      {"two spaces", "GET  / HTTP/1.1\r\n\r\n", 400},
      {"no version", "GET /\r\n\r\n", 400},
      {"version 2", "GET / HTTP/2.0\r\n\r\n", 505},
      {"version junk", "GET / HTTX/1.1\r\n\r\n", 400},
      {"long request line", "GET /" + std::string(100, 'a') + " HTTP/1.1\r\n\r\n", 414},
      {"endless request line", "GET /" + std::string(1000, 'a'), 414},
      {"long header line", "GET / HTTP/1.1\r\nX: " + std::string(100, 'a') + "\r\n\r\n", 431},
      {"endless header line", "GET / HTTP/1.1\r\nX: " + std::string(1000, 'a'), 431},
      {"too many headers", many_headers, 431},
      {"header bytes", big_headers, 431},
      {"no colon", "GET / HTTP/1.1\r\nnocolon\r\n\r\n", 400},
      {"space before colon", "GET / HTTP/1.1\r\nName : v\r\n\r\n", 400},
      {"folding", "GET / HTTP/1.1\r\nA: 1\r\n  folded\r\n\r\n", 400},
      {"control char", "GET / HTTP/1.1\r\nA: x\x01y\r\n\r\n", 400},
      {"bare CR", "GET / HTTP/1.1\r\nA: x\ry\r\n\r\n", 400},
      {"negative length", "POST / HTTP/1.1\r\nContent-Length: -5\r\n\r\n", 400},
      {"length junk", "POST / HTTP/1.1\r\nContent-Length: 5x\r\n\r\n", 400},
      {"length overflow", "POST / HTTP/1.1\r\nContent-Length: 99999999999999999999999\r\n\r\n",
       400},
      {"conflicting lengths", "POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
       400},
      {"length and chunked",
       "POST / HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n", 400},
      {"gzip coding", "POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n", 501},
      {"chunked twice", "POST / HTTP/1.1\r\nTransfer-Encoding: chunked, chunked\r\n\r\n", 501},
      {"declared body too big", "POST / HTTP/1.1\r\nContent-Length: 17\r\n\r\n", 413},
      {"chunked body too big",
       "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n9\r\n123456789\r\n9\r\n", 413},
      {"bad chunk size", "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 400},
      {"empty chunk size", "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n\r\n", 400},
      {"chunk size overflow",
       "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffffff\r\n", 400},
      {"chunk without CRLF",
       "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabX\r\n0\r\n\r\n", 400},
      {"expect junk", "POST / HTTP/1.1\r\nExpect: magic\r\n\r\n", 417},
      {"blank lines", "\r\n\r\n\r\n\r\n\r\n\r\n", 400},
  };
  for (const BadCase& c : cases) {
    for (size_t step : {size_t{1}, size_t{4096}}) {
      HttpRequestParser p = parse(c.wire, step, small);
      EXPECT_TRUE(p.failed()) << c.name << " step " << step;
      EXPECT_EQ(p.error_status(), c.status) << c.name << ": " << p.error_message();
      EXPECT_FALSE(p.error_message().empty()) << c.name;
    }
  }
}

// The point of parsing ourselves: memory stays bounded however much a client sends.
TEST(HttpRequestParser, AnEndlessHeaderStreamFailsAtTheLimitNotLater) {
  HttpRequestParser p(HttpLimits{});
  const size_t used = p.feed("GET / HTTP/1.1\r\n");
  EXPECT_EQ(used, 16u);
  const std::string header = "X-A: " + std::string(1000, 'a') + "\r\n";
  size_t fed = 0;
  while (!p.failed() && fed < (64u << 20)) {
    p.feed(header);
    fed += header.size();
  }
  ASSERT_TRUE(p.failed());
  EXPECT_EQ(p.error_status(), 431);
  EXPECT_LE(fed, HttpLimits{}.max_header_bytes + 2 * header.size());
}

TEST(HttpRequestParser, TakeResetsForTheNextRequest) {
  HttpRequestParser p(HttpLimits{});
  p.feed("POST /a HTTP/1.1\r\nContent-Length: 1\r\n\r\nx");
  ASSERT_TRUE(p.complete());
  p.take();
  EXPECT_FALSE(p.started());
  p.feed("GET /b HTTP/1.1\r\n\r\n");
  ASSERT_TRUE(p.complete());
  const HttpRequest r = p.take();
  EXPECT_EQ(r.path, "/b");
  EXPECT_TRUE(r.body.empty());
  EXPECT_TRUE(r.headers.empty());
}

TEST(HttpRequestParser, QueryValuesArePercentDecoded) {
  EXPECT_EQ(query_value("/slots/0?x=1&action=restore", "action"), "restore");
  EXPECT_EQ(query_value("/slots/0?%61ction=%65rase", "action"), "erase");
  EXPECT_EQ(query_value("/x?a=1&b=c+d%2F&e", "b"), "c d/");
  EXPECT_EQ(query_value("/x?a=1&b=2&e", "e"), "");
  EXPECT_EQ(query_value("/x?a=1", "b"), std::nullopt);
  EXPECT_EQ(query_value("/x", "a"), std::nullopt);
  EXPECT_EQ(query_value("/x?a=%zz%4", "a"), "%zz%4");  // not an escape: kept as sent
  EXPECT_EQ(query_value("/slots?xfail_on_no_slot=1", "fail_on_no_slot"), std::nullopt);
}

}  // namespace
}  // namespace specdec::server
