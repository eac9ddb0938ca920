#include "platform/file_map.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>

// Linux's madvise values, for C libraries older than the kernel.
#if defined(__linux__)
#ifndef MADV_HUGEPAGE
#define MADV_HUGEPAGE 14
#endif
#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25
#endif
#endif

namespace tern {
namespace {

const char* kind_of(mode_t mode) {
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

Error not_regular(const char* path, mode_t mode) {
  return fail(Error::IoError, "%s: is %s, not a regular file", path, kind_of(mode));
}

Error open_error(const char* path, int err) {
  if (err == ENOENT || err == ENOTDIR) return fail(Error::FileNotFound, "%s: no such file", path);
  struct stat st;  // a socket cannot be opened (ENXIO): say what it is
  if ((err == ENXIO || err == EISDIR) && stat(path, &st) == 0 && !S_ISREG(st.st_mode))
    return not_regular(path, st.st_mode);
  return fail(Error::IoError, "%s: cannot open: %s", path, std::strerror(err));
}

size_t page_bytes() {
  const long page = sysconf(_SC_PAGESIZE);
  return page > 0 ? static_cast<size_t>(page) : 4096;
}

size_t round_up(size_t n, size_t align) { return (n + align - 1) / align * align; }

// A mapping of `size` bytes whose address is a multiple of `align` (a power of two): a larger
// reservation, cut down to the aligned part. MAP_FAILED on failure.
void* aligned_mapping(size_t size, size_t align, int prot, int flags) {
  const size_t reserved = size + align;
  void* p = mmap(nullptr, reserved, prot, flags, -1, 0);
  if (p == MAP_FAILED) return p;
  const auto base = reinterpret_cast<uintptr_t>(p);
  const uintptr_t start = (base + align - 1) & ~static_cast<uintptr_t>(align - 1);
  if (start > base) munmap(p, start - base);
  if (base + reserved > start + size) munmap(reinterpret_cast<void*>(start + size), base + reserved - start - size);
  return reinterpret_cast<void*>(start);
}

// mmap of the whole file. When it holds a large page: at an address aligned to one, and advised
// for them, so that what reads it first (a header parsed, a checksum) leaves large folios in the
// page cache rather than small ones.
void* map_file(int fd, size_t size) {
  const size_t large = large_page_bytes();
  if (large == 0 || size < large) return mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  const size_t length = round_up(size, page_bytes());
  void* at = aligned_mapping(length, large, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE);
  if (at == MAP_FAILED) return mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  void* p = mmap(at, size, PROT_READ, MAP_PRIVATE | MAP_FIXED, fd, 0);
  if (p == MAP_FAILED) {
    munmap(at, length);
    return p;
  }
#if defined(__linux__)
  madvise(p, size, MADV_HUGEPAGE);
#endif
  return p;
}

}  // namespace

const char* to_string(LargePages what) {
  switch (what) {
    case LargePages::NotTried: return "not tried";
    case LargePages::Unsupported: return "unsupported";
    case LargePages::TooSmall: return "smaller than a large page";
    case LargePages::AsRead: return "as read";
    case LargePages::Collapsed: return "collapsed";
    case LargePages::Reread: return "re-read";
    case LargePages::Unavailable: return "unavailable";
    case LargePages::Unknown: return "unknown";
    case LargePages::Copied: return "copied";
  }
  return "?";
}

Result<int> open_regular_file(const char* path, uint64_t* size) {
  if (path == nullptr || path[0] == '\0') return fail(Error::InvalidArgument, "empty file path");
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer forever.
  int fd = -1;
  do fd = ::open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  while (fd < 0 && errno == EINTR);
  if (fd < 0) return open_error(path, errno);
  struct stat st;
  if (fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return fail(Error::IoError, "%s: cannot stat: %s", path, std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return not_regular(path, st.st_mode);
  }
  const int flags = fcntl(fd, F_GETFL);
  if (flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) {
    const int err = errno;
    ::close(fd);
    return fail(Error::IoError, "%s: fcntl: %s", path, std::strerror(err));
  }
  if (size != nullptr) *size = static_cast<uint64_t>(st.st_size);
  return fd;
}

Result<MappedFile> MappedFile::open(const char* path, MapMode mode) {
  uint64_t file_size = 0;
  TERN_ASSIGN_OR_RETURN(const int fd, open_regular_file(path, &file_size));

  MappedFile file;
  file.size_ = static_cast<size_t>(file_size);
  if (file.size_ == 0) {  // mmap rejects length 0; an empty file is a valid empty view
    ::close(fd);
    return file;
  }

  if (mode != MapMode::Read) {
    void* p = map_file(fd, file.size_);
    if (p != MAP_FAILED) {
      file.data_ = static_cast<const uint8_t*>(p);
      file.mapped_ = true;
      file.fd_ = fd;
      return file;
    }
    if (mode == MapMode::Mmap) {
      const int err = errno;
      ::close(fd);
      return fail(Error::IoError, "%s: mmap failed: %s", path, std::strerror(err));
    }
  }

  auto* buf = static_cast<uint8_t*>(std::malloc(file.size_));
  if (buf == nullptr) {
    ::close(fd);
    return fail(Error::OutOfMemory, "%s: cannot allocate %zu bytes to read it", path, file.size_);
  }
  size_t done = 0;
  while (done < file.size_) {
    const ssize_t n = ::read(fd, buf + done, file.size_ - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : 0;
      ::close(fd);
      std::free(buf);
      if (n == 0) return fail(Error::Truncated, "%s: file shrank while reading", path);
      return fail(Error::IoError, "%s: read failed: %s", path, std::strerror(err));
    }
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  file.data_ = buf;
  return file;
}

Result<std::string> read_whole_file(const char* path) {
  TERN_ASSIGN_OR_RETURN(MappedFile file, MappedFile::open(path, MapMode::Read));
  return std::string(reinterpret_cast<const char*>(file.data()), file.size());
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : data_(other.data_), size_(other.size_), mapped_(other.mapped_), anonymous_(other.anonymous_), fd_(other.fd_) {
  other.data_ = nullptr;
  other.size_ = 0;
  other.mapped_ = false;
  other.anonymous_ = false;
  other.fd_ = -1;
}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    reset();
    data_ = other.data_;
    size_ = other.size_;
    mapped_ = other.mapped_;
    anonymous_ = other.anonymous_;
    fd_ = other.fd_;
    other.data_ = nullptr;
    other.size_ = 0;
    other.mapped_ = false;
    other.anonymous_ = false;
    other.fd_ = -1;
  }
  return *this;
}

MappedFile::~MappedFile() { reset(); }

void MappedFile::reset() {
  if (data_ != nullptr) {
    if (mapped_) {
      munmap(const_cast<uint8_t*>(data_), size_);
    } else {
      std::free(const_cast<uint8_t*>(data_));
    }
  }
  release_descriptor();
  data_ = nullptr;
  size_ = 0;
  mapped_ = false;
  anonymous_ = false;
}

void MappedFile::release_descriptor() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

PageUsage MappedFile::page_usage() const { return tern::page_usage(data_, mapped_ ? size_ : 0); }

void MappedFile::advise_will_need() const {
  if (mapped_ && data_ != nullptr) madvise(const_cast<uint8_t*>(data_), size_, MADV_WILLNEED);
}

// Large pages for the mapping (use_large_pages, copy_to_large_pages) and their helpers.
namespace {

#if defined(__linux__)
// Faults every page of [p, p + n) in, as reads (the file's pages, read from disk if need be).
// MADV_POPULATE_READ faults them in bulk; a read of each page then costs little once they are
// in, and covers kernels before 5.14 and emulators that accept the advice and do nothing
// (qemu-user 7.2).
void populate(const uint8_t* p, size_t n) {
  madvise(const_cast<uint8_t*>(p), n, MADV_POPULATE_READ);
  const size_t page = page_bytes();
  volatile uint8_t sink = 0;
  for (size_t off = 0; off < n; off += page) sink = sink + p[off];
  (void)sink;
}

// Drops the mapping's pages of [off, off + n) and, where nobody else maps them, the file's
// page cache there, then reads them again.
void reread(const uint8_t* data, int fd, size_t off, size_t n) {
  madvise(const_cast<uint8_t*>(data) + off, n, MADV_DONTNEED);
  posix_fadvise(fd, static_cast<off_t>(off), static_cast<off_t>(n), POSIX_FADV_DONTNEED);
  populate(data + off, n);
}

// Which of the `count` large pages at `data` (aligned) the kernel maps with a large page: 1 in
// `mapped[i]`, else 0. smaps counts per mapping, so the range is cut into one mapping per large
// page for one read (every other one advised MADV_SEQUENTIAL, which splits it), then advised
// back to MADV_NORMAL (which joins it again). False if smaps cannot be read.
bool large_pages_mapped(const uint8_t* data, size_t large, size_t count, uint8_t* mapped) {
  auto* at = const_cast<uint8_t*>(data);
  for (size_t i = 1; i < count; i += 2) madvise(at + i * large, large, MADV_SEQUENTIAL);
  struct Map {
    uintptr_t data;
    size_t large, count;
    uint8_t* mapped;
  } map{reinterpret_cast<uintptr_t>(data), large, count, mapped};
  std::memset(mapped, 0, count);
  auto mark = [](const void* start, size_t bytes, const PageUsage& usage, void* context) {
    const auto* m = static_cast<const Map*>(context);
    if (usage.large_bytes < bytes) return;  // not all of it (a mapping the cut missed: read it again)
    const uintptr_t lo = reinterpret_cast<uintptr_t>(start);
    for (uintptr_t p = lo; p < lo + bytes; p += m->large) {
      if (p >= m->data && (p - m->data) / m->large < m->count) m->mapped[(p - m->data) / m->large] = 1;
    }
  };
  const bool ok = visit_mappings(data, count * large, mark, &map);
  madvise(at, count * large, MADV_NORMAL);
  return ok;
}
#endif

}  // namespace

LargePages MappedFile::use_large_pages(size_t* reread_bytes) {
  size_t unused = 0;
  size_t& reread_total = reread_bytes != nullptr ? *reread_bytes : unused;
  reread_total = 0;
#if defined(__linux__)
  if (!mapped_ || anonymous_ || fd_ < 0 || size_ == 0) return LargePages::NotTried;
  const size_t large = large_page_bytes();
  if (large == 0) return LargePages::Unsupported;
  // Large pages map whole aligned large pages of the file: the ones inside it.
  const size_t whole = size_ / large * large;
  if (whole == 0) return LargePages::TooSmall;
  if (reinterpret_cast<uintptr_t>(data_) % large != 0) return LargePages::Unavailable;
  if (madvise(const_cast<uint8_t*>(data_), size_, MADV_HUGEPAGE) != 0) return LargePages::Unsupported;
  populate(data_, size_);
  PageUsage now = page_usage();
  if (!now.known) return LargePages::Unknown;
  if (now.large_bytes >= whole) return LargePages::AsRead;
  // Kernels with CONFIG_READ_ONLY_THP_FOR_FS rebuild the page cache's small pages in place.
  if (madvise(const_cast<uint8_t*>(data_), size_, MADV_COLLAPSE) == 0) {
    now = page_usage();
    if (now.large_bytes >= whole) return LargePages::Collapsed;
  }
  // Dirty pages (a file just written and not yet synced) cannot be dropped: written back first.
  const int synced = fdatasync(fd_);
  (void)synced;  // a file that cannot be synced keeps its dirty pages, and the count below says so
  const size_t count = whole / large;
  std::unique_ptr<uint8_t[]> mapped(new (std::nothrow) uint8_t[count]);
  if (mapped == nullptr) return LargePages::Unavailable;
  if (!large_pages_mapped(data_, large, count, mapped.get())) std::memset(mapped.get(), 0, count);
  size_t first = 0;  // the first large page in small pages
  while (first < count && mapped[first]) ++first;
  if (now.large_bytes == 0) {  // does the kernel give this file large pages at all?
    reread(data_, fd_, first * large, large);
    reread_total += large;
    if (page_usage().large_bytes == 0) return LargePages::Unavailable;
    mapped[first] = 1;
  }
  // Only the large pages in small ones are read again, a run at a time.
  for (size_t i = first; i < count;) {
    if (mapped[i]) {
      ++i;
      continue;
    }
    size_t end = i + 1;
    while (end < count && !mapped[end]) ++end;
    reread(data_, fd_, i * large, (end - i) * large);
    reread_total += (end - i) * large;
    i = end;
  }
  return LargePages::Reread;
#else
  return mapped_ ? LargePages::Unsupported : LargePages::NotTried;
#endif
}

Error MappedFile::copy_to_large_pages() {
  if (!mapped_ || fd_ < 0) {
    return fail(Error::InvalidState, "the file is not mapped (read into memory): it cannot be copied into large pages");
  }
  if (anonymous_) return Error::Ok;
#if defined(__linux__)
  const size_t large = large_page_bytes();
  if (large == 0) return fail(Error::NotSupported, "this kernel has no transparent huge pages to copy the file into");
  // The copy ends where the mapping does, so its last part (less than a large page) gets small
  // pages rather than a whole large page.
  const size_t length = round_up(size_, page_bytes());
  void* at = aligned_mapping(length, large, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS);
  if (at == MAP_FAILED) {
    return fail(Error::OutOfMemory, "cannot map %zu bytes for a copy of the file: %s", length, std::strerror(errno));
  }
  if (madvise(at, length, MADV_HUGEPAGE) != 0) {
    const int err = errno;
    munmap(at, length);
    return fail(Error::NotSupported, "large pages for a copy of the file: madvise: %s", std::strerror(err));
  }
  // The file's pages read so far (its header) leave this process: the copy is all it holds.
  madvise(const_cast<uint8_t*>(data_), size_, MADV_DONTNEED);
  // Faulted in before the reads: pread into pages it faults in itself was 13x slower (1.35 s
  // against 0.10 s for 711 MB on Linux 6.18). Kernels before 5.14 fault them in as it reads.
  madvise(at, length, MADV_POPULATE_WRITE);
  auto* out = static_cast<uint8_t*>(at);
  size_t done = 0;
  while (done < size_) {
    const size_t chunk = size_ - done < (size_t{64} << 20) ? size_ - done : size_t{64} << 20;
    const ssize_t n = ::pread(fd_, out + done, chunk, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : 0;
      munmap(at, length);
      if (n == 0) return fail(Error::Truncated, "the file shrank while it was copied");
      return fail(Error::IoError, "copying the file: read failed: %s", std::strerror(err));
    }
    done += static_cast<size_t>(n);
  }
  // Read-only like the mapping, then moved onto it: the file's pages are unmapped in the same step.
  void* moved = MAP_FAILED;
  if (mprotect(at, length, PROT_READ) == 0) {
    moved = mremap(at, length, length, MREMAP_MAYMOVE | MREMAP_FIXED, const_cast<uint8_t*>(data_));
  }
  if (moved == MAP_FAILED) {
    const int err = errno;
    munmap(at, length);
    return fail(Error::IoError, "moving the copy onto the mapping: %s", std::strerror(err));
  }
  anonymous_ = true;
  return Error::Ok;
#else
  return fail(Error::NotSupported, "copying a file into large pages needs Linux transparent huge pages");
#endif
}

}  // namespace tern
