#include "platform/memory.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#if defined(__APPLE__)
#include <TargetConditionals.h>
#if TARGET_OS_IPHONE
#include <os/proc.h>
#endif
#endif

namespace tern {

namespace {

// Reads a small text file into buf (NUL-terminated); false if it cannot be read.
bool read_small_file(const char* path, char* buf, size_t size) {
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  size_t used = 0;
  while (used + 1 < size) {
    const ssize_t n = ::read(fd, buf + used, size - 1 - used);
    if (n <= 0) break;
    used += static_cast<size_t>(n);
  }
  ::close(fd);
  buf[used] = '\0';
  return used > 0;
}

// A byte count from a cgroup file: a number, or "max" (no limit: false).
bool read_cgroup_bytes(const char* path, uint64_t* out) {
  char buf[64];
  if (!read_small_file(path, buf, sizeof buf) || std::strncmp(buf, "max", 3) == 0) return false;
  char* end = nullptr;
  const unsigned long long v = std::strtoull(buf, &end, 10);
  if (end == buf) return false;
  *out = v;
  return true;
}

// limit - usage of the cgroup in `dir` (v2 file names, then v1's), or false without a limit.
bool cgroup_headroom(const char* dir, uint64_t* out) {
  char limit_path[512], usage_path[512];
  uint64_t limit = 0, usage = 0;
  std::snprintf(limit_path, sizeof limit_path, "%s/memory.max", dir);
  std::snprintf(usage_path, sizeof usage_path, "%s/memory.current", dir);
  bool ok = read_cgroup_bytes(limit_path, &limit) && read_cgroup_bytes(usage_path, &usage);
  if (!ok) {
    std::snprintf(limit_path, sizeof limit_path, "%s/memory.limit_in_bytes", dir);
    std::snprintf(usage_path, sizeof usage_path, "%s/memory.usage_in_bytes", dir);
    ok = read_cgroup_bytes(limit_path, &limit) && read_cgroup_bytes(usage_path, &usage);
    // cgroup v1 reports "no limit" as a huge page-rounded number.
    if (ok && limit >= (uint64_t{1} << 62)) ok = false;
  }
  if (!ok) return false;
  *out = limit > usage ? limit - usage : 0;
  return true;
}

// The process's cgroup directory: v2's "0::/path" line of /proc/self/cgroup under
// /sys/fs/cgroup, or v1's memory controller under /sys/fs/cgroup/memory.
bool own_cgroup_dir(char* out, size_t size) {
  char buf[4096];
  if (!read_small_file("/proc/self/cgroup", buf, sizeof buf)) return false;
  for (char* line = buf; line != nullptr && *line != '\0';) {
    char* next = std::strchr(line, '\n');
    if (next != nullptr) *next++ = '\0';
    if (std::strncmp(line, "0::", 3) == 0) {
      std::snprintf(out, size, "/sys/fs/cgroup%s", std::strcmp(line + 3, "/") == 0 ? "" : line + 3);
      return true;
    }
    const char* colon = std::strchr(line, ':');
    const char* second = colon != nullptr ? std::strchr(colon + 1, ':') : nullptr;
    if (second != nullptr && std::strstr(colon, "memory") != nullptr && std::strstr(colon, "memory") < second) {
      std::snprintf(out, size, "/sys/fs/cgroup/memory%s", std::strcmp(second + 1, "/") == 0 ? "" : second + 1);
      return true;
    }
    line = next;
  }
  return false;
}

}  // namespace

Result<uint64_t> available_memory_from(const char* meminfo_path, const char* cgroup_dir) {
  char buf[8192];
  TERN_CHECK_OR_RETURN(read_small_file(meminfo_path, buf, sizeof buf), Error::IoError, "cannot read %s", meminfo_path);
  const char* line = std::strstr(buf, "MemAvailable:");
  TERN_CHECK_OR_RETURN(line != nullptr, Error::NotSupported, "%s has no MemAvailable (Linux before 3.14?)",
                       meminfo_path);
  char* end = nullptr;
  const unsigned long long kib = std::strtoull(line + std::strlen("MemAvailable:"), &end, 10);
  TERN_CHECK_OR_RETURN(end != nullptr && end != line + std::strlen("MemAvailable:"), Error::CorruptFile,
                       "%s: unreadable MemAvailable", meminfo_path);
  uint64_t bytes = static_cast<uint64_t>(kib) * 1024;
  uint64_t headroom = 0;
  if (cgroup_dir != nullptr && cgroup_headroom(cgroup_dir, &headroom) && headroom < bytes) bytes = headroom;
  return bytes;
}

Result<uint64_t> available_memory() {
#if defined(__APPLE__) && TARGET_OS_IPHONE
  return static_cast<uint64_t>(os_proc_available_memory());
#elif defined(__linux__)
  char dir[512];
  return available_memory_from("/proc/meminfo", own_cgroup_dir(dir, sizeof dir) ? dir : nullptr);
#else
  return fail(Error::NotSupported, "available memory is not known on this platform");
#endif
}

uint64_t physical_memory() {
#if defined(_SC_PHYS_PAGES) && defined(_SC_PAGESIZE)
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page = sysconf(_SC_PAGESIZE);
  if (pages > 0 && page > 0) return static_cast<uint64_t>(pages) * static_cast<uint64_t>(page);
#endif
  return 0;
}

}  // namespace tern
