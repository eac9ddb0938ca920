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

// Appends to a buffer that may be too small, counting every byte regardless.
struct Out {
  char* buf;
  size_t capacity;
  size_t size = 0;
  void put(const char* s, size_t n) {
    if (size < capacity) {
      const size_t room = capacity - size;
      std::memcpy(buf + size, s, n < room ? n : room);
    }
    size += n;
  }
  void put(const char* s) { put(s, std::strlen(s)); }
};

// A prefix or suffix with its "{role}" / "{Role}" placeholders filled in.
void put_template(Out& out, const char* t, const char* role) {
  for (const char* p = t; *p != '\0';) {
    if (std::strncmp(p, "{role}", 6) == 0 || std::strncmp(p, "{Role}", 6) == 0) {
      // Jinja's capitalize: the first character upper case, the rest lower (roles are ASCII).
      const bool capital = p[1] == 'R';
      for (size_t i = 0; role[i] != '\0'; ++i) {
        char c = role[i];
        if (capital) c = i == 0 ? (c >= 'a' && c <= 'z' ? c - 32 : c) : (c >= 'A' && c <= 'Z' ? c + 32 : c);
        out.put(&c, 1);
      }
      p += 6;
    } else {
      out.put(p, 1);
      ++p;
    }
  }
}

}  // namespace

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

Error render_chat(const ChatFormatView& format, const Tokenizer* tokenizer, const ChatMessage* messages, size_t count,
                  bool add_generation_prefix, char* buf, size_t capacity, size_t* size) {
  TERN_CHECK_OR_RETURN(messages != nullptr || count == 0, Error::InvalidArgument, "chat: null messages");
  TERN_CHECK_OR_RETURN(size != nullptr && (buf != nullptr || capacity == 0), Error::InvalidArgument,
                       "chat: null output");
  *size = 0;
  for (size_t i = 0; i < count; ++i) {
    const char* role = messages[i].role;
    TERN_CHECK_OR_RETURN(role != nullptr && messages[i].content != nullptr, Error::InvalidArgument,
                         "chat message %zu has a null role or content", i);
    TERN_CHECK_OR_RETURN(std::strcmp(role, "system") == 0 || std::strcmp(role, "user") == 0 ||
                             std::strcmp(role, "assistant") == 0 || std::strcmp(role, "tool") == 0,
                         Error::InvalidArgument,
                         "chat message %zu has the unknown role '%.40s' (system, user, assistant, tool)", i, role);
    const uint8_t* c = reinterpret_cast<const uint8_t*>(messages[i].content);
    const size_t n = std::strlen(messages[i].content);
    for (size_t at = 0; at < n;) {
      const unicode::Decoded d = unicode::decode_utf8(c + at, n - at);
      TERN_CHECK_OR_RETURN(d.valid, Error::InvalidUtf8, "chat message %zu: invalid UTF-8 at byte %zu", i, at);
      at += d.length;
    }
  }
  Out out{buf, capacity};
  if (format.bos_first && tokenizer != nullptr && count > 0) {
    const PieceView bos = tokenizer->piece(tokenizer->bos_id());
    out.put(bos.data, bos.size);
  }
  for (size_t i = 0; i < count; ++i) {
    // A tool's result: LLaMA 3.1's "ipython" turn in the llama3 format, a "Tool" turn in the others.
    const char* role = messages[i].role;
    if (std::strcmp(role, "tool") == 0 && std::strcmp(format.name, "llama3") == 0) role = "ipython";
    put_template(out, format.message_prefix, role);
    const uint8_t* c = reinterpret_cast<const uint8_t*>(messages[i].content);
    size_t begin = 0, end = std::strlen(messages[i].content);
    if (format.trim_content) {
      while (begin < end) {
        const unicode::Decoded d = unicode::decode_utf8(c + begin, end - begin);
        if (!strip_space(d.cp)) break;
        begin += d.length;
      }
      while (end > begin) {
        size_t start = end - 1;  // back to the last character's lead byte
        while (start > begin && (c[start] & 0xC0) == 0x80) --start;
        if (!strip_space(unicode::decode_utf8(c + start, end - start).cp)) break;
        end = start;
      }
    }
    out.put(messages[i].content + begin, end - begin);
    put_template(out, format.message_suffix, role);
  }
  if (add_generation_prefix || format.generation_always) out.put(format.generation_prefix);
  *size = out.size;
  if (out.size + 1 > capacity) {
    if (capacity > 0) buf[capacity - 1] = '\0';
    return fail(Error::OutOfRange, "the chat text is %zu bytes; the buffer holds %zu (with the NUL)", out.size,
                capacity);
  }
  buf[out.size] = '\0';
  return Error::Ok;
}

}  // namespace tern
