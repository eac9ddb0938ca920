// Structured output in tern-server: OpenAI's response_format, tools / tool_choice and tool
// messages read from a request, and the shapes of a reply that is a tool call (whole or
// streamed). How tools are shown to the model, the grammar that holds the reply to them and
// how a call is read back are the library's (runtime/chat, tern_chat_complete).
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "tools/server/grammar_cache.h"
#include "tools/server/server_api.h"

namespace tern::server {

// The grammars requests' structured parts turned into (tern_chat_grammar), keyed by those parts.
SchemaGrammarCache& schema_grammar_cache();

// A whole reply with a tool call: message {role, content: null, tool_calls: [...]}; the
// finish reason "tool_calls", or "length" for a call cut by max_tokens.
nlohmann::json tool_call_body(const std::string& id, int64_t created, const std::string& model,
                              const std::string& call_id, const std::string& name, const std::string& arguments,
                              const std::string& finish_reason, const Usage& usage);
// Streamed tool-call chunks: the first (role, id, type, name, empty arguments) and then
// argument pieces, as OpenAI sends them.
std::string tool_call_chunk(const std::string& id, int64_t created, const std::string& model,
                            const std::string* call_id, const std::string* name, const std::string& arguments,
                            bool first);
std::string new_call_id();

}  // namespace tern::server
