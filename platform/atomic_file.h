// Replacing a file so that a crash, a kill or a power cut at any moment leaves either the old
// file or the complete new one (SQLite's rule): write a temporary beside it, fsync it, rename
// it over the old name, fsync the directory.
#pragma once

#include <cstddef>

#include "platform/error.h"

namespace tern {

// Writes `size` bytes to `path` atomically. The temporary is PATH.tmp.PID.N (created with
// O_EXCL, mode 0666 less the umask, as fopen would); it is removed on failure, and a process
// killed while writing leaves it behind, never in place of `path`: the next save to `path`
// removes those of processes no longer running. IoError with the reason (e.g. ENOSPC) on
// failure; `path` is then untouched.
Error write_file_atomically(const char* path, const void* data, size_t size);

}  // namespace tern
