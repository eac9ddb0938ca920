// tern-inspect: what is in a .tern bundle (config, tensors, tokenizer, KV profile, sizes).
#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <string>

#include "converter/writer/bundle_writer.h"
#include "runtime/model/bundle.h"
#include "runtime/model/model_family.h"
#include "schema/bundle_generated.h"

using namespace tern;

namespace {

const char* family_name(ModelFamily f) {
  const FamilyTraits* traits = family_traits(f);
  return traits != nullptr ? traits->name : "unknown";
}

const char* str(const flatbuffers::String* s) { return s ? s->c_str() : ""; }

std::string printable_piece(const schema::Tokenizer* t, uint32_t i) {
  const uint32_t a = t->piece_offsets()->Get(i), b = t->piece_offsets()->Get(i + 1);
  std::string out;
  for (uint32_t k = a; k < b; ++k) {
    const uint8_t ch = t->piece_bytes()->Get(k);
    if (ch >= 0x20 && ch < 0x7f) {
      out += static_cast<char>(ch);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", ch);
      out += buf;
    }
  }
  return out;
}

// The bytes of each kind of tensor, for the sizes at the end.
struct TensorTotals {
  uint64_t ternary_bytes = 0, ternary_weights = 0, dense_bytes = 0;
  std::string ternary_layouts;  // each layout the bundle uses, in order of first use
};

// Where the bundle came from and its model config.
void print_config(const std::string& path, const Bundle& b) {
  const schema::Bundle* root = b.root();
  const ModelConfig& c = b.config();
  std::printf("bundle     %s (format version %u, %zu bytes)\n", path.c_str(), b.format_version(), b.file_size());
  if (const auto* p = root->provenance()) {
    std::printf("source     %s  %s\n", str(p->source_format()), str(p->source_path()));
    std::printf("converter  tern %s, %s, %s\n", str(p->converter_version()), str(p->created_utc()), str(p->options()));
  }
  std::printf("\nconfig\n");
  std::printf("  family %s, activation %s, rope %s theta %g, norm eps %g\n", family_name(c.family),
              c.activation == Activation::Relu2 ? "relu2" : "silu",
              c.rope_style == RopeStyle::RotateHalf ? "rotate-half" : "adjacent-pairs",
              static_cast<double>(c.rope_theta), static_cast<double>(c.norm_eps));
  std::printf("  hidden %u, ffn %u, layers %u, heads %u, kv heads %u, head dim %u, vocab %u, context %u\n", c.hidden,
              c.ffn_hidden, c.layers, c.heads, c.kv_heads, c.head_dim, c.vocab, c.max_context);
  std::printf("  sub-norms %s, tied embeddings %s, bos %d, eos %d, eot %d\n", c.has_sub_norms ? "yes" : "no",
              c.tied_embeddings ? "yes" : "no", c.bos_id, c.eos_id, c.eot_id);
  const std::string chat = str(root->config()->chat_template());
  std::printf("  chat template: %s\n", chat.empty() ? "(none)" : (std::to_string(chat.size()) + " bytes").c_str());
}

// The per-tensor table (unless `no_tensors`); the totals either way.
TensorTotals print_tensors(const Bundle& b, bool no_tensors) {
  TensorTotals totals;
  const schema::Bundle* root = b.root();
  if (!no_tensors) {
    std::printf("\ntensors (%zu)\n  %-28s %-8s %-12s %-14s %12s %12s %10s\n", b.tensor_count(), "name", "type",
                "format", "shape", "offset", "bytes", "scale");
  }
  for (size_t i = 0; i < b.tensor_count(); ++i) {
    auto v = b.tensor_at(i);
    if (!v.ok()) continue;
    const schema::Tensor* t = root->tensors()->Get(static_cast<uint32_t>(i));
    uint64_t n = 1;
    std::string shape;
    for (uint32_t d = 0; d < v->ndim; ++d) {
      n *= v->shape[d];
      shape += (d ? "x" : "") + std::to_string(v->shape[d]);
    }
    uint64_t bytes = v->size_bytes;
    if (t->group_scales()) bytes += t->group_scales()->size();
    const bool ternary = v->type == TensorType::Ternary;
    std::string format = ternary ? to_string(v->layout) : to_string(v->dense_type);
    if (!ternary && v->group) format += "/g" + std::to_string(v->group);
    if (ternary) {
      const std::string layout = to_string(v->layout);
      if ((" " + totals.ternary_layouts + " ").find(" " + layout + " ") == std::string::npos) {
        totals.ternary_layouts += (totals.ternary_layouts.empty() ? "" : " ") + layout;
      }
      totals.ternary_bytes += bytes;
      totals.ternary_weights += n;
    } else {
      totals.dense_bytes += bytes;
    }
    if (!no_tensors) {
      char scale[32] = "";
      if (ternary) std::snprintf(scale, sizeof(scale), "%.6g", static_cast<double>(v->scale));
      std::printf("  %-28s %-8s %-12s %-14s %12llu %12llu %10s\n", v->name, ternary ? "ternary" : "dense",
                  format.c_str(), shape.c_str(), static_cast<unsigned long long>(t->data()->offset()),
                  static_cast<unsigned long long>(bytes), scale);
    }
  }
  return totals;
}

void print_tokenizer(const Bundle& b) {
  const schema::Tokenizer* tok = b.tokenizer();
  const uint32_t pieces = tok->piece_offsets() && tok->piece_offsets()->size() ? tok->piece_offsets()->size() - 1 : 0;
  std::printf("\ntokenizer\n");
  if (pieces == 0) {
    std::printf("  (none: this bundle cannot run)\n");
  } else {
    const char* types[] = {"unknown", "byte-level BPE", "SentencePiece BPE"};
    const unsigned type = static_cast<unsigned>(tok->type());
    std::printf("  %s, %u pieces, %u merges, pre-tokenizer %s\n", type < 3 ? types[type] : "?", pieces,
                tok->merges() ? tok->merges()->size() / 2 : 0,
                tok->pretokenizer() == schema::PreTokenizer::Llama3 ? "llama3" : "none");
    auto show = [&](const char* what, int32_t id) {
      if (id >= 0 && static_cast<uint32_t>(id) < pieces)
        std::printf("  %s %d '%s'\n", what, id, printable_piece(tok, id).c_str());
    };
    show("bos", tok->bos_id());
    show("eos", tok->eos_id());
    show("eot", tok->eot_id());
    show("unk", tok->unk_id());
    std::printf("  add_bos %s, add_dummy_prefix %s, byte_fallback %s\n", tok->add_bos() ? "yes" : "no",
                tok->add_dummy_prefix() ? "yes" : "no", tok->byte_fallback() ? "yes" : "no");
  }
}

void print_kv_profile(const Bundle& b) {
  const ModelConfig& c = b.config();
  std::printf("\nKV profile\n");
  if (const schema::KvProfile* kv = b.kv_profile()) {
    const char* classes[] = {"sink", "focused", "moderate", "mixed", "diffuse"};
    std::printf("  sink tokens %u, exact recent window %u, group %u, average %.2f bits\n  provenance: %s\n",
                kv->sink_tokens(), kv->recent_window(), kv->group_size(), static_cast<double>(kv->average_bits()),
                str(kv->provenance()));
    if (kv->heads()) {
      std::printf("  %5s %7s %9s %9s %-9s %5s %5s %4s\n", "layer", "kv head", "shannon", "renyi2", "class", "K bits",
                  "V bits", "sink");
      for (const auto* h : *kv->heads()) {
        const unsigned cls = static_cast<unsigned>(h->class_());
        std::printf("  %5u %7u %9.3f %9.3f %-9s %5u %5u %4s\n", h->layer(), h->kv_head(),
                    static_cast<double>(h->shannon_entropy()), static_cast<double>(h->renyi2_entropy()),
                    cls < 5 ? classes[cls] : "?", h->key_bits(), h->value_bits(), h->sink() ? "yes" : "");
      }
    }
    if (const auto* widths = kv->sensitivity_widths(); widths != nullptr && kv->heads()) {
      std::printf(
          "  sensitivity (mean KL x 1e-3 nats of the next-token distribution, that head alone quantized; "
          "%u positions)\n  %5s %7s",
          kv->sensitivity_tokens(), "layer", "kv head");
      for (uint8_t w : *widths) std::printf(" %7u-bit", w);
      std::printf("\n");
      for (const auto* h : *kv->heads()) {
        std::printf("  %5u %7u", h->layer(), h->kv_head());
        if (h->sensitivity())
          for (float s : *h->sensitivity()) std::printf(" %11.4f", static_cast<double>(s) * 1e3);
        std::printf("\n");
      }
    }
    if (const auto* allocations = kv->allocations()) {
      std::printf("  allocations (adaptive:B; K/V bits per head, layer-major, F = exact; value group %u)\n",
                  kv->value_group());
      for (const auto* a : *allocations) {
        std::string widths;
        const uint32_t n = a->key_bits() ? a->key_bits()->size() : 0;
        for (uint32_t i = 0; i < n; ++i) {
          if (i && c.kv_heads && i % c.kv_heads == 0) widths += ' ';
          const uint8_t k = a->key_bits()->Get(i);
          const uint8_t v = a->value_bits() && i < a->value_bits()->size() ? a->value_bits()->Get(i) : k;
          widths += k == 0 ? std::string("F") : std::to_string(k);
          if (v != k) widths += "/" + (v == 0 ? std::string("F") : std::to_string(v));
        }
        std::printf("  adaptive:%-5g %-12s %s\n", static_cast<double>(a->average_bits()), str(a->rule()),
                    widths.c_str());
      }
    }
  } else {
    std::printf("  (not calibrated)\n");
  }
}

void print_sizes(const Bundle& b, const TensorTotals& totals) {
  uint32_t fb_size;
  std::memcpy(&fb_size, b.data(), 4);
  std::printf(
      "\nsizes\n  header (FlatBuffer) %12u bytes\n  ternary             %12llu bytes (%.3f bits/weight, %s)\n"
      "  dense               %12llu bytes\n  file                %12zu bytes (%.1f MB)\n",
      fb_size + 4, static_cast<unsigned long long>(totals.ternary_bytes),
      totals.ternary_weights
          ? 8.0 * static_cast<double>(totals.ternary_bytes) / static_cast<double>(totals.ternary_weights)
          : 0.0,
      totals.ternary_layouts.empty() ? "no ternary tensors" : totals.ternary_layouts.c_str(),
      static_cast<unsigned long long>(totals.dense_bytes), b.file_size(), b.file_size() / 1e6);
  if (const schema::Checksum* cs = b.root()->checksum()) {
    std::printf("  checksum            %s header %016llx, data %016llx (--verify checks it)\n",
                cs->algorithm() == schema::ChecksumAlgorithm::Xxh64 ? "XXH64" : "unknown algorithm",
                static_cast<unsigned long long>(cs->header()), static_cast<unsigned long long>(cs->data()));
  } else {
    std::printf("  checksum            none recorded\n");
  }
}

// --verify: reads the whole file against its recorded checksum; the exit status says the result.
int verify(const std::string& path, const Bundle& b, bool require) {
  const auto start = std::chrono::steady_clock::now();
  BundleChecksum cs;
  const Error e = b.verify_checksum(path.c_str(), &cs);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (e != Error::Ok) {
    std::printf("%s: checksum FAILED: %s\n", path.c_str(), last_error_message());
    return 1;
  }
  if (!cs.recorded) {
    std::printf("%s: no checksum recorded (converted before checksums were written)%s\n", path.c_str(),
                require ? "; --require-checksum: FAILED" : "");
    return require ? 1 : 0;
  }
  std::printf("%s: checksum OK (XXH64 header %016llx, data %016llx; %.1f MB read in %.2f s)\n", path.c_str(),
              static_cast<unsigned long long>(cs.header), static_cast<unsigned long long>(cs.data),
              static_cast<double>(cs.bytes) / 1e6, seconds);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tern-inspect: print what a .tern bundle holds"};
  std::string path;
  bool no_tensors = false, verify_only = false, require = false;
  app.add_option("bundle", path, "bundle file")->required();
  app.add_flag("--no-tensors", no_tensors, "skip the per-tensor table");
  app.add_flag("--verify", verify_only,
               "only check the bundle: its structure and every byte against the recorded checksum (exit status 1 "
               "when damaged; a bundle without a checksum passes unless --require-checksum)");
  app.add_flag("--require-checksum", require, "with --verify: a bundle without a checksum fails");
  CLI11_PARSE(app, argc, argv);

  auto opened = Bundle::open(path.c_str());
  if (!opened.ok()) {
    if (verify_only) {
      std::printf("%s: FAILED: %s\n", path.c_str(), last_error_message());
    } else {
      std::fprintf(stderr, "tern-inspect: %s\n", last_error_message());
    }
    return 1;
  }
  const Bundle& b = *opened;
  if (verify_only) return verify(path, b, require);
  print_config(path, b);
  const TensorTotals totals = print_tensors(b, no_tensors);
  print_tokenizer(b);
  print_kv_profile(b);
  print_sizes(b, totals);
  return 0;
}
