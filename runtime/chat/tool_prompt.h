// How a chat request reaches the model: its messages in the bundle's chat format, the tools
// shown in the system message, earlier calls written as the model writes them.
//
// Tools: a system message (the request's first one, extended, or a new first one) says to
// answer a call with only {"name": ..., "arguments": ...} and lists each function as a JSON
// line {"name", "description", "parameters"}. An assistant turn's earlier calls follow its
// content as that object, one per line; a tool's result is the format's tool turn.
#pragma once

#include <cstddef>

#include "platform/error.h"
#include "runtime/chat/chat_request.h"
#include "runtime/text/chat.h"

namespace tern {
class Tokenizer;
}

namespace tern::chat {

// The prompt of a chat request (validated), ending with the assistant's header, into buf
// (NUL-terminated); *size is its length, also when it does not fit (then OutOfRange).
Error render_prompt(const ChatFormatView& format, const Tokenizer* tokenizer, const Request& r, char* buf,
                    size_t capacity, size_t* size);

}  // namespace tern::chat
