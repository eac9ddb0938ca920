// Replies whole and streamed, tool calls included (reply_stream.h).
#include "tools/server/reply_stream.h"

#include <atomic>
#include <cstdio>
#include <ctime>
#include <utility>

namespace tern::server {

bool offers_tools(const GenerationRequest& r) {
  return !r.structured.tools.empty() && r.structured.tool_choice != StructuredOutput::ToolChoice::None;
}

std::string new_id(bool chat) {
  static std::atomic<uint64_t> counter{0};
  char buf[64];
  std::snprintf(buf, sizeof buf, "%s-%llx%04llx", chat ? "chatcmpl" : "cmpl",
                static_cast<unsigned long long>(std::time(nullptr)),
                static_cast<unsigned long long>(counter++ & 0xffff));
  return buf;
}

nlohmann::json reply_body(bool chat, const std::string& id, int64_t created, const std::string& model,
                          const GenerationRequest& r, const Generation& g) {
  const Usage usage{g.prompt_tokens, g.completion_tokens, g.reused_tokens};
  if (offers_tools(r)) {
    ToolCallScanner call(true);
    call.push(g.text);
    if (call.complete_call())
      return tool_call_body(id, created, model, new_call_id(), call.name(), call.arguments(), usage);
  }
  return completion_body(chat, id, created, model, g.text, g.finish_reason, usage);
}

ReplyStream::ReplyStream(bool chat, std::string id, int64_t created, std::string model, bool tools, Writer write)
    : chat_(chat),
      id_(std::move(id)),
      created_(created),
      model_(std::move(model)),
      call_(tools),
      write_(std::move(write)) {}

bool ReplyStream::piece(const std::string& text) {
  const std::string arguments = call_.push(text);
  switch (call_.kind()) {
    case ToolCallScanner::Kind::Undecided: return true;
    case ToolCallScanner::Kind::Content:
      if (!held_sent_) {  // everything so far, this piece included
        held_sent_ = true;
        return content(call_.text());
      }
      return content(text);
    case ToolCallScanner::Kind::Call:
      if (!held_sent_) {
        held_sent_ = true;
        const std::string call_id = new_call_id();
        if (!send(tool_call_chunk(id_, created_, model_, &call_id, &call_.name(), "", first_))) return false;
        first_ = false;
      }
      return arguments.empty() || send(tool_call_chunk(id_, created_, model_, nullptr, nullptr, arguments, false));
  }
  return true;
}

void ReplyStream::finish(const std::string* finish_reason) {
  if (call_.kind() == ToolCallScanner::Kind::Undecided && !call_.text().empty()) content(call_.text());
  const std::string tool_calls = "tool_calls";
  send(stream_chunk(chat_, id_, created_, model_, "", call_.complete_call() ? &tool_calls : finish_reason, first_));
}

bool ReplyStream::content(const std::string& text) {
  const bool ok = send(stream_chunk(chat_, id_, created_, model_, text, nullptr, first_));
  first_ = false;
  return ok;
}

}  // namespace tern::server
