// A conversation rendered into the text the model was trained on, from the chat format the
// converter stored in the bundle (schema/tokenizer.fbs ChatFormat; converter/tokenizer/chat_format.h
// derives it from the checkpoint's Jinja template). No heap use: the text goes into the
// caller's buffer.
#pragma once

#include <cstddef>
#include <cstdint>

#include "platform/error.h"

namespace tern {

class Tokenizer;
namespace schema {
struct Tokenizer;
}

struct ChatMessage {
  const char* role;     // "system", "user", "assistant" or "tool" (a tool's result)
  const char* content;  // UTF-8
};

// The format's pieces as views into the bundle (or the built-in plain fallback).
struct ChatFormatView {
  const char* name = "plain";
  bool bos_first = false;
  const char* message_prefix = "{Role}: ";
  const char* message_suffix = "\n";
  bool trim_content = true;
  const char* generation_prefix = "Assistant:";
  bool generation_always = false;
  const char* stop = "\nUser:";  // null when the format ends turns with a token
};

// The bundle tokenizer's format; the plain fallback (opening with BOS when the tokenizer
// adds one) when it stores none.
ChatFormatView chat_format_of(const schema::Tokenizer* table, const Tokenizer* tokenizer);

// Renders `messages` into buf (NUL-terminated); *size gets the length without the NUL, also
// when `capacity` is too small (then OutOfRange, naming the size). InvalidArgument for an
// unknown role, InvalidUtf8 for content that is not UTF-8. The role "tool" (a tool's result)
// is written "ipython" in the llama3 format (LLaMA 3.1's tool turn), "tool" in the others.
Error render_chat(const ChatFormatView& format, const Tokenizer* tokenizer, const ChatMessage* messages, size_t count,
                  bool add_generation_prefix, char* buf, size_t capacity, size_t* size);

}  // namespace tern
