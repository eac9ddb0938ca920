#include "platform/file_map.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

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

}  // namespace

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
    void* p = mmap(nullptr, file.size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p != MAP_FAILED) {
      ::close(fd);
      file.data_ = static_cast<const uint8_t*>(p);
      file.mapped_ = true;
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

MappedFile::MappedFile(MappedFile&& other) noexcept : data_(other.data_), size_(other.size_), mapped_(other.mapped_) {
  other.data_ = nullptr;
  other.size_ = 0;
  other.mapped_ = false;
}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    reset();
    data_ = other.data_;
    size_ = other.size_;
    mapped_ = other.mapped_;
    other.data_ = nullptr;
    other.size_ = 0;
    other.mapped_ = false;
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
  data_ = nullptr;
  size_ = 0;
  mapped_ = false;
}

void MappedFile::advise_will_need() const {
  if (mapped_ && data_ != nullptr) madvise(const_cast<uint8_t*>(data_), size_, MADV_WILLNEED);
}

}  // namespace tern
