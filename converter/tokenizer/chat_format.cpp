#include "converter/tokenizer/chat_format.h"

#include <nlohmann/json.hpp>

#include "platform/file_map.h"

namespace tern::convert {

namespace {

bool has(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

}  // namespace

ChatFormatIR derive_chat_format(const std::string& jinja, bool bos_for_plain) {
  ChatFormatIR f;
  f.bos_first = bos_for_plain;
  const bool trims = has(jinja, "| trim") || has(jinja, "|trim");
  const bool bos = has(jinja, "bos_token");
  // Without the add_generation_prompt test the template always opens the assistant's turn.
  const bool always = !has(jinja, "add_generation_prompt");
  if (has(jinja, "<|start_header_id|>") && has(jinja, "message['role']") && has(jinja, "<|end_header_id|>") &&
      has(jinja, "<|eot_id|>")) {
    // LLaMA-3: <|start_header_id|>{role}<|end_header_id|>\n\n{content}<|eot_id|>
    f.name = "llama3";
    f.message_prefix = "<|start_header_id|>{role}<|end_header_id|>\n\n";
    f.message_suffix = "<|eot_id|>";
    f.generation_prefix = "<|start_header_id|>assistant<|end_header_id|>\n\n";
    f.stop.clear();
  } else if ((has(jinja, "message['role'] | capitalize + ': '") || has(jinja, "message['role']|capitalize + ': '")) &&
             has(jinja, "<|eot_id|>") && has(jinja, "'Assistant: '")) {
    // BitNet b1.58 2B-4T: {Role}: {content}<|eot_id|> ... Assistant:
    f.name = "bitnet-2b4t";
    f.message_prefix = "{Role}: ";
    f.message_suffix = "<|eot_id|>";
    f.generation_prefix = "Assistant: ";
    f.stop.clear();
  } else {
    return f;
  }
  f.recognized = true;
  f.bos_first = bos;
  f.trim_content = trims;
  f.generation_always = always;
  return f;
}

Result<std::string> read_chat_template(const std::string& path) {
  TERN_ASSIGN_OR_RETURN(const std::string text, read_whole_file(path.c_str()));
  if (path.size() >= 5 && path.compare(path.size() - 5, 5, ".json") == 0) {
    const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    TERN_CHECK_OR_RETURN(!j.is_discarded() && j.is_object(), Error::CorruptFile, "%s: not a JSON object", path.c_str());
    TERN_CHECK_OR_RETURN(j.contains("chat_template") && j["chat_template"].is_string(), Error::NotFound,
                         "%s: no \"chat_template\" string", path.c_str());
    return j["chat_template"].get<std::string>();
  }
  return text;
}

}  // namespace tern::convert
