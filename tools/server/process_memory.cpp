// glibc's malloc configured for a server whose requests come and go (process_memory.h).
#include "tools/server/process_memory.h"

#include <malloc.h>
#include <unistd.h>

#include <cstdio>

namespace tern::server {

namespace {
constexpr size_t kMapThreshold = 64u << 10;
constexpr size_t kTrimAbove = 1u << 20;
}  // namespace

void configure_allocator() {
  mallopt(M_ARENA_MAX, 2);
  mallopt(M_MMAP_THRESHOLD, static_cast<int>(kMapThreshold));
  mallopt(M_TRIM_THRESHOLD, static_cast<int>(kTrimAbove));
}

void release_request_memory() {
  if (mallinfo2().fordblks > kTrimAbove) malloc_trim(kTrimAbove / 2);
}

uint64_t resident_bytes() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  unsigned long long pages = 0, resident = 0;
  const int n = std::fscanf(f, "%llu %llu", &pages, &resident);
  std::fclose(f);
  return n == 2 ? resident * static_cast<uint64_t>(sysconf(_SC_PAGESIZE)) : 0;
}

uint64_t memory_allowance(const ServerOptions& opt) { return (16u << 20) + gate_limits(opt).max_buffered_bytes; }

}  // namespace tern::server
