// A second, deliberately plain HTTP/1.1 request parser, written from RFC 9112's grammar for the
// tests (tests/server/http_smuggling_test.cpp, tests/fuzz/fuzz_http_request.cpp) to hold
// tern-server's RequestScanner to. It parses the whole buffer at once, line by line, and says
// whether the bytes are a whole request (and where it ends), need more, or are refused with
// which status. The policy choices RFC 9112 leaves open are tern-server's, written out once:
//  - up to the end of the head, at most max_head bytes (leading empty lines included), else 431;
//  - one Content-Length (1*DIGIT), value above max_body: 413; Transfer-Encoding exactly
//    "chunked", once, not on HTTP/1.0; a list of other codings: 501; both framings: 400;
//  - HTTP/d.d other than 1.0 and 1.1: 505; chunk lines (size, extensions, trailers) at most
//    1024 bytes, extensions without control bytes; the framing of a chunked body at most
//    2 * max_body + 65536 bytes, its data at most max_body (a size whose digits pass it: 413);
//  - errors are reported for the first line (in order) that has one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace tern::test {

struct HttpVerdict {
  enum Kind { NeedMore, Complete, Bad } kind = NeedMore;
  size_t end = 0;  // Complete: bytes of the request
  int status = 0;  // Bad
};

namespace http_reference {

inline bool is_tchar(unsigned char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         std::string("!#$%&'*+-.^_`|~").find(static_cast<char>(c)) != std::string::npos;
}
// field-vchar / SP / HTAB (obs-text included).
inline bool is_field_char(unsigned char c) { return c == '\t' || (c >= 0x20 && c != 0x7f); }
inline std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c + 32 : c);
  return s;
}
inline std::string trim_ows(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && (s[b] == ' ' || s[b] == '\t')) ++b;
  while (e > b && (s[e - 1] == ' ' || s[e - 1] == '\t')) --e;
  return s.substr(b, e - b);
}
inline bool all_of(const std::string& s, bool (*pred)(unsigned char)) {
  for (char c : s)
    if (!pred(static_cast<unsigned char>(c))) return false;
  return true;
}
inline bool is_digit(unsigned char c) { return c >= '0' && c <= '9'; }
inline bool is_hex(unsigned char c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }
inline bool is_target_char(unsigned char c) { return c > 0x20 && c != 0x7f; }
inline bool is_coding_char(unsigned char c) { return is_tchar(c) || c == ',' || c == ' '; }

// field-line = field-name ":" OWS field-value OWS; false if it is not one.
inline bool field_line(const std::string& line, std::string* name, std::string* value) {
  const size_t colon = line.find(':');
  if (colon == std::string::npos || colon == 0) return false;
  *name = line.substr(0, colon);
  *value = line.substr(colon + 1);
  return all_of(*name, is_tchar) && all_of(*value, is_field_char);
}

}  // namespace http_reference

inline HttpVerdict reference_parse(const std::string& b, size_t max_head, size_t max_body) {
  using namespace http_reference;
  HttpVerdict need, bad;
  bad.kind = HttpVerdict::Bad;
  auto refuse = [&](int status) {
    bad.status = status;
    return bad;
  };
  // ---- head: lines up to an empty one, all inside max_head ----
  size_t pos = 0;
  bool have_request_line = false, http10 = false, chunked = false, has_length = false, has_coding = false;
  uint64_t length = 0;
  while (true) {
    const size_t nl = b.find('\n', pos);
    if (nl == std::string::npos || nl >= max_head) return b.size() >= max_head ? refuse(431) : need;
    if (nl == pos || b[nl - 1] != '\r') return refuse(400);  // a bare LF
    const std::string line = b.substr(pos, nl - 1 - pos);
    pos = nl + 1;
    if (line.find('\r') != std::string::npos) return refuse(400);  // a bare CR
    if (!have_request_line) {
      if (line.empty()) continue;  // RFC 9112 section 2.2
      have_request_line = true;
      const size_t sp1 = line.find(' '), sp2 = sp1 == std::string::npos ? sp1 : line.find(' ', sp1 + 1);
      if (sp2 == std::string::npos) return refuse(400);
      const std::string method = line.substr(0, sp1), target = line.substr(sp1 + 1, sp2 - sp1 - 1),
                        version = line.substr(sp2 + 1);
      if (method.empty() || !all_of(method, is_tchar) || target.empty() || !all_of(target, is_target_char)) {
        return refuse(400);
      }
      if (version.size() != 8 || version.compare(0, 5, "HTTP/") != 0 || !is_digit(version[5]) || version[6] != '.' ||
          !is_digit(version[7])) {
        return refuse(400);
      }
      if (version != "HTTP/1.1" && version != "HTTP/1.0") return refuse(505);
      http10 = version == "HTTP/1.0";
      continue;
    }
    if (line.empty()) break;
    std::string name, value;
    if (!field_line(line, &name, &value)) return refuse(400);  // obs-fold, "Name :", NUL, ...
    name = lower(name);
    value = trim_ows(value);
    if (name == "content-length") {
      if (has_length || value.empty() || !all_of(value, is_digit)) return refuse(400);
      has_length = true;
      const size_t first = value.find_first_not_of('0');
      const std::string significant = first == std::string::npos ? "0" : value.substr(first);
      if (significant.size() > 15 || std::stoull(significant) > max_body) return refuse(413);
      length = std::stoull(significant);
    } else if (name == "transfer-encoding") {
      if (has_coding || http10) return refuse(400);
      has_coding = true;
      if (lower(value) != "chunked") return refuse(!value.empty() && all_of(value, is_coding_char) ? 501 : 400);
      chunked = true;
    }
  }
  const size_t head_end = pos;
  if (chunked && has_length) return refuse(400);
  if (!chunked) {
    if (b.size() - head_end < length) return need;
    HttpVerdict done;
    done.kind = HttpVerdict::Complete;
    done.end = head_end + length;
    return done;
  }
  // ---- chunked body: chunk-size [ chunk-ext ] CRLF chunk-data CRLF ... 0 CRLF trailers CRLF ----
  uint64_t body = 0;
  bool last = false;
  while (true) {
    const size_t nl = b.find('\n', pos);
    const size_t max_line = 1024;
    if (nl == std::string::npos) return b.size() - pos >= max_line ? refuse(400) : need;
    if (nl - pos + 1 > max_line) return refuse(400);
    if (nl == pos || b[nl - 1] != '\r') return refuse(400);
    const std::string line = b.substr(pos, nl - 1 - pos);
    if (line.find('\r') != std::string::npos) return refuse(400);
    pos = nl + 1;
    if (pos - head_end > 2 * max_body + 65536) return refuse(413);
    if (last) {
      if (line.empty()) {
        HttpVerdict done;
        done.kind = HttpVerdict::Complete;
        done.end = pos;
        return done;
      }
      std::string name, value;
      if (!field_line(line, &name, &value)) return refuse(400);
      continue;
    }
    size_t digits = 0;
    while (digits < line.size() && is_hex(static_cast<unsigned char>(line[digits]))) ++digits;
    const std::string hex = line.substr(0, digits);
    const size_t first = hex.find_first_not_of('0');
    const std::string significant = first == std::string::npos ? "0" : hex.substr(first);
    if (significant.size() > 12 || body + std::stoull(significant, nullptr, 16) > max_body) return refuse(413);
    if (digits == 0) return refuse(400);
    // [ BWS ";" extension ]: whitespace only before a ';', no control bytes after it.
    const std::string rest = line.substr(digits);
    if (!rest.empty()) {
      const size_t semi = rest.find_first_not_of(" \t");
      if (semi == std::string::npos || rest[semi] != ';' || !all_of(rest.substr(semi), is_field_char)) {
        return refuse(400);
      }
    }
    const uint64_t size = std::stoull(significant, nullptr, 16);
    body += size;
    if (size == 0) {
      last = true;
      continue;
    }
    if (b.size() - pos < size) return need;
    pos += size;
    // The data's CRLF.
    if (b.size() - pos < 2) {
      if (b.size() - pos == 1 && b[pos] != '\r') return refuse(400);
      return need;
    }
    if (b[pos] != '\r' || b[pos + 1] != '\n') return refuse(400);
    pos += 2;
    if (pos - head_end > 2 * max_body + 65536) return refuse(413);
  }
}

}  // namespace tern::test
