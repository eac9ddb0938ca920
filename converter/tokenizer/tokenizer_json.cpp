// Hugging Face tokenizer.json import (byte-level BPE, e.g. LLaMA-3) and the
// tokenizer_config.json fields the runtime needs.
#include <nlohmann/json.hpp>

#include <map>
#include <string>
#include <unordered_map>

#include "converter/tokenizer/tokenizer_internal.h"
#include "platform/file_map.h"

namespace tern::convert {
namespace {

using nlohmann::json;

// The exact LLaMA-3 and Qwen2 (Qwen3 too) split patterns the runtime implements natively:
// they differ only in how many digits one pre-token takes.
constexpr const char* kLlama3Pattern =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
constexpr const char* kQwen2Pattern =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
constexpr const char* kSpaceMark = "\xE2\x96\x81";  // U+2581

Result<json> read_json(const std::string& path) {
  TERN_ASSIGN_OR_RETURN(const std::string text, read_whole_file(path.c_str()));
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  TERN_CHECK_OR_RETURN(!j.is_discarded(), Error::InvalidArgument, "%s: not valid JSON", path.c_str());
  return j;
}

// GPT-2's byte-to-unicode map, inverted: the code point standing for each byte.
std::unordered_map<uint32_t, uint8_t> unicode_to_byte() {
  std::unordered_map<uint32_t, uint8_t> map;
  uint32_t extra = 0;
  for (uint32_t b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    map[printable ? b : 256 + extra++] = static_cast<uint8_t>(b);
  }
  return map;
}

// Decodes a byte-level piece ("Ġhello") back to raw bytes (" hello").
bool unmap_piece(const std::string& s, const std::unordered_map<uint32_t, uint8_t>& map, std::string* out) {
  out->clear();
  for (size_t i = 0; i < s.size();) {
    const uint8_t b0 = static_cast<uint8_t>(s[i]);
    uint32_t cp, n;
    if (b0 < 0x80) {
      cp = b0, n = 1;
    } else if ((b0 & 0xE0) == 0xC0 && i + 1 < s.size()) {
      cp = ((b0 & 0x1Fu) << 6) | (s[i + 1] & 0x3F), n = 2;
    } else {
      return false;  // the map only uses code points below U+0800
    }
    auto it = map.find(cp);
    if (it == map.end()) return false;
    out->push_back(static_cast<char>(it->second));
    i += n;
  }
  return true;
}

std::string token_content(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
  return "";
}

bool has_split(const json& pre, const char* pattern) {
  if (!pre.is_object()) return false;
  if (pre.value("type", "") == "Split" && pre.contains("pattern") && pre["pattern"].is_object()) {
    return pre["pattern"].value("Regex", "") == pattern;
  }
  if (pre.value("type", "") == "Sequence" && pre.contains("pretokenizers")) {
    for (const auto& p : pre["pretokenizers"]) {
      if (has_split(p, pattern)) return true;
    }
  }
  return false;
}

bool has_type(const json& node, const char* type, const char* list_key) {
  if (!node.is_object()) return false;
  if (node.value("type", "") == type) return true;
  if (node.contains(list_key) && node[list_key].is_array()) {
    for (const auto& p : node[list_key]) {
      if (has_type(p, type, list_key)) return true;
    }
  }
  return false;
}

}  // namespace

Error apply_tokenizer_config(const std::string& config_path, TokenizerIR* ir) {
  TERN_ASSIGN_OR_RETURN(json cfg, read_json(config_path));
  auto find = [&](const std::string& content) -> int32_t {
    if (content.empty()) return -1;
    for (size_t i = 0; i < ir->pieces.size(); ++i) {
      if (ir->pieces[i] == content && ir->attrs[i] != TokenAttr::Normal) return static_cast<int32_t>(i);
    }
    for (size_t i = 0; i < ir->pieces.size(); ++i) {
      if (ir->pieces[i] == content) return static_cast<int32_t>(i);
    }
    return -1;
  };
  if (cfg.contains("bos_token")) {
    const int32_t id = find(token_content(cfg["bos_token"]));
    if (id >= 0) ir->bos_id = id;
  }
  if (cfg.contains("eos_token")) {
    const int32_t id = find(token_content(cfg["eos_token"]));
    if (id >= 0) ir->eos_id = id;
  }
  if (cfg.contains("pad_token")) {
    const int32_t id = find(token_content(cfg["pad_token"]));
    if (id >= 0) ir->pad_id = id;
  }
  if (cfg.contains("add_bos_token") && cfg["add_bos_token"].is_boolean())
    ir->add_bos = cfg["add_bos_token"].get<bool>();
  if (cfg.contains("add_eos_token") && cfg["add_eos_token"].is_boolean())
    ir->add_eos = cfg["add_eos_token"].get<bool>();
  if (cfg.contains("chat_template") && cfg["chat_template"].is_string()) {
    ir->chat_template = cfg["chat_template"].get<std::string>();
  }
  return Error::Ok;
}

namespace {

// How a tokenizer.json without byte-level pre-tokenization normalizes spaces: Gemma's
// Replace(" " -> U+2581), or LLaMA-2's Sequence[Prepend(U+2581), Replace(...)]. Sets
// *prefix for the Prepend; false for anything else.
bool spm_style_normalizer(const json& n, bool* prefix) {
  if (!n.is_object()) return false;
  const std::string type = n.value("type", "");
  if (type == "Replace") {
    return n.contains("pattern") && n["pattern"].is_object() && n["pattern"].value("String", "") == " " &&
           n.value("content", "") == kSpaceMark;
  }
  if (type == "Prepend") {
    *prefix = n.value("prepend", "") == kSpaceMark;
    return *prefix;
  }
  if (type == "Sequence" && n.contains("normalizers") && n["normalizers"].is_array()) {
    bool replaced = false;
    for (const auto& m : n["normalizers"]) {
      if (!spm_style_normalizer(m, prefix)) return false;
      replaced |= m.value("type", "") == "Replace";
    }
    return replaced;
  }
  return false;
}

// A pre-tokenizer that does nothing once spaces are U+2581: none, or a split on " ".
bool spm_style_pretokenizer(const json& pre) {
  if (pre.is_null()) return true;
  return pre.is_object() && pre.value("type", "") == "Split" && pre.contains("pattern") && pre["pattern"].is_object() &&
         pre["pattern"].value("String", "") == " ";
}

// The special tokens a TemplateProcessing post-processor puts around a single text.
void scan_template(const json& p, const json& added, TokenizerIR* ir) {
  if (!p.is_object()) return;
  if (p.value("type", "") == "TemplateProcessing" && p.contains("single") && p["single"].is_array() &&
      !p["single"].empty()) {
    const json& single = p["single"];
    if (single.front().contains("SpecialToken")) ir->add_bos = true;
    if (single.size() > 1 && single.back().contains("SpecialToken")) {
      const std::string name = single.back()["SpecialToken"].value("id", "");
      for (const auto& t : added) {
        if (t.value("content", "") == name) ir->template_eos_id = t.value("id", -1);
      }
    }
  }
  if (p.contains("processors") && p["processors"].is_array()) {
    for (const auto& q : p["processors"]) scan_template(q, added, ir);
  }
}

// The tokenizer's kind from its normalizer, pre-tokenizer and decoder: byte-level BPE with
// the LLaMA-3 or Qwen2 split, or SentencePiece-style BPE; anything else is refused.
Error read_kind(const std::string& path, const json& model, const json& pre, const json& norm, bool byte_level,
                TokenizerIR* ir) {
  if (byte_level) {
    ir->type = TokenizerType::ByteLevelBpe;
    if (norm.is_object() && norm.value("type", "") == "NFC") {
      ir->nfc = true;
    } else {
      TERN_CHECK_OR_RETURN(norm.is_null(), Error::NotSupported,
                           "%s: tokenizer.json normalizer %s is not supported (none or NFC)", path.c_str(),
                           norm.value("type", "?").c_str());
    }
    if (has_split(pre, kLlama3Pattern)) {
      ir->pretokenizer = PreTokenizer::Llama3;
    } else if (has_split(pre, kQwen2Pattern)) {
      ir->pretokenizer = PreTokenizer::Qwen2;
    } else {
      // Byte-level with GPT-2's own regex or another split would tokenize differently.
      TERN_CHECK_OR_RETURN(!has_type(pre, "Split", "pretokenizers") && !pre.is_object(), Error::NotSupported,
                           "%s: pre-tokenizer is not the LLaMA-3 or Qwen2 split (not supported)", path.c_str());
    }
  } else {
    // SentencePiece-style BPE (Gemma, LLaMA-2): spaces become U+2581, pieces are stored as
    // such, unknown characters fall back to <0xXX> bytes, merges by rank.
    bool prefix = false;
    TERN_CHECK_OR_RETURN(spm_style_normalizer(norm, &prefix) && spm_style_pretokenizer(pre), Error::NotSupported,
                         "%s: only byte-level BPE or SentencePiece-style BPE (spaces replaced by U+2581) "
                         "tokenizer.json is supported",
                         path.c_str());
    ir->type = TokenizerType::SentencePieceBpe;
    ir->add_dummy_prefix = prefix;
    ir->byte_fallback = model.value("byte_fallback", false);
  }
  ir->ignore_merges = model.value("ignore_merges", false);
  return Error::Ok;
}

using Vocab = std::map<std::string, int32_t>;  // piece string as in the file -> id

// The model's vocab; *max_id: the largest id.
Result<Vocab> read_vocab(const std::string& path, const json& model, int64_t* max_id) {
  Vocab vocab;
  for (auto it = model["vocab"].begin(); it != model["vocab"].end(); ++it) {
    TERN_CHECK_OR_RETURN(it.value().is_number_integer(), Error::InvalidArgument, "%s: vocab id is not an integer",
                         path.c_str());
    const int64_t id = it.value().get<int64_t>();
    TERN_CHECK_OR_RETURN(id >= 0 && id < (1 << 24), Error::InvalidArgument, "%s: vocab id %lld out of range",
                         path.c_str(), static_cast<long long>(id));
    vocab[it.key()] = static_cast<int32_t>(id);
    *max_id = std::max(*max_id, id);
  }
  return vocab;
}

// Every id's piece and attribute: the vocab's (byte-level pieces decoded to raw bytes), then
// the added tokens'.
Error fill_pieces(const std::string& path, const json& model, const Vocab& vocab, const json& added, bool byte_level,
                  TokenizerIR* ir) {
  const auto map = unicode_to_byte();
  const std::string unk =
      model.contains("unk_token") && model["unk_token"].is_string() ? model["unk_token"].get<std::string>() : "";
  for (const auto& [text, id] : vocab) {
    if (byte_level) {
      std::string raw;
      TERN_CHECK_OR_RETURN(unmap_piece(text, map, &raw), Error::InvalidArgument,
                           "%s: vocab piece %d is not byte-level encoded", path.c_str(), id);
      ir->pieces[id] = raw;
      ir->attrs[id] = TokenAttr::Normal;
      continue;
    }
    ir->pieces[id] = text;
    const bool byte_piece = text.size() == 6 && text.compare(0, 3, "<0x") == 0 && text[5] == '>';
    ir->attrs[id] = byte_piece ? TokenAttr::Byte : text == unk ? TokenAttr::Unknown : TokenAttr::Normal;
    if (text == unk) ir->unk_id = id;
  }
  for (const auto& t : added) {
    const int64_t id = t.value("id", -1);
    const std::string content = t.value("content", "");
    TERN_CHECK_OR_RETURN(id >= 0 && !content.empty(), Error::InvalidArgument, "%s: malformed added token",
                         path.c_str());
    if (!byte_level && content == unk) continue;  // <unk> stays the unknown piece
    ir->pieces[id] = content;
    ir->attrs[id] = t.value("special", false) ? TokenAttr::Control : TokenAttr::UserDefined;
  }
  return Error::Ok;
}

// The merges ("a b" strings or ["a", "b"] pairs) as pairs of vocab ids, by rank.
Error read_merges(const std::string& path, const json& model, const Vocab& vocab, TokenizerIR* ir) {
  if (!model.contains("merges") || !model["merges"].is_array()) return Error::Ok;
  ir->merges.reserve(model["merges"].size());
  for (const auto& m : model["merges"]) {
    std::string a, b;
    if (m.is_string()) {  // "a b"
      const std::string s = m.get<std::string>();
      const size_t space = s.find(' ');
      TERN_CHECK_OR_RETURN(space != std::string::npos, Error::InvalidArgument, "%s: merge '%s' has no space",
                           path.c_str(), s.c_str());
      a = s.substr(0, space);
      b = s.substr(space + 1);
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {  // ["a", "b"]
      a = m[0].get<std::string>();
      b = m[1].get<std::string>();
    } else {
      return fail(Error::InvalidArgument, "%s: malformed merge entry", path.c_str());
    }
    auto ia = vocab.find(a), ib = vocab.find(b), ic = vocab.find(a + b);
    TERN_CHECK_OR_RETURN(ia != vocab.end() && ib != vocab.end() && ic != vocab.end(), Error::InvalidArgument,
                         "%s: merge '%s %s' uses pieces not in the vocab", path.c_str(), a.c_str(), b.c_str());
    ir->merges.emplace_back(static_cast<uint32_t>(ia->second), static_cast<uint32_t>(ib->second));
  }
  return Error::Ok;
}

}  // namespace

Result<TokenizerIR> import_tokenizer_json(const std::string& path, const std::string& config_path) {
  TERN_ASSIGN_OR_RETURN(json j, read_json(path));
  TERN_CHECK_OR_RETURN(j.is_object() && j.contains("model") && j["model"].is_object(), Error::InvalidArgument,
                       "%s: no \"model\" object", path.c_str());
  const json& model = j["model"];
  TERN_CHECK_OR_RETURN(model.value("type", "") == "BPE", Error::NotSupported, "%s: model type '%s' is not supported",
                       path.c_str(), model.value("type", "?").c_str());
  const json pre = j.contains("pre_tokenizer") ? j["pre_tokenizer"] : json();
  const json dec = j.contains("decoder") ? j["decoder"] : json();
  const json norm = j.contains("normalizer") ? j["normalizer"] : json();
  const bool byte_level = has_type(pre, "ByteLevel", "pretokenizers") || has_type(dec, "ByteLevel", "decoders");
  TERN_CHECK_OR_RETURN(model.contains("vocab") && model["vocab"].is_object(), Error::InvalidArgument,
                       "%s: model has no vocab", path.c_str());

  TokenizerIR ir;
  TERN_RETURN_IF_ERROR(read_kind(path, model, pre, norm, byte_level, &ir));
  int64_t max_id = -1;
  TERN_ASSIGN_OR_RETURN(const Vocab vocab, read_vocab(path, model, &max_id));
  const json added = j.contains("added_tokens") && j["added_tokens"].is_array() ? j["added_tokens"] : json::array();
  for (const auto& t : added) max_id = std::max<int64_t>(max_id, t.value("id", -1));
  ir.pieces.assign(static_cast<size_t>(max_id + 1), std::string());
  ir.attrs.assign(static_cast<size_t>(max_id + 1), TokenAttr::Unused);  // ids nobody names
  TERN_RETURN_IF_ERROR(fill_pieces(path, model, vocab, added, byte_level, &ir));
  TERN_RETURN_IF_ERROR(read_merges(path, model, vocab, &ir));

  // Specials by the names the LLaMA-3 family uses; tokenizer_config.json overrides.
  auto find_added = [&](const char* content) -> int32_t {
    for (const auto& t : added) {
      if (t.value("content", "") == content) return t.value("id", -1);
    }
    return -1;
  };
  ir.bos_id = find_added("<|begin_of_text|>");
  ir.eos_id = find_added("<|end_of_text|>");
  ir.eot_id = find_added("<|eot_id|>");
  // add_bos: the post-processor's single-sequence template starts with a special token.
  ir.add_bos = false;
  if (j.contains("post_processor")) scan_template(j["post_processor"], added, &ir);
  if (!config_path.empty()) TERN_RETURN_IF_ERROR(apply_tokenizer_config(config_path, &ir));
  return ir;
}

}  // namespace tern::convert
