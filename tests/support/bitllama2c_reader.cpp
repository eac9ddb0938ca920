#include "tests/support/bitllama2c_reader.h"

#include <gtest/gtest.h>

#include <cstring>

#include "kernels/ternary_layout.h"
#include "tests/support/test_util.h"

namespace tern::testing {

namespace {

struct Cursor {
  const std::vector<uint8_t>& bytes;
  size_t at;
  bool ok = true;
  template <typename T>
  T read() {
    T v{};
    if (at + sizeof(T) > bytes.size()) {
      ok = false;
      return v;
    }
    std::memcpy(&v, bytes.data() + at, sizeof(T));
    at += sizeof(T);
    return v;
  }
};

}  // namespace

std::unique_ptr<Bitllama2cWeights> read_bitllama2c(const std::string& path) {
  const std::vector<uint8_t> bytes = read_file_bytes(path);
  if (bytes.size() < 256) {
    ADD_FAILURE() << "cannot read " << path;
    return nullptr;
  }
  auto out = std::make_unique<Bitllama2cWeights>();
  Cursor cur{bytes, 0};
  const uint32_t magic = cur.read<uint32_t>();
  const int32_t version = cur.read<int32_t>();
  if (magic != 0x616b3432u || version != 1) {
    ADD_FAILURE() << path << ": bad magic/version";
    return nullptr;
  }
  int32_t h[7];
  for (int32_t& v : h) v = cur.read<int32_t>();
  const uint8_t shared = cur.read<uint8_t>();
  if (shared == 0) {
    ADD_FAILURE() << path << ": separate classifier not handled by the test reader";
    return nullptr;
  }
  ModelConfig& c = out->config;
  c.family = ModelFamily::Bitllama2c;
  c.hidden = static_cast<uint32_t>(h[0]);
  c.ffn_hidden = static_cast<uint32_t>(h[1]);
  c.layers = static_cast<uint32_t>(h[2]);
  c.heads = static_cast<uint32_t>(h[3]);
  c.kv_heads = static_cast<uint32_t>(h[4]);
  c.vocab = static_cast<uint32_t>(h[5]);
  c.max_context = static_cast<uint32_t>(h[6]);
  c.head_dim = c.hidden / c.heads;
  c.rope_theta = 10000.0f;
  c.rope_style = RopeStyle::AdjacentPairs;
  c.norm_eps = 1e-5f;
  c.activation = Activation::Silu;
  c.has_sub_norms = false;
  c.tied_embeddings = true;
  c.bos_id = 1;
  c.eos_id = 2;

  cur.at = 256;
  out->final_norm.resize(c.hidden);
  for (float& v : out->final_norm) v = cur.read<float>();
  out->embeddings.resize(static_cast<size_t>(c.vocab) * c.hidden);
  for (float& v : out->embeddings) v = cur.read<float>();

  const size_t kvd = static_cast<size_t>(c.kv_heads) * c.head_dim;
  struct Kind {
    size_t rows, cols;
    TernaryMatrix LayerWeights::*slot;
  };
  const Kind kinds[] = {{c.hidden, c.hidden, &LayerWeights::wq},
                        {kvd, c.hidden, &LayerWeights::wk},
                        {kvd, c.hidden, &LayerWeights::wv},
                        {c.hidden, c.hidden, &LayerWeights::wo},
                        {c.ffn_hidden, c.hidden, &LayerWeights::w_gate},  // w1
                        {c.hidden, c.ffn_hidden, &LayerWeights::w_down},  // w2
                        {c.ffn_hidden, c.hidden, &LayerWeights::w_up}};   // w3
  out->layers.resize(c.layers);
  out->packed.reserve(7 * c.layers);
  for (const Kind& k : kinds) {
    for (uint32_t l = 0; l < c.layers; ++l) {
      const float scale = cur.read<float>();
      const size_t n = k.rows * k.cols;
      std::vector<int8_t> codes(n);
      if (cur.at + n / 4 > bytes.size()) {
        ADD_FAILURE() << path << ": truncated";
        return nullptr;
      }
      for (size_t j = 0; j < n; ++j) {
        const uint8_t bits = (bytes[cur.at + j / 4] >> (6 - 2 * (j % 4))) & 3u;
        codes[j] = bits == 1 ? 1 : (bits == 3 ? -1 : 0);
      }
      cur.at += n / 4;
      std::vector<uint8_t> packed(ternary_packed_size(ternary_default_layout(), k.rows, k.cols));
      EXPECT_EQ(ternary_pack(ternary_default_layout(), codes.data(), k.rows, k.cols, packed.data(), packed.size()),
                Error::Ok);
      out->packed.push_back(std::move(packed));
      TernaryMatrix m;
      m.layout = ternary_default_layout();
      m.data = out->packed.back().data();
      m.size_bytes = out->packed.back().size();
      m.rows = k.rows;
      m.cols = k.cols;
      m.scale = scale;
      out->layers[l].*(k.slot) = m;
    }
  }
  if (!cur.ok) {
    ADD_FAILURE() << path << ": truncated";
    return nullptr;
  }
  ModelWeights& w = out->weights;
  w.tok_embeddings.type = DenseType::F32;
  w.tok_embeddings.data = out->embeddings.data();
  w.tok_embeddings.size_bytes = out->embeddings.size() * sizeof(float);
  w.tok_embeddings.rows = c.vocab;
  w.tok_embeddings.cols = c.hidden;
  w.lm_head = w.tok_embeddings;
  w.final_norm = VectorView{DenseType::F32, out->final_norm.data(), out->final_norm.size()};
  w.layers = out->layers.data();
  out->bytes = bytes.size();
  return out;
}

}  // namespace tern::testing
