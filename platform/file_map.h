// Read-only view of a whole file: mmap'd where possible (zero-copy, pages shared with
// the OS cache and counted once), or read into one heap buffer when mapping is not
// available or not wanted. Either way the bytes stay valid until the object dies.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "platform/error.h"
#include "platform/large_pages.h"

namespace tern {

enum class MapMode {
  Auto,  // mmap, falling back to read on failure
  Mmap,  // mmap only
  Read,  // read into a heap buffer (what a platform without mmap does)
};

// Every file Tern reads is opened here. A read-only descriptor of the regular file at `path`
// (its size in *size when not null), opened without blocking: a FIFO, a device, a directory or
// a socket is IoError naming what it is, never a wait for a writer or an endless read. The
// caller closes the descriptor.
Result<int> open_regular_file(const char* path, uint64_t* size);

// The whole regular file at `path` (a prompt, a grammar, a JSON file), through
// open_regular_file() and so with its errors.
Result<std::string> read_whole_file(const char* path);

// What MappedFile::use_large_pages() or copy_to_large_pages() found or did.
enum class LargePages : uint8_t {
  NotTried,     // not asked for, or nothing to map (the read fallback, an empty file)
  Unsupported,  // no transparent huge pages here (another OS, or a kernel without them)
  TooSmall,     // the file is smaller than one large page
  AsRead,       // the mapping got large pages as the file was read in
  Collapsed,    // the kernel rebuilt the page cache's small pages into large ones (MADV_COLLAPSE)
  Reread,       // the page cache held small pages: dropped and read again into large ones
  Unavailable,  // the kernel gives this file no large pages (one dropped and read again got none)
  Unknown,      // asked for, but the kernel cannot say what came of it (/proc unreadable)
  Copied,       // copied into anonymous memory in large pages
};
// "not tried", "unsupported", ..., "copied".
const char* to_string(LargePages what);

class MappedFile {
 public:
  static Result<MappedFile> open(const char* path, MapMode mode = MapMode::Auto);

  MappedFile() = default;
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  bool is_mapped() const { return mapped_; }
  // True after copy_to_large_pages(): the bytes are an anonymous copy, not the file's pages.
  bool is_anonymous() const { return anonymous_; }
  // Hints that the whole file will be read soon (no-op for the read fallback).
  void advise_will_need() const;

  // A mapped file of at least one large page starts at an address aligned to it and is advised
  // for large pages (Linux MADV_HUGEPAGE: what first reads it leaves large folios in the page
  // cache, which the kernel maps with large pages). The two calls below use the descriptor kept
  // open until release_descriptor() (or the object dies).
  //
  // Large pages for the mapping without more memory (Linux): every page read in now, and each
  // large page the page cache held in small pages (as the program that wrote the file leaves
  // them) written back if dirty, dropped (pages another process maps stay) and read again.
  // When none was large, one is re-read first as a probe, so that a kernel or filesystem giving
  // the file none costs one large page read twice, not the whole file.
  // `reread_bytes` (may be null): how much was read again.
  LargePages use_large_pages(size_t* reread_bytes = nullptr);
  // Replaces the mapping by an anonymous copy of the file in large pages at the same address
  // (pointers into it stay valid), read-only. NotSupported where there are no large pages,
  // InvalidState for the read fallback; the mapping is unchanged on failure.
  Error copy_to_large_pages();
  // The mapping's pages now (page_usage()).
  PageUsage page_usage() const;
  void release_descriptor();

 private:
  void reset();

  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  bool mapped_ = false;
  bool anonymous_ = false;
  int fd_ = -1;  // kept while mapped, for use_large_pages() and copy_to_large_pages()
};

}  // namespace tern
