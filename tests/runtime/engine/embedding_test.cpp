// The BitNet embedding families end to end: tiny random-weight Qwen3 and Gemma3 models
// (gen_models.py, Hugging Face and I2_S GGUF layouts) converted by tern-convert, embedded by
// the runtime with its own tokenizer, against an independent float64 reference
// (reference.py) fed by the Hugging Face tokenizers oracle (hf_oracle.mjs). Run once per
// ISA level (TERN_ISA), natively and under qemu.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kernels/isa.h"
#include "runtime/engine/model.h"
#include "runtime/engine/session.h"
#include "tests/support/test_util.h"

namespace tern {
namespace {

std::string embedding_dir() {
  const char* env = std::getenv("TERN_EMBEDDING_TEST_DIR");
  return env != nullptr && *env != '\0' ? env : TERN_EMBEDDING_TEST_DIR_DEFAULT;
}

struct Case {
  std::string model, text, prompt;
  std::vector<int32_t> ids;
  std::vector<double> embedding;
};

const std::vector<Case>& reference() {
  static const std::vector<Case> cases = [] {
    std::vector<Case> out;
    std::ifstream in(embedding_dir() + "/reference.jsonl");
    std::string line;
    while (std::getline(in, line)) {
      const nlohmann::json j = nlohmann::json::parse(line);
      out.push_back({j["model"], j["text"], j["prompt"], j["ids"].get<std::vector<int32_t>>(),
                     j["embedding"].get<std::vector<double>>()});
    }
    return out;
  }();
  return cases;
}

std::vector<const Case*> cases_of(const std::string& model) {
  std::vector<const Case*> out;
  for (const Case& c : reference()) {
    if (c.model == model) out.push_back(&c);
  }
  return out;
}

double cosine(const float* a, const std::vector<double>& b, size_t n) {
  double ab = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < n; ++i) {
    ab += a[i] * b[i];
    aa += static_cast<double>(a[i]) * a[i];
    bb += b[i] * b[i];
  }
  return ab / std::sqrt(aa * bb);
}

// The level TERN_ISA names must be one this CPU runs (else the entry is skipped).
bool isa_runs_here() {
  const char* name = std::getenv("TERN_ISA");
  if (name == nullptr || *name == '\0') return true;
  auto isa = parse_isa(name);
  return isa.ok() && isa_supported(*isa, cpu_features());
}

struct Loaded {
  std::unique_ptr<Model> model;
  Session* session = nullptr;
};

Loaded load_new(const std::string& bundle, uint32_t context, uint32_t batch) {
  Loaded l;
  ModelParams params;
  params.context_tokens = context;
  params.batch_tokens = batch;
  params.threads = 2;
  auto model = Model::load((embedding_dir() + "/" + bundle).c_str(), params);
  EXPECT_TRUE(model.ok()) << bundle << ": " << last_error_message();
  if (!model.ok()) return l;
  l.model = std::move(model).value();
  auto session = l.model->create_session(SamplerParams{});
  EXPECT_TRUE(session.ok()) << last_error_message();
  if (session.ok()) l.session = *session;
  return l;
}

// Loaded once per process and configuration (Gemma's 262k-piece tokenizer takes a moment).
Loaded& load(const std::string& bundle, uint32_t context = 0, uint32_t batch = 32) {
  static std::map<std::string, Loaded> loaded;
  const std::string key = bundle + "/" + std::to_string(context) + "/" + std::to_string(batch);
  auto it = loaded.find(key);
  if (it == loaded.end() || it->second.session == nullptr) {
    it = loaded.insert_or_assign(key, load_new(bundle, context, batch)).first;
  }
  return it->second;
}

// Embeds `cases` in one call, each with its own prompt given as an explicit instruction.
std::vector<float> embed_all(Session& s, const std::vector<const Case*>& cases, const EmbedOptions& base,
                             EmbedStats* stats = nullptr) {
  const uint32_t dims = base.dimensions ? base.dimensions : s.model().config().hidden;
  std::vector<float> out(cases.size() * dims);
  // Texts sharing a prompt go in one call (the prompt is per call).
  std::map<std::string, std::vector<size_t>> by_prompt;
  for (size_t i = 0; i < cases.size(); ++i) by_prompt[cases[i]->prompt].push_back(i);
  for (const auto& [prompt, idx] : by_prompt) {
    std::vector<const char*> texts;
    std::vector<size_t> sizes;
    for (size_t i : idx) {
      texts.push_back(cases[i]->text.data());
      sizes.push_back(cases[i]->text.size());
    }
    std::vector<float> part(idx.size() * dims);
    EmbedOptions o = base;
    o.instruction = prompt.c_str();
    EXPECT_EQ(
        s.embed(texts.data(), sizes.data(), texts.size(), o, part.data(), part.size() * sizeof(float), nullptr, stats),
        Error::Ok)
        << last_error_message();
    for (size_t k = 0; k < idx.size(); ++k) std::copy_n(&part[k * dims], dims, &out[idx[k] * dims]);
  }
  return out;
}

class Embedding : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (!isa_runs_here()) GTEST_SKIP() << "this CPU does not run TERN_ISA=" << std::getenv("TERN_ISA");
    ASSERT_TRUE(testing::file_exists(embedding_dir() + "/reference.jsonl"))
        << embedding_dir() << "/reference.jsonl is missing (ctest makes it first, in embedding_make_models)";
  }
  // "qwen3-gguf" reads the GGUF conversion of the "qwen3" model.
  std::string model() const { return GetParam().substr(0, GetParam().find("-gguf")); }
  std::string bundle() const { return GetParam() + ".tern"; }
};

TEST_P(Embedding, TokensEqualTheOracle) {
  Loaded& l = load(bundle());
  ASSERT_NE(l.session, nullptr);
  const auto cases = cases_of(model());
  ASSERT_GE(cases.size(), 20u);
  Tokenizer* tok = l.model->tokenizer();
  const ModelConfig& c = l.model->config();
  for (const Case* k : cases) {
    const std::string text = k->prompt + k->text;
    std::vector<int32_t> ids(4 * text.size() + 8);
    auto n = tok->encode(text.data(), text.size(), tok->add_bos_default(), true, ids.data(), ids.size());
    ASSERT_TRUE(n.ok()) << last_error_message();
    ids.resize(*n);
    if (c.embedding_append_eos) ids.push_back(tok->eos_id());
    EXPECT_EQ(ids, k->ids) << GetParam() << ": " << text;
  }
}

TEST_P(Embedding, MatchesTheReference) {
  Loaded& l = load(bundle());
  ASSERT_NE(l.session, nullptr);
  const auto cases = cases_of(model());
  const uint32_t hidden = l.model->config().hidden;
  EmbedStats stats;
  const std::vector<float> got = embed_all(*l.session, cases, EmbedOptions{}, &stats);
  double worst = 1.0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const double cos = cosine(&got[i * hidden], cases[i]->embedding, hidden);
    worst = std::min(worst, cos);
    EXPECT_GE(cos, 0.999) << GetParam() << " text " << i << ": " << cases[i]->text;
    double norm = 0;
    for (uint32_t d = 0; d < hidden; ++d) norm += static_cast<double>(got[i * hidden + d]) * got[i * hidden + d];
    EXPECT_NEAR(norm, 1.0, 1e-5);
  }
  std::printf("%s (%s): worst cosine %.6f over %zu texts, %llu tokens in %u batches\n", GetParam().c_str(),
              to_string(active_isa_level()), worst, cases.size(), static_cast<unsigned long long>(stats.tokens),
              stats.batches);
}

// One text per call, and many texts through a small context and batch (texts span batches,
// share them, and the cache starts over): the same vectors as all at once.
TEST_P(Embedding, BatchingDoesNotChangeVectors) {
  const auto cases = cases_of(model());
  Loaded& all = load(bundle());
  Loaded& small = load(bundle(), 160, 16);
  ASSERT_NE(all.session, nullptr);
  ASSERT_NE(small.session, nullptr);
  const uint32_t hidden = all.model->config().hidden;
  const std::vector<float> together = embed_all(*all.session, cases, EmbedOptions{});
  EmbedStats stats;
  const std::vector<float> packed = embed_all(*small.session, cases, EmbedOptions{}, &stats);
  EXPECT_GE(stats.batches, 3u);  // 16-token batches over ~50 tokens, the 160-token cache filled and started over
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::vector<const Case*> one = {cases[i]};
    const std::vector<float> alone = embed_all(*all.session, one, EmbedOptions{});
    for (uint32_t d = 0; d < hidden; ++d) {
      EXPECT_NEAR(alone[d], together[i * hidden + d], 1e-6) << "text " << i;
      EXPECT_NEAR(packed[i * hidden + d], together[i * hidden + d], 1e-6) << "text " << i;
    }
  }
}

// The first D dimensions, re-normalized; int8 codes and sign bits of the reference's vector.
TEST_P(Embedding, TruncatedAndQuantizedOutputs) {
  Loaded& l = load(bundle());
  ASSERT_NE(l.session, nullptr);
  const auto cases = cases_of(model());
  const uint32_t hidden = l.model->config().hidden, dims = 24;
  EmbedOptions o;
  o.dimensions = dims;
  const std::vector<float> cut = embed_all(*l.session, cases, o);
  for (size_t i = 0; i < cases.size(); ++i) {
    std::vector<double> ref(cases[i]->embedding.begin(), cases[i]->embedding.begin() + dims);
    double norm = 0;
    for (double v : ref) norm += v * v;
    for (double& v : ref) v /= std::sqrt(norm);
    EXPECT_GE(cosine(&cut[i * dims], ref, dims), 0.999) << "text " << i;
  }
  // int8 and bits: exactly the formats of the float vector, and close to the reference's.
  const std::vector<float> full = embed_all(*l.session, cases, EmbedOptions{});
  for (EmbedFormat format : {EmbedFormat::Int8, EmbedFormat::Binary}) {
    for (size_t i = 0; i < cases.size(); ++i) {
      const char* text = cases[i]->text.c_str();
      EmbedOptions q;
      q.format = format;
      q.instruction = cases[i]->prompt.c_str();
      std::vector<uint8_t> out(embed_row_bytes(format, hidden));
      float scale = 0;
      ASSERT_EQ(l.session->embed(&text, nullptr, 1, q, out.data(), out.size(), &scale, nullptr), Error::Ok)
          << last_error_message();
      const float* v = &full[i * hidden];
      const std::vector<double>& ref = cases[i]->embedding;
      float max_abs = 0;
      for (uint32_t d = 0; d < hidden; ++d) max_abs = std::max(max_abs, std::fabs(v[d]));
      std::vector<float> dequantized(hidden);
      for (uint32_t d = 0; d < hidden; ++d) {
        if (format == EmbedFormat::Int8) {
          EXPECT_EQ(static_cast<int8_t>(out[d]), static_cast<int8_t>(std::nearbyint(v[d] / (max_abs / 127.0f))))
              << "text " << i << " dim " << d;
          dequantized[d] = static_cast<int8_t>(out[d]) * scale;
        } else {
          const bool bit = (out[d / 8] >> (7 - d % 8)) & 1;
          EXPECT_EQ(bit, v[d] > 0) << "text " << i << " dim " << d;
          if (std::fabs(ref[d]) > 0.02) {
            EXPECT_EQ(bit, ref[d] > 0) << "text " << i << " dim " << d;
          }
        }
      }
      if (format == EmbedFormat::Int8) {
        EXPECT_FLOAT_EQ(scale, max_abs / 127.0f);
        EXPECT_GE(cosine(dequantized.data(), ref, hidden), 0.998) << "text " << i;
      }
    }
  }
}

// The bundle's stored query prompt gives the same vector as the same text given explicitly.
TEST_P(Embedding, StoredPromptsAndErrors) {
  Loaded& l = load(bundle(), 64);
  ASSERT_NE(l.session, nullptr);
  const uint32_t hidden = l.model->config().hidden;
  const Case* query = nullptr;
  for (const Case* c : cases_of(model())) {
    if (!c->prompt.empty()) query = c;
  }
  ASSERT_NE(query, nullptr);
  const char* text = query->text.c_str();
  std::vector<float> named(hidden), explicit_(hidden);
  EmbedOptions o;
  o.prompt_name = "query";
  if (GetParam().find("gguf") != std::string::npos) {  // bitnet.cpp's GGUFs carry no prompts
    EXPECT_EQ(l.session->embed(&text, nullptr, 1, o, named.data(), named.size() * 4, nullptr, nullptr),
              Error::InvalidArgument);
    EXPECT_NE(std::string(last_error_message()).find("has none"), std::string::npos) << last_error_message();
    o.prompt_name = nullptr;
  }
  ASSERT_EQ(l.session->embed(&text, nullptr, 1, o, named.data(), named.size() * 4, nullptr, nullptr), Error::Ok)
      << last_error_message();
  const bool stored = GetParam().find("gguf") == std::string::npos;
  o.prompt_name = nullptr;
  o.instruction = query->prompt.c_str();
  ASSERT_EQ(l.session->embed(&text, nullptr, 1, o, explicit_.data(), explicit_.size() * 4, nullptr, nullptr),
            Error::Ok);
  if (stored) {
    EXPECT_EQ(named, explicit_);
  }
  named = explicit_;
  EXPECT_GE(cosine(named.data(), query->embedding, hidden), 0.999);

  o.instruction = nullptr;
  o.prompt_name = "passage";
  EXPECT_EQ(l.session->embed(&text, nullptr, 1, o, named.data(), named.size() * 4, nullptr, nullptr),
            Error::InvalidArgument);
  EXPECT_NE(std::string(last_error_message()).find(stored ? "'query'" : "has none"), std::string::npos)
      << last_error_message();
  o.prompt_name = "";
  EXPECT_EQ(l.session->embed(&text, nullptr, 1, o, named.data(), 8, nullptr, nullptr), Error::OutOfRange);
  o.dimensions = hidden + 1;
  EXPECT_EQ(l.session->embed(&text, nullptr, 1, o, named.data(), named.size() * 4, nullptr, nullptr),
            Error::InvalidArgument);

  // Longer than the 64-token context: refused, or cut to its first tokens when asked.
  std::string long_text;
  for (int i = 0; i < 40; ++i) long_text += "many words here ";
  const char* too_long = long_text.c_str();
  EmbedOptions plain;
  EXPECT_EQ(l.session->embed(&too_long, nullptr, 1, plain, named.data(), named.size() * 4, nullptr, nullptr),
            Error::PromptTooLong);
  plain.truncate = true;
  EmbedStats stats;
  ASSERT_EQ(l.session->embed(&too_long, nullptr, 1, plain, named.data(), named.size() * 4, nullptr, &stats), Error::Ok)
      << last_error_message();
  EXPECT_EQ(stats.truncated, 1u);
  EXPECT_EQ(stats.tokens, 64u);
  // A generator's calls are refused on an embedding model.
  const int32_t token = 1;
  EXPECT_EQ(l.session->prefill(&token, 1), Error::NotSupported);
}

// Token-id inputs: a text's ids (without the specials, as tern_tokenize gives them with
// add_bos = 0, or with them, as the Hugging Face oracle gives them) embed to the text's vector
// exactly; a prompt goes in front as its own tokens, after the BOS.
TEST_P(Embedding, TokenIdInputs) {
  Loaded& l = load(bundle(), 64);
  ASSERT_NE(l.session, nullptr);
  Model& net = *l.model;
  const uint32_t hidden = net.config().hidden;
  std::vector<const Case*> plain;
  for (const Case* c : cases_of(model())) {
    if (c->prompt.empty() && c->ids.size() < 60) plain.push_back(c);
  }
  ASSERT_GE(plain.size(), 3u);
  EmbedOptions none;
  none.prompt_name = "";
  std::vector<std::vector<int32_t>> bare, oracle;
  std::vector<const char*> texts;
  for (const Case* c : plain) {
    std::vector<int32_t> ids(256);
    auto n = net.encode(c->text.data(), c->text.size(), false, true, ids.data(), ids.size(), nullptr);
    ASSERT_TRUE(n.ok()) << last_error_message();
    ids.resize(*n);
    bare.push_back(ids);
    oracle.push_back(c->ids);
    texts.push_back(c->text.c_str());
  }
  auto embed_ids = [&](const std::vector<std::vector<int32_t>>& lists, const EmbedOptions& o, std::vector<float>* out) {
    std::vector<const int32_t*> ptrs;
    std::vector<size_t> counts;
    for (const auto& ids : lists) {
      ptrs.push_back(ids.data());
      counts.push_back(ids.size());
    }
    out->assign(lists.size() * hidden, 0.0f);
    return l.session->embed(EmbedInputs::of_tokens(ptrs.data(), counts.data(), lists.size()), o, out->data(),
                            out->size() * sizeof(float), nullptr, nullptr);
  };
  std::vector<float> from_text(plain.size() * hidden), from_bare, from_oracle;
  ASSERT_EQ(l.session->embed(texts.data(), nullptr, texts.size(), none, from_text.data(),
                             from_text.size() * sizeof(float), nullptr, nullptr),
            Error::Ok)
      << last_error_message();
  ASSERT_EQ(embed_ids(bare, none, &from_bare), Error::Ok) << last_error_message();
  ASSERT_EQ(embed_ids(oracle, none, &from_oracle), Error::Ok) << last_error_message();
  EXPECT_EQ(from_bare, from_text);
  EXPECT_EQ(from_oracle, from_text);
  for (size_t i = 0; i < plain.size(); ++i) {
    EXPECT_GE(cosine(from_oracle.data() + i * hidden, plain[i]->embedding, hidden), 0.999) << plain[i]->text;
  }

  // A prompt: its own tokens between the BOS and the ids.
  const char* instruction = "Instruct: find the answer\nQuery:";
  std::vector<int32_t> prompt_ids(64);
  auto np =
      net.encode(instruction, std::strlen(instruction), false, true, prompt_ids.data(), prompt_ids.size(), nullptr);
  ASSERT_TRUE(np.ok());
  prompt_ids.resize(*np);
  std::vector<std::vector<int32_t>> joined;
  for (const auto& ids : bare) {
    joined.push_back(prompt_ids);
    joined.back().insert(joined.back().end(), ids.begin(), ids.end());
  }
  EmbedOptions with_prompt;
  with_prompt.instruction = instruction;
  std::vector<float> prompted, expected;
  ASSERT_EQ(embed_ids(bare, with_prompt, &prompted), Error::Ok) << last_error_message();
  ASSERT_EQ(embed_ids(joined, none, &expected), Error::Ok) << last_error_message();
  EXPECT_EQ(prompted, expected);
  EXPECT_NE(prompted, from_bare);

  // Ids outside the vocabulary, an empty input, and more ids than the context.
  std::vector<float> scratch;
  EXPECT_EQ(embed_ids({{1, static_cast<int32_t>(net.config().vocab)}}, none, &scratch), Error::InvalidToken);
  EXPECT_EQ(embed_ids({{1, -1}}, none, &scratch), Error::InvalidToken);
  EXPECT_EQ(embed_ids({{}}, none, &scratch), Error::InvalidArgument);
  const std::vector<int32_t> many(100, bare[0][0]);
  EXPECT_EQ(embed_ids({many}, none, &scratch), Error::PromptTooLong);
  EmbedOptions cut = none;
  cut.truncate = true;
  EmbedStats stats;
  std::vector<const int32_t*> one = {many.data()};
  const size_t count = many.size();
  scratch.assign(hidden, 0.0f);
  ASSERT_EQ(l.session->embed(EmbedInputs::of_tokens(one.data(), &count, 1), cut, scratch.data(),
                             scratch.size() * sizeof(float), nullptr, &stats),
            Error::Ok)
      << last_error_message();
  EXPECT_EQ(stats.truncated, 1u);
  EXPECT_EQ(stats.tokens, 64u);
}

INSTANTIATE_TEST_SUITE_P(Models, Embedding,
                         ::testing::Values("qwen3", "gemma3", "qwen3-mean", "qwen3-gguf", "gemma3-gguf"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& ch : n) ch = ch == '-' ? '_' : ch;
                           return n;
                         });

}  // namespace
}  // namespace tern
