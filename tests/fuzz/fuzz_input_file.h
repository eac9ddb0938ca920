// Parsers that only take paths get the fuzz input through a file in a per-process
// directory on /dev/shm (memory-backed), rewritten every run and removed at exit.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

namespace tern::fuzz {

class ShmDir {
 public:
  static ShmDir& get() {
    // Never destroyed: the atexit cleanup below must still find the path.
    static ShmDir* dir = new ShmDir;
    return *dir;
  }
  const std::string& path() const { return path_; }
  // Writes `data` to <dir>/<name> and returns that path.
  std::string put(const std::string& name, const uint8_t* data, size_t size) const {
    const std::string file = path_ + "/" + name;
    FILE* f = std::fopen(file.c_str(), "wb");
    if (f == nullptr) std::abort();
    if (size != 0 && std::fwrite(data, 1, size, f) != size) std::abort();
    std::fclose(f);
    return file;
  }

 private:
  ShmDir() {
    const char* base = std::filesystem::exists("/dev/shm") ? "/dev/shm" : "/tmp";
    path_ = std::string(base) + "/tern-fuzz-" + std::to_string(::getpid());
    std::filesystem::create_directories(path_);
    std::atexit([] { std::filesystem::remove_all(ShmDir::get().path()); });
  }
  std::string path_;
};

}  // namespace tern::fuzz
