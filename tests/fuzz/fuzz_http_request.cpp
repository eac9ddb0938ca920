// tern-server's connection gate: where a request ends (RequestScanner), from raw bytes off
// the network, held to a second parser written from RFC 9112 for the tests
// (tests/server/http_reference_parser.h). The first byte sets the piece size the bytes arrive
// in; the verdict (and where the request ends, or the refusal's status) must not depend on it,
// must equal the reference parser's on every prefix the pieces deliver, and a complete request
// must lie within the bytes.
#include <cstddef>
#include <cstdint>
#include <string>

#include "tests/server/http_reference_parser.h"
#include "tools/server/request_scanner.h"

using tern::server::RequestLimits;
using tern::server::RequestScanner;
using tern::test::HttpVerdict;

namespace {

// The scanner's verdict on the bytes it has seen equals the reference's on the same bytes.
bool agrees(const RequestScanner& s, RequestScanner::Status st, const std::string& bytes, const RequestLimits& l) {
  const HttpVerdict v = tern::test::reference_parse(bytes, l.max_head_bytes, l.max_body_bytes);
  switch (st) {
    case RequestScanner::Status::NeedMore: return v.kind == HttpVerdict::NeedMore;
    case RequestScanner::Status::Complete: return v.kind == HttpVerdict::Complete && v.end == s.request_bytes();
    case RequestScanner::Status::Bad: return v.kind == HttpVerdict::Bad && v.status == s.error_status();
  }
  return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  RequestLimits limits;
  limits.max_head_bytes = 2048;
  limits.max_body_bytes = 4096;
  const size_t piece = 1 + data[0] % 16;
  const char* bytes = reinterpret_cast<const char*>(data) + 1;
  const size_t n = size - 1;
  RequestScanner whole(limits), pieced(limits);
  const RequestScanner::Status a = whole.scan(bytes, n);
  if (!agrees(whole, a, std::string(bytes, n), limits)) __builtin_trap();
  RequestScanner::Status b = RequestScanner::Status::NeedMore;
  for (size_t at = 0; at < n && b == RequestScanner::Status::NeedMore;) {
    at = at + piece < n ? at + piece : n;
    b = pieced.scan(bytes, at);
    // Every prefix on short inputs; on long ones about 64 of them (the reference is O(n)).
    const size_t every = n / piece / 64 + 1;
    if ((at == n || (at / piece) % every == 0) && !agrees(pieced, b, std::string(bytes, at), limits)) {
      __builtin_trap();
    }
  }
  if (n == 0) b = pieced.scan(bytes, 0);
  if (a != b) __builtin_trap();
  if (a == RequestScanner::Status::Complete &&
      (whole.request_bytes() != pieced.request_bytes() || whole.request_bytes() > n ||
       whole.request_bytes() < whole.head_bytes() || whole.request_start() >= whole.head_bytes())) {
    __builtin_trap();
  }
  if (a == RequestScanner::Status::Bad &&
      (whole.error_status() != pieced.error_status() || whole.error_message().empty())) {
    __builtin_trap();
  }
  return 0;
}
