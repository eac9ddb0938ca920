// Large pages for big read-only data (the weights): what the kernel offers, and what a range of
// this process's memory is mapped with now. Linux and Android: transparent huge pages, read from
// /sys/kernel/mm/transparent_hugepage and /proc/self/smaps. Elsewhere nothing is known.
#pragma once

#include <cstddef>

namespace tern {

// The kernel's large page for mappings, its PMD size: 2 MiB on x86-64 and on arm64 with 4 KiB
// pages. 0 where there are no transparent huge pages (or another OS).
size_t large_page_bytes();

// The transparent huge page policy for anonymous memory, as the kernel words it ("always",
// "madvise", "never"), into `out`; "" where it cannot be read.
void transparent_huge_pages_policy(char* out, size_t capacity);

struct PageUsage {
  bool known = false;         // false: the platform cannot tell (the counts are 0)
  size_t resident_bytes = 0;  // in memory now (Rss)
  size_t large_bytes = 0;     // of those, mapped with large pages (FilePmdMapped + AnonHugePages)
};

// The pages of the mappings that overlap [begin, begin + bytes), whole (a mapping reaching
// past the range is counted whole). No heap use.
PageUsage page_usage(const void* begin, size_t bytes);

// Each mapping that overlaps [begin, begin + bytes), with its pages, in address order, from one
// read of /proc/self/smaps. False where that cannot be read. No heap use.
using MappingVisitor = void (*)(const void* start, size_t bytes, const PageUsage& usage, void* context);
bool visit_mappings(const void* begin, size_t bytes, MappingVisitor visit, void* context);

}  // namespace tern
