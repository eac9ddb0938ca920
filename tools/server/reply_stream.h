// A generation's reply in OpenAI's shapes: whole (its text, or the tool call it is, with its
// logprobs) or streamed as server-sent events, and the ids replies carry.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tools/server/generation.h"
#include "tools/server/server_api.h"
#include "tools/server/structured_output.h"

namespace tern::server {

// A reply's id: "chatcmpl-..." or "cmpl-...", unique in this process.
std::string new_id(bool chat);

// OpenAI's logprobs of a choice: chat {"content": [{token, logprob, bytes, top_logprobs}]},
// completions {"tokens", "token_logprobs", "top_logprobs", "text_offset"} (offsets from
// `offset`, the text before these tokens).
nlohmann::json logprobs_body(bool chat, const std::vector<TokenLogprob>& tokens, size_t offset = 0);

// A whole reply: its text, or the tool call it is.
nlohmann::json reply_body(bool chat, const std::string& id, int64_t created, const std::string& model,
                          const GenerationRequest& r, const Generation& g);

// A streamed reply: text as content deltas, or the call's id and name and then its
// arguments as they are generated (OpenAI's chunk shapes); each token's logprobs ride on the
// chunk that carries its text. `index`: the choice's (a completion's prompt i).
class ReplyStream final : public GenerationEvents {
 public:
  using Writer = std::function<bool(const std::string&)>;
  ReplyStream(const GenerationRequest& r, std::string id, int64_t created, std::string model, Writer write,
              size_t index = 0);

  bool content(const std::string& text) override;
  bool call(const std::string& name) override;
  bool arguments(const std::string& text) override;
  bool token(const TokenLogprob& t) override;

  // The last chunk, with the finish reason.
  void finish(const std::string& finish_reason);

 private:
  bool send(const std::string& event) { return write_(event); }
  nlohmann::json take_logprobs();

  const GenerationRequest& request_;
  std::string id_;
  int64_t created_;
  std::string model_;
  Writer write_;
  size_t index_;
  bool first_ = true;
  std::vector<TokenLogprob> pending_;  // tokens whose text has not been sent yet
  size_t text_offset_ = 0;             // completions: bytes of text sent so far
};

}  // namespace tern::server
