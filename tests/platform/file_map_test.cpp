#include "platform/file_map.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <numeric>
#include <vector>

#include "tests/support/large_pages_probe.h"
#include "tests/support/special_files.h"
#include "tests/support/test_util.h"

namespace tern {
namespace {

using testing::TempFile;

std::vector<uint8_t> pattern(size_t n) {
  std::vector<uint8_t> v(n);
  uint32_t x = 12345;
  for (auto& b : v) {
    x = x * 1103515245u + 12345u;
    b = static_cast<uint8_t>(x >> 16);
  }
  return v;
}

class FileMapModes : public ::testing::TestWithParam<MapMode> {};

TEST_P(FileMapModes, ReadsExactBytes) {
  // Sizes around a page boundary, and a large file spanning many pages.
  for (size_t n : {size_t{1}, size_t{4095}, size_t{4096}, size_t{4097}, size_t{3} << 20}) {
    TempFile tmp(".bin");
    const auto bytes = pattern(n);
    tmp.write(bytes);
    auto file = MappedFile::open(tmp.path().c_str(), GetParam());
    ASSERT_TRUE(file.ok()) << last_error_message();
    ASSERT_EQ(file->size(), n);
    EXPECT_EQ(file->is_mapped(), GetParam() != MapMode::Read);
    EXPECT_EQ(std::vector<uint8_t>(file->data(), file->data() + n), bytes);
  }
}

TEST_P(FileMapModes, EmptyFileIsAnEmptyView) {
  TempFile tmp;
  tmp.write(nullptr, 0);
  auto file = MappedFile::open(tmp.path().c_str(), GetParam());
  ASSERT_TRUE(file.ok());
  EXPECT_EQ(file->size(), 0u);
}

INSTANTIATE_TEST_SUITE_P(All, FileMapModes, ::testing::Values(MapMode::Auto, MapMode::Mmap, MapMode::Read));

TEST(FileMap, RealModelMatchesStreamRead) {
  const std::string path = testing::tiny_austen_packed_dir() + "/model.safetensors";
  TERN_REQUIRE_FILE(path);
  const auto expected = testing::read_file_bytes(path);
  auto file = MappedFile::open(path.c_str());
  ASSERT_TRUE(file.ok()) << last_error_message();
  ASSERT_EQ(file->size(), expected.size());
  EXPECT_TRUE(std::equal(expected.begin(), expected.end(), file->data()));
  // safetensors: a little-endian header length, then the JSON header, read through the mapping.
  uint64_t header = 0;
  std::memcpy(&header, file->data(), 8);
  EXPECT_LT(header + 8, file->size());
  EXPECT_EQ(file->data()[8], '{');
}

TEST(FileMap, MissingFileIsFileNotFound) {
  auto file = MappedFile::open("/nonexistent/dir/model.tern");
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.error(), Error::FileNotFound);
  EXPECT_NE(std::string(last_error_message()).find("/nonexistent/dir/model.tern"), std::string::npos);
}

TEST(FileMap, DirectoryAndEmptyPathAreRejected) {
  auto dir = MappedFile::open("/tmp");
  ASSERT_FALSE(dir.ok());
  EXPECT_EQ(dir.error(), Error::IoError);
  auto empty = MappedFile::open("");
  EXPECT_EQ(empty.error(), Error::InvalidArgument);
  auto null = MappedFile::open(nullptr);
  EXPECT_EQ(null.error(), Error::InvalidArgument);
}

// A FIFO, a device, a directory and a socket are refused at once, named, in every mode and
// by read_whole_file: never a wait for a FIFO's writer (today's open() blocked forever) nor an
// endless read of /dev/zero.
TEST(FileMap, SpecialFilesAreRefusedWithoutBlocking) {
  testing::SpecialFiles special;
  for (const auto& [kind, path] : special.all()) {
    for (MapMode mode : {MapMode::Auto, MapMode::Mmap, MapMode::Read}) {
      const int status = testing::exit_status_within(10, [&, kind = kind, path = path] {
        auto file = MappedFile::open(path.c_str(), mode);
        if (file.ok() || file.error() != Error::IoError) return 1;
        const std::string why = last_error_message();
        if (why.find(path) == std::string::npos || why.find(kind) == std::string::npos) return 2;
        auto text = read_whole_file(path.c_str());
        return text.ok() || text.error() != Error::IoError ? 3 : 0;
      });
      EXPECT_EQ(status, 0) << kind << " " << path << " mode " << static_cast<int>(mode)
                           << " (-1: still blocked after 10 s)";
    }
  }
}

TEST(FileMap, ReadWholeFileReturnsTheBytes) {
  TempFile tmp(".txt");
  const std::string text = "root ::= \"yes\" | \"no\"\n";
  tmp.write(text.data(), text.size());
  auto read = read_whole_file(tmp.path().c_str());
  ASSERT_TRUE(read.ok()) << last_error_message();
  EXPECT_EQ(*read, text);
}

TEST(FileMap, MoveTransfersOwnership) {
  TempFile tmp;
  const auto bytes = pattern(100);
  tmp.write(bytes);
  auto opened = MappedFile::open(tmp.path().c_str());
  ASSERT_TRUE(opened.ok());
  MappedFile a = std::move(opened).value();
  MappedFile b = std::move(a);
  EXPECT_EQ(a.data(), nullptr);
  EXPECT_EQ(a.size(), 0u);
  ASSERT_EQ(b.size(), 100u);
  EXPECT_EQ(b.data()[99], bytes[99]);
}

// Large pages. What the kernel gives differs between machines (transparent huge pages on or
// off, a filesystem with or without large folios): each case checks that what a call says it
// did is what /proc/self/smaps shows, and that the bytes stay the file's.

// Bytes [off, off + n) of a file left in the page cache in small pages: dropped, then read back
// with readahead off (the kernel then caches them a page at a time, as a program writing the
// file does).
void cache_in_small_pages(const std::string& path, size_t off, size_t n) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(fdatasync(fd), 0);
  posix_fadvise(fd, off, n, POSIX_FADV_DONTNEED);
  posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM);
  std::vector<uint8_t> buf(size_t{1} << 20);
  for (size_t at = off; at < off + n; at += buf.size()) ASSERT_GT(pread(fd, buf.data(), buf.size(), at), 0);
  ::close(fd);
}

// Bytes this process has had read from storage (/proc/self/io read_bytes), or -1.
long long storage_read_bytes() {
  std::FILE* f = std::fopen("/proc/self/io", "r");
  if (f == nullptr) return -1;
  char line[128];
  long long bytes = -1;
  while (std::fgets(line, sizeof line, f) != nullptr) {
    if (std::sscanf(line, "read_bytes: %lld", &bytes) == 1) break;
  }
  std::fclose(f);
  return bytes;
}

bool anonymous_large_pages_on() {
  char policy[16];
  transparent_huge_pages_policy(policy, sizeof policy);
  return large_page_bytes() > 0 && std::strcmp(policy, "never") != 0;
}

TEST(FileMapLargePages, MappingStartsOnALargePage) {
  const size_t large = large_page_bytes();
  if (large == 0) GTEST_SKIP() << "no transparent huge pages here";
  TempFile tmp(".bin");
  tmp.write(pattern(large + 12345));
  auto file = MappedFile::open(tmp.path().c_str());
  ASSERT_TRUE(file.ok()) << last_error_message();
  EXPECT_EQ(reinterpret_cast<uintptr_t>(file->data()) % large, 0u);
  EXPECT_EQ(std::vector<uint8_t>(file->data(), file->data() + file->size()), pattern(large + 12345));
}

TEST(FileMapLargePages, FileLeftInSmallPagesIsReadAgainInLargeOnes) {
  const size_t large = large_page_bytes();
  if (large == 0) GTEST_SKIP() << "no transparent huge pages here";
  const size_t n = 2 * large + 4096 + 100;  // two whole large pages and a tail
  TempFile tmp(".bin");
  tmp.write(pattern(n));
  cache_in_small_pages(tmp.path(), 0, n);
  auto file = MappedFile::open(tmp.path().c_str());
  ASSERT_TRUE(file.ok()) << last_error_message();
  const LargePages did = file->use_large_pages();
  const PageUsage now = file->page_usage();
  std::printf("use_large_pages: %s, %zu of %zu bytes in large pages\n", to_string(did), now.large_bytes, n);
  ASSERT_TRUE(now.known);
  EXPECT_GE(now.resident_bytes, n) << "use_large_pages reads the whole file in";
  switch (did) {
    case LargePages::AsRead:
    case LargePages::Collapsed:
    case LargePages::Reread: EXPECT_GE(now.large_bytes, 2 * large) << to_string(did); break;
    case LargePages::Unavailable: EXPECT_EQ(now.large_bytes, 0u) << "the probe found none"; break;
    default: ADD_FAILURE() << "unexpected: " << to_string(did);
  }
  EXPECT_FALSE(file->is_anonymous());
  EXPECT_EQ(std::vector<uint8_t>(file->data(), file->data() + n), pattern(n));
}

// A file the page cache holds in large pages but for its first one (a header read with read(),
// say): only that one is read again, not the whole file.
TEST(FileMapLargePages, OnlyTheLargePagesHeldInSmallOnesAreReadAgain) {
  const size_t large = large_page_bytes();
  if (large == 0) GTEST_SKIP() << "no transparent huge pages here";
  const size_t n = 8 * large;
  TempFile tmp(".bin");
  tmp.write(pattern(n));
  {
    auto first = MappedFile::open(tmp.path().c_str());
    ASSERT_TRUE(first.ok()) << last_error_message();
    cache_in_small_pages(tmp.path(), 0, n);  // then the whole file read again, in large pages
    if (first->use_large_pages() != LargePages::Reread || first->page_usage().large_bytes != n) {
      GTEST_SKIP() << "the kernel gives this file no large pages";
    }
  }
  cache_in_small_pages(tmp.path(), 0, large);
  auto file = MappedFile::open(tmp.path().c_str());
  ASSERT_TRUE(file.ok()) << last_error_message();
  const long long before = storage_read_bytes();
  EXPECT_EQ(file->use_large_pages(), LargePages::Reread);
  const long long read = storage_read_bytes() - before;
  EXPECT_EQ(file->page_usage().large_bytes, n);
  std::printf("read again: %lld bytes of %zu\n", read, n);
  if (before >= 0) {
    EXPECT_LE(read, static_cast<long long>(2 * large));
  }
  EXPECT_EQ(std::vector<uint8_t>(file->data(), file->data() + n), pattern(n));
}

TEST(FileMapLargePages, CopyKeepsTheAddressAndTheBytes) {
  if (!anonymous_large_pages_on()) GTEST_SKIP() << "no transparent huge pages for anonymous memory here";
  const size_t large = large_page_bytes();
  const size_t n = 3 * large + 777;
  TempFile tmp(".bin");
  tmp.write(pattern(n));
  auto file = MappedFile::open(tmp.path().c_str());
  ASSERT_TRUE(file.ok()) << last_error_message();
  const uint8_t* before = file->data();
  ASSERT_EQ(file->copy_to_large_pages(), Error::Ok) << last_error_message();
  EXPECT_TRUE(file->is_anonymous());
  EXPECT_EQ(file->data(), before);
  EXPECT_EQ(std::vector<uint8_t>(file->data(), file->data() + n), pattern(n));
  const PageUsage now = file->page_usage();
  ASSERT_TRUE(now.known);
  if (tern::testing::anonymous_large_pages_given()) {
    // The three whole large pages; the tail is in small pages.
    EXPECT_GE(now.large_bytes, 3 * large);
    EXPECT_LT(now.large_bytes, 4 * large);
  } else {
    std::printf("advised anonymous memory gets no large pages here: nor does the copy\n");
    EXPECT_EQ(now.large_bytes, 0u);
  }
  // The copy outlives the file: nothing reads the file's pages any more.
  MappedFile moved = std::move(file).value();
  ASSERT_EQ(::unlink(tmp.path().c_str()), 0);
  EXPECT_EQ(moved.data()[n - 1], pattern(n)[n - 1]);
}

TEST(FileMapLargePages, ReadFallbackIsNeitherAdvisedNorCopied) {
  TempFile tmp(".bin");
  tmp.write(pattern(5000));
  auto file = MappedFile::open(tmp.path().c_str(), MapMode::Read);
  ASSERT_TRUE(file.ok());
  EXPECT_EQ(file->use_large_pages(), LargePages::NotTried);
  EXPECT_EQ(file->copy_to_large_pages(), Error::InvalidState);
  EXPECT_FALSE(file->page_usage().known);
}

TEST(FileMapLargePages, PageUsageReadsTheMappingsOverTheRange) {
#if !defined(__linux__)
  GTEST_SKIP() << "page usage is read from /proc/self/smaps";
#endif
  std::vector<uint8_t> heap(size_t{1} << 20, 1);  // touched: resident
  const PageUsage used = page_usage(heap.data(), heap.size());
  ASSERT_TRUE(used.known);
  EXPECT_GE(used.resident_bytes, heap.size());
  // Nothing is mapped at the first page.
  const PageUsage none = page_usage(reinterpret_cast<const void*>(uintptr_t{4096}), 4096);
  EXPECT_TRUE(none.known);
  EXPECT_EQ(none.resident_bytes, 0u);
  char policy[16];
  transparent_huge_pages_policy(policy, sizeof policy);
  if (large_page_bytes() > 0) {
    EXPECT_TRUE(std::strcmp(policy, "always") == 0 || std::strcmp(policy, "madvise") == 0 ||
                std::strcmp(policy, "never") == 0)
        << policy;
  }
}

}  // namespace
}  // namespace tern
