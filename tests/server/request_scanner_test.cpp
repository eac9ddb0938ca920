// Where tern-server's connection gate decides a request ends: each case is raw bytes with the
// outcome written out by hand (RFC 9112's framing as httplib then reads it), fed whole, a byte
// at a time and in random pieces; all three must agree.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "tools/server/request_scanner.h"

namespace tern::server {
namespace {

using Status = RequestScanner::Status;

struct Case {
  const char* name;
  std::string bytes;
  Status status;
  size_t request_bytes;  // Complete: where the request ends
  int error_status;      // Bad
  const char* says;      // Bad: in the message
  const char* method;
  const char* path;
};

RequestLimits small_limits() {
  RequestLimits l;
  l.max_head_bytes = 256;
  l.max_body_bytes = 64;
  return l;
}

// Feeds `bytes` in pieces of the given sizes (the last piece takes the rest), as the gate does:
// the buffer grows, and scan sees all of it each time.
RequestScanner feed(const std::string& bytes, const std::vector<size_t>& pieces, Status* out) {
  RequestScanner s(small_limits());
  std::string buffer;
  size_t at = 0;
  Status st = Status::NeedMore;
  for (size_t i = 0; at < bytes.size() && st == Status::NeedMore; ++i) {
    const size_t n = i < pieces.size() ? std::min(pieces[i], bytes.size() - at) : bytes.size() - at;
    buffer.append(bytes, at, n);
    at += n;
    st = s.scan(buffer.data(), buffer.size());
  }
  if (bytes.empty()) st = s.scan(buffer.data(), 0);
  *out = st;
  return s;
}

const std::string kGet = "GET /health HTTP/1.1\r\nHost: x\r\n\r\n";

std::vector<Case> cases() {
  const std::string post = "POST /v1/completions?x=1 HTTP/1.1\r\nHost: x\r\n";
  const std::string chunked_head = "POST /v1/chat/completions HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n";
  return {
      {"a GET", kGet, Status::Complete, kGet.size(), 0, "", "GET", "/health"},
      {"a GET, then the next request", kGet + "GET /props", Status::Complete, kGet.size(), 0, "", "GET", "/health"},
      {"half a header", "GET /health HTTP/1.1\r\nHost: x\r\n", Status::NeedMore, 0, 0, "", "GET", "/health"},
      {"nothing", "", Status::NeedMore, 0, 0, "", "", ""},
      {"a body by Content-Length", post + "Content-Length: 5\r\n\r\nhelloGET", Status::Complete, post.size() + 26, 0,
       "", "POST", "/v1/completions"},
      {"name and value as sent", post + "content-LENGTH:\t 5 \r\n\r\nhello", Status::Complete, post.size() + 28, 0, "",
       "POST", "/v1/completions"},
      {"the same length twice", post + "Content-Length: 2\r\nContent-Length: 2\r\n\r\nhi", Status::Bad, 0, 400,
       "more than one Content-Length", "POST", "/v1/completions"},
      {"half a body", post + "Content-Length: 5\r\n\r\nhel", Status::NeedMore, 0, 0, "", "POST", "/v1/completions"},
      // httplib would skip a header line ending in a bare LF (and run the body as a request).
      {"a bare-LF header line is refused", post + "Content-Length: 5\n\r\n", Status::Bad, 0, 400, "bare LF", "POST",
       "/v1/completions"},
      {"chunked", chunked_head + "5;name=v\r\nhello\r\n1\r\n!\r\n0\r\n\r\n", Status::Complete, chunked_head.size() + 28,
       0, "", "POST", "/v1/chat/completions"},
      {"chunked with trailers", chunked_head + "3\r\nabc\r\n0\r\nX-Sum: 1\r\n\r\nnext", Status::Complete,
       chunked_head.size() + 23, 0, "", "POST", "/v1/chat/completions"},
      {"chunked, not ended", chunked_head + "3\r\nabc\r\n", Status::NeedMore, 0, 0, "", "POST", "/v1/chat/completions"},
      {"both framings", post + "Content-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", Status::Bad, 0, 400,
       "both Content-Length and Transfer-Encoding", "POST", "/v1/completions"},
      {"another coding", post + "Transfer-Encoding: gzip, chunked\r\n\r\n", Status::Bad, 0, 501, "not supported",
       "POST", "/v1/completions"},
      {"two codings headers", post + "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", Status::Bad, 0,
       400, "more than one Transfer-Encoding", "POST", "/v1/completions"},
      {"a length that is not a number", post + "Content-Length: 12a\r\n\r\n", Status::Bad, 0, 400, "is not a number",
       "POST", "/v1/completions"},
      {"a negative length", post + "Content-Length: -1\r\n\r\n", Status::Bad, 0, 400, "is not a number", "POST",
       "/v1/completions"},
      {"an empty length", post + "Content-Length:\r\n\r\n", Status::Bad, 0, 400, "empty", "POST", "/v1/completions"},
      {"two lengths", post + "Content-Length: 2\r\nContent-Length: 3\r\n\r\nhi", Status::Bad, 0, 400,
       "more than one Content-Length", "POST", "/v1/completions"},
      {"a body over the limit", post + "Content-Length: 65\r\n\r\n", Status::Bad, 0, 413, "larger than 64 bytes",
       "POST", "/v1/completions"},
      {"a length past 64 bits", post + "Content-Length: 99999999999999999999999\r\n\r\n", Status::Bad, 0, 413,
       "larger than 64 bytes", "POST", "/v1/completions"},
      {"a head over the limit", "GET /" + std::string(300, 'a') + " HTTP/1.1\r\n\r\n", Status::Bad, 0, 431,
       "longer than 256 bytes", "", ""},
      {"a chunk size that is not hex", chunked_head + "zz\r\n", Status::Bad, 0, 400, "not a hexadecimal", "POST",
       "/v1/chat/completions"},
      {"a chunk longer than its size", chunked_head + "2\r\nabc\r\n", Status::Bad, 0, 400, "longer than its size",
       "POST", "/v1/chat/completions"},
      {"a chunk line without CR", chunked_head + "2\nab\r\n", Status::Bad, 0, 400, "CRLF", "POST",
       "/v1/chat/completions"},
      {"chunks over the limit", chunked_head + "40\r\n" + std::string(64, 'x') + "\r\n1\r\n", Status::Bad, 0, 413,
       "larger than 64 bytes", "POST", "/v1/chat/completions"},
      {"a huge chunk size", chunked_head + "ffffffffffffffffff\r\n", Status::Bad, 0, 413, "larger than 64 bytes",
       "POST", "/v1/chat/completions"},
      {"a chunk extension over 1 KiB", chunked_head + "1;" + std::string(1100, 'e'), Status::Bad, 0, 400,
       "longer than 1024 bytes", "POST", "/v1/chat/completions"},
  };
}

void expect_case(const Case& c, const RequestScanner& s, Status st, const std::string& how) {
  SCOPED_TRACE(std::string(c.name) + " (" + how + ")");
  ASSERT_EQ(static_cast<int>(st), static_cast<int>(c.status));
  if (st == Status::Complete) {
    EXPECT_EQ(s.request_bytes(), c.request_bytes);
  }
  if (st == Status::Bad) {
    EXPECT_EQ(s.error_status(), c.error_status);
    EXPECT_NE(s.error_message().find(c.says), std::string::npos) << s.error_message();
  }
  if (st != Status::Bad || c.method[0] != '\0') {
    EXPECT_EQ(s.method(), c.method);
    EXPECT_EQ(s.path(), c.path);
  }
}

TEST(RequestScanner, EachFramingWholeByteByByteAndInPieces) {
  std::mt19937 rng(27);
  for (const Case& c : cases()) {
    Status st;
    RequestScanner whole = feed(c.bytes, {}, &st);
    expect_case(c, whole, st, "whole");
    RequestScanner bytewise = feed(c.bytes, std::vector<size_t>(c.bytes.size(), 1), &st);
    expect_case(c, bytewise, st, "a byte at a time");
    for (int round = 0; round < 5; ++round) {
      std::vector<size_t> pieces;
      for (size_t n = 0; n < c.bytes.size(); n += pieces.back()) pieces.push_back(1 + rng() % 9);
      RequestScanner pieced = feed(c.bytes, pieces, &st);
      expect_case(c, pieced, st, "in pieces");
    }
  }
}

TEST(RequestScanner, ExpectContinueAndResetForTheNextRequest) {
  RequestScanner s(small_limits());
  const std::string head = "POST /v1/completions HTTP/1.1\r\nExpect: 100-Continue\r\nContent-Length: 4\r\n\r\n";
  EXPECT_EQ(s.scan(head.data(), head.size()), Status::NeedMore);
  EXPECT_TRUE(s.head_complete());
  EXPECT_EQ(s.head_bytes(), head.size());
  EXPECT_TRUE(s.expects_continue());
  EXPECT_TRUE(s.has_body());
  const std::string all = head + "abcd" + kGet;
  ASSERT_EQ(s.scan(all.data(), all.size()), Status::Complete);
  EXPECT_EQ(s.request_bytes(), head.size() + 4);
  // The gate drops the request's bytes and scans what follows afresh.
  const std::string rest = all.substr(s.request_bytes());
  s.reset();
  ASSERT_EQ(s.scan(rest.data(), rest.size()), Status::Complete);
  EXPECT_EQ(s.request_bytes(), kGet.size());
  EXPECT_EQ(s.method(), "GET");
  EXPECT_FALSE(s.expects_continue());
  EXPECT_FALSE(s.has_body());
}

// A quarter-megabyte body in 1-byte chunks (1.5 MB with its framing), arriving 7 bytes at a
// time: scanning resumes where it stopped (rescanning from the start each time would be ~10^11
// steps here). Framing beyond twice the body limit is refused.
TEST(RequestScanner, ATrickledChunkedBodyIsScannedOnce) {
  RequestLimits limits;
  const std::string head = "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n";
  auto one_byte_chunks = [&](size_t n) {
    std::string bytes = head;
    for (size_t i = 0; i < n; ++i) bytes += "1\r\nx\r\n";
    return bytes + "0\r\n\r\n";
  };
  const std::string bytes = one_byte_chunks(limits.max_body_bytes / 4);
  RequestScanner s(limits);
  std::string buffer;
  Status st = Status::NeedMore;
  for (size_t at = 0; at < bytes.size() && st == Status::NeedMore; at += 7) {
    buffer.append(bytes, at, 7);
    st = s.scan(buffer.data(), buffer.size());
  }
  ASSERT_EQ(st, Status::Complete);
  EXPECT_EQ(s.request_bytes(), bytes.size());
  const std::string framed = one_byte_chunks(limits.max_body_bytes / 2);
  RequestScanner over(limits);
  EXPECT_EQ(over.scan(framed.data(), framed.size()), Status::Bad);
  EXPECT_EQ(over.error_status(), 413);
  EXPECT_NE(over.error_message().find("with its framing"), std::string::npos) << over.error_message();
}

}  // namespace
}  // namespace tern::server
