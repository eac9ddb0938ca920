// tern_chat_complete: a whole chat or completion request on a session. The reply's grammar
// is set (reused when the session holds it), the prompt rendered and tokenized in the slot's
// chat memory and run after the prefix the session already holds, then the reply generated
// with the request's sampler and streamed as events: content, or a tool call's name and
// arguments, and each token's log-probabilities when asked. No allocation.
#pragma once

#include "platform/error.h"
#include "runtime/chat/chat_request.h"
#include "runtime/engine/session.h"

namespace tern::chat {

// `callback` may be null. `result` may be null.
Error complete(Session& session, const Request& request, EventCallback callback, void* user, ChatResult* result);

// The prompt text and the grammar a request would get, into caller memory (the C API's
// tern_chat_prompt / tern_chat_grammar): *size is the length, OutOfRange when it does not fit.
Error prompt_text(const Model& model, const Request& request, char* buf, size_t capacity, size_t* size);
Error grammar_text(const Request& request, char* buf, size_t capacity, size_t* size, void* work, size_t work_bytes,
                   char* scratch, size_t scratch_bytes);

}  // namespace tern::chat
