// Where an HTTP/1.1 request ends, found from the bytes a connection has sent so far, before any
// worker thread touches it: tern-server's connection gate reads each request whole (head and
// body) and only then hands it to a worker, so a client that trickles bytes never holds one.
// The framing is RFC 9112's, narrowed to what cpp-httplib then parses the same way:
//  - the head is the request line and header lines up to the first line that is exactly
//    CRLF (lines ending in a bare LF are skipped, as httplib skips them);
//  - the body is Content-Length bytes (digits only; repeats must agree) or a chunked body
//    (hex sizes, optional extensions, trailer lines); both at once, another transfer coding,
//    or a malformed size is refused, never guessed at (request smuggling).
// Scanning resumes where the last call stopped: a request that arrives a byte at a time costs
// O(its length) in total, whatever its shape (a chunked body of 1-byte chunks included).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace tern::server {

struct RequestLimits {
  size_t max_head_bytes = 16 * 1024;
  size_t max_body_bytes = 1 << 20;  // after de-chunking
};

class RequestScanner {
 public:
  enum class Status { NeedMore, Complete, Bad };

  explicit RequestScanner(const RequestLimits& limits = RequestLimits()) : limits_(limits) {}

  // `data` is the connection's unconsumed bytes, the same prefix grown since the last call.
  Status scan(const char* data, size_t size);

  bool head_complete() const { return head_bytes_ != 0; }
  size_t head_bytes() const { return head_bytes_; }
  // Complete: the request's bytes (head and body); what follows belongs to the next one.
  size_t request_bytes() const { return request_bytes_; }
  const std::string& method() const { return method_; }
  const std::string& path() const { return path_; }  // the request target without its query
  bool has_body() const { return chunked_ || content_length_ > 0; }
  bool expects_continue() const { return expects_continue_; }
  // Bad: the status to answer with (400, 413, 431, 501) and why.
  int error_status() const { return error_status_; }
  const std::string& error_message() const { return error_message_; }

  // For the next request on the connection, after request_bytes() were consumed.
  void reset() { *this = RequestScanner(limits_); }

 private:
  enum class Chunk { Size, Data, DataEnd, Trailer };

  Status fail(int status, std::string message);
  Status scan_head(const char* data, size_t size);
  bool header_line(const char* line, size_t length);
  Status scan_chunked(const char* data, size_t size);

  RequestLimits limits_;
  size_t scanned_ = 0;   // the start of the next line (or chunk data) to look at
  size_t searched_ = 0;  // how far a line end was looked for, past scanned_
  size_t head_bytes_ = 0;
  size_t request_bytes_ = 0;
  bool first_line_ = true;
  std::string method_, path_;
  bool chunked_ = false, saw_length_ = false, saw_encoding_ = false, expects_continue_ = false;
  uint64_t content_length_ = 0;
  Chunk chunk_ = Chunk::Size;
  uint64_t chunk_left_ = 0;  // data bytes still to come in this chunk
  uint64_t body_bytes_ = 0;  // de-chunked
  int error_status_ = 0;
  std::string error_message_;
};

}  // namespace tern::server
