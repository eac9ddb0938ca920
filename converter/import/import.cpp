#include "converter/import/import.h"

#include <unistd.h>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "converter/import/bitllama2c_import.h"
#include "converter/import/gguf_import.h"
#include "converter/import/hf_import.h"
#include "platform/file_map.h"

namespace tern::convert {
namespace fs = std::filesystem;

const char* to_string(InputFormat f) {
  switch (f) {
    case InputFormat::Unknown: return "unknown";
    case InputFormat::HuggingFace: return "huggingface";
    case InputFormat::Gguf: return "gguf";
    case InputFormat::Bitllama2c: return "bitllama2c";
  }
  return "unknown";
}

InputFormat detect_format(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    return fs::exists(fs::path(path) / "config.json", ec) ? InputFormat::HuggingFace : InputFormat::Unknown;
  }
  const std::string name = fs::path(path).filename().string();
  if (name == "config.json" || name == "model.safetensors" || name == "model.safetensors.index.json") {
    return InputFormat::HuggingFace;
  }
  uint8_t head[4] = {};
  auto fd = open_regular_file(path.c_str(), nullptr);  // never an ifstream: a FIFO would block
  if (!fd.ok()) return InputFormat::Unknown;
  const ssize_t got = ::read(*fd, head, 4);
  ::close(*fd);
  if (got == 4) {
    if (std::memcmp(head, "GGUF", 4) == 0) return InputFormat::Gguf;
    uint32_t magic;
    std::memcpy(&magic, head, 4);
    if (magic == kBitllama2cMagic) return InputFormat::Bitllama2c;
  }
  if (fs::path(path).extension() == ".gguf") return InputFormat::Gguf;
  return InputFormat::Unknown;
}

namespace {

// Drops the tensors of layers N and above ("layers.K.*") and records N layers.
Result<ModelIR> keep_first_layers(Result<ModelIR> imported, uint32_t n) {
  if (!imported.ok() || n == 0) return imported;
  ModelIR ir = std::move(imported).value();
  TERN_CHECK_OR_RETURN(n <= ir.config.layers, Error::InvalidArgument, "--keep-layers %u: the model has only %u layers",
                       n, ir.config.layers);
  std::vector<TensorIR> kept;
  for (TensorIR& t : ir.tensors) {
    unsigned layer = 0;
    if (std::sscanf(t.name.c_str(), "layers.%u.", &layer) == 1 && layer >= n) continue;
    kept.push_back(std::move(t));
  }
  ir.tensors = std::move(kept);
  ir.config.layers = n;
  return ir;
}

Result<ModelIR> import_by_format(const std::string& path, const ConvertOptions& options) {
  std::error_code ec;
  switch (detect_format(path)) {
    case InputFormat::HuggingFace: {
      const std::string dir = fs::is_directory(path, ec) ? path : fs::path(path).parent_path().string();
      return import_hf(dir.empty() ? "." : dir, options);
    }
    case InputFormat::Gguf: return import_gguf(path, options);
    case InputFormat::Bitllama2c: return import_bitllama2c(path, options);
    case InputFormat::Unknown: break;
  }
  if (fs::is_directory(path, ec)) {
    return fail(Error::BadMagic, "%s: directory without config.json (not a Hugging Face checkpoint)", path.c_str());
  }
  return fail(Error::BadMagic, "%s: unrecognized input format (not GGUF, bitllama2c .bin, or a Hugging Face directory)",
              path.c_str());
}

}  // namespace

Result<ModelIR> import_model(const std::string& path, const ConvertOptions& options) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return fail(Error::FileNotFound, "%s: not found", path.c_str());
  if (!fs::is_directory(path, ec)) {  // a FIFO, a device or a socket: said so, before reading it
    TERN_ASSIGN_OR_RETURN(const int fd, open_regular_file(path.c_str(), nullptr));
    ::close(fd);
  }
  return keep_first_layers(import_by_format(path, options), options.keep_layers);
}

}  // namespace tern::convert
