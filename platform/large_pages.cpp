#include "platform/large_pages.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace tern {
namespace {

#if defined(__linux__)

// The first `capacity - 1` bytes of a small file, NUL-terminated; false if it cannot be read.
bool read_small_file(const char* path, char* out, size_t capacity) {
  int fd = -1;
  do fd = ::open(path, O_RDONLY | O_CLOEXEC);
  while (fd < 0 && errno == EINTR);
  if (fd < 0) return false;
  ssize_t n = -1;
  do n = ::read(fd, out, capacity - 1);
  while (n < 0 && errno == EINTR);
  ::close(fd);
  if (n < 0) return false;
  out[n] = '\0';
  return true;
}

// "Name:   1234 kB" -> 1234 * 1024 into *bytes when the line is that field.
bool field_bytes(const char* line, const char* name, size_t* bytes) {
  const size_t n = std::strlen(name);
  if (std::strncmp(line, name, n) != 0 || line[n] != ':') return false;
  *bytes = static_cast<size_t>(std::strtoull(line + n + 1, nullptr, 10)) * 1024;
  return true;
}

// The lines of /proc/self/smaps, each mapping overlapping [begin, end) handed to `visit` once
// its fields are read.
struct SmapsScan {
  uintptr_t begin = 0, end = 0;
  MappingVisitor visit = nullptr;
  void* context = nullptr;
  bool inside = false;
  uintptr_t lo = 0, hi = 0;
  PageUsage usage;

  void flush() {
    if (inside) visit(reinterpret_cast<const void*>(lo), hi - lo, usage, context);
    inside = false;
  }

  void line(const char* s) {
    char* rest = nullptr;
    const uintptr_t start = static_cast<uintptr_t>(std::strtoull(s, &rest, 16));
    if (rest != s && *rest == '-') {  // a mapping's header line: "lo-hi perms offset dev inode path"
      flush();
      const uintptr_t stop = static_cast<uintptr_t>(std::strtoull(rest + 1, &rest, 16));
      inside = *rest == ' ' && start < end && stop > begin;
      lo = start;
      hi = stop;
      usage = PageUsage{};
      usage.known = true;
      return;
    }
    if (!inside) return;
    size_t bytes = 0;
    if (field_bytes(s, "Rss", &bytes)) usage.resident_bytes += bytes;
    if (field_bytes(s, "FilePmdMapped", &bytes) || field_bytes(s, "AnonHugePages", &bytes)) {
      usage.large_bytes += bytes;
    }
  }
};

#endif

}  // namespace

size_t large_page_bytes() {
#if defined(__linux__)
  char text[32];
  if (!read_small_file("/sys/kernel/mm/transparent_hugepage/hpage_pmd_size", text, sizeof text)) return 0;
  return static_cast<size_t>(std::strtoull(text, nullptr, 10));
#else
  return 0;
#endif
}

void transparent_huge_pages_policy(char* out, size_t capacity) {
  if (capacity == 0) return;
  out[0] = '\0';
#if defined(__linux__)
  // "always [madvise] never": the bracketed word is the policy.
  char text[128];
  if (!read_small_file("/sys/kernel/mm/transparent_hugepage/enabled", text, sizeof text)) return;
  const char* open = std::strchr(text, '[');
  const char* close = open != nullptr ? std::strchr(open, ']') : nullptr;
  if (close == nullptr) return;
  std::snprintf(out, capacity, "%.*s", static_cast<int>(close - open - 1), open + 1);
#endif
}

bool visit_mappings(const void* begin, size_t bytes, MappingVisitor visit, void* context) {
#if defined(__linux__)
  if (begin == nullptr || bytes == 0) return false;
  int fd = -1;
  do fd = ::open("/proc/self/smaps", O_RDONLY | O_CLOEXEC);
  while (fd < 0 && errno == EINTR);
  if (fd < 0) return false;
  SmapsScan scan;
  scan.begin = reinterpret_cast<uintptr_t>(begin);
  scan.end = scan.begin + bytes;
  scan.visit = visit;
  scan.context = context;
  // Lines are taken whole up to 127 bytes; what follows (a long path) is not needed.
  char buf[4096], line[128];
  size_t used = 0;
  bool ok = true;
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) ok = false;
    if (n <= 0) break;
    for (ssize_t i = 0; i < n; ++i) {
      if (buf[i] != '\n') {
        if (used + 1 < sizeof line) line[used++] = buf[i];
        continue;
      }
      line[used] = '\0';
      scan.line(line);
      used = 0;
    }
  }
  ::close(fd);
  if (ok) scan.flush();
  return ok;
#else
  (void)begin;
  (void)bytes;
  (void)visit;
  (void)context;
  return false;
#endif
}

PageUsage page_usage(const void* begin, size_t bytes) {
  PageUsage sum;
  auto add = [](const void*, size_t, const PageUsage& u, void* context) {
    auto* total = static_cast<PageUsage*>(context);
    total->resident_bytes += u.resident_bytes;
    total->large_bytes += u.large_bytes;
  };
  sum.known = visit_mappings(begin, bytes, add, &sum);
  if (!sum.known) sum = PageUsage{};
  return sum;
}

}  // namespace tern
