#include "tools/server/request_scanner.h"

#include <cstring>

namespace tern::server {
namespace {

bool equals_nocase(const char* a, size_t n, const char* b) {
  if (std::strlen(b) != n) return false;
  for (size_t i = 0; i < n; ++i) {
    char x = a[i], y = b[i];
    if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z') y = static_cast<char>(y - 'A' + 'a');
    if (x != y) return false;
  }
  return true;
}

// [b, e) without leading and trailing spaces and tabs (httplib's trim of header values).
void trim(const char*& b, const char*& e) {
  while (b < e && (*b == ' ' || *b == '\t')) ++b;
  while (e > b && (e[-1] == ' ' || e[-1] == '\t')) --e;
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

RequestScanner::Status RequestScanner::fail(int status, std::string message) {
  error_status_ = status;
  error_message_ = std::move(message);
  return Status::Bad;
}

RequestScanner::Status RequestScanner::scan(const char* data, size_t size) {
  if (error_status_ != 0) return Status::Bad;
  if (request_bytes_ != 0) return Status::Complete;
  if (head_bytes_ == 0) {
    const Status s = scan_head(data, size);
    if (s != Status::Complete) return s;
  }
  if (chunked_) return scan_chunked(data, size);
  if (size - head_bytes_ < content_length_) return Status::NeedMore;
  request_bytes_ = head_bytes_ + static_cast<size_t>(content_length_);
  return Status::Complete;
}

RequestScanner::Status RequestScanner::scan_head(const char* data, size_t size) {
  while (true) {
    const size_t limit = size < limits_.max_head_bytes ? size : limits_.max_head_bytes;
    if (searched_ < scanned_) searched_ = scanned_;
    const void* nl = searched_ < limit ? std::memchr(data + searched_, '\n', limit - searched_) : nullptr;
    if (nl == nullptr) {
      searched_ = limit;
      if (size >= limits_.max_head_bytes) {
        return fail(
            431, "the request line and headers are longer than " + std::to_string(limits_.max_head_bytes) + " bytes");
      }
      return Status::NeedMore;
    }
    // Lines are found in order: scanned_ is always the start of the next one.
    const char* line = data + scanned_;
    const size_t length = static_cast<size_t>(static_cast<const char*>(nl) - line) + 1;
    scanned_ += length;
    if (first_line_) {
      first_line_ = false;
      const char* end = line + length;
      const char* space = static_cast<const char*>(std::memchr(line, ' ', length));
      if (space != nullptr) {
        method_.assign(line, space);
        const char* target = space + 1;
        const char* stop = target;
        while (stop < end && *stop != ' ' && *stop != '?' && *stop != '\r' && *stop != '\n') ++stop;
        path_.assign(target, stop);
      }
      continue;
    }
    if (length == 2 && line[0] == '\r') break;
    if (length >= 2 && line[length - 2] == '\r' && !header_line(line, length - 2)) return Status::Bad;
  }
  head_bytes_ = scanned_;
  if (chunked_ && saw_length_) return fail(400, "the request has both Content-Length and Transfer-Encoding");
  if (content_length_ > limits_.max_body_bytes) {
    return fail(413, "the request body is larger than " + std::to_string(limits_.max_body_bytes) + " bytes");
  }
  scanned_ = head_bytes_;
  return Status::Complete;
}

bool RequestScanner::header_line(const char* line, size_t length) {
  const void* colon = std::memchr(line, ':', length);
  if (colon == nullptr) return true;  // httplib ignores it too
  const size_t name_length = static_cast<size_t>(static_cast<const char*>(colon) - line);
  const char* value = line + name_length + 1;
  const char* end = line + length;
  trim(value, end);
  const size_t n = static_cast<size_t>(end - value);
  if (equals_nocase(line, name_length, "content-length")) {
    if (n == 0 || n > 18) {  // 18 digits cannot overflow 64 bits
      fail(n == 0 ? 400 : 413,
           n == 0 ? "Content-Length is empty"
                  : "the request body is larger than " + std::to_string(limits_.max_body_bytes) + " bytes");
      return false;
    }
    uint64_t v = 0;
    for (size_t i = 0; i < n; ++i) {
      if (value[i] < '0' || value[i] > '9') {
        fail(400, "Content-Length '" + std::string(value, n) + "' is not a number of bytes");
        return false;
      }
      v = v * 10 + static_cast<uint64_t>(value[i] - '0');
    }
    if (saw_length_ && v != content_length_) {
      fail(400, "the request has two different Content-Length headers");
      return false;
    }
    saw_length_ = true;
    content_length_ = v;
  } else if (equals_nocase(line, name_length, "transfer-encoding")) {
    if (saw_encoding_) {
      fail(400, "the request has more than one Transfer-Encoding header");
      return false;
    }
    saw_encoding_ = true;
    if (!equals_nocase(value, n, "chunked")) {
      fail(501, "Transfer-Encoding '" + std::string(value, n) + "' is not supported (only chunked)");
      return false;
    }
    chunked_ = true;
  } else if (equals_nocase(line, name_length, "expect")) {
    expects_continue_ = equals_nocase(value, n, "100-continue");
  }
  return true;
}

RequestScanner::Status RequestScanner::scan_chunked(const char* data, size_t size) {
  const size_t max_line = 1024;  // a size line with extensions, or a trailer line
  while (scanned_ < size) {
    if (chunk_ == Chunk::Data) {
      const uint64_t available = size - scanned_;
      const uint64_t take = available < chunk_left_ ? available : chunk_left_;
      scanned_ += static_cast<size_t>(take);
      chunk_left_ -= take;
      if (chunk_left_ > 0) return Status::NeedMore;
      chunk_ = Chunk::DataEnd;
      continue;
    }
    const char* line = data + scanned_;
    const size_t avail = size - scanned_;
    const size_t limit = scanned_ + (avail < max_line ? avail : max_line);
    if (searched_ < scanned_) searched_ = scanned_;
    const void* nl = std::memchr(data + searched_, '\n', limit - searched_);
    if (nl == nullptr) {
      searched_ = limit;
      if (avail >= max_line) return fail(400, "a chunk-size or trailer line is longer than 1024 bytes");
      return Status::NeedMore;
    }
    const size_t length = static_cast<size_t>(static_cast<const char*>(nl) - line) + 1;
    if (length < 2 || line[length - 2] != '\r') return fail(400, "a chunked body line does not end in CRLF");
    scanned_ += length;
    // Framing may add some bytes per chunk, not unboundedly many (a 1 KiB extension per byte).
    if (scanned_ - head_bytes_ > 2 * limits_.max_body_bytes + 65536) {
      return fail(413, "the chunked request body is larger than " + std::to_string(limits_.max_body_bytes) +
                           " bytes with its framing");
    }
    if (chunk_ == Chunk::DataEnd) {
      if (length != 2) return fail(400, "a chunk's data is longer than its size");
      chunk_ = Chunk::Size;
    } else if (chunk_ == Chunk::Trailer) {
      if (length == 2) {
        request_bytes_ = scanned_;
        return Status::Complete;
      }
    } else {
      uint64_t v = 0;
      size_t i = 0;
      for (; i < length - 2 && hex_digit(line[i]) >= 0; ++i) {
        if (i >= 15)
          return fail(413, "the request body is larger than " + std::to_string(limits_.max_body_bytes) + " bytes");
        v = v * 16 + static_cast<uint64_t>(hex_digit(line[i]));
      }
      if (i == 0 || (i < length - 2 && line[i] != ';' && line[i] != ' ' && line[i] != '\t')) {
        return fail(400, "a chunk size is not a hexadecimal number");
      }
      body_bytes_ += v;
      if (body_bytes_ > limits_.max_body_bytes) {
        return fail(413, "the request body is larger than " + std::to_string(limits_.max_body_bytes) + " bytes");
      }
      chunk_left_ = v;
      chunk_ = v == 0 ? Chunk::Trailer : Chunk::Data;
    }
  }
  return Status::NeedMore;
}

}  // namespace tern::server
