// tern-server's connection gate: where a request ends (RequestScanner), from raw bytes off
// the network. The first byte sets the piece size the bytes arrive in; the verdict (and where
// the request ends, or the refusal's status) must not depend on it, and a complete request
// must lie within the bytes.
#include <cstddef>
#include <cstdint>
#include <string>

#include "tools/server/request_scanner.h"

using tern::server::RequestLimits;
using tern::server::RequestScanner;

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
  RequestScanner::Status b = RequestScanner::Status::NeedMore;
  for (size_t at = 0; at < n && b == RequestScanner::Status::NeedMore;) {
    at = at + piece < n ? at + piece : n;
    b = pieced.scan(bytes, at);
  }
  if (n == 0) b = pieced.scan(bytes, 0);
  if (a != b) __builtin_trap();
  if (a == RequestScanner::Status::Complete &&
      (whole.request_bytes() != pieced.request_bytes() || whole.request_bytes() > n ||
       whole.request_bytes() < whole.head_bytes())) {
    __builtin_trap();
  }
  if (a == RequestScanner::Status::Bad &&
      (whole.error_status() != pieced.error_status() || whole.error_message().empty())) {
    __builtin_trap();
  }
  return 0;
}
