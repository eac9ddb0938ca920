// The paths that are not regular files (a FIFO, a device, a directory, a unix socket), for
// tests that every opener refuses them, and a bound on how long a call may take to do so.
#pragma once

#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "tests/support/test_util.h"

namespace tern::testing {

// One of each kind, made in a fresh folder (the socket is bound and listening, as a live
// server's would be); removed with the folder.
class SpecialFiles {
 public:
  SpecialFiles() {
    mkfifo(fifo().c_str(), 0600);
    mkdir(directory().c_str(), 0700);
    sock_ = socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", socket_path().c_str());
    bind(sock_, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    listen(sock_, 1);
  }
  ~SpecialFiles() {
    close(sock_);
    rmdir(directory().c_str());
  }
  SpecialFiles(const SpecialFiles&) = delete;
  SpecialFiles& operator=(const SpecialFiles&) = delete;

  std::string fifo() const { return dir_.file("fifo.tern"); }
  std::string directory() const { return dir_.file("dir.tern"); }
  std::string socket_path() const { return dir_.file("sock.tern"); }
  // (name, path) of every kind; /dev/zero reads forever, /dev/null reads empty.
  std::vector<std::pair<std::string, std::string>> all() const {
    return {{"FIFO", fifo()},
            {"character device", "/dev/zero"},
            {"character device", "/dev/null"},
            {"directory", directory()},
            {"socket", socket_path()}};
  }

 private:
  TempDir dir_;
  int sock_ = -1;
};

// Runs `body` in a child process and returns its exit status, or -1 when it has not ended
// within `seconds` (the child is then killed): a call that blocks on a FIFO fails the test
// instead of hanging it.
inline int exit_status_within(double seconds, const std::function<int()>& body) {
  const pid_t pid = fork();
  if (pid == 0) _exit(body());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -2;
}

}  // namespace tern::testing
