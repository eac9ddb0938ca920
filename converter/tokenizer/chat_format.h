// What a checkpoint's Jinja chat_template means, as data the runtime can render without a
// template engine (schema/tokenizer.fbs ChatFormat, runtime/text/chat.h). The converter knows the
// templates of the families we import by their shape; anything else falls back to the plain
// "User: ...\nAssistant:" format, and the converter says so.
#pragma once

#include <string>

#include "platform/error.h"

namespace tern::convert {

struct ChatFormatIR {
  std::string name = "plain";
  bool bos_first = false;
  std::string message_prefix = "{Role}: ";
  std::string message_suffix = "\n";
  bool trim_content = true;  // plain: "Assistant: " + reply reads back as the reply generated after "Assistant:"
  std::string generation_prefix = "Assistant:";
  bool generation_always = false;
  std::string stop = "\nUser:";
  bool recognized = false;  // false: the template was absent or unknown (plain fallback)
};

// The format a Jinja template renders. `bos_for_plain`: whether the plain fallback opens
// with the BOS text (the tokenizer's add_bos).
ChatFormatIR derive_chat_format(const std::string& jinja, bool bos_for_plain);

// A chat template from a file: a tokenizer_config.json (its "chat_template"), or the
// template text itself (.jinja or anything else).
Result<std::string> read_chat_template(const std::string& path);

}  // namespace tern::convert
