// The grammar a reply follows: a response_format's JSON (any object, or a schema), a GBNF
// grammar as given, or, with tools, exactly a call {"name": <a function>, "arguments": <valid
// against its parameters>} (tool_choice required; a named function: only it), or that or text
// not starting with "{" (auto; with a JSON response_format, that or the JSON reply).
//
// The tools' schemas become one document, anyOf the calls (and the reply), each part's "$ref"
// pointers moved to where it sits, converted by the JSON Schema converter.
#pragma once

#include <cstddef>

#include "platform/error.h"
#include "runtime/chat/chat_request.h"

namespace tern::chat {

// The grammar of a validated request: *grammar points at its text (in buf, or the request's
// own GBNF) and *size is its length; *size 0: no grammar. buf holds the composed schema and
// the grammar; work is the converter's tables (json_schema_work_bytes()). GrammarTooLarge
// when they do not fit in buf; the converter's errors (UnsupportedSchema, InvalidArgument).
Error reply_grammar(const Request& r, char* buf, size_t capacity, void* work, size_t work_bytes, const char** grammar,
                    size_t* size);

}  // namespace tern::chat
