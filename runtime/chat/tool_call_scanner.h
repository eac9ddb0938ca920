// Reads a reply as it streams: whether it is a tool call (it opens with {"name": "<function>",
// "arguments": ...), the function's name, and the text of "arguments" exactly as generated,
// piece by piece. Fixed memory: the text is held only while it may still open a call.
#pragma once

#include <cstddef>

#include "runtime/chat/chat_request.h"

namespace tern::chat {

class ToolCallScanner {
 public:
  enum class Kind { Undecided, Call, Content };
  // What a piece adds: content, the call's start (its name), argument text.
  struct Sink {
    virtual ~Sink() = default;
    virtual bool content(const char* text, size_t size) = 0;  // false: stop
    virtual bool call(const char* name, size_t size) = 0;
    virtual bool arguments(const char* text, size_t size) = 0;
  };

  // The functions the reply may call (none: everything is content).
  ToolCallScanner(const Tool* tools, size_t n_tools, Sink& sink)
      : kind_(n_tools > 0 ? Kind::Undecided : Kind::Content), tools_(tools), n_tools_(n_tools), sink_(sink) {}
  // The next piece of the reply; false when the sink asked to stop.
  bool push(const char* text, size_t size);
  // The reply ended. Text held while undecided is content after all, unless the reply was
  // `cut` (by max_tokens) while opening a call: then it is that call, named by the function
  // its name's start picks out (or the start itself), with no arguments yet.
  bool finish(bool cut);
  Kind kind() const { return kind_; }
  // The call's arguments value is complete.
  bool complete_call() const { return kind_ == Kind::Call && done_; }

 private:
  bool scan_arguments(const char* text, size_t size);
  // Longest opening of a call: {"name":"<64>","arguments": with the white space the JSON
  // grammar allows around each token (a newline and 20 spaces at most).
  static constexpr size_t kHeld = 512;
  Kind kind_;
  const Tool* tools_;
  size_t n_tools_;
  Sink& sink_;
  char held_[kHeld];
  size_t held_size_ = 0;
  bool done_ = false;  // the arguments value ended
  int depth_ = 0;
  bool in_string_ = false, escaped_ = false;
};

}  // namespace tern::chat
