// Read-only view of a whole file: mmap'd where possible (zero-copy, pages shared with
// the OS cache and counted once), or read into one heap buffer when mapping is not
// available or not wanted. Either way the bytes stay valid until the object dies.
#pragma once

#include <cstddef>
#include <cstdint>

#include "platform/error.h"

namespace tern {

enum class MapMode {
  Auto,  // mmap, falling back to read on failure
  Mmap,  // mmap only
  Read,  // read into a heap buffer (what a platform without mmap does)
};

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
