#include "platform/atomic_file.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "tests/support/test_util.h"

namespace tern {
namespace {

using testing::TempDir;

bool exists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }

void touch(const std::string& path) { std::ofstream(path) << "partial state"; }

// The pid of a process that has ended (and been reaped): what `kill -9` during a save leaves.
pid_t dead_pid() {
  const pid_t pid = fork();
  if (pid == 0) _exit(0);
  int status = 0;
  waitpid(pid, &status, 0);
  return pid;
}

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(AtomicFile, WritesTheBytes) {
  TempDir dir;
  const std::string path = dir.file("s.state");
  ASSERT_EQ(write_file_atomically(path.c_str(), "abc", 3), Error::Ok) << last_error_message();
  EXPECT_EQ(read_all(path), "abc");
}

// A temporary a killed save left (a dead pid's) goes at the next save to the same path; one of
// a running process (a save in progress), and those of other files, stay.
TEST(AtomicFile, NextSaveRemovesTemporariesOfDeadProcesses) {
  TempDir dir;
  const std::string path = dir.file("s.state");
  const std::string stale = path + ".tmp." + std::to_string(dead_pid()) + ".3";
  const std::string live = path + ".tmp." + std::to_string(getppid()) + ".0";
  const std::string other = dir.file("t.state") + ".tmp." + std::to_string(dead_pid()) + ".0";
  const std::string lookalike = path + ".tmp.notapid.0";
  for (const std::string& p : {stale, live, other, lookalike}) touch(p);
  ASSERT_EQ(write_file_atomically(path.c_str(), "new", 3), Error::Ok) << last_error_message();
  EXPECT_FALSE(exists(stale)) << stale;
  EXPECT_TRUE(exists(live));
  EXPECT_TRUE(exists(other));
  EXPECT_TRUE(exists(lookalike));
  EXPECT_EQ(read_all(path), "new");
}

}  // namespace
}  // namespace tern
