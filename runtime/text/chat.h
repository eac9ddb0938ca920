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
  const char* role;     // "system", "developer", "user", "assistant" or "tool" (a tool's result)
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

// InvalidUtf8 naming message `index` and the byte when `text` is not UTF-8.
Error check_chat_utf8(const char* text, size_t size, size_t index);

// The role as the format writes it, or InvalidArgument naming an unknown one: "developer"
// (OpenAI's newer name) is "system"; a tool's result is "ipython" in the llama3 format (LLaMA
// 3.1's tool turn), "tool" in the others.
Result<const char*> chat_role(const ChatFormatView& format, const char* role, size_t index);

// Writes a conversation in a chat format into a caller's buffer, a message at a time; a
// message's content may come in several parts, trimmed as a whole when the format trims.
// What does not fit is counted, so size() is the whole text's length either way. No heap use.
class ChatWriter {
 public:
  ChatWriter(const ChatFormatView& format, const Tokenizer* tokenizer, char* buf, size_t capacity);
  void start();                                 // the BOS token's text, when the format opens with it
  void begin(const char* role);                 // a role chat_role() returned
  void content(const char* text, size_t size);  // valid UTF-8
  void content(const char* text);
  void end();
  void generation_prefix(bool add);  // the assistant's header (always, when the format says so)
  size_t size() const { return size_; }
  // NUL-terminates; OutOfRange naming the size when it did not fit.
  Error finish(size_t* size);

 private:
  void put(const char* s, size_t n);
  void put_template(const char* t);
  const ChatFormatView& format_;
  const Tokenizer* tokenizer_;
  char* buf_;
  size_t capacity_;
  size_t size_ = 0;
  const char* role_ = "";
  bool leading_ = false;        // trimming the content's leading white space
  size_t trailing_ = SIZE_MAX;  // where the content's trailing white space starts (SIZE_MAX: none)
};

// Renders `messages` into buf (NUL-terminated); *size gets the length without the NUL, also
// when `capacity` is too small (then OutOfRange, naming the size). InvalidArgument for an
// unknown role, InvalidUtf8 for content that is not UTF-8.
Error render_chat(const ChatFormatView& format, const Tokenizer* tokenizer, const ChatMessage* messages, size_t count,
                  bool add_generation_prefix, char* buf, size_t capacity, size_t* size);

}  // namespace tern
