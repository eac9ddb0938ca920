#include "tools/server/request_scanner.h"

#include <cstdio>
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

// [b, e) without leading and trailing spaces and tabs (OWS).
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

// RFC 9110 section 5.6.2.
bool tchar(char c) {
  if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) return true;
  return c != '\0' && std::strchr("!#$%&'*+-.^_`|~", c) != nullptr;
}

// A field value's bytes (and a chunk extension's): visible ASCII, obs-text, SP and HTAB.
bool field_byte(char c) {
  const auto u = static_cast<unsigned char>(c);
  return u == '\t' || (u >= 0x20 && u != 0x7f);
}

std::string hex_byte(char c) {
  char b[8];
  std::snprintf(b, sizeof b, "0x%02x", static_cast<unsigned>(static_cast<unsigned char>(c)));
  return b;
}

}  // namespace

std::string escape_for_log(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u >= 0x7f || c == '"' || c == '\\') {
      static const char digits[] = "0123456789ABCDEF";
      out += "\\x";
      out += digits[u >> 4];
      out += digits[u & 15];
    } else {
      out += c;
    }
  }
  return out;
}

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
    if (length < 2 || line[length - 2] != '\r') return fail(400, "a header line ends in a bare LF (not CRLF)");
    const size_t content = length - 2;
    if (std::memchr(line, '\r', content) != nullptr) return fail(400, "a header line holds a bare CR");
    if (first_line_) {
      if (content == 0) {  // an empty line before the request line: ignored
        request_start_ = scanned_;
        continue;
      }
      first_line_ = false;
      if (!request_line(line, content)) return Status::Bad;
      continue;
    }
    if (content == 0) break;
    if (!header_line(line, content, false)) return Status::Bad;
  }
  head_bytes_ = scanned_;
  if (chunked_ && saw_length_) return fail(400, "the request has both Content-Length and Transfer-Encoding");
  scanned_ = head_bytes_;
  return Status::Complete;
}

bool RequestScanner::request_line(const char* line, size_t length) {
  const char* end = line + length;
  const char* p = line;
  while (p < end && tchar(*p)) ++p;
  const char* method_end = p;
  if (p == line || p == end || *p != ' ') {
    fail(400, "the request line is not METHOD TARGET HTTP/1.1");
    return false;
  }
  const char* target = ++p;
  while (p<end&& static_cast<unsigned char>(*p)> 0x20 && *p != 0x7f) ++p;
  const char* target_end = p;
  if (p == target || p == end || *p != ' ') {
    fail(400, "the request line is not METHOD TARGET HTTP/1.1");
    return false;
  }
  const char* version = p + 1;
  const size_t n = static_cast<size_t>(end - version);
  const bool well_formed = n == 8 && std::memcmp(version, "HTTP/", 5) == 0 && version[5] >= '0' && version[5] <= '9' &&
                           version[6] == '.' && version[7] >= '0' && version[7] <= '9';
  if (!well_formed) {
    fail(400, "the request line is not METHOD TARGET HTTP/1.1");
    return false;
  }
  if (version[5] != '1' || (version[7] != '0' && version[7] != '1')) {
    fail(505, "HTTP version " + std::string(version + 5, 3) + " is not supported (HTTP/1.1 and HTTP/1.0 are)");
    return false;
  }
  http10_ = version[7] == '0';
  method_.assign(line, method_end);
  const char* query = static_cast<const char*>(std::memchr(target, '?', static_cast<size_t>(target_end - target)));
  path_.assign(target, query != nullptr ? query : target_end);
  return true;
}

bool RequestScanner::header_line(const char* line, size_t length, bool trailer) {
  const char* what = trailer ? "a trailer line" : "a header line";
  if (line[0] == ' ' || line[0] == '\t') {
    fail(400, std::string(what) + " starts with whitespace (an obs-fold continuation)");
    return false;
  }
  size_t name_length = 0;
  while (name_length < length && tchar(line[name_length])) ++name_length;
  if (name_length == length) {
    fail(400, std::string(what) + " has no colon");
    return false;
  }
  const char stop = line[name_length];
  if (stop != ':' || name_length == 0) {
    fail(400, stop == ' ' || stop == '\t' ? std::string(what) + " has whitespace before its colon"
              : name_length == 0          ? std::string(what) + " has no field name"
                                          : "a header name holds " + hex_byte(stop) + ", not a token character");
    return false;
  }
  const char* value = line + name_length + 1;
  const char* end = line + length;
  for (const char* p = value; p < end; ++p) {
    if (!field_byte(*p)) {
      fail(400,
           *p == '\0' ? "a header value holds a NUL byte" : "a header value holds the control byte " + hex_byte(*p));
      return false;
    }
  }
  if (trailer) return true;  // trailer fields are checked, not used
  trim(value, end);
  const size_t n = static_cast<size_t>(end - value);
  if (equals_nocase(line, name_length, "content-length")) {
    if (saw_length_) {
      fail(400, "the request has more than one Content-Length header");
      return false;
    }
    saw_length_ = true;
    if (n == 0) {
      fail(400, "Content-Length is empty");
      return false;
    }
    uint64_t v = 0;
    for (size_t i = 0; i < n; ++i) {
      if (value[i] < '0' || value[i] > '9') {
        fail(400, "Content-Length '" + std::string(value, n) + "' is not a number of bytes");
        return false;
      }
    }
    for (size_t i = 0; i < n; ++i) {
      v = v * 10 + static_cast<uint64_t>(value[i] - '0');
      if (v > limits_.max_body_bytes) {  // before it could overflow
        fail(413, "the request body is larger than " + std::to_string(limits_.max_body_bytes) + " bytes");
        return false;
      }
    }
    content_length_ = v;
  } else if (equals_nocase(line, name_length, "transfer-encoding")) {
    if (saw_encoding_) {
      fail(400, "the request has more than one Transfer-Encoding header");
      return false;
    }
    saw_encoding_ = true;
    if (http10_) {
      fail(400, "an HTTP/1.0 request has Transfer-Encoding");
      return false;
    }
    if (!equals_nocase(value, n, "chunked")) {
      bool list = n > 0;
      for (size_t i = 0; i < n; ++i) list = list && (tchar(value[i]) || value[i] == ',' || value[i] == ' ');
      fail(list ? 501 : 400, list ? "Transfer-Encoding '" + std::string(value, n) + "' is not supported (only chunked)"
                                  : "Transfer-Encoding is malformed");
      return false;
    }
    chunked_ = true;
  } else if (equals_nocase(line, name_length, "expect")) {
    expects_continue_ = equals_nocase(value, n, "100-continue");
  }
  return true;
}

bool RequestScanner::chunk_size_line(const char* line, size_t length) {
  uint64_t v = 0;
  size_t i = 0;
  for (; i < length && hex_digit(line[i]) >= 0; ++i) {
    v = v * 16 + static_cast<uint64_t>(hex_digit(line[i]));
    if (body_bytes_ + v > limits_.max_body_bytes) {  // before it could overflow
      fail(413, "the request body is larger than " + std::to_string(limits_.max_body_bytes) + " bytes");
      return false;
    }
  }
  size_t j = i;
  while (j < length && (line[j] == ' ' || line[j] == '\t')) ++j;
  // chunk-size [ BWS ";" extension ]: whitespace only before a ';'.
  if (i == 0 || (j < length && line[j] != ';') || (j == length && j != i)) {
    fail(400, "a chunk size is not a hexadecimal number");
    return false;
  }
  for (; j < length; ++j) {
    if (!field_byte(line[j])) {
      fail(400, "a chunk extension holds the control byte " + hex_byte(line[j]));
      return false;
    }
  }
  body_bytes_ += v;
  chunk_left_ = v;
  chunk_ = v == 0 ? Chunk::Trailer : Chunk::Data;
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
    if (chunk_ == Chunk::DataEnd) {  // exactly CRLF after the data, refused at its first wrong byte
      if (data[scanned_] != '\r') return fail(400, "a chunk's data is longer than its size");
      if (size - scanned_ < 2) return Status::NeedMore;
      if (data[scanned_ + 1] != '\n') return fail(400, "a chunk's data is not followed by CRLF");
      scanned_ += 2;
      if (scanned_ - head_bytes_ > 2 * limits_.max_body_bytes + 65536) {
        return fail(413, "the chunked request body is larger than " + std::to_string(limits_.max_body_bytes) +
                             " bytes with its framing");
      }
      chunk_ = Chunk::Size;
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
    if (std::memchr(line, '\r', length - 2) != nullptr) return fail(400, "a chunked body line holds a bare CR");
    scanned_ += length;
    // Framing may add some bytes per chunk, not unboundedly many (a 1 KiB extension per byte).
    if (scanned_ - head_bytes_ > 2 * limits_.max_body_bytes + 65536) {
      return fail(413, "the chunked request body is larger than " + std::to_string(limits_.max_body_bytes) +
                           " bytes with its framing");
    }
    if (chunk_ == Chunk::Trailer) {
      if (length == 2) {
        request_bytes_ = scanned_;
        return Status::Complete;
      }
      if (!header_line(line, length - 2, true)) return Status::Bad;
    } else if (!chunk_size_line(line, length - 2)) {
      return Status::Bad;
    }
  }
  return Status::NeedMore;
}

}  // namespace tern::server
