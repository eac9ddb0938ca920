#include "tools/server/server_api.h"

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>

#include "tools/server/grammar_cache.h"

namespace tern::server {

using nlohmann::json;

json error_body(const ApiError& e) {
  json err = {{"message", e.message}, {"type", e.type}};
  err["param"] = e.param.empty() ? json(nullptr) : json(e.param);
  err["code"] = e.code.empty() ? json(nullptr) : json(e.code);
  return json{{"error", err}};
}

bool valid_utf8(const std::string& s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  for (size_t i = 0; i < n;) {
    const unsigned char c = p[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len;
    uint32_t cp, min;
    if (c >= 0xC2 && c <= 0xDF)
      len = 2, cp = c & 0x1F, min = 0x80;
    else if (c >= 0xE0 && c <= 0xEF)
      len = 3, cp = c & 0x0F, min = 0x800;
    else if (c >= 0xF0 && c <= 0xF4)
      len = 4, cp = c & 0x07, min = 0x10000;
    else
      return false;
    if (i + len > n) return false;
    for (size_t k = 1; k < len; ++k) {
      if ((p[i + k] & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (p[i + k] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += len;
  }
  return true;
}

namespace {

bool fail(ApiError* e, std::string message, std::string param, int status = 400, std::string code = "") {
  e->status = status;
  e->message = std::move(message);
  e->param = std::move(param);
  e->code = std::move(code);
  return false;
}

// The optional "model" field: any string names the one model served (as llama.cpp's server
// takes it: a client configured for another name still works); `out` gets the served name.
bool parse_model(const json& j, const std::string& model_name, std::string* out, ApiError* e) {
  if (j.contains("model") && !j["model"].is_null() && !j["model"].is_string()) {
    return fail(e, "'model' must be a string", "model");
  }
  *out = model_name;
  return true;
}

// A number field in [lo, hi] (absent: keep *out).
bool number(const json& j, const char* key, double lo, double hi, double* out, ApiError* e) {
  if (!j.contains(key) || j[key].is_null()) return true;
  if (!j[key].is_number()) return fail(e, std::string("'") + key + "' must be a number", key);
  const double v = j[key].get<double>();
  if (!(v >= lo && v <= hi)) {
    return fail(e,
                std::string("'") + key + "' is " + j[key].dump() + "; it must be in [" + json(lo).dump() + ", " +
                    json(hi).dump() + "]",
                key);
  }
  *out = v;
  return true;
}

// Chat: "logprobs" a boolean and "top_logprobs" 0 to 20 (with logprobs); completions (the
// legacy API): "logprobs" 0 to 5, the alternatives per token.
bool parse_logprobs(const json& j, GenerationRequest* r, ApiError* e) {
  const bool given = j.contains("logprobs") && !j["logprobs"].is_null();
  if (!r->chat) {
    if (!given) return true;
    const json& n = j["logprobs"];
    if (!n.is_number_integer() || n.get<int64_t>() < 0 || n.get<int64_t>() > 5) {
      return fail(e, "'logprobs' must be an integer from 0 to 5 (the alternatives per token)", "logprobs");
    }
    r->logprobs = true;
    r->top_logprobs = n.get<uint32_t>();
    return true;
  }
  if (given) {
    if (!j["logprobs"].is_boolean()) return fail(e, "'logprobs' must be a boolean", "logprobs");
    r->logprobs = j["logprobs"].get<bool>();
  }
  if (j.contains("top_logprobs") && !j["top_logprobs"].is_null()) {
    const json& n = j["top_logprobs"];
    if (!n.is_number_integer() || n.get<int64_t>() < 0 || n.get<int64_t>() > 20) {
      return fail(e, "'top_logprobs' must be an integer from 0 to 20", "top_logprobs");
    }
    if (!r->logprobs) return fail(e, "'top_logprobs' needs 'logprobs': true", "top_logprobs");
    r->top_logprobs = n.get<uint32_t>();
  }
  return true;
}

bool parse_fields(const json& j, GenerationRequest* r, ApiError* e) {
  double v = 0;
  if (j.contains("max_tokens") || j.contains("max_completion_tokens")) {
    const char* key = j.contains("max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
    if (!j[key].is_null()) {
      if (!j[key].is_number_integer()) return fail(e, std::string("'") + key + "' must be an integer", key);
      const int64_t n = j[key].get<int64_t>();
      if (n < 1) return fail(e, std::string("'") + key + "' must be at least 1, got " + std::to_string(n), key);
      r->max_tokens = n;
    }
  }
  v = r->temperature;
  if (!number(j, "temperature", 0.0, 2.0, &v, e)) return false;
  r->temperature = static_cast<float>(v);
  v = r->top_p;
  if (!number(j, "top_p", 0.0, 1.0, &v, e)) return false;
  if (v == 0.0) v = 1e-6;  // "top_p 0" asks for the single most likely token
  r->top_p = static_cast<float>(v);
  v = r->presence_penalty;
  if (!number(j, "presence_penalty", -2.0, 2.0, &v, e)) return false;
  r->presence_penalty = static_cast<float>(v);
  v = r->frequency_penalty;
  if (!number(j, "frequency_penalty", -2.0, 2.0, &v, e)) return false;
  r->frequency_penalty = static_cast<float>(v);
  if (j.contains("seed") && !j["seed"].is_null()) {
    if (!j["seed"].is_number_integer()) return fail(e, "'seed' must be an integer", "seed");
    r->seed = static_cast<uint64_t>(j["seed"].get<int64_t>());
  }
  if (j.contains("n") && !j["n"].is_null() && !(j["n"].is_number_integer() && j["n"].get<int64_t>() == 1)) {
    return fail(e, "'n' must be 1: one choice per request", "n");
  }
  if (j.contains("stop") && !j["stop"].is_null()) {
    const json& s = j["stop"];
    if (s.is_string()) {
      r->stop.push_back(s.get<std::string>());
    } else if (s.is_array() && s.size() <= 4) {
      for (const json& x : s) {
        if (!x.is_string()) return fail(e, "'stop' must be a string or an array of up to 4 strings", "stop");
        r->stop.push_back(x.get<std::string>());
      }
    } else {
      return fail(e, "'stop' must be a string or an array of up to 4 strings", "stop");
    }
    for (const std::string& x : r->stop) {
      if (x.empty() || x.size() > 64) return fail(e, "each stop string must have 1 to 64 bytes", "stop");
    }
  }
  if (j.contains("logit_bias") && !j["logit_bias"].is_null()) {
    const json& b = j["logit_bias"];
    if (!b.is_object()) return fail(e, "'logit_bias' must map token ids to numbers", "logit_bias");
    if (b.size() > 300) return fail(e, "'logit_bias' has more than 300 entries", "logit_bias");
    for (auto it = b.begin(); it != b.end(); ++it) {
      char* end = nullptr;
      const long id = std::strtol(it.key().c_str(), &end, 10);
      if (it.key().empty() || *end != '\0' || id < 0 || id > std::numeric_limits<int32_t>::max()) {
        return fail(e, "'logit_bias' key '" + it.key() + "' is not a token id", "logit_bias");
      }
      if (!it.value().is_number() || !(it.value().get<double>() >= -100.0 && it.value().get<double>() <= 100.0)) {
        return fail(e, "'logit_bias' values must be numbers in [-100, 100]", "logit_bias");
      }
      r->logit_bias[static_cast<int32_t>(id)] = it.value().get<float>();
    }
  }
  if (j.contains("stream") && !j["stream"].is_null()) {
    if (!j["stream"].is_boolean()) return fail(e, "'stream' must be a boolean", "stream");
    r->stream = j["stream"].get<bool>();
  }
  if (!parse_logprobs(j, r, e)) return false;
  if (j.contains("stream_options") && j["stream_options"].is_object()) {
    const json& o = j["stream_options"];
    if (o.contains("include_usage") && o["include_usage"].is_boolean())
      r->include_usage = o["include_usage"].get<bool>();
  }
  return true;
}

// A token id as JSON: an integer in [0, 2^31).
bool token_id(const json& x, int32_t* out) {
  if (!x.is_number_integer()) return false;
  const int64_t v = x.get<int64_t>();
  if (v < 0 || v > std::numeric_limits<int32_t>::max()) return false;
  *out = static_cast<int32_t>(v);
  return true;
}

// A non-empty array of token ids into `out`; false (the message in *why) otherwise.
bool token_list(const json& a, std::vector<int32_t>* out, std::string* why) {
  if (!a.is_array() || a.empty()) {
    *why = a.is_array() ? "is empty" : "must be an array of token ids";
    return false;
  }
  out->reserve(a.size());
  for (const json& x : a) {
    int32_t id = 0;
    if (!token_id(x, &id)) {
      *why = "holds " + x.dump() + ", which is not a token id (an integer from 0)";
      return false;
    }
    out->push_back(id);
  }
  return true;
}

// /v1/completions' "prompt": a string, an array of strings, an array of token ids, or an
// array of token-id arrays (OpenAI's forms); "echo" and whether "logprobs" comes with it.
bool parse_prompts(const json& j, GenerationRequest* r, ApiError* e) {
  static const char* kForms =
      "'prompt' must be a string, an array of strings, an array of token ids or an array of token-id arrays";
  if (!j.contains("prompt")) return fail(e, kForms, "prompt");
  const json& p = j["prompt"];
  std::string why;
  if (p.is_string()) {
    r->prompts.push_back({p.get<std::string>(), {}});
  } else if (p.is_array() && !p.empty() && p[0].is_number()) {
    CompletionPrompt one;
    if (!token_list(p, &one.ids, &why)) return fail(e, "'prompt' " + why, "prompt");
    r->prompts.push_back(std::move(one));
  } else if (p.is_array() && !p.empty()) {
    if (p.size() > kMaxCompletionPrompts) {
      return fail(
          e, "'prompt' has " + std::to_string(p.size()) + " prompts; at most " + std::to_string(kMaxCompletionPrompts),
          "prompt");
    }
    const bool texts = p[0].is_string();
    for (size_t i = 0; i < p.size(); ++i) {
      CompletionPrompt one;
      if (texts && p[i].is_string()) {
        one.text = p[i].get<std::string>();
      } else if (texts || !token_list(p[i], &one.ids, &why)) {
        return fail(e,
                    texts ? std::string(kForms) + " (prompt[" + std::to_string(i) + "] is not a string)"
                          : "'prompt[" + std::to_string(i) + "]' " + (why.empty() ? "is not an array" : why),
                    "prompt");
      }
      r->prompts.push_back(std::move(one));
    }
  } else {
    return fail(e, p.is_array() ? "'prompt' is an empty array" : kForms, "prompt");
  }
  r->prompt = r->prompts[0].text;
  r->prompt_ids = r->prompts[0].ids;
  if (j.contains("echo") && !j["echo"].is_null()) {
    if (!j["echo"].is_boolean()) return fail(e, "'echo' must be a boolean", "echo");
    r->echo = j["echo"].get<bool>();
  }
  if (r->echo && j.contains("logprobs") && !j["logprobs"].is_null() &&
      !(j["logprobs"].is_boolean() && !j["logprobs"].get<bool>())) {
    return fail(e, "'echo' with 'logprobs' is not supported: the prompt's log-probabilities are not computed",
                "logprobs");
  }
  return true;
}

// Message contents and stop strings reach the C API as C strings, which end at a NUL: a
// "\u0000" would silently cut the text there (a stop string would stop on its prefix).
bool no_nul_in_c_strings(const GenerationRequest& r, ApiError* e) {
  for (const Message& m : r.messages) {
    if (m.content.find('\0') != std::string::npos)
      return fail(e, "message content must not contain U+0000", "messages");
    for (const ToolCallMessage& c : m.tool_calls) {
      if (c.name.find('\0') != std::string::npos || c.arguments.find('\0') != std::string::npos) {
        return fail(e, "tool calls must not contain U+0000", "messages");
      }
    }
  }
  for (const std::string& x : r.stop) {
    if (x.find('\0') != std::string::npos) return fail(e, "stop strings must not contain U+0000", "stop");
  }
  return true;
}

}  // namespace

std::optional<GenerationRequest> parse_generation_request(const std::string& body, bool chat,
                                                          const std::string& model_name, ApiError* e) {
  const json j = json::parse(body, nullptr, false);
  if (j.is_discarded()) {
    fail(e, "the request body is not valid JSON", "");
    return std::nullopt;
  }
  if (!j.is_object()) {
    fail(e, "the request body must be a JSON object", "");
    return std::nullopt;
  }
  GenerationRequest r;
  r.chat = chat;
  if (!parse_model(j, model_name, &r.model, e)) return std::nullopt;
  if (chat) {
    if (!j.contains("messages") || !j["messages"].is_array() || j["messages"].empty()) {
      fail(e, "'messages' must be a non-empty array", "messages");
      return std::nullopt;
    }
    for (const json& m : j["messages"]) {
      if (!m.is_object() || !m.contains("role") || !m["role"].is_string()) {
        fail(e, "each message needs a string 'role'", "messages");
        return std::nullopt;
      }
      Message msg;
      msg.role = m["role"].get<std::string>();
      if (msg.role != "system" && msg.role != "developer" && msg.role != "user" && msg.role != "assistant" &&
          msg.role != "tool") {
        fail(e, "unknown message role '" + msg.role + "' (system, developer, user, assistant, tool)", "messages");
        return std::nullopt;
      }
      if (msg.role == "tool" || (msg.role == "assistant" && m.contains("tool_calls") && !m["tool_calls"].is_null())) {
        if (!parse_tool_message(m, &msg, e)) return std::nullopt;
        r.messages.push_back(std::move(msg));
        continue;
      }
      if (m.contains("content") && m["content"].is_string()) {
        msg.content = m["content"].get<std::string>();
      } else if (m.contains("content") && m["content"].is_array()) {  // [{"type": "text", "text": ...}]
        for (const json& part : m["content"]) {
          if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") ||
              !part["text"].is_string()) {
            fail(e, "message content parts must be {\"type\": \"text\", \"text\": ...}", "messages");
            return std::nullopt;
          }
          msg.content += part["text"].get<std::string>();
        }
      } else {
        fail(e, "each message needs a string 'content'", "messages");
        return std::nullopt;
      }
      r.messages.push_back(std::move(msg));
    }
  } else {
    if (!parse_prompts(j, &r, e)) return std::nullopt;
  }
  if (!parse_fields(j, &r, e)) return std::nullopt;
  if (!no_nul_in_c_strings(r, e)) return std::nullopt;
  if (!parse_structured_output(body, chat, &r.structured, e)) return std::nullopt;
  return r;
}

static json usage_body(const Usage& u) {
  return json{{"prompt_tokens", u.prompt_tokens},
              {"completion_tokens", u.completion_tokens},
              {"total_tokens", u.prompt_tokens + u.completion_tokens},
              {"prompt_tokens_details", {{"cached_tokens", u.cached_tokens}}}};
}

namespace {

std::string& fingerprint_storage() {
  static std::string fingerprint;
  return fingerprint;
}

// The fields every completion object and chunk starts with.
json completion_head(const char* object, const std::string& id, int64_t created, const std::string& model) {
  json j = {{"id", id}, {"object", object}, {"created", created}, {"model", model}};
  if (!system_fingerprint().empty()) j["system_fingerprint"] = system_fingerprint();
  return j;
}

std::string event(const json& j) { return "data: " + j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n"; }

}  // namespace

void set_system_fingerprint(std::string fingerprint) { fingerprint_storage() = std::move(fingerprint); }
const std::string& system_fingerprint() { return fingerprint_storage(); }

std::string bundle_fingerprint(const std::string& bundle_path, const std::string& version) {
  const std::string plain = "tern-" + version;
  // Only a regular file is read: opening a FIFO would block the server before it listens (the
  // loader refuses special files with a message of its own).
  struct stat st {};
  if (::stat(bundle_path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return plain;
  std::ifstream in(bundle_path, std::ios::binary);
  std::string header(4, '\0');
  if (!in.read(header.data(), 4)) return plain;
  const auto* size_bytes = reinterpret_cast<const unsigned char*>(header.data());
  const uint32_t n = uint32_t{size_bytes[0]} | uint32_t{size_bytes[1]} << 8 | uint32_t{size_bytes[2]} << 16 |
                     uint32_t{size_bytes[3]} << 24;
  if (n > (256u << 20)) return plain;  // not a bundle's header: it holds metadata only
  header.resize(4 + static_cast<size_t>(n));
  if (!in.read(header.data() + 4, n)) return plain;
  char hex[17];  // FNV-1a over the size prefix and the FlatBuffer
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(fnv1a64(header)));
  return plain + "-" + std::string(hex, 12);
}

json completion_body(bool chat, const std::string& id, int64_t created, const std::string& model,
                     const std::string& text, const std::string& finish_reason, const Usage& usage,
                     const json& logprobs) {
  if (!chat) return text_completion_body(id, created, model, {TextChoice{text, finish_reason, logprobs}}, usage);
  json body = completion_head("chat.completion", id, created, model);
  body["choices"] = json::array({json{{"index", 0},
                                      {"finish_reason", finish_reason},
                                      {"logprobs", logprobs},
                                      {"message", {{"role", "assistant"}, {"content", text}}}}});
  body["usage"] = usage_body(usage);
  return body;
}

json text_completion_body(const std::string& id, int64_t created, const std::string& model,
                          const std::vector<TextChoice>& choices, const Usage& usage) {
  json body = completion_head("text_completion", id, created, model);
  json list = json::array();
  for (size_t i = 0; i < choices.size(); ++i) {
    list.push_back(json{{"index", i},
                        {"finish_reason", choices[i].finish_reason},
                        {"logprobs", choices[i].logprobs},
                        {"text", choices[i].text}});
  }
  body["choices"] = std::move(list);
  body["usage"] = usage_body(usage);
  return body;
}

std::string stream_chunk(bool chat, const std::string& id, int64_t created, const std::string& model,
                         const std::string& text, const std::string* finish_reason, bool first, const json& logprobs,
                         size_t index) {
  json choice = {{"index", index},
                 {"finish_reason", finish_reason ? json(*finish_reason) : json(nullptr)},
                 {"logprobs", logprobs}};
  if (chat) {
    json delta = json::object();
    if (first) delta["role"] = "assistant";
    if (!text.empty() || (first && finish_reason == nullptr)) delta["content"] = text;
    choice["delta"] = delta;
  } else {
    choice["text"] = text;
  }
  json j = completion_head(chat ? "chat.completion.chunk" : "text_completion", id, created, model);
  j["choices"] = json::array({choice});
  return event(j);
}

std::string stream_usage_chunk(bool chat, const std::string& id, int64_t created, const std::string& model,
                               const Usage& usage) {
  json j = completion_head(chat ? "chat.completion.chunk" : "text_completion", id, created, model);
  j["choices"] = json::array();
  j["usage"] = usage_body(usage);
  return event(j);
}

namespace {

// The stored prompt names as a list for a message: 'query', 'document'.
std::string quoted_list(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "'" : ", '") + n + "'";
  return out.empty() ? "none" : out;
}

// /v1/embeddings' "input" in any of its four forms into `r`.
bool parse_embedding_input(const json& in, uint32_t vocab_size, EmbeddingRequest* r, ApiError* e) {
  static const char* kForms =
      "'input' must be a string, an array of strings, an array of token ids or an array of token-id arrays";
  std::string why;
  if (in.is_string()) {
    r->input.push_back(in.get<std::string>());
  } else if (in.is_array() && !in.empty() && in[0].is_number()) {
    r->tokens.emplace_back();
    if (!token_list(in, &r->tokens.back(), &why)) return fail(e, "'input' " + why, "input");
  } else if (in.is_array() && !in.empty()) {
    const bool texts = in[0].is_string();
    for (size_t i = 0; i < in.size(); ++i) {
      const std::string at = "'input[" + std::to_string(i) + "]'";
      if (texts && in[i].is_string()) {
        r->input.push_back(in[i].get<std::string>());
      } else if (texts) {
        return fail(e, std::string(kForms) + " (" + at + " is not a string)", "input");
      } else {
        r->tokens.emplace_back();
        if (!token_list(in[i], &r->tokens.back(), &why)) return fail(e, at + " " + why, "input");
      }
    }
  } else {
    return fail(e, in.is_array() ? "'input' is an empty array" : kForms, "input");
  }
  for (size_t i = 0; i < r->input.size(); ++i) {
    if (r->input[i].empty()) {
      return fail(e,
                  r->input.size() == 1 && in.is_string() ? "'input' is an empty string"
                                                         : "'input[" + std::to_string(i) + "]' is an empty string",
                  "input");
    }
  }
  for (size_t i = 0; i < r->tokens.size(); ++i) {
    for (const int32_t id : r->tokens[i]) {
      if (static_cast<uint32_t>(id) >= vocab_size) {
        return fail(e,
                    "token id " + std::to_string(id) + " in 'input" +
                        (in[0].is_array() ? "[" + std::to_string(i) + "]" : "") + "' is outside the vocabulary (0 to " +
                        std::to_string(vocab_size - 1) + ")",
                    "input");
      }
    }
  }
  if (r->count() > kMaxEmbeddingInputs) {
    return fail(e,
                "'input' has " + std::to_string(r->count()) + " inputs; at most " + std::to_string(kMaxEmbeddingInputs),
                "input");
  }
  return true;
}

}  // namespace

std::optional<EmbeddingRequest> parse_embedding_request(const std::string& body, const EmbeddingModel& model,
                                                        ApiError* e) {
  const json j = json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    fail(e, j.is_discarded() ? "the request body is not valid JSON" : "the request body must be a JSON object", "");
    return std::nullopt;
  }
  EmbeddingRequest r;
  if (!parse_model(j, model.name, &r.model, e)) return std::nullopt;
  if (!j.contains("input")) {
    fail(e, "'input' is required: a string, an array of strings or token ids", "input");
    return std::nullopt;
  }
  if (!parse_embedding_input(j["input"], model.vocab_size, &r, e)) return std::nullopt;
  if (j.contains("prompt_name") && !j["prompt_name"].is_null()) {
    const json& p = j["prompt_name"];
    if (!p.is_string()) {
      fail(e, "'prompt_name' must be a string: the name of a prompt stored in the model", "prompt_name");
      return std::nullopt;
    }
    const std::string name = p.get<std::string>();
    if (!name.empty() && std::find(model.prompts.begin(), model.prompts.end(), name) == model.prompts.end()) {
      fail(e, "the model has no prompt named '" + name + "' (it has " + quoted_list(model.prompts) + ")",
           "prompt_name");
      return std::nullopt;
    }
    r.prompt_name = name;
  }
  const uint32_t model_dimensions = model.dimensions;
  if (j.contains("encoding_format") && !j["encoding_format"].is_null()) {
    const json& f = j["encoding_format"];
    if (!f.is_string() || (f != "float" && f != "base64")) {
      fail(e, "'encoding_format' must be \"float\" or \"base64\"", "encoding_format");
      return std::nullopt;
    }
    r.base64 = f == "base64";
  }
  if (j.contains("dimensions") && !j["dimensions"].is_null()) {
    const json& d = j["dimensions"];
    if (!d.is_number_integer() || d.get<int64_t>() < 1 || d.get<int64_t>() > model_dimensions) {
      fail(e, "'dimensions' must be an integer from 1 to " + std::to_string(model_dimensions), "dimensions");
      return std::nullopt;
    }
    r.dimensions = d.get<uint32_t>();
  }
  if (j.contains("user") && !j["user"].is_null() && !j["user"].is_string()) {
    fail(e, "'user' must be a string", "user");
    return std::nullopt;
  }
  return r;
}

std::string base64_encode(const void* data, size_t size) {
  static const char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  const auto* p = static_cast<const uint8_t*>(data);
  std::string out;
  out.reserve((size + 2) / 3 * 4);
  for (size_t i = 0; i < size; i += 3) {
    const uint32_t v =
        (uint32_t{p[i]} << 16) | (i + 1 < size ? uint32_t{p[i + 1]} << 8 : 0) | (i + 2 < size ? p[i + 2] : 0);
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += i + 1 < size ? kAlphabet[(v >> 6) & 63] : '=';
    out += i + 2 < size ? kAlphabet[v & 63] : '=';
  }
  return out;
}

json embeddings_body(const std::string& model, const std::vector<float>& vectors, uint32_t dimensions, bool base64,
                     uint64_t prompt_tokens) {
  json data = json::array();
  const size_t n = dimensions == 0 ? 0 : vectors.size() / dimensions;
  for (size_t i = 0; i < n; ++i) {
    const float* v = vectors.data() + i * dimensions;
    json item = {{"object", "embedding"}, {"index", i}};
    if (base64) {  // little-endian float32, as the OpenAI API sends it (and its clients decode)
      item["embedding"] = base64_encode(v, dimensions * sizeof(float));
    } else {
      item["embedding"] = std::vector<float>(v, v + dimensions);
    }
    data.push_back(std::move(item));
  }
  return json{{"object", "list"},
              {"data", std::move(data)},
              {"model", model},
              {"usage", {{"prompt_tokens", prompt_tokens}, {"total_tokens", prompt_tokens}}}};
}

json model_object(const std::string& model, int64_t created) {
  return json{{"id", model}, {"object", "model"}, {"created", created}, {"owned_by", "tern"}};
}

json models_body(const std::string& model, int64_t created) {
  return json{{"object", "list"}, {"data", json::array({model_object(model, created)})}};
}

bool equals_secret(const std::string& given, const std::string& secret) {
  // volatile: the compiler may not turn the loop into an early-exit comparison.
  volatile unsigned char diff = given.size() == secret.size() ? 0 : 1;
  for (size_t i = 0; i < secret.size(); ++i) {
    const unsigned char g = i < given.size() ? static_cast<unsigned char>(given[i]) : 0;
    diff = static_cast<unsigned char>(diff | (g ^ static_cast<unsigned char>(secret[i])));
  }
  return diff == 0;
}

}  // namespace tern::server
