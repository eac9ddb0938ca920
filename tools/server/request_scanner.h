// Where an HTTP/1.1 request ends, found from the bytes a connection has sent so far, before any
// worker thread touches it: tern-server's connection gate reads each request whole (head and
// body) and only then hands it to a worker, so a client that trickles bytes never holds one.
// The parse is RFC 9112's, strict: what it does not understand it refuses (400 and the
// connection closes) rather than guess at, so no front end can read a request's framing one
// way and Tern another (request smuggling):
//  - empty lines (CRLF) before the request line are skipped (RFC 9112 section 2.2);
//  - every line ends in CRLF: a bare LF, or a CR anywhere else, is refused;
//  - the request line is `token SP target SP HTTP/d.d`; only HTTP/1.0 and 1.1 are served (505);
//  - a header line is `token ":" OWS value OWS`: no space before the colon, no obs-fold
//    continuation, no control byte (NUL included) but HTAB in the value;
//  - the body is Content-Length bytes (digits only, one such header) or a chunked body (hex
//    sizes, extensions without control bytes, trailer lines as strict as headers); both at
//    once, Transfer-Encoding on HTTP/1.0, two Transfer-Encoding headers or any value but
//    `chunked` is refused (a well-formed list of other codings: 501).
// The head (with any leading empty lines) is limited to max_head_bytes: past it, 431. The
// default, 8 KiB, is cpp-httplib's per-line limit too, so httplib never refuses first.
// Scanning resumes where the last call stopped: a request that arrives a byte at a time costs
// O(its length) in total, whatever its shape (a chunked body of 1-byte chunks included).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace tern::server {

struct RequestLimits {
  size_t max_head_bytes = 8 * 1024;  // must stay <= httplib's CPPHTTPLIB_HEADER_MAX_LENGTH
  size_t max_body_bytes = 1 << 20;   // after de-chunking
};

// `text` from a client, for a log line: control bytes, DEL, bytes past ASCII, '"' and '\\'
// become \xHH (nginx's escaping), so a client cannot forge or garble log lines.
std::string escape_for_log(const std::string& text);

class RequestScanner {
 public:
  enum class Status { NeedMore, Complete, Bad };

  explicit RequestScanner(const RequestLimits& limits = RequestLimits()) : limits_(limits) {}

  // `data` is the connection's unconsumed bytes, the same prefix grown since the last call.
  Status scan(const char* data, size_t size);

  bool head_complete() const { return head_bytes_ != 0; }
  size_t head_bytes() const { return head_bytes_; }
  // Complete: the request's bytes (leading empty lines, head and body); what follows belongs to
  // the next one. The request line starts at request_start() (after the empty lines).
  size_t request_bytes() const { return request_bytes_; }
  size_t request_start() const { return request_start_; }
  const std::string& method() const { return method_; }
  const std::string& path() const { return path_; }  // the request target without its query
  bool has_body() const { return chunked_ || content_length_ > 0; }
  bool expects_continue() const { return expects_continue_; }
  // Bad: the status to answer with (400, 413, 431, 501, 505) and why.
  int error_status() const { return error_status_; }
  const std::string& error_message() const { return error_message_; }

  // For the next request on the connection, after request_bytes() were consumed.
  void reset() { *this = RequestScanner(limits_); }

 private:
  enum class Chunk { Size, Data, DataEnd, Trailer };

  Status fail(int status, std::string message);
  Status scan_head(const char* data, size_t size);
  bool request_line(const char* line, size_t length);
  bool header_line(const char* line, size_t length, bool trailer);
  bool chunk_size_line(const char* line, size_t length);
  Status scan_chunked(const char* data, size_t size);

  RequestLimits limits_;
  size_t scanned_ = 0;   // the start of the next line (or chunk data) to look at
  size_t searched_ = 0;  // how far a line end was looked for, past scanned_
  size_t head_bytes_ = 0;
  size_t request_bytes_ = 0;
  size_t request_start_ = 0;
  bool first_line_ = true;
  bool http10_ = false;
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
