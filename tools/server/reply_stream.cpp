// Replies whole and streamed, tool calls and logprobs included (reply_stream.h).
#include "tools/server/reply_stream.h"

#include <atomic>
#include <cstdio>
#include <ctime>
#include <utility>

namespace tern::server {

using nlohmann::json;

std::string new_id(bool chat) {
  static std::atomic<uint64_t> counter{0};
  char buf[64];
  std::snprintf(buf, sizeof buf, "%s-%llx%04llx", chat ? "chatcmpl" : "cmpl",
                static_cast<unsigned long long>(std::time(nullptr)),
                static_cast<unsigned long long>(counter++ & 0xffff));
  return buf;
}

namespace {

json bytes_of(const std::string& token) {
  json b = json::array();
  for (unsigned char c : token) b.push_back(static_cast<int>(c));
  return b;
}

}  // namespace

json logprobs_body(bool chat, const std::vector<TokenLogprob>& tokens, size_t offset) {
  if (chat) {
    json content = json::array();
    for (const TokenLogprob& t : tokens) {
      json top = json::array();
      for (const auto& [token, logprob] : t.top) {
        top.push_back({{"token", token}, {"logprob", logprob}, {"bytes", bytes_of(token)}});
      }
      content.push_back(
          {{"token", t.token}, {"logprob", t.logprob}, {"bytes", bytes_of(t.token)}, {"top_logprobs", top}});
    }
    return json{{"content", content}, {"refusal", nullptr}};
  }
  json texts = json::array(), values = json::array(), tops = json::array(), offsets = json::array();
  for (const TokenLogprob& t : tokens) {
    texts.push_back(t.token);
    values.push_back(t.logprob);
    json top = json::object();
    for (const auto& [token, logprob] : t.top) top[token] = logprob;
    tops.push_back(top);
    offsets.push_back(offset);
    offset += t.token.size();
  }
  return json{{"tokens", texts}, {"token_logprobs", values}, {"top_logprobs", tops}, {"text_offset", offsets}};
}

json reply_body(bool chat, const std::string& id, int64_t created, const std::string& model, const GenerationRequest& r,
                const Generation& g) {
  const Usage usage{g.prompt_tokens, g.completion_tokens, g.reused_tokens};
  const json logprobs = r.logprobs ? logprobs_body(chat, g.logprobs) : json(nullptr);
  if (!g.call) return completion_body(chat, id, created, model, g.text, g.finish_reason, usage, logprobs);
  // A call cut by max_tokens keeps the shape of a call (finish reason "length").
  json body = tool_call_body(id, created, model, new_call_id(), g.call_name, g.call_arguments, g.finish_reason, usage);
  body["choices"][0]["logprobs"] = logprobs;
  return body;
}

ReplyStream::ReplyStream(const GenerationRequest& r, std::string id, int64_t created, std::string model, Writer write,
                         size_t index)
    : request_(r),
      id_(std::move(id)),
      created_(created),
      model_(std::move(model)),
      write_(std::move(write)),
      index_(index) {}

json ReplyStream::take_logprobs() {
  if (!request_.logprobs) return nullptr;
  json body = logprobs_body(request_.chat, pending_, text_offset_);
  for (const TokenLogprob& t : pending_) text_offset_ += t.token.size();
  pending_.clear();
  return body;
}

bool ReplyStream::content(const std::string& text) {
  const bool ok =
      send(stream_chunk(request_.chat, id_, created_, model_, text, nullptr, first_, take_logprobs(), index_));
  first_ = false;
  return ok;
}

bool ReplyStream::call(const std::string& name) {
  const std::string call_id = new_call_id();
  const bool ok = send(tool_call_chunk(id_, created_, model_, &call_id, &name, "", first_));
  first_ = false;
  return ok;
}

bool ReplyStream::arguments(const std::string& text) {
  return send(tool_call_chunk(id_, created_, model_, nullptr, nullptr, text, false));
}

bool ReplyStream::token(const TokenLogprob& t) {
  pending_.push_back(t);
  return true;
}

void ReplyStream::finish(const std::string& finish_reason) {
  // Tokens whose text never came (an end of the call, a stop string) ride on the last chunk.
  send(stream_chunk(request_.chat, id_, created_, model_, "", &finish_reason, first_,
                    pending_.empty() ? json(nullptr) : take_logprobs(), index_));
}

}  // namespace tern::server
