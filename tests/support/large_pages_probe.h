// Whether advised anonymous memory really gets large pages here: tried on a fresh mapping and
// read back from /proc/self/smaps. A kernel with transparent huge pages "never" refuses the
// advice; qemu-user (7.2) accepts it and does nothing, so what a test may expect of a copy into
// large pages is what this says, not what the advice returned.
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <cstring>

#include "platform/large_pages.h"

namespace tern::testing {

inline bool anonymous_large_pages_given() {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  const size_t large = large_page_bytes();
  if (large == 0) return false;
  const size_t n = 2 * large;  // holds one aligned large page wherever it lands
  void* p = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return false;
  bool given = false;
  if (madvise(p, n, MADV_HUGEPAGE) == 0) {
    std::memset(p, 1, n);
    given = page_usage(p, n).large_bytes > 0;
  }
  munmap(p, n);
  return given;
#else
  return false;
#endif
}

}  // namespace tern::testing
