// tern-server's structured output without HTTP or a model: response_format / tools /
// tool_choice parsing and its errors, tool messages in the history, how tools are shown to
// the model, the grammar each choice gives (checked against the automaton: what it must
// accept and refuse), and reading a tool call back out of a reply, whole or one byte at a time.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "runtime/base/arena.h"
#include "runtime/structured/grammar.h"
#include "tools/server/structured_output.h"

namespace tern::server {
namespace {

using nlohmann::json;

json weather_tool() {
  return json{{"type", "function"},
              {"function",
               {{"name", "get_weather"},
                {"description", "The weather in a city."},
                {"parameters",
                 {{"type", "object"},
                  {"properties", {{"city", {{"type", "string"}}}, {"unit", {{"enum", {"C", "F"}}}}}},
                  {"required", {"city", "unit"}},
                  {"additionalProperties", false}}}}}};
}

json time_tool() {
  return json{{"type", "function"},
              {"function",
               {{"name", "get_time"},
                {"parameters",
                 {{"$ref", "#/$defs/zone"},
                  {"$defs",
                   {{"zone",
                     {{"type", "object"},
                      {"properties", {{"tz", {{"type", "string"}}}}},
                      {"required", {"tz"}},
                      {"additionalProperties", false}}}}}}}}}};
}

std::optional<GenerationRequest> parse(const json& body, ApiError* e) {
  return parse_generation_request(body.dump(), true, "tiny", e);
}

json chat_with(const json& extra) {
  json body = {{"messages", json::array({{{"role", "user"}, {"content", "Weather in Paris?"}}})}};
  for (auto it = extra.begin(); it != extra.end(); ++it) body[it.key()] = it.value();
  return body;
}

// Whether whole texts are sentences of a grammar, on a vocabulary of single bytes.
class Sentences {
 public:
  explicit Sentences(const std::string& grammar) : arena_memory_(1 << 20), region_(new uint8_t[kRegion]) {
    for (uint32_t b = 0; b < 256; ++b) bytes_.push_back(static_cast<uint8_t>(b)), offsets_.push_back(b);
    offsets_.push_back(256);
    offsets_.push_back(256);
    ArenaAllocator arena(arena_memory_.data(), arena_memory_.size());
    const int32_t end = 256;
    EXPECT_EQ(vocab_.build(bytes_.data(), offsets_.data(), 257, &end, 1, arena), Error::Ok);
    EXPECT_EQ(g_.compile(grammar.data(), grammar.size(), vocab_, region_.get(), kRegion), Error::Ok)
        << last_error_message() << "\n"
        << grammar;
  }
  bool accepts(const std::string& text) {
    g_.restart();
    auto r = g_.accept_bytes(reinterpret_cast<const uint8_t*>(text.data()), text.size());
    return r.ok() && *r && g_.accepting();
  }

 private:
  static constexpr size_t kRegion = size_t{8} << 20;
  std::vector<uint8_t> arena_memory_;
  std::unique_ptr<uint8_t[]> region_;
  std::vector<uint8_t> bytes_;
  std::vector<uint32_t> offsets_;
  GrammarVocab vocab_;
  Grammar g_;
};

TEST(StructuredOutput, ParsesResponseFormatAndTools) {
  ApiError e;
  auto r = parse(chat_with({{"response_format",
                             {{"type", "json_schema"},
                              {"json_schema", {{"name", "w"}, {"strict", true}, {"schema", {{"type", "integer"}}}}}}}}),
                 &e);
  ASSERT_TRUE(r) << e.message;
  EXPECT_EQ(r->structured.format, StructuredOutput::Format::JsonSchema);
  EXPECT_EQ(r->structured.schema.dump(), R"({"type":"integer"})");
  r = parse(chat_with({{"response_format", {{"type", "json_object"}}}}), &e);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->structured.format, StructuredOutput::Format::JsonObject);
  r = parse(chat_with({{"tools", {weather_tool(), time_tool()}}}), &e);
  ASSERT_TRUE(r) << e.message;
  ASSERT_EQ(r->structured.tools.size(), 2u);
  EXPECT_EQ(r->structured.tool_choice, StructuredOutput::ToolChoice::Auto);
  r = parse(chat_with({{"tools", {weather_tool()}},
                       {"tool_choice", {{"type", "function"}, {"function", {{"name", "get_weather"}}}}}}),
            &e);
  ASSERT_TRUE(r) << e.message;
  EXPECT_EQ(r->structured.tool_choice, StructuredOutput::ToolChoice::Named);
  EXPECT_EQ(r->structured.tool_name, "get_weather");
  r = parse(chat_with({{"grammar", "root ::= \"x\""}}), &e);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->structured.format, StructuredOutput::Format::Grammar);
}

TEST(StructuredOutput, RefusesBadFieldsWithTheirName) {
  const struct {
    json extra;
    const char* param;
    const char* says;
  } cases[] = {
      {{{"response_format", {{"type", "xml"}}}}, "response_format", "'text', 'json_object' or 'json_schema'"},
      {{{"response_format", {{"type", "json_schema"}, {"json_schema", {{"name", "x"}}}}}}, "response_format", "schema"},
      {{{"tools", {{{"type", "function"}, {"function", {{"name", "bad name!"}}}}}}}, "tools", "function name"},
      {{{"tools", {weather_tool(), weather_tool()}}}, "tools", "twice"},
      {{{"tools", "get_weather"}}, "tools", "array"},
      {{{"tool_choice", "required"}}, "tool_choice", "needs 'tools'"},
      {{{"tools", {weather_tool()}}, {"tool_choice", {{"type", "function"}, {"function", {{"name", "nope"}}}}}},
       "tool_choice",
       "not in 'tools'"},
      {{{"tools", {weather_tool()}}, {"tool_choice", "sometimes"}}, "tool_choice", "'none', 'auto'"},
      {{{"grammar", 3}}, "grammar", "GBNF"},
      {{{"grammar", "root ::= \"x\""}, {"response_format", {{"type", "json_object"}}}}, "grammar", "cannot both"},
      {{{"parallel_tool_calls", "yes"}}, "parallel_tool_calls", "boolean"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.extra.dump());
    ApiError e;
    EXPECT_FALSE(parse(chat_with(c.extra), &e));
    EXPECT_EQ(e.status, 400);
    EXPECT_EQ(e.param, c.param);
    EXPECT_NE(e.message.find(c.says), std::string::npos) << e.message;
  }
  ApiError e;
  EXPECT_FALSE(parse_generation_request(json{{"prompt", "x"}, {"tools", {weather_tool()}}}.dump(), false, "tiny", &e));
  EXPECT_EQ(e.param, "tools");
}

TEST(StructuredOutput, ToolMessagesJoinTheHistory) {
  ApiError e;
  const json body = {
      {"tools", {weather_tool()}},
      {"messages",
       json::array({{{"role", "system"}, {"content", "Be brief."}},
                    {{"role", "user"}, {"content", "Weather in Paris?"}},
                    {{"role", "assistant"},
                     {"content", nullptr},
                     {"tool_calls", json::array({{{"id", "call_1"},
                                                  {"type", "function"},
                                                  {"function",
                                                   {{"name", "get_weather"},
                                                    {"arguments", "{\"city\": \"Paris\", \"unit\": \"C\"}"}}}}})}},
                    {{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "18 C, cloudy"}}})}};
  const auto r = parse(body, &e);
  ASSERT_TRUE(r) << e.message;
  ASSERT_EQ(r->messages.size(), 4u);
  EXPECT_EQ(r->messages[2].content, R"({"name":"get_weather","arguments":{"city":"Paris","unit":"C"}})");
  EXPECT_EQ(r->messages[3].role, "tool");
  EXPECT_EQ(r->messages[3].content, "18 C, cloudy");
  // The tools are shown in the first system message, one JSON line each.
  const std::vector<Message> shown = prompt_messages(*r);
  ASSERT_EQ(shown.size(), 4u);
  EXPECT_EQ(shown[0].content.find("Be brief.\n\nYou can call functions."), 0u) << shown[0].content;
  EXPECT_NE(shown[0].content.find("{\"name\":\"get_weather\",\"description\":\"The weather in a city.\""),
            std::string::npos)
      << shown[0].content;
  // tool_choice "none": nothing shown.
  GenerationRequest none = *r;
  none.structured.tool_choice = StructuredOutput::ToolChoice::None;
  EXPECT_EQ(prompt_messages(none)[0].content, "Be brief.");
  EXPECT_FALSE(parse(chat_with({{"messages", json::array({{{"role", "tool"}}})}}), &e));
}

TEST(StructuredOutput, GrammarsHoldTheReplyToTheChoice) {
  ApiError e;
  std::string grammar;
  const std::string call = R"({"name": "get_weather", "arguments": {"city": "Paris", "unit": "C"}})";
  const std::string bad_unit = R"({"name": "get_weather", "arguments": {"city": "Paris", "unit": "K"}})";
  const std::string time_call = R"({"name":"get_time","arguments":{"tz":"CET"}})";
  {  // required: a call of any tool, nothing else ($refs of a tool's own document still resolve)
    auto r = parse(chat_with({{"tools", {weather_tool(), time_tool()}}, {"tool_choice", "required"}}), &e);
    ASSERT_TRUE(r && reply_grammar(r->structured, &grammar, &e)) << e.message;
    Sentences g(grammar);
    EXPECT_TRUE(g.accepts(call));
    EXPECT_TRUE(g.accepts(time_call));
    EXPECT_FALSE(g.accepts(bad_unit));
    EXPECT_FALSE(g.accepts("It is sunny."));
  }
  {  // a named function: only it
    auto r = parse(chat_with({{"tools", {weather_tool(), time_tool()}},
                              {"tool_choice", {{"type", "function"}, {"function", {{"name", "get_time"}}}}}}),
                   &e);
    ASSERT_TRUE(r && reply_grammar(r->structured, &grammar, &e)) << e.message;
    Sentences g(grammar);
    EXPECT_TRUE(g.accepts(time_call));
    EXPECT_FALSE(g.accepts(call));
  }
  {  // auto: a call, or text that does not open like one
    auto r = parse(chat_with({{"tools", {weather_tool()}}}), &e);
    ASSERT_TRUE(r && reply_grammar(r->structured, &grammar, &e)) << e.message;
    Sentences g(grammar);
    EXPECT_TRUE(g.accepts(call));
    EXPECT_TRUE(g.accepts("It is sunny."));
    EXPECT_FALSE(g.accepts("{\"name\": \"other\"}"));
  }
  {  // auto with a JSON reply: a call, or the reply's schema
    auto r = parse(
        chat_with({{"tools", {weather_tool()}},
                   {"response_format",
                    {{"type", "json_schema"}, {"json_schema", {{"name", "n"}, {"schema", {{"type", "integer"}}}}}}}}),
        &e);
    ASSERT_TRUE(r && reply_grammar(r->structured, &grammar, &e)) << e.message;
    Sentences g(grammar);
    EXPECT_TRUE(g.accepts(call));
    EXPECT_TRUE(g.accepts("42"));
    EXPECT_FALSE(g.accepts("It is sunny."));
  }
  {  // no tools: the schema; a schema the grammar cannot honour is a 400 naming it
    auto r = parse(chat_with({{"response_format", {{"type", "json_object"}}}}), &e);
    ASSERT_TRUE(r && reply_grammar(r->structured, &grammar, &e));
    Sentences g(grammar);
    EXPECT_TRUE(g.accepts("{\"a\": [1, {\"b\": null}]}"));
    EXPECT_FALSE(g.accepts("[1]"));
    r = parse(chat_with({{"response_format",
                          {{"type", "json_schema"},
                           {"json_schema", {{"schema", {{"type", "string"}, {"pattern", "a+"}}}}}}}}),
              &e);
    ASSERT_TRUE(r);
    EXPECT_FALSE(reply_grammar(r->structured, &grammar, &e));
    EXPECT_EQ(e.status, 400);
    EXPECT_NE(e.message.find("'pattern'"), std::string::npos) << e.message;
  }
}

TEST(StructuredOutput, ScannerReadsCallsWholeAndByTheByte) {
  const std::string reply =
      "{\n  \"name\" : \"get_weather\",\"arguments\": {\"city\": \"Pa\\\"ris}\", \"unit\": \"C\"} }\n";
  const std::string arguments = "{\"city\": \"Pa\\\"ris}\", \"unit\": \"C\"}";
  ToolCallScanner whole(true);
  whole.push(reply);
  EXPECT_TRUE(whole.complete_call());
  EXPECT_EQ(whole.name(), "get_weather");
  EXPECT_EQ(whole.arguments(), arguments);
  ToolCallScanner bytes(true);
  std::string streamed;
  for (char c : reply) {
    streamed += bytes.push(std::string(1, c));
    if (bytes.kind() == ToolCallScanner::Kind::Undecided) {
      EXPECT_TRUE(bytes.name().empty());
    }
  }
  EXPECT_EQ(streamed, arguments);
  EXPECT_TRUE(bytes.complete_call());
  // Text is content as soon as it cannot be a call; without tools, always.
  ToolCallScanner text(true);
  text.push("{\"na");
  EXPECT_EQ(text.kind(), ToolCallScanner::Kind::Undecided);
  text.push("me\": 3");
  EXPECT_EQ(text.kind(), ToolCallScanner::Kind::Content);
  ToolCallScanner none(false);
  none.push(reply);
  EXPECT_EQ(none.kind(), ToolCallScanner::Kind::Content);
  // Cut short (max_tokens): a call, not complete.
  ToolCallScanner cut(true);
  cut.push("{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Pa");
  EXPECT_EQ(cut.kind(), ToolCallScanner::Kind::Call);
  EXPECT_FALSE(cut.complete_call());
}

TEST(StructuredOutput, BodiesHaveOpenAIsShape) {
  const json body =
      tool_call_body("chatcmpl-1", 7, "tiny", "call_x", "get_weather", "{\"city\":\"Paris\"}", Usage{3, 4, 0});
  const json& choice = body["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "tool_calls");
  EXPECT_TRUE(choice["message"]["content"].is_null());
  EXPECT_EQ(choice["message"]["tool_calls"][0]["function"]["arguments"], "{\"city\":\"Paris\"}");
  EXPECT_EQ(choice["message"]["tool_calls"][0]["type"], "function");
  EXPECT_EQ(body["usage"]["total_tokens"], 7);
  const std::string call_id = "call_y", name = "get_weather";
  const std::string first = tool_call_chunk("chatcmpl-1", 7, "tiny", &call_id, &name, "", true);
  const json j = json::parse(first.substr(6));
  EXPECT_EQ(j["choices"][0]["delta"]["tool_calls"][0]["id"], "call_y");
  EXPECT_EQ(j["choices"][0]["delta"]["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(j["choices"][0]["delta"]["role"], "assistant");
  EXPECT_EQ(new_call_id().size(), 29u);
  EXPECT_NE(new_call_id(), new_call_id());
}

}  // namespace
}  // namespace tern::server
