#include "tools/server/chat_call.h"

#include <cmath>
#include <random>

namespace tern::server {

namespace {

tern_response_format format_of(StructuredOutput::Format f) {
  switch (f) {
    case StructuredOutput::Format::JsonObject: return TERN_RESPONSE_JSON_OBJECT;
    case StructuredOutput::Format::JsonSchema: return TERN_RESPONSE_JSON_SCHEMA;
    case StructuredOutput::Format::Grammar: return TERN_RESPONSE_GRAMMAR;
    case StructuredOutput::Format::Text: break;
  }
  return TERN_RESPONSE_TEXT;
}

tern_tool_choice choice_of(StructuredOutput::ToolChoice c) {
  switch (c) {
    case StructuredOutput::ToolChoice::None: return TERN_TOOL_CHOICE_NONE;
    case StructuredOutput::ToolChoice::Required: return TERN_TOOL_CHOICE_REQUIRED;
    case StructuredOutput::ToolChoice::Named: return TERN_TOOL_CHOICE_FUNCTION;
    case StructuredOutput::ToolChoice::Auto: break;
  }
  return TERN_TOOL_CHOICE_AUTO;
}

std::string dump(const nlohmann::ordered_json& j) {
  return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

}  // namespace

ChatCall::ChatCall(const GenerationRequest& r) : request_(tern_chat_default_request()) {
  const StructuredOutput& s = r.structured;
  if (r.chat) {
    calls_.reserve(r.messages.size());
    for (const Message& m : r.messages) {
      std::vector<tern_tool_call> calls;
      for (const ToolCallMessage& c : m.tool_calls)
        calls.push_back({c.id.c_str(), c.name.c_str(), c.arguments.c_str()});
      calls_.push_back(std::move(calls));
      turns_.push_back({m.role.c_str(), m.has_content ? m.content.c_str() : nullptr,
                        calls_.back().empty() ? nullptr : calls_.back().data(), calls_.back().size(),
                        m.tool_call_id.empty() ? nullptr : m.tool_call_id.c_str()});
    }
    request_.messages = turns_.data();
    request_.n_messages = turns_.size();
  } else if (!r.prompt_ids.empty()) {  // token ids, run as given
    request_.prompt_tokens = r.prompt_ids.data();
    request_.n_prompt_tokens = r.prompt_ids.size();
  } else {
    request_.prompt = r.prompt.c_str();
    request_.prompt_size = r.prompt.size();
  }
  parameters_.reserve(s.tools.size());
  for (const ToolFunction& f : s.tools) parameters_.push_back(dump(f.parameters));
  for (size_t i = 0; i < s.tools.size(); ++i) {
    const ToolFunction& f = s.tools[i];
    tools_.push_back({f.name.c_str(), f.description.empty() ? nullptr : f.description.c_str(), parameters_[i].c_str()});
  }
  request_.tools = tools_.empty() ? nullptr : tools_.data();
  request_.n_tools = tools_.size();
  request_.tool_choice = choice_of(s.tool_choice);
  request_.tool_name = s.tool_name.empty() ? nullptr : s.tool_name.c_str();
  request_.response_format = format_of(s.format);
  if (s.format == StructuredOutput::Format::JsonSchema) {
    schema_ = dump(s.schema);
    request_.response_schema = schema_.c_str();
  }
  if (s.format == StructuredOutput::Format::Grammar) request_.grammar = s.grammar.c_str();

  request_.sampler.temperature = r.temperature;
  request_.sampler.top_p = r.top_p;
  request_.sampler.presence_penalty = r.presence_penalty;
  request_.sampler.frequency_penalty = r.frequency_penalty;
  request_.sampler.seed = r.seed ? *r.seed : std::random_device{}();
  for (const auto& [token, value] : r.logit_bias) bias_.push_back({token, value <= -100.0f ? -INFINITY : value});
  request_.logit_bias = bias_.empty() ? nullptr : bias_.data();
  request_.n_logit_bias = bias_.size();
  for (const std::string& x : r.stop) stops_.push_back(x.c_str());
  request_.stop_strings = stops_.empty() ? nullptr : stops_.data();
  request_.n_stop_strings = stops_.size();
  request_.logprobs = r.logprobs ? 1 : 0;
  request_.top_logprobs = r.top_logprobs;

  // Everything the grammar depends on, each part's length first so no two requests share it.
  auto part = [this](const std::string& text) { structure_ += std::to_string(text.size()) + ":" + text; };
  part(std::to_string(request_.response_format) + "/" + std::to_string(request_.tool_choice));
  part(schema_);
  part(s.grammar);
  part(s.tool_name);
  for (size_t i = 0; i < s.tools.size(); ++i) {
    part(s.tools[i].name);
    part(parameters_[i]);
  }
}

}  // namespace tern::server
