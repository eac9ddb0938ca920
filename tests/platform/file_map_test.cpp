#include "platform/file_map.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstring>
#include <numeric>
#include <vector>

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

}  // namespace
}  // namespace tern
