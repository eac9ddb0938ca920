// tern-server's structured output without HTTP or a model: response_format / tools /
// tool_choice parsing and its errors, tool messages kept with their calls, and the shapes of
// a tool-call reply. (How tools are shown, the grammars and the call scanner are the
// library's: tests/runtime/chat.)
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

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

TEST(StructuredOutput, ToolMessagesKeepTheirCalls) {
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
  EXPECT_FALSE(r->messages[2].has_content);
  ASSERT_EQ(r->messages[2].tool_calls.size(), 1u);
  EXPECT_EQ(r->messages[2].tool_calls[0].id, "call_1");
  EXPECT_EQ(r->messages[2].tool_calls[0].name, "get_weather");
  EXPECT_EQ(r->messages[2].tool_calls[0].arguments, "{\"city\": \"Paris\", \"unit\": \"C\"}");
  EXPECT_EQ(r->messages[3].role, "tool");
  EXPECT_EQ(r->messages[3].tool_call_id, "call_1");
  EXPECT_EQ(r->messages[3].content, "18 C, cloudy");
  EXPECT_FALSE(parse(chat_with({{"messages", json::array({{{"role", "tool"}}})}}), &e));
}

TEST(StructuredOutput, BodiesHaveOpenAIsShape) {
  const json body = tool_call_body("chatcmpl-1", 7, "tiny", "call_x", "get_weather", "{\"city\":\"Paris\"}",
                                   "tool_calls", Usage{3, 4, 0});
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
