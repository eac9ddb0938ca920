#include "runtime/chat/tool_call_scanner.h"

#include <cstring>
#include <initializer_list>

namespace tern::chat {

namespace {

bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// How far text[0, n) matches the start of a call, {"name": "<name>", "arguments": ...
// Returns 1 when it is one (*args: where the arguments value starts; *name, *name_size), 0
// while it may still become one, -1 when it cannot.
int call_prefix(const char* text, size_t n, size_t* args, const char** name, size_t* name_size) {
  size_t i = 0;
  auto ws = [&] {
    while (i < n && is_ws(text[i])) ++i;
  };
  auto literal = [&](const char* l) -> int {  // 1 matched, 0 text ended inside, -1 differs
    for (const char* p = l; *p != '\0'; ++p, ++i) {
      if (i == n) return 0;
      if (text[i] != *p) return -1;
    }
    return 1;
  };
  // The pieces with optional white space between them; 1 when all matched.
  auto pieces = [&](std::initializer_list<const char*> list) -> int {
    bool first = true;
    for (const char* piece : list) {
      if (!first) ws();
      first = false;
      const int m = literal(piece);
      if (m != 1) return m;
    }
    return 1;
  };
  int m;
  if ((m = pieces({"{", "\"name\"", ":", "\""})) != 1) return m;  // the reply opens with the brace
  const size_t start = i;
  while (i < n && text[i] != '"') {
    if (text[i] == '\\' || i - start >= kMaxFunctionName) return -1;  // names have no escapes
    ++i;
  }
  if (i == n) return 0;
  *name = text + start;
  *name_size = i - start;
  ++i;
  ws();
  if ((m = pieces({",", "\"arguments\"", ":"})) != 1) return m;
  ws();
  if (i == n) return 0;
  *args = i;
  return 1;
}

}  // namespace

bool ToolCallScanner::push(const char* text, size_t size) {
  if (kind_ == Kind::Content) return sink_.content(text, size);
  if (kind_ == Kind::Call) return scan_arguments(text, size);
  // Undecided: hold the text until it shows whether it opens a call.
  const size_t take = size < kHeld - held_size_ ? size : kHeld - held_size_;
  std::memcpy(held_ + held_size_, text, take);
  held_size_ += take;
  size_t args = 0, name_size = 0;
  const char* name = nullptr;
  const int m = call_prefix(held_, held_size_, &args, &name, &name_size);
  if (m < 0 || (m == 0 && held_size_ == kHeld)) {
    kind_ = Kind::Content;
    if (!sink_.content(held_, held_size_)) return false;
    return take == size || sink_.content(text + take, size - take);
  }
  if (m == 0) return true;
  kind_ = Kind::Call;
  if (!sink_.call(name, name_size)) return false;
  if (!scan_arguments(held_ + args, held_size_ - args)) return false;
  return take == size || scan_arguments(text + take, size - take);
}

bool ToolCallScanner::finish(bool cut) {
  if (kind_ != Kind::Undecided) return true;
  if (!cut) {
    kind_ = Kind::Content;
    return held_size_ == 0 || sink_.content(held_, held_size_);
  }
  // The name as far as it was written: after {"name":" (with the white space between).
  const char* name = held_;
  size_t size = 0;
  const char* quote = static_cast<const char*>(std::memchr(held_, ':', held_size_));
  if (quote != nullptr) quote = static_cast<const char*>(std::memchr(quote, '"', held_ + held_size_ - quote));
  if (quote != nullptr) {
    name = quote + 1;
    size = static_cast<size_t>(held_ + held_size_ - name);
  }
  const Tool* match = nullptr;
  size_t matches = 0;
  for (size_t i = 0; i < n_tools_; ++i) {
    if (std::strncmp(tools_[i].name, name, size) == 0) {
      match = &tools_[i];
      ++matches;
    }
  }
  kind_ = Kind::Call;
  if (matches == 1) return sink_.call(match->name, std::strlen(match->name));
  return sink_.call(name, size);
}

// The arguments value: up to where its brackets close (or a scalar ends).
bool ToolCallScanner::scan_arguments(const char* text, size_t size) {
  if (done_) return true;
  size_t i = 0;
  for (; i < size && !done_; ++i) {
    const char c = text[i];
    if (in_string_) {
      if (escaped_) {
        escaped_ = false;
      } else if (c == '\\') {
        escaped_ = true;
      } else if (c == '"') {
        in_string_ = false;
        if (depth_ == 0) done_ = true;
      }
      continue;
    }
    if (c == '"') {
      in_string_ = true;
    } else if (c == '{' || c == '[') {
      ++depth_;
    } else if (c == '}' || c == ']') {
      if (depth_ == 0) {  // the call's own '}' after a scalar
        done_ = true;
        break;
      }
      if (--depth_ == 0) done_ = true;
    } else if (depth_ == 0 && (c == ',' || is_ws(c))) {
      done_ = true;
      break;
    }
  }
  return i == 0 || sink_.arguments(text, i);
}

}  // namespace tern::chat
