// The chat engine through the C API (tern_chat_complete), each behaviour against a second
// path: the prompt with tools against tern_chat_apply of the messages the tools section
// describes (the tool lines written here with nlohmann::json), the reply against the manual
// path (tern_chat_prompt + tern_chat_grammar + tern_generate), prefix reuse against a fresh
// session, calls parsed back against the reply's JSON, and bad requests refused by name.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cstring>
#include <string>
#include <vector>

#include "include/tern.h"
#include "tests/support/bundle_util.h"

namespace {

using nlohmann::json;
using ojson = nlohmann::ordered_json;

constexpr const char* kChatBundle = "tiny-austen-2b4t-chat.tern";

constexpr const char* kWeather =
    R"({"type":"object","properties":{"city":{"type":"string","maxLength":12},"days":{"type":"integer","minimum":1,"maximum":7}},"required":["city","days"],"additionalProperties":false})";

struct Loaded {
  tern_model* model = nullptr;
  tern_session* session = nullptr;
  explicit Loaded(const char* bundle, uint32_t sessions = 1) {
    tern_model_params mp = tern_model_default_params();
    mp.n_threads = 1;
    mp.n_ctx = 512;
    mp.n_sessions = sessions;
    mp.grammar_bytes = 4u << 20;
    EXPECT_EQ(tern_model_load(tern::testing::bundle_path(bundle).c_str(), &mp, &model), TERN_OK)
        << tern_last_error_message();
    if (model != nullptr) {
      EXPECT_EQ(tern_session_create(model, nullptr, &session), TERN_OK) << tern_last_error_message();
    }
  }
  ~Loaded() {
    tern_session_free(session);
    tern_model_free(model);
  }
};

// What the events said.
struct Reply {
  std::string content, call_name, arguments;
  std::vector<tern_token_logprob> tokens;  // TOKEN events' chosen tokens
  std::vector<std::vector<tern_token_logprob>> tops;
  std::string token_text;  // the chosen tokens' texts joined
  int calls = 0;
  std::vector<std::string> order;  // event kinds in order, merged runs
  tern_chat_result result{};
  tern_status status = TERN_OK;
};

int collect(const tern_chat_event* e, void* user) {
  auto* r = static_cast<Reply*>(user);
  const std::string text(e->text != nullptr ? e->text : "", e->size);
  const char* kind = e->type == TERN_CHAT_CONTENT          ? "content"
                     : e->type == TERN_CHAT_TOOL_CALL      ? "call"
                     : e->type == TERN_CHAT_TOOL_ARGUMENTS ? "arguments"
                                                           : "token";
  if (r->order.empty() || r->order.back() != kind) r->order.push_back(kind);
  if (e->type == TERN_CHAT_CONTENT) r->content += text;
  if (e->type == TERN_CHAT_TOOL_CALL) {
    r->call_name = text;
    ++r->calls;
  }
  if (e->type == TERN_CHAT_TOOL_ARGUMENTS) r->arguments += text;
  if (e->type == TERN_CHAT_TOKEN) {
    r->tokens.push_back(*e->token);
    r->tops.emplace_back(e->top, e->top + e->n_top);
    r->token_text.append(e->token->text, e->token->size);
  }
  return 0;
}

Reply run(tern_session* session, const tern_chat_request& request) {
  Reply r;
  r.status = tern_chat_complete(session, &request, collect, &r, &r.result);
  return r;
}

// A text from a call that says its size first (OUT_OF_RANGE with too small a buffer).
template <typename Write>
std::string sized_text(Write write) {
  size_t size = 0;
  const tern_status s = write(nullptr, 0, &size);
  EXPECT_TRUE(s == TERN_OK || s == TERN_OUT_OF_RANGE) << tern_last_error_message();
  std::vector<char> buf(size + 1);
  EXPECT_EQ(write(buf.data(), buf.size(), &size), TERN_OK) << tern_last_error_message();
  return std::string(buf.data(), size);
}

std::string prompt_of(tern_model* model, const tern_chat_request& request) {
  return sized_text([&](char* b, size_t n, size_t* size) { return tern_chat_prompt(model, &request, b, n, size); });
}

std::string grammar_of(tern_model* model, const tern_chat_request& request) {
  return sized_text([&](char* b, size_t n, size_t* size) { return tern_chat_grammar(model, &request, b, n, size); });
}

std::string apply(tern_model* model, const std::vector<tern_chat_message>& messages) {
  return sized_text([&](char* b, size_t n, size_t* size) {
    return tern_chat_apply(model, messages.data(), messages.size(), 1, b, n, size);
  });
}

tern_chat_request weather_request(const tern_chat_turn* turns, size_t n, const tern_chat_tool* tools, size_t n_tools) {
  tern_chat_request r = tern_chat_default_request();
  r.messages = turns;
  r.n_messages = n;
  r.tools = tools;
  r.n_tools = n_tools;
  r.max_tokens = 96;
  r.sampler.temperature = 0.9f;
  r.sampler.seed = 7;
  return r;
}

const tern_chat_tool kTools[] = {
    {"get_weather", "The forecast for a city", kWeather},
    {"get_time", nullptr, nullptr},
};

TEST(ChatCompletion, ToolsAreShownInTheSystemMessageAsJsonLines) {
  TERN_REQUIRE_BUNDLE(kChatBundle);
  Loaded m(kChatBundle);
  const tern_tool_call earlier = {"call_1", "get_time", R"({ "zone" : "UTC" })"};
  const tern_chat_turn turns[] = {
      {"developer", "  Be brief.  ", nullptr, 0, nullptr},
      {"user", "Weather in Oslo?", nullptr, 0, nullptr},
      {"assistant", nullptr, &earlier, 1, nullptr},
      {"tool", "12:00", nullptr, 0, "call_1"},
  };
  tern_chat_request r = weather_request(turns, 4, kTools, 2);
  // The same conversation written out by hand: the tool lines with nlohmann's compact dump.
  std::string system =
      "  Be brief.  \n\nYou can call functions. To call one, answer with only a JSON object: "
      "{\"name\": <the function's name>, \"arguments\": <its arguments>}.\nFunctions:";
  ojson weather;
  weather["name"] = "get_weather";
  weather["description"] = "The forecast for a city";
  weather["parameters"] = ojson::parse(kWeather);
  ojson time;
  time["name"] = "get_time";
  time["parameters"] = ojson{{"type", "object"}, {"properties", ojson::object()}};
  system += "\n" + weather.dump() + "\n" + time.dump();
  ojson call;
  call["name"] = "get_time";
  call["arguments"] = ojson{{"zone", "UTC"}};
  const std::string call_text = call.dump();
  const std::vector<tern_chat_message> by_hand = {
      {"system", system.c_str()}, {"user", "Weather in Oslo?"}, {"assistant", call_text.c_str()}, {"tool", "12:00"}};
  EXPECT_EQ(prompt_of(m.model, r), apply(m.model, by_hand));

  // tool_choice none: the tools are not shown; "developer" is rendered as "system".
  r.tool_choice = TERN_TOOL_CHOICE_NONE;
  const std::vector<tern_chat_message> plain = {
      {"system", "  Be brief.  "}, {"user", "Weather in Oslo?"}, {"assistant", call_text.c_str()}, {"tool", "12:00"}};
  EXPECT_EQ(prompt_of(m.model, r), apply(m.model, plain));
  EXPECT_EQ(grammar_of(m.model, r), "");
}

TEST(ChatCompletion, ARequiredCallIsValidAndStreamedAsNameAndArguments) {
  TERN_REQUIRE_BUNDLE(kChatBundle);
  Loaded m(kChatBundle);
  const tern_chat_turn turns[] = {{"user", "Weather in Oslo for 3 days?", nullptr, 0, nullptr}};
  tern_chat_request r = weather_request(turns, 1, kTools, 2);
  r.tool_choice = TERN_TOOL_CHOICE_FUNCTION;
  r.tool_name = "get_weather";
  for (uint64_t seed : {1u, 2u, 3u, 4u}) {
    r.sampler.seed = seed;
    const Reply reply = run(m.session, r);
    ASSERT_EQ(reply.status, TERN_OK) << tern_last_error_message();
    EXPECT_EQ(reply.result.finish_reason, TERN_FINISH_TOOL_CALLS);
    EXPECT_EQ(reply.result.n_tool_calls, 1u);
    EXPECT_EQ(reply.calls, 1);
    EXPECT_EQ(reply.call_name, "get_weather");
    EXPECT_EQ(reply.content, "");
    const json args = json::parse(reply.arguments, nullptr, false);
    ASSERT_TRUE(args.is_object()) << reply.arguments;
    ASSERT_TRUE(args.contains("city") && args["city"].is_string()) << reply.arguments;
    EXPECT_LE(args["city"].get<std::string>().size(), 12u);  // by code points; ASCII-heavy tiny model
    ASSERT_TRUE(args.contains("days") && args["days"].is_number_integer()) << reply.arguments;
    EXPECT_GE(args["days"].get<int>(), 1);
    EXPECT_LE(args["days"].get<int>(), 7);
    EXPECT_EQ(args.size(), 2u);
  }
}

// The engine's reply equals the manual path through the C API: the same prompt text, grammar
// and sampler with tern_generate on a fresh session.
TEST(ChatCompletion, TheReplyEqualsTheManualPath) {
  TERN_REQUIRE_BUNDLE(kChatBundle);
  Loaded m(kChatBundle, 2);
  const tern_chat_turn turns[] = {{"system", "You answer in JSON.", nullptr, 0, nullptr},
                                  {"user", "Tell me about Emma.", nullptr, 0, nullptr}};
  for (int required : {0, 1}) {
    tern_chat_request r = weather_request(turns, 2, kTools, 2);
    r.tool_choice = required ? TERN_TOOL_CHOICE_REQUIRED : TERN_TOOL_CHOICE_AUTO;
    r.sampler.seed = 11;
    const Reply reply = run(m.session, r);
    ASSERT_EQ(reply.status, TERN_OK) << tern_last_error_message();

    tern_session* manual = nullptr;
    tern_session_params sp = tern_session_default_params();
    sp.sampler = r.sampler;
    ASSERT_EQ(tern_session_create(m.model, &sp, &manual), TERN_OK);
    const std::string grammar = grammar_of(m.model, r);
    ASSERT_FALSE(grammar.empty());
    ASSERT_EQ(tern_session_set_grammar(manual, grammar.data(), grammar.size()), TERN_OK) << tern_last_error_message();
    const std::string prompt = prompt_of(m.model, r);
    tern_generate_params gp = tern_generate_default_params();
    gp.max_new_tokens = r.max_tokens;
    gp.add_bos = 0;
    gp.parse_special = 1;
    tern_model_info info{};
    tern_model_get_info(m.model, &info);
    const char* stop = info.chat_stop;
    gp.stop_strings = stop != nullptr ? &stop : nullptr;
    gp.n_stop_strings = stop != nullptr ? 1 : 0;
    std::string text;
    auto append = [](const char* t, size_t n, void* u) {
      static_cast<std::string*>(u)->append(t, n);
      return 0;
    };
    tern_generate_stats stats{};
    ASSERT_EQ(tern_generate(manual, prompt.data(), prompt.size(), &gp, append, &text, &stats), TERN_OK);
    tern_session_free(manual);

    EXPECT_EQ(reply.result.prompt_tokens, stats.prompt_tokens);
    EXPECT_EQ(reply.result.completion_tokens, stats.generated_tokens);
    if (reply.calls == 1) {
      const json whole = json::parse(text, nullptr, false);
      ASSERT_TRUE(whole.is_object()) << text;
      EXPECT_EQ(whole["name"], reply.call_name);
      EXPECT_EQ(json::parse(reply.arguments), whole["arguments"]) << reply.arguments;
      // The arguments are the reply's own text, byte for byte.
      EXPECT_NE(text.find(reply.arguments), std::string::npos);
      EXPECT_EQ(reply.content, "");
    } else {
      EXPECT_FALSE(required) << "a required call was not made: " << reply.content;
      EXPECT_EQ(reply.content, text);
      EXPECT_NE(text.substr(0, 1), "{");
    }
  }
}

TEST(ChatCompletion, SeededCallsAreIdenticalAndStatelessOverACachedPrefix) {
  TERN_REQUIRE_BUNDLE(kChatBundle);
  Loaded m(kChatBundle);
  const tern_chat_turn turns[] = {{"user", "It is a truth universally acknowledged", nullptr, 0, nullptr}};
  tern_chat_request r = weather_request(turns, 1, nullptr, 0);
  r.max_tokens = 24;
  r.sampler.temperature = 1.0f;
  r.sampler.seed = 42;
  std::vector<Reply> replies;
  for (int i = 0; i < 3; ++i) replies.push_back(run(m.session, r));
  for (const Reply& reply : replies) {
    ASSERT_EQ(reply.status, TERN_OK) << tern_last_error_message();
    EXPECT_EQ(reply.content, replies[0].content);
  }
  EXPECT_EQ(replies[0].result.cached_tokens, 0u);
  // The second call holds the first's prompt: all of it but the last token is reused.
  EXPECT_EQ(replies[1].result.cached_tokens, replies[1].result.prompt_tokens - 1);
  // A greedy call in between does not leave the session greedy.
  tern_chat_request greedy = r;
  greedy.sampler.temperature = 0.0f;
  ASSERT_EQ(run(m.session, greedy).status, TERN_OK);
  EXPECT_EQ(run(m.session, r).content, replies[0].content);
}

// A second turn reuses the first turn's tokens and replies as a fresh session would.
TEST(ChatCompletion, ASecondTurnReusesThePrefixAndMatchesAFreshSession) {
  TERN_REQUIRE_BUNDLE(kChatBundle);
  Loaded m(kChatBundle, 2);
  tern_chat_turn turns[] = {{"user", "Who is Mr. Darcy?", nullptr, 0, nullptr},
                            {"assistant", "", nullptr, 0, nullptr},
                            {"user", "And Elizabeth?", nullptr, 0, nullptr}};
  tern_chat_request first = weather_request(turns, 1, nullptr, 0);
  first.sampler.temperature = 0.0f;
  first.max_tokens = 20;
  const Reply one = run(m.session, first);
  ASSERT_EQ(one.status, TERN_OK) << tern_last_error_message();
  turns[1].content = one.content.c_str();
  tern_chat_request second = first;
  second.n_messages = 3;
  const Reply two = run(m.session, second);
  ASSERT_EQ(two.status, TERN_OK) << tern_last_error_message();
  EXPECT_GT(two.result.cached_tokens, one.result.prompt_tokens);
  EXPECT_LT(two.result.cached_tokens, two.result.prompt_tokens);

  tern_session* fresh = nullptr;
  ASSERT_EQ(tern_session_create(m.model, nullptr, &fresh), TERN_OK);
  Reply again;
  again.status = tern_chat_complete(fresh, &second, collect, &again, &again.result);
  tern_session_free(fresh);
  ASSERT_EQ(again.status, TERN_OK);
  EXPECT_EQ(again.result.cached_tokens, 0u);
  EXPECT_EQ(again.content, two.content);
}

TEST(ChatCompletion, ACallCutByMaxTokensIsACallWithFinishReasonLength) {
  TERN_REQUIRE_BUNDLE(kChatBundle);
  Loaded m(kChatBundle);
  const tern_chat_turn turns[] = {{"user", "Weather?", nullptr, 0, nullptr}};
  tern_chat_request r = weather_request(turns, 1, kTools, 1);
  r.tool_choice = TERN_TOOL_CHOICE_REQUIRED;
  r.max_tokens = 12;  // the tiny model's tokens are short: the call opens, the arguments are cut
  const Reply reply = run(m.session, r);
  ASSERT_EQ(reply.status, TERN_OK) << tern_last_error_message();
  EXPECT_EQ(reply.result.finish_reason, TERN_FINISH_LENGTH);
  EXPECT_EQ(reply.result.n_tool_calls, 1u);
  EXPECT_EQ(reply.call_name, "get_weather");
  EXPECT_EQ(reply.content, "");
}

TEST(ChatCompletion, JsonSchemaRepliesValidateAndCompletionsNeedNoChat) {
  TERN_REQUIRE_BUNDLE(kChatBundle);
  Loaded m(kChatBundle);
  const tern_chat_turn turns[] = {{"user", "A forecast, please.", nullptr, 0, nullptr}};
  tern_chat_request r = weather_request(turns, 1, nullptr, 0);
  r.response_format = TERN_RESPONSE_JSON_SCHEMA;
  r.response_schema = kWeather;
  r.max_tokens = 200;
  const Reply reply = run(m.session, r);
  ASSERT_EQ(reply.status, TERN_OK) << tern_last_error_message();
  const json j = json::parse(reply.content, nullptr, false);
  ASSERT_TRUE(j.is_object()) << reply.content;
  EXPECT_TRUE(j["days"].is_number_integer());
  EXPECT_EQ(reply.result.finish_reason, TERN_FINISH_STOP);

  tern_chat_request c = tern_chat_default_request();
  c.prompt = "It is a truth";
  c.prompt_size = std::strlen(c.prompt);
  c.max_tokens = 5;
  const Reply completion = run(m.session, c);
  ASSERT_EQ(completion.status, TERN_OK) << tern_last_error_message();
  EXPECT_EQ(completion.result.finish_reason, TERN_FINISH_LENGTH);
  EXPECT_EQ(completion.result.completion_tokens, 5u);

  // The same prompt as its token ids (the BOS included, as the text gets it) runs the same.
  std::vector<int32_t> ids(64);
  size_t n = 0;
  ASSERT_EQ(tern_tokenize(m.model, c.prompt, c.prompt_size, 1, 1, ids.data(), ids.size(), &n), TERN_OK);
  tern_chat_request by_ids = c;
  by_ids.prompt = nullptr;
  by_ids.prompt_size = 0;
  by_ids.prompt_tokens = ids.data();
  by_ids.n_prompt_tokens = n;
  tern_session_reset(m.session);
  const Reply again = run(m.session, by_ids);
  ASSERT_EQ(again.status, TERN_OK) << tern_last_error_message();
  EXPECT_EQ(again.content, completion.content);
  EXPECT_EQ(again.result.prompt_tokens, completion.result.prompt_tokens);
  ids[0] = 1 << 30;
  EXPECT_EQ(run(m.session, by_ids).status, TERN_INVALID_TOKEN);
  by_ids.prompt = c.prompt;  // both: refused
  EXPECT_EQ(run(m.session, by_ids).status, TERN_INVALID_ARGUMENT);
}

// Each generated token's log-probability comes before its text: greedy picks the most likely
// of the alternatives, they are sorted, and the tokens' texts join up to the reply.
TEST(ChatCompletion, LogprobsComeWithEveryGeneratedToken) {
  TERN_REQUIRE_BUNDLE(kChatBundle);
  Loaded m(kChatBundle);
  const tern_chat_turn turns[] = {{"user", "Who is Emma?", nullptr, 0, nullptr}};
  tern_chat_request r = weather_request(turns, 1, nullptr, 0);
  r.sampler.temperature = 0.0f;
  r.max_tokens = 16;
  r.logprobs = 1;
  r.top_logprobs = 5;
  const Reply reply = run(m.session, r);
  ASSERT_EQ(reply.status, TERN_OK) << tern_last_error_message();
  ASSERT_FALSE(reply.tokens.empty());
  EXPECT_EQ(reply.token_text, reply.content);
  const bool ended = reply.result.stop_reason == TERN_STOP_END_OF_GENERATION;
  EXPECT_EQ(reply.tokens.size() + (ended ? 1 : 0), reply.result.completion_tokens);
  for (size_t i = 0; i < reply.tokens.size(); ++i) {
    const tern_token_logprob& chosen = reply.tokens[i];
    const std::vector<tern_token_logprob>& top = reply.tops[i];
    EXPECT_LE(chosen.logprob, 0.0f);
    ASSERT_EQ(top.size(), 5u);
    EXPECT_EQ(top[0].token, chosen.token);  // greedy: the most likely
    EXPECT_FLOAT_EQ(top[0].logprob, chosen.logprob);
    for (size_t k = 1; k < top.size(); ++k) EXPECT_GE(top[k - 1].logprob, top[k].logprob);
  }
  // Without logprobs there are no token events, and the reply is the same.
  r.logprobs = 0;
  const Reply plain = run(m.session, r);
  EXPECT_TRUE(plain.tokens.empty());
  EXPECT_EQ(plain.content, reply.content);
}

TEST(ChatCompletion, BadRequestsAreRefusedByName) {
  TERN_REQUIRE_BUNDLE(kChatBundle);
  Loaded m(kChatBundle);
  const tern_chat_turn turns[] = {{"user", "hi", nullptr, 0, nullptr}};
  auto refused = [&](tern_chat_request r, tern_status want, const char* words) {
    Reply reply = run(m.session, r);
    EXPECT_EQ(reply.status, want) << tern_status_string(reply.status) << ": " << tern_last_error_message();
    EXPECT_NE(std::string(tern_last_error_message()).find(words), std::string::npos) << tern_last_error_message();
  };
  const tern_chat_turn bad_role[] = {{"narrator", "hi", nullptr, 0, nullptr}};
  refused(weather_request(bad_role, 1, nullptr, 0), TERN_INVALID_ARGUMENT, "narrator");
  const tern_chat_turn bad_utf8[] = {{"user", "caf\xC3", nullptr, 0, nullptr}};
  refused(weather_request(bad_utf8, 1, nullptr, 0), TERN_INVALID_UTF8, "message 0");
  const tern_chat_tool bad_name[] = {{"get weather", nullptr, nullptr}};
  refused(weather_request(turns, 1, bad_name, 1), TERN_INVALID_ARGUMENT, "function name");
  const tern_chat_tool twice[] = {{"f", nullptr, nullptr}, {"f", nullptr, nullptr}};
  refused(weather_request(turns, 1, twice, 2), TERN_INVALID_ARGUMENT, "twice");
  tern_chat_request unknown = weather_request(turns, 1, kTools, 2);
  unknown.tool_choice = TERN_TOOL_CHOICE_FUNCTION;
  unknown.tool_name = "get_news";
  refused(unknown, TERN_INVALID_ARGUMENT, "get_news");
  tern_chat_request both = weather_request(turns, 1, kTools, 2);
  both.response_format = TERN_RESPONSE_GRAMMAR;
  both.grammar = "root ::= \"a\"";
  refused(both, TERN_INVALID_ARGUMENT, "grammar and tools");
  const tern_chat_tool not_json[] = {{"f", nullptr, "{\"type\": "}};
  refused(weather_request(turns, 1, not_json, 1), TERN_INVALID_ARGUMENT, "parameters of tool 'f'");
  const tern_chat_tool unsupported[] = {{"f", nullptr, R"({"type":"object","patternProperties":{}})"}};
  refused(weather_request(turns, 1, unsupported, 1), TERN_UNSUPPORTED_SCHEMA, "patternProperties");
  tern_chat_request many = weather_request(turns, 1, nullptr, 0);
  many.logprobs = 1;
  many.top_logprobs = 21;
  refused(many, TERN_INVALID_ARGUMENT, "top_logprobs");
  tern_chat_request empty = tern_chat_default_request();
  refused(empty, TERN_INVALID_ARGUMENT, "messages (a chat), or a prompt");
  EXPECT_EQ(tern_chat_complete(nullptr, &many, nullptr, nullptr, nullptr), TERN_INVALID_ARGUMENT);
}

}  // namespace
