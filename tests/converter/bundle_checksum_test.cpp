// The bundle checksum (schema/README.md, "Checksum"): a byte flipped anywhere in a converted
// bundle -- the header, a weight, the tokenizer, the last byte, the checksum itself -- is
// found and named by Bundle::verify_checksum and tern_bundle_verify, while Bundle::open (the
// default load, which reads no weights) still accepts it; an untouched bundle verifies; a
// bundle written without the field (as before it existed) loads and reports none.
#include <flatbuffers/flatbuffers.h>

#include <sys/wait.h>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "converter/writer/bundle_writer.h"
#include "fixtures.h"
#include "include/tern.h"
#include "runtime/base/xxh64.h"
#include "runtime/model/bundle.h"
#include "schema/bundle_generated.h"
#include "tests/support/test_util.h"

namespace tern {
namespace {

// Writes the tiny model (ternary weights, Q8 embeddings, a tokenizer) to `path`; its bytes.
std::vector<uint8_t> write_tiny(const std::string& path, bool checksum) {
  static const convert::ModelIR ir = testing::tiny_model_ir(2);
  convert::ConvertOptions o;
  o.embed_type = DenseType::Q8;
  o.embed_group = 4;
  convert::BundleContents contents = convert::contents_from_ir(ir, o);
  contents.checksum = checksum;
  auto stats = convert::write_bundle(path, contents);
  EXPECT_TRUE(stats.ok()) << last_error_message();
  return testing::read_file_bytes(path);
}

uint64_t data_start_of(const std::vector<uint8_t>& bytes) {
  uint32_t fb_size;
  std::memcpy(&fb_size, bytes.data(), 4);
  return (4ull + fb_size + 63) / 64 * 64;
}

// Where each kind of byte lives in `bytes` (offsets into the file).
struct Places {
  size_t provenance = 0;  // a character of the provenance's source format (header)
  size_t config = 0;      // the config's max_context (header)
  size_t tokenizer = 0;   // the first piece's first byte (header)
  size_t weight = 0;      // a byte inside a ternary tensor (data area)
  size_t scale = 0;       // a Q8 group scale (data area)
  size_t checksum = 0;    // the recorded data hash itself (header)
  size_t last = 0;        // the file's last byte
};

Places places_in(const std::vector<uint8_t>& bytes) {
  const auto* root = flatbuffers::GetSizePrefixedRoot<schema::Bundle>(bytes.data());
  const uint8_t* base = bytes.data();
  Places p;
  p.provenance = reinterpret_cast<const uint8_t*>(root->provenance()->source_format()->c_str()) - base;
  p.config =
      reinterpret_cast<const flatbuffers::Table*>(root->config())->GetAddressOf(schema::ModelConfig::VT_MAX_CONTEXT) -
      base;
  p.tokenizer = root->tokenizer()->piece_bytes()->Data() - base;
  const uint64_t data_start = data_start_of(bytes);
  for (const schema::Tensor* t : *root->tensors()) {
    if (t->type() == schema::TensorType::Ternary && p.weight == 0) {
      p.weight = data_start + t->data()->offset() + t->data()->size() / 2;
    }
    if (t->group_scales() != nullptr && t->group_scales()->size() != 0 && p.scale == 0) {
      p.scale = data_start + t->group_scales()->offset() + 1;
    }
  }
  if (root->checksum() != nullptr) {
    p.checksum =
        reinterpret_cast<const flatbuffers::Table*>(root->checksum())->GetAddressOf(schema::Checksum::VT_DATA) - base;
  }
  p.last = bytes.size() - 1;
  return p;
}

TEST(BundleChecksum, UntouchedBundleVerifiesWithTheReferenceHash) {
  testing::TempFile file(".tern");
  const std::vector<uint8_t> bytes = write_tiny(file.path(), true);
  auto b = Bundle::open(file.path().c_str());
  ASSERT_TRUE(b.ok()) << last_error_message();
  BundleChecksum cs;
  ASSERT_EQ(b->verify_checksum(file.path().c_str(), &cs), Error::Ok) << last_error_message();
  EXPECT_TRUE(cs.recorded);
  // Independently: the data area's XXH64 in one piece, and the header's with its two values zeroed.
  const uint64_t data_start = data_start_of(bytes);
  EXPECT_EQ(cs.data, xxh64(bytes.data() + data_start, bytes.size() - data_start));
  std::vector<uint8_t> header(bytes.begin(), bytes.begin() + static_cast<ptrdiff_t>(data_start));
  const auto* table = reinterpret_cast<const flatbuffers::Table*>(
      flatbuffers::GetSizePrefixedRoot<schema::Bundle>(bytes.data())->checksum());
  for (auto field : {schema::Checksum::VT_HEADER, schema::Checksum::VT_DATA}) {
    ASSERT_NE(table->GetAddressOf(field), nullptr);
    std::memset(header.data() + (table->GetAddressOf(field) - bytes.data()), 0, 8);
  }
  EXPECT_EQ(cs.header, xxh64(header.data(), header.size()));
  EXPECT_EQ(cs.bytes, bytes.size());

  int recorded = -1;
  EXPECT_EQ(tern_bundle_verify(file.path().c_str(), 1, &recorded), TERN_OK) << tern_last_error_message();
  EXPECT_EQ(recorded, 1);
}

TEST(BundleChecksum, EveryKindOfFlippedByteFailsAndIsNamed) {
  testing::TempFile original(".tern");
  const std::vector<uint8_t> bytes = write_tiny(original.path(), true);
  const Places p = places_in(bytes);
  ASSERT_NE(p.weight, 0u);
  ASSERT_NE(p.scale, 0u);
  ASSERT_NE(p.checksum, 0u);
  const struct {
    const char* what;
    size_t offset;
    const char* named;
  } cases[] = {
      {"provenance", p.provenance, "in the header"}, {"config", p.config, "in the header"},
      {"tokenizer", p.tokenizer, "in the header"},   {"checksum", p.checksum, "in the data area"},
      {"weight", p.weight, "in the data area"},      {"group scale", p.scale, "in the data area"},
      {"last byte", p.last, "in the data area"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    ASSERT_LT(c.offset, bytes.size());
    std::vector<uint8_t> damaged = bytes;
    damaged[c.offset] ^= 0x04;
    testing::TempFile file(".tern");
    file.write(damaged);
    // Today's default load takes it: nothing reads these bytes' integrity.
    auto b = Bundle::open(file.path().c_str());
    ASSERT_TRUE(b.ok()) << last_error_message();
    BundleChecksum cs;
    EXPECT_EQ(b->verify_checksum(file.path().c_str(), &cs), Error::CorruptFile);
    EXPECT_NE(std::string(last_error_message()).find(c.named), std::string::npos) << last_error_message();
    int recorded = -1;
    EXPECT_EQ(tern_bundle_verify(file.path().c_str(), 0, &recorded), TERN_CORRUPT_FILE);
    const std::string msg = tern_last_error_message();
    EXPECT_NE(msg.find("checksum mismatch " + std::string(c.named)), std::string::npos) << msg;
    EXPECT_NE(msg.find(file.path()), std::string::npos) << msg;
    EXPECT_EQ(recorded, 1);
  }
}

// Every bit of the file flipped: the bundle either fails to open or fails the checksum, except a
// flip of the few bits that say the checksum is there at all (the Bundle's vtable entry), which
// reads as "no checksum recorded": require_checksum (--require-checksum) refuses those.
TEST(BundleChecksum, NoFlippedByteAnywherePasses) {
  testing::TempFile original(".tern");
  const std::vector<uint8_t> bytes = write_tiny(original.path(), true);
  std::vector<uint8_t> copy(bytes.size() + 64);
  uint8_t* aligned = copy.data() + (64 - reinterpret_cast<uintptr_t>(copy.data()) % 64) % 64;
  size_t unrecorded = 0, opened = 0;
  for (size_t i = 0; i < bytes.size(); ++i) {
    for (int bit = 0; bit < 8; ++bit) {
      std::memcpy(aligned, bytes.data(), bytes.size());
      aligned[i] ^= static_cast<uint8_t>(1u << bit);
      auto b = Bundle::from_memory(aligned, bytes.size());
      if (!b.ok()) continue;
      ++opened;
      BundleChecksum cs;
      const Error e = b->verify_checksum("flipped", &cs);
      if (e == Error::Ok && !cs.recorded) {
        ++unrecorded;
        continue;
      }
      EXPECT_NE(e, Error::Ok) << "bit " << bit << " of byte " << i << " of " << bytes.size() << " flipped passed";
    }
  }
  EXPECT_LE(unrecorded, 4u);
  std::printf("%zu single-bit flips: %zu opened, all of them failed the checksum but %zu read as unrecorded\n",
              bytes.size() * 8, opened, unrecorded);
}

TEST(BundleChecksum, OldBundleWithoutTheFieldLoadsAndSaysSo) {
  testing::TempFile file(".tern");
  const std::vector<uint8_t> bytes = write_tiny(file.path(), false);
  EXPECT_EQ(flatbuffers::GetSizePrefixedRoot<schema::Bundle>(bytes.data())->checksum(), nullptr);
  auto b = Bundle::open(file.path().c_str());
  ASSERT_TRUE(b.ok()) << last_error_message();
  BundleChecksum cs;
  EXPECT_EQ(b->verify_checksum(file.path().c_str(), &cs), Error::Ok) << last_error_message();
  EXPECT_FALSE(cs.recorded);
  int recorded = -1;
  EXPECT_EQ(tern_bundle_verify(file.path().c_str(), 0, &recorded), TERN_OK) << tern_last_error_message();
  EXPECT_EQ(recorded, 0);
  EXPECT_EQ(tern_bundle_verify(file.path().c_str(), 1, &recorded), TERN_NOT_FOUND);
  EXPECT_NE(std::string(tern_last_error_message()).find("no checksum recorded"), std::string::npos);
}

// `tern-inspect --verify [extra] path`: its exit status and its output.
int inspect_verify(const std::string& path, const std::string& extra, std::string* out) {
  const std::string cmd = std::string(TERN_INSPECT_EXE) + " --verify " + extra + " '" + path + "' 2>&1";
  std::FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return -1;
  char buf[1024];
  out->clear();
  while (std::fgets(buf, sizeof buf, p) != nullptr) *out += buf;
  const int status = pclose(p);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(BundleChecksum, InspectVerifyPrintsTheResult) {
  testing::TempFile file(".tern"), old(".tern"), damaged(".tern");
  std::vector<uint8_t> bytes = write_tiny(file.path(), true);
  write_tiny(old.path(), false);
  bytes[places_in(bytes).weight] ^= 0x01;
  damaged.write(bytes);
  std::string out;
  EXPECT_EQ(inspect_verify(file.path(), "", &out), 0) << out;
  EXPECT_NE(out.find("checksum OK"), std::string::npos) << out;
  EXPECT_EQ(inspect_verify(damaged.path(), "", &out), 1) << out;
  EXPECT_NE(out.find("checksum FAILED"), std::string::npos) << out;
  EXPECT_NE(out.find("in the data area"), std::string::npos) << out;
  EXPECT_EQ(inspect_verify(old.path(), "", &out), 0) << out;
  EXPECT_NE(out.find("no checksum recorded"), std::string::npos) << out;
  EXPECT_EQ(inspect_verify(old.path(), "--require-checksum", &out), 1) << out;
}

}  // namespace
}  // namespace tern
