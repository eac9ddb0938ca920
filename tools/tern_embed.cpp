// tern-embed MODEL.tern -p TEXT... | -f FILE: one vector per text (per line of FILE) from an
// embedding bundle, as JSON (stdout or -o) or as a .npy array, through the C API's
// tern_embed: the texts go through the model in batches, several to a forward pass.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "include/tern.h"
#include "tools/common/cli_files.h"
#include "tools/common/model_options.h"

namespace {

int die(const char* what) {
  std::fprintf(stderr, "tern-embed: %s: %s\n", what, tern_last_error_message());
  return 1;
}

// A JSON string literal of `s` (UTF-8 passes through; controls are escaped).
std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

// NumPy's .npy format, version 1.0: magic, header length, a Python dict literal padded to 64.
bool write_npy(const std::string& path, const char* dtype, size_t rows, size_t cols, const void* data, size_t bytes) {
  std::string header = std::string("{'descr': '") + dtype + "', 'fortran_order': False, 'shape': (" +
                       std::to_string(rows) + ", " + std::to_string(cols) + "), }";
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::ofstream out(path, std::ios::binary);
  const uint16_t len = static_cast<uint16_t>(header.size());
  out.write("\x93NUMPY\x01\x00", 8);
  out.write(reinterpret_cast<const char*>(&len), 2);
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  out.write(static_cast<const char*>(data), static_cast<std::streamsize>(bytes));
  return static_cast<bool>(out);
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// The vectors (`row` bytes each in `format`, int8's scales beside) as tern-embed's JSON.
std::string embeddings_json(const std::string& model_path, tern_embed_format format, uint32_t dims, size_t row,
                            const std::vector<uint8_t>& out, const std::vector<float>& scales, size_t n_texts,
                            uint64_t tokens) {
  std::string json = "{\"model\": " + json_string(model_path) + ", \"dimensions\": " + std::to_string(dims) +
                     ", \"format\": \"" +
                     (format == TERN_EMBED_FLOAT32 ? "float32"
                      : format == TERN_EMBED_INT8  ? "int8"
                                                   : "binary") +
                     "\", \"embeddings\": [";
  char num[32];
  for (size_t i = 0; i < n_texts; ++i) {
    json += i ? ",\n  [" : "\n  [";
    const uint8_t* r = out.data() + i * row;
    const size_t n = format == TERN_EMBED_FLOAT32 ? dims : row;
    for (size_t d = 0; d < n; ++d) {
      if (format == TERN_EMBED_FLOAT32) {
        float v;
        std::memcpy(&v, r + d * sizeof(float), sizeof v);
        std::snprintf(num, sizeof num, "%.9g", static_cast<double>(v));
      } else if (format == TERN_EMBED_INT8) {
        std::snprintf(num, sizeof num, "%d", static_cast<int>(static_cast<int8_t>(r[d])));
      } else {
        std::snprintf(num, sizeof num, "%u", static_cast<unsigned>(r[d]));
      }
      json += d ? ", " : "";
      json += num;
    }
    json += "]";
  }
  json += "]";
  if (format == TERN_EMBED_INT8) {
    json += ", \"scales\": [";
    for (size_t i = 0; i < n_texts; ++i) {
      std::snprintf(num, sizeof num, "%.9g", static_cast<double>(scales[i]));
      json += (i ? ", " : "") + std::string(num);
    }
    json += "]";
  }
  json += ", \"tokens\": " + std::to_string(tokens) + "}\n";
  return json;
}

// The command line.
struct EmbedOptions {
  std::string model_path, file, output, format_name = "float", prompt, instruction;
  std::vector<std::string> texts;
  uint32_t dimensions = 0;
  tern::cli::ModelOptions model_options;
  bool truncate = false, no_prompt = false, quiet = false;
};

void add_embed_options(CLI::App& app, EmbedOptions* o) {
  app.add_option("MODEL", o->model_path, "an embedding bundle (.tern)")->required();
  app.add_option("-p,--text", o->texts, "a text to embed (repeatable)");
  app.add_option("-f,--file", o->file, "embed every line of FILE (empty lines too)");
  app.add_option("-o,--output", o->output,
                 "write to OUT (.npy: a NumPy array; otherwise JSON); default: JSON on stdout");
  app.add_option("--format", o->format_name, "float (default), int8 (per-text absmax scale) or binary (sign bits)");
  app.add_option("--dimensions", o->dimensions, "keep the first D dimensions, re-normalized (0: all)");
  app.add_option("--prompt", o->prompt, "a prompt stored in the bundle, e.g. query (default: the bundle's default)");
  app.add_flag("--no-prompt", o->no_prompt, "no prompt, even if the bundle has a default one");
  app.add_option("--instruction", o->instruction, "text put in front of every input instead of a stored prompt");
  app.add_flag("--truncate", o->truncate, "cut texts longer than the context to their first tokens (else an error)");
  tern::cli::add_threads_option(app, &o->model_options.threads, "--threads");
  tern::cli::add_ctx_option(app, &o->model_options.ctx, "--ctx",
                            "longest input in tokens the KV cache holds (0: as many as the budget allows)");
  tern::cli::add_batch_option(app, &o->model_options.batch, "--batch",
                              "tokens per forward pass (default 64; texts share a batch)");
  tern::cli::add_memory_budget_option(app, &o->model_options.memory_budget);
  app.add_flag("-q,--quiet", o->quiet, "no statistics on stderr");
}

// -f FILE: every line appended to the texts (a trailing CR dropped); false if it cannot be opened.
bool read_lines(const std::string& file, std::vector<std::string>* texts) {
  std::string bytes, why;
  if (!tern::cli::read_file(file, &bytes, &why)) return false;
  std::istringstream in(bytes);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    texts->push_back(line);
  }
  return true;
}

// --format's name as the C API's format; false for a name it does not know.
bool parse_format(const std::string& name, tern_embed_format* format) {
  if (name == "float" || name == "float32") {
    *format = TERN_EMBED_FLOAT32;
  } else if (name == "int8") {
    *format = TERN_EMBED_INT8;
  } else if (name == "binary" || name == "ubinary") {
    *format = TERN_EMBED_BINARY;
  } else {
    return false;
  }
  return true;
}

// The vectors to -o (.npy, with int8's scales beside; or JSON) or as JSON to stdout; false if a write failed.
bool write_embeddings(const EmbedOptions& o, tern_embed_format format, uint32_t dims, size_t row,
                      const std::vector<uint8_t>& out, const std::vector<float>& scales, uint64_t tokens) {
  const std::string& output = o.output;
  const size_t n_texts = o.texts.size();
  bool ok = true;
  if (ends_with(output, ".npy")) {
    const char* dtype = format == TERN_EMBED_FLOAT32 ? "<f4" : format == TERN_EMBED_INT8 ? "|i1" : "|u1";
    const size_t cols = format == TERN_EMBED_FLOAT32 ? dims : row;
    ok = write_npy(output, dtype, n_texts, cols, out.data(), out.size());
    if (ok && format == TERN_EMBED_INT8) {  // the scales beside: OUT.scales.npy
      const std::string scales_path = output.substr(0, output.size() - 4) + ".scales.npy";
      ok = write_npy(scales_path, "<f4", n_texts, 1, scales.data(), scales.size() * sizeof(float));
    }
  } else {
    const std::string json = embeddings_json(o.model_path, format, dims, row, out, scales, n_texts, tokens);
    if (output.empty()) {
      std::fwrite(json.data(), 1, json.size(), stdout);
    } else {
      std::ofstream f(output, std::ios::binary);
      f << json;
      ok = static_cast<bool>(f);
    }
  }
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Embed texts with a Tern embedding bundle: one vector per text, JSON or .npy"};
  EmbedOptions o;
  add_embed_options(app, &o);
  CLI11_PARSE(app, argc, argv);
  const std::vector<std::string>& texts = o.texts;

  if (!o.file.empty() && !read_lines(o.file, &o.texts)) {
    std::fprintf(stderr, "tern-embed: %s: cannot open\n", o.file.c_str());
    return 1;
  }
  if (texts.empty()) {
    std::fprintf(stderr, "tern-embed: no texts (give -p TEXT or -f FILE)\n");
    return 2;
  }
  tern_embed_format format;
  if (!parse_format(o.format_name, &format)) {
    std::fprintf(stderr, "tern-embed: --format %s: use float, int8 or binary\n", o.format_name.c_str());
    return 2;
  }

  tern_model_params mp;
  if (tern::cli::to_model_params(o.model_options, &mp) != TERN_OK) return die("--memory-budget");
  tern_model* model = nullptr;
  if (tern_model_load(o.model_path.c_str(), &mp, &model) != TERN_OK) return die(o.model_path.c_str());
  tern_embedding_info info;
  tern_model_get_embedding_info(model, &info);
  if (info.dimensions == 0) {
    std::fprintf(stderr, "tern-embed: %s is not an embedding model (use tern-run)\n", o.model_path.c_str());
    tern_model_free(model);
    return 1;
  }
  tern_session* session = nullptr;
  if (tern_session_create(model, nullptr, &session) != TERN_OK) return die("session");

  const uint32_t dims = o.dimensions == 0 ? info.dimensions : o.dimensions;
  const size_t row = tern_embed_row_bytes(format, dims);
  std::vector<uint8_t> out(texts.size() * row);
  std::vector<float> scales(texts.size());
  std::vector<const char*> ptrs;
  std::vector<size_t> sizes;
  for (const std::string& t : texts) {
    ptrs.push_back(t.data());
    sizes.push_back(t.size());
  }
  tern_embed_params ep = tern_embed_default_params();
  ep.dimensions = o.dimensions;
  ep.format = format;
  ep.prompt_name = o.no_prompt ? "" : o.prompt.empty() ? nullptr : o.prompt.c_str();
  ep.instruction = o.instruction.empty() ? nullptr : o.instruction.c_str();
  ep.truncate = o.truncate ? 1 : 0;
  tern_embed_stats stats;
  if (tern_embed(session, ptrs.data(), sizes.data(), texts.size(), &ep, out.data(), out.size(), scales.data(),
                 &stats) != TERN_OK) {
    return die("embed");
  }
  if (!o.quiet) {
    std::fprintf(stderr, "tern-embed: %u texts, %llu tokens in %u batches, %.3f s (%.1f texts/s, %.1f tokens/s)%s\n",
                 stats.n_texts, static_cast<unsigned long long>(stats.n_tokens), stats.n_batches, stats.seconds,
                 stats.n_texts / stats.seconds, static_cast<double>(stats.n_tokens) / stats.seconds,
                 stats.n_truncated ? ", some texts truncated" : "");
  }

  const bool ok = write_embeddings(o, format, dims, row, out, scales, stats.n_tokens);
  tern_session_free(session);
  tern_model_free(model);
  if (!ok) {
    std::fprintf(stderr, "tern-embed: %s: cannot write\n", o.output.c_str());
    return 1;
  }
  return 0;
}
