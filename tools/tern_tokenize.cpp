// tern-tokenize TOKENIZER_OR_BUNDLE: reads JSON lines {"text": ...} on stdin and writes
// {"text": ..., "ids": [...]} (no BOS), so any file of cases can be checked against a
// reference. tokenizer.json / tokenizer.model / a directory go through the converter's
// importer and the bundle's FlatBuffer table; a .tern bundle uses its baked tokenizer.
// Either way the ids come from the runtime Tokenizer.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "converter/tokenizer/tokenizer_host.h"
#include "runtime/model/bundle.h"
#include "runtime/text/tokenizer.h"

namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

int die(const char* what) {
  std::fprintf(stderr, "tern-tokenize: %s: %s\n", what, tern::last_error_message());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Encode JSON lines {\"text\": ...} from stdin with a Tern tokenizer"};
  std::string path;
  bool parse_special = false;
  bool decode = false;
  bool stats = false;
  app.add_option("TOKENIZER_OR_BUNDLE", path, "tokenizer.json, tokenizer.model, a directory, or a .tern bundle")
      ->required();
  app.add_flag("--parse-special", parse_special, "turn special-token text (e.g. <|eot_id|>) into its id");
  app.add_flag("--decode", decode, "also write \"decoded\": the text decoded back from the ids");
  app.add_flag("--stats", stats, "print the tokenizer's kind, vocabulary and arena bytes to stderr");
  CLI11_PARSE(app, argc, argv);

  std::unique_ptr<tern::convert::HostTokenizer> host;
  tern::Bundle bundle;
  std::vector<uint8_t> arena_memory;
  tern::Tokenizer bundle_tokenizer;
  tern::Tokenizer* tokenizer = nullptr;
  if (ends_with(path, ".tern")) {
    auto opened = tern::Bundle::open(path.c_str());
    if (!opened.ok()) return die(path.c_str());
    bundle = std::move(opened).value();
    arena_memory.resize(tern::Tokenizer::required_arena_bytes(bundle.tokenizer()));
    tern::ArenaAllocator arena(arena_memory.data(), arena_memory.size());
    auto created = tern::Tokenizer::create(bundle.tokenizer(), arena);
    if (!created.ok()) return die(path.c_str());
    bundle_tokenizer = std::move(created).value();
    tokenizer = &bundle_tokenizer;
  } else {
    auto loaded = tern::convert::HostTokenizer::load(path);
    if (!loaded.ok()) return die(path.c_str());
    host = std::move(loaded).value();
    tokenizer = &host->tokenizer();
  }

  if (stats) {
    const tern::schema::Tokenizer* table = host ? host->table() : bundle.tokenizer();
    std::fprintf(stderr, "%s: %s, %d pieces, bos %d eos %d eot %d, arena %zu bytes\n", path.c_str(),
                 tokenizer->kind() == tern::TokenizerKind::ByteLevelBpe       ? "byte-level BPE"
                 : tokenizer->kind() == tern::TokenizerKind::SentencePieceBpe ? "SentencePiece BPE"
                                                                              : "SentencePiece unigram",
                 tokenizer->vocab_size(), tokenizer->bos_id(), tokenizer->eos_id(), tokenizer->eot_id(),
                 tern::Tokenizer::required_arena_bytes(table));
  }
  std::string line;
  std::vector<int32_t> ids;
  std::vector<uint8_t> scratch;
  size_t line_no = 0;
  while (std::getline(std::cin, line)) {
    ++line_no;
    if (line.empty()) continue;
    nlohmann::json in = nlohmann::json::parse(line, nullptr, false);
    if (in.is_discarded() || !in.is_object() || !in.contains("text") || !in["text"].is_string()) {
      std::fprintf(stderr, "tern-tokenize: line %zu: expected {\"text\": ...}\n", line_no);
      return 1;
    }
    const std::string text = in["text"].get<std::string>();
    ids.resize(text.size() + 1);
    scratch.resize(tokenizer->encode_scratch_bytes(text.size()));
    size_t needed = 0;
    auto n = tokenizer->encode(text.data(), text.size(), /*add_bos=*/false, parse_special, ids.data(), ids.size(),
                               &needed, scratch.data(), scratch.size());
    if (!n.ok() && n.error() == tern::Error::OutOfRange) {  // byte fallback: more ids than bytes
      ids.resize(needed);
      n = tokenizer->encode(text.data(), text.size(), false, parse_special, ids.data(), ids.size(), &needed,
                            scratch.data(), scratch.size());
    }
    if (!n.ok()) return die("encode");
    ids.resize(*n);
    nlohmann::json out;
    out["text"] = text;
    out["ids"] = ids;
    if (decode) {
      tern::TokenDecoder decoder(*tokenizer);
      std::string decoded;
      std::vector<char> buf(4096);
      for (int32_t id : ids) {
        auto m = decoder.push(id, buf.data(), buf.size());
        if (!m.ok()) return die("decode");
        decoded.append(buf.data(), *m);
      }
      auto m = decoder.flush(buf.data(), buf.size());
      if (!m.ok()) return die("decode");
      decoded.append(buf.data(), *m);
      out["decoded"] = decoded;
    }
    std::cout << out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
  }
  return 0;
}
