// Read-only view of a whole file: mmap'd where possible (zero-copy, pages shared with
// the OS cache and counted once), or read into one heap buffer when mapping is not
// available or not wanted. Either way the bytes stay valid until the object dies.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "platform/error.h"

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
  // Hints that the whole file will be read soon (no-op for the read fallback).
  void advise_will_need() const;

 private:
  void reset();

  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  bool mapped_ = false;
};

}  // namespace tern
