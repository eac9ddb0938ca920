#include "platform/atomic_file.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>

namespace tern {
namespace {

int retry_eintr_open(const char* path, int flags, mode_t mode) {
  int fd;
  do fd = ::open(path, flags, mode);
  while (fd < 0 && errno == EINTR);
  return fd;
}

bool write_all(int fd, const uint8_t* p, size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

// The folder `path` is in, and its name in that folder.
const char* split_path(const char* path, char (&dir)[4096]) {
  const char* slash = std::strrchr(path, '/');
  if (slash == nullptr) {
    std::snprintf(dir, sizeof dir, ".");
  } else if (slash == path) {
    std::snprintf(dir, sizeof dir, "/");
  } else {
    std::snprintf(dir, sizeof dir, "%.*s", static_cast<int>(slash - path), path);
  }
  return slash == nullptr ? path : slash + 1;
}

// The pid of a temporary NAME.tmp.PID.N of `name`, or 0 if `entry` is not one.
long temporary_pid(const char* entry, const char* name) {
  const size_t len = std::strlen(name);
  if (std::strncmp(entry, name, len) != 0 || std::strncmp(entry + len, ".tmp.", 5) != 0) return 0;
  const char* p = entry + len + 5;
  long pid = 0;
  int digits = 0;
  for (; *p >= '0' && *p <= '9' && digits < 10; ++p, ++digits) pid = pid * 10 + (*p - '0');
  if (digits == 0 || *p++ != '.' || *p == '\0') return 0;
  for (; *p != '\0'; ++p) {
    if (*p < '0' || *p > '9') return 0;
  }
  return pid;
}

// Removes the temporaries of `path` that processes killed while writing left behind: those
// whose pid no longer runs (a live pid's, ours included, may be a save in progress).
void remove_stale_temporaries(const char* path) {
  char dir[4096];
  const char* name = split_path(path, dir);
  DIR* d = opendir(dir);
  if (d == nullptr) return;
  while (const dirent* e = readdir(d)) {
    const long pid = temporary_pid(e->d_name, name);
    if (pid <= 0 || pid == static_cast<long>(::getpid())) continue;
    if (::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;
    unlinkat(dirfd(d), e->d_name, 0);
  }
  closedir(d);
}

// The rename is durable only once the directory entry is: fsync the directory itself.
bool sync_directory_of(const char* path) {
  char dir[4096];
  split_path(path, dir);
  const int fd = retry_eintr_open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0);
  if (fd < 0) return false;
  // Some file systems cannot sync a directory (EINVAL): the rename is as durable as they allow.
  const bool ok = ::fsync(fd) == 0 || errno == EINVAL;
  ::close(fd);
  return ok;
}

}  // namespace

Error write_file_atomically(const char* path, const void* data, size_t size) {
  TERN_CHECK_OR_RETURN(path != nullptr && path[0] != '\0', Error::InvalidArgument, "empty file path");
  static std::atomic<unsigned> counter{0};
  char temp[4096];
  int fd = -1;
  for (int attempt = 0; fd < 0 && attempt < 100; ++attempt) {
    const int n =
        std::snprintf(temp, sizeof temp, "%s.tmp.%ld.%u", path, static_cast<long>(::getpid()), counter.fetch_add(1));
    TERN_CHECK_OR_RETURN(n > 0 && static_cast<size_t>(n) < sizeof temp, Error::InvalidArgument,
                         "%.200s...: path too long", path);
    fd = retry_eintr_open(temp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0 && errno != EEXIST) break;
  }
  if (fd < 0) return fail(Error::IoError, "%s: cannot create %s (%s)", path, temp, std::strerror(errno));
  const bool written = write_all(fd, static_cast<const uint8_t*>(data), size) && ::fsync(fd) == 0;
  int err = errno;
  const bool closed = ::close(fd) == 0;
  if (written && !closed) err = errno;
  if (!written || !closed) {
    ::unlink(temp);
    return fail(Error::IoError, "%s: cannot write %zu bytes (%s); the previous file is untouched", path, size,
                std::strerror(err));
  }
  if (::rename(temp, path) != 0) {
    err = errno;
    ::unlink(temp);
    return fail(Error::IoError, "%s: cannot replace it (%s); the previous file is untouched", path, std::strerror(err));
  }
  remove_stale_temporaries(path);
  TERN_CHECK_OR_RETURN(sync_directory_of(path), Error::IoError, "%s: written, but its directory cannot be synced (%s)",
                       path, std::strerror(errno));
  return Error::Ok;
}

}  // namespace tern
