#include "runtime/text/chat.h"

#include <cstring>

#include "runtime/text/tokenizer.h"
#include "runtime/text/unicode.h"
#include "schema/bundle_generated.h"

namespace tern {

namespace {

const char* str_or(const flatbuffers::String* s, const char* fallback) { return s != nullptr ? s->c_str() : fallback; }

// White space as Python's str.strip() (Jinja's trim) sees it: Unicode White_Space plus the
// four information separators U+001C..U+001F.
bool strip_space(uint32_t cp) { return unicode::is_whitespace(cp) || (cp >= 0x1C && cp <= 0x1F); }

}  // namespace

Error check_chat_utf8(const char* text, size_t size, size_t index) {
  const uint8_t* c = reinterpret_cast<const uint8_t*>(text);
  for (size_t at = 0; at < size;) {
    const unicode::Decoded d = unicode::decode_utf8(c + at, size - at);
    TERN_CHECK_OR_RETURN(d.valid, Error::InvalidUtf8, "chat message %zu: invalid UTF-8 at byte %zu", index, at);
    at += d.length;
  }
  return Error::Ok;
}

namespace {}  // namespace

ChatFormatView chat_format_of(const schema::Tokenizer* table, const Tokenizer* tokenizer) {
  ChatFormatView v;
  v.bos_first = tokenizer != nullptr && tokenizer->add_bos_default() && tokenizer->bos_id() >= 0;
  const schema::ChatFormat* f = table != nullptr ? table->chat_format() : nullptr;
  if (f == nullptr) return v;
  v.name = str_or(f->name(), "plain");
  v.bos_first = f->bos_first() && tokenizer != nullptr && tokenizer->bos_id() >= 0;
  v.message_prefix = str_or(f->message_prefix(), "");
  v.message_suffix = str_or(f->message_suffix(), "");
  v.trim_content = f->trim_content();
  v.generation_prefix = str_or(f->generation_prefix(), "");
  v.generation_always = f->generation_always();
  v.stop = f->stop() != nullptr && f->stop()->size() > 0 ? f->stop()->c_str() : nullptr;
  return v;
}

Result<const char*> chat_role(const ChatFormatView& format, const char* role, size_t index) {
  TERN_CHECK_OR_RETURN(role != nullptr, Error::InvalidArgument, "chat message %zu has no role", index);
  if (std::strcmp(role, "developer") == 0) return "system";  // OpenAI's newer name for it
  if (std::strcmp(role, "tool") == 0) return std::strcmp(format.name, "llama3") == 0 ? "ipython" : "tool";
  TERN_CHECK_OR_RETURN(
      std::strcmp(role, "system") == 0 || std::strcmp(role, "user") == 0 || std::strcmp(role, "assistant") == 0,
      Error::InvalidArgument,
      "chat message %zu has the unknown role '%.40s' (system, developer, user, assistant, tool)", index, role);
  return role;
}

ChatWriter::ChatWriter(const ChatFormatView& format, const Tokenizer* tokenizer, char* buf, size_t capacity)
    : format_(format), tokenizer_(tokenizer), buf_(buf), capacity_(buf != nullptr ? capacity : 0) {}

void ChatWriter::put(const char* s, size_t n) {
  if (size_ < capacity_) {
    const size_t room = capacity_ - size_;
    std::memcpy(buf_ + size_, s, n < room ? n : room);
  }
  size_ += n;
}

// A prefix or suffix with its "{role}" / "{Role}" placeholders filled in.
void ChatWriter::put_template(const char* t) {
  for (const char* p = t; *p != '\0';) {
    if (std::strncmp(p, "{role}", 6) == 0 || std::strncmp(p, "{Role}", 6) == 0) {
      // Jinja's capitalize: the first character upper case, the rest lower (roles are ASCII).
      const bool capital = p[1] == 'R';
      for (size_t i = 0; role_[i] != '\0'; ++i) {
        char c = role_[i];
        if (capital) c = i == 0 ? (c >= 'a' && c <= 'z' ? c - 32 : c) : (c >= 'A' && c <= 'Z' ? c + 32 : c);
        put(&c, 1);
      }
      p += 6;
    } else {
      put(p, 1);
      ++p;
    }
  }
}

void ChatWriter::start() {
  if (format_.bos_first && tokenizer_ != nullptr) {
    const PieceView bos = tokenizer_->piece(tokenizer_->bos_id());
    put(bos.data, bos.size);
  }
}

void ChatWriter::begin(const char* role) {
  role_ = role;
  put_template(format_.message_prefix);
  leading_ = format_.trim_content;
  trailing_ = SIZE_MAX;
}

void ChatWriter::content(const char* text, size_t size) {
  const uint8_t* c = reinterpret_cast<const uint8_t*>(text);
  for (size_t at = 0; at < size;) {
    const unicode::Decoded d = unicode::decode_utf8(c + at, size - at);
    const size_t n = d.valid ? d.length : 1;
    const bool space = d.valid && strip_space(d.cp);
    if (format_.trim_content && space) {
      if (!leading_) {
        if (trailing_ == SIZE_MAX) trailing_ = size_;
        put(text + at, n);
      }
    } else {
      leading_ = false;
      trailing_ = SIZE_MAX;
      put(text + at, n);
    }
    at += n;
  }
}

void ChatWriter::content(const char* text) { content(text, std::strlen(text)); }

void ChatWriter::end() {
  if (trailing_ != SIZE_MAX) size_ = trailing_;  // Jinja's trim of the content's end
  trailing_ = SIZE_MAX;
  put_template(format_.message_suffix);
}

void ChatWriter::generation_prefix(bool add) {
  if (add || format_.generation_always) put(format_.generation_prefix, std::strlen(format_.generation_prefix));
}

Error ChatWriter::finish(size_t* size) {
  *size = size_;
  if (size_ + 1 > capacity_) {
    if (capacity_ > 0) buf_[capacity_ - 1] = '\0';
    return fail(Error::OutOfRange, "the chat text is %zu bytes; the buffer holds %zu (with the NUL)", size_, capacity_);
  }
  buf_[size_] = '\0';
  return Error::Ok;
}

Error render_chat(const ChatFormatView& format, const Tokenizer* tokenizer, const ChatMessage* messages, size_t count,
                  bool add_generation_prefix, char* buf, size_t capacity, size_t* size) {
  TERN_CHECK_OR_RETURN(messages != nullptr || count == 0, Error::InvalidArgument, "chat: null messages");
  TERN_CHECK_OR_RETURN(size != nullptr && (buf != nullptr || capacity == 0), Error::InvalidArgument,
                       "chat: null output");
  *size = 0;
  for (size_t i = 0; i < count; ++i) {
    TERN_CHECK_OR_RETURN(messages[i].role != nullptr && messages[i].content != nullptr, Error::InvalidArgument,
                         "chat message %zu has a null role or content", i);
    TERN_RETURN_IF_ERROR(chat_role(format, messages[i].role, i).error());
    TERN_RETURN_IF_ERROR(check_chat_utf8(messages[i].content, std::strlen(messages[i].content), i));
  }
  ChatWriter out(format, tokenizer, buf, capacity);
  if (count > 0) out.start();
  for (size_t i = 0; i < count; ++i) {
    out.begin(*chat_role(format, messages[i].role, i));
    out.content(messages[i].content);
    out.end();
  }
  out.generation_prefix(add_generation_prefix);
  return out.finish(size);
}

}  // namespace tern
