// The OpenAI-compatible request and response shapes of tern-server, apart from HTTP and the
// model so they can be tested alone: parsing (with the error an API client expects for each
// bad field) and the JSON / server-sent-event bodies.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace tern::server {

// An error answered as {"error": {...}} with an HTTP status.
struct ApiError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;  // the offending field, or empty
  std::string code;   // e.g. "model_not_found", "context_length_exceeded"
};
nlohmann::json error_body(const ApiError& e);

// A call an assistant made earlier in the conversation.
struct ToolCallMessage {
  std::string id;
  std::string name;
  std::string arguments;  // JSON text, as the client sent it
};

struct Message {
  std::string role;
  std::string content;
  bool has_content = true;                  // false: "content" null (an assistant's tool calls only)
  std::vector<ToolCallMessage> tool_calls;  // an assistant's
  std::string tool_call_id;                 // a tool's result: the call it answers
};

// What the reply must look like: OpenAI's response_format and tools / tool_choice, or
// llama.cpp's "grammar" (tools/server/structured_output.h).
// Schemas keep the request's key order (the grammar writes properties in that order).
struct ToolFunction {
  std::string name;
  std::string description;
  nlohmann::ordered_json parameters;  // a JSON Schema for the arguments
};
struct StructuredOutput {
  enum class Format { Text, JsonObject, JsonSchema, Grammar };
  Format format = Format::Text;
  nlohmann::ordered_json schema;  // JsonSchema
  std::string grammar;            // Grammar: GBNF text
  std::vector<ToolFunction> tools;
  enum class ToolChoice { None, Auto, Required, Named };
  ToolChoice tool_choice = ToolChoice::None;  // Auto when tools are given without a choice
  std::string tool_name;                      // Named
};
// response_format, grammar, tools, tool_choice, parallel_tool_calls (tools: chat only), from
// the request body (valid JSON).
bool parse_structured_output(const std::string& body, bool chat, StructuredOutput* out, ApiError* e);
// A message with role "tool" (its content and tool_call_id), or an assistant's with
// "tool_calls" (the calls as sent; the library renders them for the model).
bool parse_tool_message(const nlohmann::json& m, Message* msg, ApiError* e);

// One prompt of a completion request: text, or a text's token ids.
struct CompletionPrompt {
  std::string text;
  std::vector<int32_t> ids;  // non-empty: the prompt is given as these ids
};
inline constexpr size_t kMaxCompletionPrompts = 64;

// What both endpoints ask for. Absent fields keep these defaults.
struct GenerationRequest {
  bool chat = true;
  std::string model;              // the served model's name (any name the client gives means it)
  std::vector<Message> messages;  // chat
  // Completions: `prompt` a string, an array of strings, an array of token ids or an array
  // of such arrays (OpenAI's four forms), one choice each. `prompt` holds the text prepare()
  // runs (the first prompt's; routes.cpp runs each of `prompts` in turn), or `prompt_ids` when
  // it is given as token ids (run as given; `prompt` is then their text, for "echo").
  std::string prompt;
  std::vector<int32_t> prompt_ids;
  std::vector<CompletionPrompt> prompts;
  bool echo = false;        // completions: the prompt in front of each choice's text
  int64_t max_tokens = -1;  // -1: up to the context
  float temperature = 0.8f;
  float top_p = 0.95f;
  std::optional<uint64_t> seed;
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  std::map<int32_t, float> logit_bias;
  std::vector<std::string> stop;  // at most 4
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  bool logprobs = false;       // chat: "logprobs": true; completions: "logprobs": N
  uint32_t top_logprobs = 0;   // chat: "top_logprobs" (at most 20); completions: N (at most 5)
  StructuredOutput structured;
};

// Parses a request body (already known to be valid UTF-8) for /v1/chat/completions
// (chat = true) or /v1/completions. `model_name` is the one model served: any string in the
// request's "model" names it (llama.cpp's behaviour), and the reply says `model_name`.
std::optional<GenerationRequest> parse_generation_request(const std::string& body, bool chat,
                                                          const std::string& model_name, ApiError* error);

// True when `s` is well-formed UTF-8 (no overlongs, surrogates or values past U+10FFFF).
bool valid_utf8(const std::string& s);

struct Usage {
  uint32_t prompt_tokens = 0;
  uint32_t completion_tokens = 0;
  uint32_t cached_tokens = 0;  // prompt tokens the slot already held (not run again)
};

// "system_fingerprint" on every completion object and chunk: which build served which
// bundle (bundle_fingerprint). Set once before serving; empty (the default): left out.
void set_system_fingerprint(std::string fingerprint);
const std::string& system_fingerprint();
// "tern-<version>-<12 hex digits>": the digits hash the bundle's header (its size prefix and
// FlatBuffer: config, tensor table, tokenizer and the recorded checksums of the weights), so
// two bundles differ in them unless their bytes are the same. Reads the header only;
// "tern-<version>" when the file cannot be read.
std::string bundle_fingerprint(const std::string& bundle_path, const std::string& version);

// A whole (non-streamed) answer; `logprobs` is the choice's (null: none asked for).
nlohmann::json completion_body(bool chat, const std::string& id, int64_t created, const std::string& model,
                               const std::string& text, const std::string& finish_reason, const Usage& usage,
                               const nlohmann::json& logprobs = nullptr);
// A whole text completion with one choice per prompt, choice i at index i.
struct TextChoice {
  std::string text;
  std::string finish_reason;
  nlohmann::json logprobs;  // null: none asked for
};
nlohmann::json text_completion_body(const std::string& id, int64_t created, const std::string& model,
                                    const std::vector<TextChoice>& choices, const Usage& usage);
// One server-sent event, "data: {...}\n\n": a piece of text, or (finish_reason set, text
// empty) the last chunk; usage (when include_usage) goes into a final chunk of its own.
// `index`: the choice (a completion's prompt) the piece belongs to.
std::string stream_chunk(bool chat, const std::string& id, int64_t created, const std::string& model,
                         const std::string& text, const std::string* finish_reason, bool first,
                         const nlohmann::json& logprobs = nullptr, size_t index = 0);
std::string stream_usage_chunk(bool chat, const std::string& id, int64_t created, const std::string& model,
                               const Usage& usage);
inline const char* stream_done() { return "data: [DONE]\n\n"; }

// GET /v1/models: the one model; GET /v1/models/{id}: its object.
nlohmann::json model_object(const std::string& model, int64_t created);
nlohmann::json models_body(const std::string& model, int64_t created);

// What /v1/embeddings checks a request against.
struct EmbeddingModel {
  std::string name;
  uint32_t dimensions = 0;
  uint32_t vocab_size = 0;
  std::vector<std::string> prompts;  // the names of the prompts stored in the bundle
};

// POST /v1/embeddings: `input` a string, an array of strings, an array of token ids or an
// array of such arrays (OpenAI's four forms; none may be empty, ids below the vocabulary
// size), `prompt_name` (a prompt stored in the bundle, as sentence-transformers names it;
// "" none; absent or null: the bundle's default), `encoding_format` "float" (default) or
// "base64" (little-endian float32 bytes), `dimensions` (the first D, re-normalized),
// `model` (any name), `user` (ignored).
struct EmbeddingRequest {
  std::string model;
  std::vector<std::string> input;            // texts, or
  std::vector<std::vector<int32_t>> tokens;  // token-id inputs
  std::optional<std::string> prompt_name;
  bool base64 = false;
  uint32_t dimensions = 0;  // 0: the model's
  size_t count() const { return tokens.empty() ? input.size() : tokens.size(); }
};
inline constexpr size_t kMaxEmbeddingInputs = 2048;  // as OpenAI's API
std::optional<EmbeddingRequest> parse_embedding_request(const std::string& body, const EmbeddingModel& model,
                                                        ApiError* error);
// {"object": "list", "data": [{"object": "embedding", "index", "embedding"}...], "model", "usage"}.
nlohmann::json embeddings_body(const std::string& model, const std::vector<float>& vectors, uint32_t dimensions,
                               bool base64, uint64_t prompt_tokens);
std::string base64_encode(const void* data, size_t size);

// Whether `given` equals `secret`, in time that depends on the secret's length only (no early
// exit at the first differing byte for a client to measure).
bool equals_secret(const std::string& given, const std::string& secret);

}  // namespace tern::server
