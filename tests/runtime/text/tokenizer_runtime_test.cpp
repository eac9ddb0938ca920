// The runtime tokenizer on small hand-built tables, with expectations worked out by hand
// from the BPE rules. Needs no converter or shared files, so it also runs on device
// builds (aarch64 under qemu).
#include <flatbuffers/flatbuffers.h>
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "runtime/base/arena.h"
#include "runtime/text/tokenizer.h"
#include "schema/tokenizer_generated.h"

namespace tern {
namespace {

struct Piece {
  std::string bytes;
  schema::TokenAttr attr = schema::TokenAttr::Normal;
  float score = 0.0f;
};

struct TableSpec {
  schema::TokenizerType type = schema::TokenizerType::ByteLevelBpe;
  schema::PreTokenizer pretokenizer = schema::PreTokenizer::Llama3;
  std::vector<Piece> pieces;
  std::vector<std::pair<uint32_t, uint32_t>> merges;
  bool ignore_merges = false;
  bool add_dummy_prefix = false;
  bool byte_fallback = false;
  bool remove_extra_whitespaces = false;
  int32_t bos = -1, eos = -1, unk = -1;
};

class Built {
 public:
  explicit Built(const TableSpec& spec) {
    std::vector<uint8_t> bytes, attrs;
    std::vector<uint32_t> offsets{0}, merges;
    std::vector<float> scores;
    for (const auto& p : spec.pieces) {
      bytes.insert(bytes.end(), p.bytes.begin(), p.bytes.end());
      offsets.push_back(static_cast<uint32_t>(bytes.size()));
      attrs.push_back(static_cast<uint8_t>(p.attr));
      scores.push_back(p.score);
    }
    for (const auto& m : spec.merges) {
      merges.push_back(m.first);
      merges.push_back(m.second);
    }
    auto fb = schema::CreateTokenizer(
        fbb_, spec.type, spec.pretokenizer, fbb_.CreateVector(bytes), fbb_.CreateVector(offsets),
        spec.type == schema::TokenizerType::SentencePieceBpe ? fbb_.CreateVector(scores) : 0, fbb_.CreateVector(attrs),
        fbb_.CreateVector(merges), spec.bos, spec.eos, -1, spec.unk, -1, spec.bos >= 0, spec.add_dummy_prefix,
        spec.byte_fallback, spec.ignore_merges, 0, spec.remove_extra_whitespaces);
    fbb_.Finish(fb);
    table_ = flatbuffers::GetRoot<schema::Tokenizer>(fbb_.GetBufferPointer());
    memory_.resize(Tokenizer::required_arena_bytes(table_));
    ArenaAllocator arena(memory_.data(), memory_.size());
    auto t = Tokenizer::create(table_, arena);
    ok_ = t.ok();
    if (ok_) tokenizer_ = std::move(t).value();
  }
  bool ok() const { return ok_; }
  Tokenizer& tok() { return tokenizer_; }
  const schema::Tokenizer* table() const { return table_; }

  std::vector<int32_t> encode(const std::string& text, bool parse_special = false) {
    int32_t out[256];
    auto n = tokenizer_.encode(text.data(), text.size(), false, parse_special, out, 256);
    EXPECT_TRUE(n.ok()) << last_error_message();
    return n.ok() ? std::vector<int32_t>(out, out + *n) : std::vector<int32_t>{};
  }
  std::string decode(const std::vector<int32_t>& ids) {
    TokenDecoder d(tokenizer_);
    std::string s;
    char buf[4096];
    for (int32_t id : ids) {
      auto n = d.push(id, buf, sizeof buf);
      EXPECT_TRUE(n.ok());
      if (n.ok()) s.append(buf, *n);
    }
    auto n = d.flush(buf, sizeof buf);
    if (n.ok()) s.append(buf, *n);
    return s;
  }

 private:
  flatbuffers::FlatBufferBuilder fbb_;
  const schema::Tokenizer* table_ = nullptr;
  std::vector<uint8_t> memory_;
  Tokenizer tokenizer_;
  bool ok_ = false;
};

// Byte-level BPE: ids 0..255 are the bytes, then merged pieces.
TableSpec byte_level() {
  TableSpec s;
  for (int b = 0; b < 256; ++b) s.pieces.push_back({std::string(1, static_cast<char>(b))});
  s.pieces.push_back({"ab"});                                   // 256
  s.pieces.push_back({"abc"});                                  // 257
  s.pieces.push_back({"bc"});                                   // 258
  s.pieces.push_back({"aa"});                                   // 259
  s.pieces.push_back({"aaaa"});                                 // 260
  s.pieces.push_back({"xyz"});                                  // 261: in the vocabulary, no merges make it
  s.pieces.push_back({"<|end|>", schema::TokenAttr::Control});  // 262
  s.merges = {{'a', 'b'}, {256, 'c'}, {'b', 'c'}, {'a', 'a'}, {259, 259}};
  s.eos = 262;
  return s;
}

TEST(ByteLevelBpe, MergesByRankLeftmostFirst) {
  Built t(byte_level());
  ASSERT_TRUE(t.ok()) << last_error_message();
  // a b c: (a,b) rank 0 beats (b,c) rank 2; then (ab,c) rank 1.
  EXPECT_EQ(t.encode("abc"), (std::vector<int32_t>{257}));
  // b c a b: (a,b) first, then (b,c); "c"+"ab" is no merge.
  EXPECT_EQ(t.encode("bcab"), (std::vector<int32_t>{258, 256}));
  // Equal ranks merge leftmost first: aa a, then aa aa -> aaaa.
  EXPECT_EQ(t.encode("aaa"), (std::vector<int32_t>{259, 'a'}));
  EXPECT_EQ(t.encode("aaaa"), (std::vector<int32_t>{260}));
  EXPECT_EQ(t.encode("aaaaa"), (std::vector<int32_t>{260, 'a'}));
  // The pre-tokenizer splits " ab" off, and no merge involves the space.
  EXPECT_EQ(t.encode("ab ab"), (std::vector<int32_t>{256, ' ', 256}));
  EXPECT_EQ(t.encode("12345"), (std::vector<int32_t>{'1', '2', '3', '4', '5'}));
  EXPECT_EQ(t.decode({257, ' ', 260}), "abc aaaa");
}

TEST(ByteLevelBpe, IgnoreMergesTakesWholePreTokens) {
  TableSpec spec = byte_level();
  Built plain(spec);
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain.encode("xyz"), (std::vector<int32_t>{'x', 'y', 'z'}));
  spec.ignore_merges = true;
  Built whole(spec);
  ASSERT_TRUE(whole.ok());
  EXPECT_EQ(whole.encode("xyz"), (std::vector<int32_t>{261}));
  EXPECT_EQ(whole.encode("xyzx"), (std::vector<int32_t>{'x', 'y', 'z', 'x'}));
}

TEST(ByteLevelBpe, SpecialsInvalidBytesNul) {
  Built t(byte_level());
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t.encode("ab<|end|>", true), (std::vector<int32_t>{256, 262}));
  EXPECT_EQ(t.encode("<|end|>", false).size(), 7u);
  EXPECT_EQ(t.decode({256, 262}), "ab");  // control tokens decode to nothing
  // 0xFF is replaced by U+FFFD (EF BF BD); NUL is a byte like any other.
  EXPECT_EQ(t.encode("a\xFF"), (std::vector<int32_t>{'a', 0xEF, 0xBF, 0xBD}));
  EXPECT_EQ(t.encode(std::string("a\0b", 3)), (std::vector<int32_t>{'a', 0, 'b'}));
  EXPECT_TRUE(t.encode("").empty());
  // A two-byte character split over two byte tokens comes out once, when complete.
  TokenDecoder d(t.tok());
  char buf[64];
  auto first = d.push(0xC3, buf, sizeof buf);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(*first, 0u);
  EXPECT_EQ(d.push(0xA9, buf, 1).error(), Error::OutOfRange);  // needs 2 bytes; nothing consumed
  auto second = d.push(0xA9, buf, 2);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(std::string(buf, *second), "\xC3\xA9");
  // An exact-size buffer is enough.
  auto abc = d.push(257, buf, 3);
  ASSERT_TRUE(abc.ok());
  EXPECT_EQ(std::string(buf, *abc), "abc");
}

TEST(ByteLevelBpe, ScratchAndCapacityErrors) {
  Built t(byte_level());
  ASSERT_TRUE(t.ok());
  const std::string text = "abc abc abc";
  int32_t out[2];
  size_t needed = 0;
  auto r = t.tok().encode(text.data(), text.size(), false, false, out, 2, &needed);
  EXPECT_EQ(r.error(), Error::OutOfRange);
  EXPECT_EQ(needed, 5u);  // "abc", " " "abc", " " "abc": no merge joins the space
  // A caller scratch too small for even one pre-token.
  uint8_t tiny[64];
  int32_t big[16];
  EXPECT_EQ(t.tok().encode(text.data(), text.size(), false, false, big, 16, nullptr, tiny, sizeof tiny).error(),
            Error::BudgetTooSmall);
  std::vector<uint8_t> enough(t.tok().encode_scratch_bytes(text.size()));
  auto ok = t.tok().encode(text.data(), text.size(), false, false, big, 16, nullptr, enough.data(), enough.size());
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(std::vector<int32_t>(big, big + *ok), (std::vector<int32_t>{257, ' ', 257, ' ', 257}));
}

TEST(ByteLevelBpe, RejectsInconsistentTables) {
  TableSpec spec = byte_level();
  spec.pieces.erase(spec.pieces.begin() + 'q');  // byte 'q' has no piece any more
  spec.merges.clear();
  Built missing(spec);
  EXPECT_FALSE(missing.ok());
  EXPECT_EQ(last_error_code(), Error::InvalidBundle);
  spec = byte_level();
  spec.merges.push_back({'x', 'q'});  // "xq" is not in the vocabulary
  Built bad_merge(spec);
  EXPECT_FALSE(bad_merge.ok());
  spec = byte_level();
  spec.type = schema::TokenizerType::Unknown;
  Built unknown(spec);
  EXPECT_FALSE(unknown.ok());
  EXPECT_EQ(last_error_code(), Error::NotSupported);
}

// SentencePiece BPE: <unk>, <s>, </s>, 256 byte pieces, then scored pieces.
TableSpec sentencepiece(bool byte_fallback) {
  TableSpec s;
  s.type = schema::TokenizerType::SentencePieceBpe;
  s.pretokenizer = schema::PreTokenizer::None;
  s.pieces.push_back({"<unk>", schema::TokenAttr::Unknown});
  s.pieces.push_back({"<s>", schema::TokenAttr::Control});
  s.pieces.push_back({"</s>", schema::TokenAttr::Control});
  static const char kHex[] = "0123456789ABCDEF";
  for (int b = 0; b < 256; ++b) {
    s.pieces.push_back({std::string("<0x") + kHex[b >> 4] + kHex[b & 15] + ">", schema::TokenAttr::Byte});
  }
  s.pieces.push_back({"\xE2\x96\x81", schema::TokenAttr::Normal, -1.0f});  // 259 ▁
  s.pieces.push_back({"a", schema::TokenAttr::Normal, -1.5f});             // 260
  s.pieces.push_back({"b", schema::TokenAttr::Normal, -1.6f});             // 261
  s.pieces.push_back(
      {"\xE2\x96\x81"
       "a",
       schema::TokenAttr::Normal, -2.0f});                       // 262 ▁a
  s.pieces.push_back({"ab", schema::TokenAttr::Normal, -3.0f});  // 263
  s.pieces.push_back(
      {"\xE2\x96\x81"
       "ab",
       schema::TokenAttr::Normal, -0.5f});                                             // 264 ▁ab
  s.pieces.push_back({"\xE2\x96\x81\xE2\x96\x81", schema::TokenAttr::Normal, -4.0f});  // 265 ▁▁
  s.add_dummy_prefix = true;
  s.byte_fallback = byte_fallback;
  s.bos = 1;
  s.eos = 2;
  s.unk = 0;
  return s;
}

TEST(SentencePieceBpe, MergesByScore) {
  Built t(sentencepiece(true));
  ASSERT_TRUE(t.ok()) << last_error_message();
  // "▁ab": (▁,a) -2.0 beats (a,b) -3.0; then (▁a,b) makes ▁ab.
  EXPECT_EQ(t.encode("ab"), (std::vector<int32_t>{264}));
  // "▁b▁a": only (▁,a) is a piece.
  EXPECT_EQ(t.encode("b a"), (std::vector<int32_t>{259, 261, 262}));
  // "▁▁a": (▁,▁) -4.0 loses to (▁,a) -2.0 at the right.
  EXPECT_EQ(t.encode(" a"), (std::vector<int32_t>{259, 262}));
  EXPECT_EQ(t.decode({264}), "ab");  // dummy-prefix space stripped
  EXPECT_EQ(t.decode({259, 261, 262}), "b a");
  EXPECT_EQ(t.decode({1, 264, 2}), "ab");  // controls skipped, first piece still stripped
}

TEST(SentencePieceBpe, ByteFallbackAndUnknown) {
  Built fallback(sentencepiece(true));
  ASSERT_TRUE(fallback.ok());
  // 'c' is no piece: <0x63> is id 3 + 0x63.
  EXPECT_EQ(fallback.encode("ac"), (std::vector<int32_t>{262, 3 + 0x63}));
  EXPECT_EQ(fallback.encode(std::string("a\0", 2)), (std::vector<int32_t>{262, 3}));
  // An invalid byte is U+FFFD, which falls back to its three bytes.
  EXPECT_EQ(fallback.encode("a\xFF"), (std::vector<int32_t>{262, 3 + 0xEF, 3 + 0xBF, 3 + 0xBD}));
  EXPECT_EQ(fallback.decode({262, 3 + 0xC3, 3 + 0xA9}), "a\xC3\xA9");
  Built unk(sentencepiece(false));
  ASSERT_TRUE(unk.ok());
  // A run of unknown characters is one <unk>, as libsentencepiece does.
  EXPECT_EQ(unk.encode("acc"), (std::vector<int32_t>{262, 0}));
  EXPECT_EQ(unk.decode({262, 0}), "a \xE2\x81\x87 ");
}

TEST(SentencePieceBpe, RemoveExtraWhitespaces) {
  TableSpec spec = sentencepiece(true);
  spec.remove_extra_whitespaces = true;
  Built t(spec);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t.encode("  a   b  "), (std::vector<int32_t>{262, 259, 261}));  // "▁a▁b"
  EXPECT_TRUE(t.encode("   ").empty());
  EXPECT_EQ(t.decode({259, 259, 262}), "a");  // every leading space goes
}

}  // namespace
}  // namespace tern
