// tern-server's request parsing, response bodies and slot queue, without HTTP or a model.
// UTF-8 validity is checked against utf8proc's decoder; bodies against the OpenAI shapes
// (field by field, as the official clients read them).
#include <gtest/gtest.h>
#include <utf8proc.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <random>
#include <thread>

#include "tools/server/server_api.h"
#include "tools/server/slot_pool.h"

namespace tern::server {
namespace {

using nlohmann::json;

std::optional<GenerationRequest> chat(const json& body, ApiError* e) {
  return parse_generation_request(body.dump(), true, "tiny", e);
}

json user(const std::string& text) { return json::array({{{"role", "user"}, {"content", text}}}); }

TEST(ServerApi, ParsesEveryChatField) {
  ApiError e;
  const json body = {{"model", "tiny"},
                     {"messages", json::array({{{"role", "developer"}, {"content", "Be brief."}},
                                               {{"role", "user"},
                                                {"content", json::array({{{"type", "text"}, {"text", "Hello, "}},
                                                                         {{"type", "text"}, {"text", "there"}}})}}})},
                     {"temperature", 0},
                     {"top_p", 0.5},
                     {"max_tokens", 7},
                     {"stop", json::array({"\n\n", "END"})},
                     {"seed", 42},
                     {"presence_penalty", 0.5},
                     {"frequency_penalty", -1.5},
                     {"logit_bias", {{"13", -100}, {"7", 2.5}}},
                     {"stream", true},
                     {"stream_options", {{"include_usage", true}}}};
  const auto r = chat(body, &e);
  ASSERT_TRUE(r) << e.message;
  ASSERT_EQ(r->messages.size(), 2u);
  EXPECT_EQ(r->messages[0].role, "developer");  // the library renders it as "system"
  EXPECT_EQ(r->messages[1].content, "Hello, there");
  EXPECT_EQ(r->temperature, 0.0f);
  EXPECT_EQ(r->top_p, 0.5f);
  EXPECT_EQ(r->max_tokens, 7);
  EXPECT_EQ(r->stop, (std::vector<std::string>{"\n\n", "END"}));
  EXPECT_EQ(r->seed, 42u);
  EXPECT_EQ(r->presence_penalty, 0.5f);
  EXPECT_EQ(r->frequency_penalty, -1.5f);
  EXPECT_EQ(r->logit_bias.at(13), -100.0f);
  EXPECT_EQ(r->logit_bias.at(7), 2.5f);
  EXPECT_TRUE(r->stream);
  EXPECT_TRUE(r->include_usage);
}

TEST(ServerApi, DefaultsWhenFieldsAreAbsentOrNull) {
  ApiError e;
  const auto r = chat({{"messages", user("hi")}, {"max_tokens", nullptr}, {"stop", nullptr}}, &e);
  ASSERT_TRUE(r) << e.message;
  EXPECT_EQ(r->max_tokens, -1);
  EXPECT_TRUE(r->stop.empty());
  EXPECT_FALSE(r->seed.has_value());
  EXPECT_FALSE(r->stream);
  const auto c = parse_generation_request(R"({"prompt": "Once", "max_completion_tokens": 3})", false, "tiny", &e);
  ASSERT_TRUE(c) << e.message;
  EXPECT_EQ(c->prompt, "Once");
  EXPECT_EQ(c->max_tokens, 3);
}

TEST(ServerApi, AnyModelNameMeansTheServedModel) {
  for (const char* body : {R"({"model": "gpt-4o", "prompt": "a"})", R"({"model": "", "prompt": "a"})",
                           R"({"model": null, "prompt": "a"})", R"({"prompt": "a"})"}) {
    ApiError e;
    const auto r = parse_generation_request(body, false, "tiny", &e);
    ASSERT_TRUE(r) << body << ": " << e.message;
    EXPECT_EQ(r->model, "tiny") << body;
  }
}

TEST(ServerApi, CompletionPromptsInOpenAIsFourForms) {
  ApiError e;
  auto r = parse_generation_request(R"({"prompt": ["It is", "", "Once"], "echo": true})", false, "tiny", &e);
  ASSERT_TRUE(r) << e.message;
  ASSERT_EQ(r->prompts.size(), 3u);
  EXPECT_EQ(r->prompts[1].text, "");
  EXPECT_EQ(r->prompts[2].text, "Once");
  EXPECT_EQ(r->prompt, "It is");
  EXPECT_TRUE(r->prompt_ids.empty());
  EXPECT_TRUE(r->echo);
  r = parse_generation_request(R"({"prompt": [1, 2, 2147483647]})", false, "tiny", &e);
  ASSERT_TRUE(r) << e.message;
  ASSERT_EQ(r->prompts.size(), 1u);
  EXPECT_EQ(r->prompt_ids, (std::vector<int32_t>{1, 2, 2147483647}));
  r = parse_generation_request(R"({"prompt": [[5], [6, 7]], "logprobs": null, "echo": true})", false, "tiny", &e);
  ASSERT_TRUE(r) << e.message;
  ASSERT_EQ(r->prompts.size(), 2u);
  EXPECT_EQ(r->prompts[1].ids, (std::vector<int32_t>{6, 7}));
  EXPECT_EQ(r->prompt_ids, (std::vector<int32_t>{5}));
  std::string list = "[";
  for (size_t i = 0; i <= kMaxCompletionPrompts; ++i) list += i ? ",\"a\"" : "\"a\"";
  EXPECT_FALSE(parse_generation_request("{\"prompt\": " + list + "]}", false, "tiny", &e));
  EXPECT_EQ(e.param, "prompt");
  EXPECT_NE(e.message.find("at most 64"), std::string::npos) << e.message;
}

struct BadCase {
  const char* name;
  std::string body;
  bool chat;
  int status;
  const char* param;  // nullptr: no param
  const char* code;   // nullptr: no code
};

TEST(ServerApi, EachBadRequestGetsItsStatusAndField) {
  const std::string msgs = R"("messages": [{"role": "user", "content": "hi"}])";
  const std::vector<BadCase> cases = {
      {"malformed JSON", "{\"messages\": [", true, 400, nullptr, nullptr},
      {"not an object", "[1, 2]", true, 400, nullptr, nullptr},
      {"lone surrogate escape", R"({"messages": [{"role": "user", "content": "\ud800"}]})", true, 400, nullptr,
       nullptr},
      {"no messages", R"({"model": "tiny"})", true, 400, "messages", nullptr},
      {"empty messages", R"({"messages": []})", true, 400, "messages", nullptr},
      {"messages not an array", R"({"messages": "hi"})", true, 400, "messages", nullptr},
      {"unknown role", R"({"messages": [{"role": "wizard", "content": "hi"}]})", true, 400, "messages", nullptr},
      {"content a number", R"({"messages": [{"role": "user", "content": 5}]})", true, 400, "messages", nullptr},
      {"image part", R"({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]})", true,
       400, "messages", nullptr},
      {"model a number", "{\"model\": 4, " + msgs + "}", true, 400, "model", nullptr},
      {"temperature a string", "{\"temperature\": \"hot\", " + msgs + "}", true, 400, "temperature", nullptr},
      {"temperature too high", "{\"temperature\": 2.5, " + msgs + "}", true, 400, "temperature", nullptr},
      {"top_p negative", "{\"top_p\": -0.1, " + msgs + "}", true, 400, "top_p", nullptr},
      {"max_tokens negative", "{\"max_tokens\": -5, " + msgs + "}", true, 400, "max_tokens", nullptr},
      {"max_tokens zero", "{\"max_tokens\": 0, " + msgs + "}", true, 400, "max_tokens", nullptr},
      {"max_tokens a float", "{\"max_tokens\": 1.5, " + msgs + "}", true, 400, "max_tokens", nullptr},
      {"seed a string", "{\"seed\": \"1\", " + msgs + "}", true, 400, "seed", nullptr},
      {"n of 2", "{\"n\": 2, " + msgs + "}", true, 400, "n", nullptr},
      {"five stops", "{\"stop\": [\"a\",\"b\",\"c\",\"d\",\"e\"], " + msgs + "}", true, 400, "stop", nullptr},
      {"stop a number", "{\"stop\": 3, " + msgs + "}", true, 400, "stop", nullptr},
      {"empty stop", "{\"stop\": \"\", " + msgs + "}", true, 400, "stop", nullptr},
      {"bias key not an id", "{\"logit_bias\": {\"x\": 1}, " + msgs + "}", true, 400, "logit_bias", nullptr},
      {"bias out of range", "{\"logit_bias\": {\"5\": 101}, " + msgs + "}", true, 400, "logit_bias", nullptr},
      {"bias negative id", "{\"logit_bias\": {\"-1\": 1}, " + msgs + "}", true, 400, "logit_bias", nullptr},
      {"stream a string", "{\"stream\": \"yes\", " + msgs + "}", true, 400, "stream", nullptr},
      {"presence too big", "{\"presence_penalty\": 3, " + msgs + "}", true, 400, "presence_penalty", nullptr},
      {"no prompt", R"({"max_tokens": 4})", false, 400, "prompt", nullptr},
      {"prompt an empty array", R"({"prompt": []})", false, 400, "prompt", nullptr},
      {"prompt an empty id list", R"({"prompt": [[]]})", false, 400, "prompt", nullptr},
      {"prompt ids and a string", R"({"prompt": [1, "a"]})", false, 400, "prompt", nullptr},
      {"prompt a string and ids", R"({"prompt": ["a", [1]]})", false, 400, "prompt", nullptr},
      {"prompt a negative id", R"({"prompt": [-1]})", false, 400, "prompt", nullptr},
      {"prompt a fractional id", R"({"prompt": [[1.5]]})", false, 400, "prompt", nullptr},
      {"prompt an object", R"({"prompt": {"text": "a"}})", false, 400, "prompt", nullptr},
      {"echo a string", R"({"prompt": "a", "echo": "yes"})", false, 400, "echo", nullptr},
      {"echo with logprobs", R"({"prompt": "a", "echo": true, "logprobs": 2})", false, 400, "logprobs", nullptr},
      {"a NUL in content", R"({"messages": [{"role": "user", "content": "a\u0000b"}]})", true, 400, "messages",
       nullptr},
      {"a NUL in a stop string", "{\"stop\": \"a\\u0000\", " + msgs + "}", true, 400, "stop", nullptr},
  };
  for (const BadCase& c : cases) {
    ApiError e;
    EXPECT_FALSE(parse_generation_request(c.body, c.chat, "tiny", &e)) << c.name;
    EXPECT_EQ(e.status, c.status) << c.name;
    EXPECT_FALSE(e.message.empty()) << c.name;
    EXPECT_EQ(e.param, c.param ? c.param : "") << c.name << ": " << e.message;
    EXPECT_EQ(e.code, c.code ? c.code : "") << c.name;
    const json body = error_body(e);
    EXPECT_EQ(body["error"]["message"], e.message) << c.name;
    EXPECT_EQ(body["error"]["param"], c.param ? json(c.param) : json(nullptr)) << c.name;
  }
}

// utf8proc_iterate decodes one character or reports an invalid sequence.
bool utf8proc_valid(const std::string& s) {
  const auto* p = reinterpret_cast<const utf8proc_uint8_t*>(s.data());
  utf8proc_ssize_t left = static_cast<utf8proc_ssize_t>(s.size());
  while (left > 0) {
    utf8proc_int32_t cp;
    const utf8proc_ssize_t n = utf8proc_iterate(p, left, &cp);
    if (n <= 0) return false;
    p += n;
    left -= n;
  }
  return true;
}

TEST(ServerApi, Utf8ValidityAgreesWithUtf8procOnEverySequenceUpToThreeBytes) {
  std::string s;
  for (uint32_t v = 0; v < (1u << 24); ++v) {
    for (int len = 1; len <= 3; ++len) {
      if (len < 3 && (v >> (8 * len)) != 0) continue;
      s.assign(static_cast<size_t>(len), '\0');
      for (int k = 0; k < len; ++k) s[k] = static_cast<char>(v >> (8 * (len - 1 - k)));
      ASSERT_EQ(valid_utf8(s), utf8proc_valid(s)) << std::hex << "bytes " << v << " length " << len;
    }
  }
}

TEST(ServerApi, Utf8ValidityAgreesWithUtf8procOnRandomText) {
  std::mt19937 rng(7);
  // Lead bytes of 4-byte forms and continuation bytes, so most strings are near-valid.
  const uint8_t interesting[] = {0x00, 0x41, 0x7f, 0x80, 0xbf, 0xc0, 0xc2, 0xdf, 0xe0, 0xed,
                                 0xef, 0xf0, 0xf4, 0xf5, 0xff, 0x8f, 0x90, 0xa0, 0x9f};
  int valid = 0;
  for (int i = 0; i < 200000; ++i) {
    std::string s(1 + rng() % 12, '\0');
    for (char& c : s) {
      c = static_cast<char>(rng() % 2 ? interesting[rng() % sizeof interesting] : rng() % 256);
    }
    const bool v = valid_utf8(s);
    valid += v;
    ASSERT_EQ(v, utf8proc_valid(s)) << i;
  }
  EXPECT_GT(valid, 1000);  // the sample reaches valid multi-byte text, not only garbage
}

TEST(ServerApi, CompletionBodiesHaveTheOpenAIShape) {
  const json c = completion_body(true, "chatcmpl-1", 1700000000, "tiny", "Hi there", "length", Usage{5, 2, 3});
  EXPECT_EQ(c["object"], "chat.completion");
  EXPECT_EQ(c["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(c["choices"][0]["message"]["content"], "Hi there");
  EXPECT_EQ(c["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(c["usage"]["total_tokens"], 7);
  EXPECT_EQ(c["usage"]["prompt_tokens_details"]["cached_tokens"], 3);
  const json t = completion_body(false, "cmpl-1", 1, "tiny", "abc", "stop", Usage{1, 1, 0});
  EXPECT_EQ(t["object"], "text_completion");
  EXPECT_EQ(t["choices"][0]["text"], "abc");
  EXPECT_FALSE(t["choices"][0].contains("message"));
}

// One server-sent event: "data: " + JSON + a blank line.
json event_json(const std::string& event) {
  EXPECT_EQ(event.rfind("data: ", 0), 0u);
  EXPECT_EQ(event.substr(event.size() - 2), "\n\n");
  EXPECT_EQ(event.find('\n'), event.size() - 2) << "a newline inside the JSON would split the event";
  return json::parse(event.substr(6, event.size() - 8));
}

TEST(ServerApi, StreamChunksAreOneEventEach) {
  const std::string finish = "stop";
  const json first = event_json(stream_chunk(true, "id", 1, "tiny", "Hel\nlo", nullptr, true));
  EXPECT_EQ(first["object"], "chat.completion.chunk");
  EXPECT_EQ(first["choices"][0]["delta"]["role"], "assistant");
  EXPECT_EQ(first["choices"][0]["delta"]["content"], "Hel\nlo");
  EXPECT_TRUE(first["choices"][0]["finish_reason"].is_null());
  const json next = event_json(stream_chunk(true, "id", 1, "tiny", "!", nullptr, false));
  EXPECT_FALSE(next["choices"][0]["delta"].contains("role"));
  const json last = event_json(stream_chunk(true, "id", 1, "tiny", "", &finish, false));
  EXPECT_EQ(last["choices"][0]["finish_reason"], "stop");
  EXPECT_FALSE(last["choices"][0]["delta"].contains("content"));
  const json usage = event_json(stream_usage_chunk(true, "id", 1, "tiny", Usage{3, 4, 0}));
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"]["completion_tokens"], 4);
  const json text = event_json(stream_chunk(false, "id", 1, "tiny", "x", nullptr, true));
  EXPECT_EQ(text["object"], "text_completion");
  EXPECT_EQ(text["choices"][0]["text"], "x");
  EXPECT_STREQ(stream_done(), "data: [DONE]\n\n");
  // Bytes that are not UTF-8 become U+FFFD instead of throwing.
  const json bad = event_json(stream_chunk(false, "id", 1, "tiny", "a\xff", nullptr, false));
  EXPECT_EQ(bad["choices"][0]["text"], "a\xef\xbf\xbd");
}

TEST(ServerApi, ModelsListsTheOneModel) {
  const json m = models_body("tiny", 5);
  EXPECT_EQ(m["object"], "list");
  ASSERT_EQ(m["data"].size(), 1u);
  EXPECT_EQ(m["data"][0]["id"], "tiny");
  EXPECT_EQ(m["data"][0]["object"], "model");
  EXPECT_EQ(m["data"][0], model_object("tiny", 5));
}

TEST(ServerApi, ChoicesCarryTheirIndexAndEveryObjectTheFingerprint) {
  set_system_fingerprint("tern-0.0.0-0123456789ab");
  const json t = text_completion_body("cmpl-1", 1, "tiny",
                                      {{"a", "stop", nullptr}, {"b", "length", {{"tokens", {"b"}}}}}, Usage{4, 3, 1});
  ASSERT_EQ(t["choices"].size(), 2u);
  EXPECT_EQ(t["choices"][1]["index"], 1);
  EXPECT_EQ(t["choices"][1]["text"], "b");
  EXPECT_EQ(t["choices"][1]["finish_reason"], "length");
  EXPECT_TRUE(t["choices"][0]["logprobs"].is_null());
  EXPECT_EQ(t["choices"][1]["logprobs"]["tokens"][0], "b");
  EXPECT_EQ(t["usage"]["total_tokens"], 7);
  EXPECT_EQ(t["system_fingerprint"], "tern-0.0.0-0123456789ab");
  EXPECT_EQ(completion_body(true, "c", 1, "tiny", "x", "stop", Usage{})["system_fingerprint"],
            "tern-0.0.0-0123456789ab");
  const json chunk = event_json(stream_chunk(false, "id", 1, "tiny", "x", nullptr, false, nullptr, 3));
  EXPECT_EQ(chunk["choices"][0]["index"], 3);
  EXPECT_EQ(chunk["system_fingerprint"], "tern-0.0.0-0123456789ab");
  EXPECT_EQ(event_json(stream_usage_chunk(true, "id", 1, "tiny", Usage{}))["system_fingerprint"],
            "tern-0.0.0-0123456789ab");
  set_system_fingerprint("");
  EXPECT_FALSE(completion_body(true, "c", 1, "tiny", "x", "stop", Usage{}).contains("system_fingerprint"));
}

// The fingerprint hashes the bundle's header (size prefix and FlatBuffer), not its weights.
TEST(ServerApi, BundleFingerprintFollowsTheHeader) {
  const std::string path = ::testing::TempDir() + "/fingerprint.tern";
  auto write = [&](const std::string& bytes) { std::ofstream(path, std::ios::binary) << bytes; };
  std::string bundle = std::string("\x08\0\0\0", 4) + "HEADER!!" + "weights";
  write(bundle);
  const std::string a = bundle_fingerprint(path, "1.2.3");
  EXPECT_EQ(a.rfind("tern-1.2.3-", 0), 0u) << a;
  EXPECT_EQ(a.size(), std::string("tern-1.2.3-").size() + 12) << a;
  EXPECT_EQ(a.find_first_not_of("0123456789abcdef", 11), std::string::npos) << a;
  bundle.back() = '!';  // past the header: the same
  write(bundle);
  EXPECT_EQ(bundle_fingerprint(path, "1.2.3"), a);
  bundle[6] = 'x';  // inside it: another
  write(bundle);
  EXPECT_NE(bundle_fingerprint(path, "1.2.3"), a);
  write(std::string("\x40\0\0\0", 4) + "short");  // a header longer than the file
  EXPECT_EQ(bundle_fingerprint(path, "1.2.3"), "tern-1.2.3");
  EXPECT_EQ(bundle_fingerprint(path + ".missing", "1.2.3"), "tern-1.2.3");
  std::remove(path.c_str());
}

TEST(ServerApi, EmbeddingInputsInEveryFormAndTheirErrors) {
  const EmbeddingModel model{"emb", 8, 100, {"query", "document"}};
  ApiError e;
  auto r = parse_embedding_request(R"({"input": ["a", "b"], "prompt_name": "query"})", model, &e);
  ASSERT_TRUE(r) << e.message;
  EXPECT_EQ(r->input, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(r->prompt_name, std::optional<std::string>("query"));
  EXPECT_EQ(r->count(), 2u);
  r = parse_embedding_request(R"({"input": [3, 4, 99], "prompt_name": ""})", model, &e);
  ASSERT_TRUE(r) << e.message;
  ASSERT_EQ(r->tokens.size(), 1u);
  EXPECT_EQ(r->tokens[0], (std::vector<int32_t>{3, 4, 99}));
  EXPECT_EQ(r->prompt_name, std::optional<std::string>(""));
  r = parse_embedding_request(R"({"input": [[3], [4, 5]], "model": "anything"})", model, &e);
  ASSERT_TRUE(r) << e.message;
  EXPECT_EQ(r->count(), 2u);
  EXPECT_FALSE(r->prompt_name.has_value());
  EXPECT_EQ(r->model, "emb");
  const std::vector<std::pair<std::string, std::string>> bad = {
      {R"({"input": ""})", "empty string"},
      {R"({"input": []})", "empty array"},
      {R"({"input": [[]]})", "is empty"},
      {R"({"input": ["a", ""]})", "'input[1]' is an empty string"},
      {R"({"input": [[1], []]})", "'input[1]' is empty"},
      {R"({"input": [1, 100]})", "token id 100 in 'input' is outside the vocabulary (0 to 99)"},
      {R"({"input": [[1], [2, 100]]})", "token id 100 in 'input[1]'"},
      {R"({"input": [-1]})", "not a token id"},
      {R"({"input": ["a", [1]]})", "is not a string"},
      {R"({"input": [[1], "a"]})", "must be an array of token ids"},
      {R"({"input": 42})", "must be a string"},
      {R"({"input": "a", "prompt_name": "passage"})", "no prompt named 'passage' (it has 'query', 'document')"},
      {R"({"input": "a", "prompt_name": 3})", "'prompt_name' must be a string"},
  };
  for (const auto& [body, message] : bad) {
    EXPECT_FALSE(parse_embedding_request(body, model, &e)) << body;
    EXPECT_EQ(e.status, 400) << body;
    EXPECT_NE(e.message.find(message), std::string::npos) << body << ": " << e.message;
    EXPECT_EQ(e.param, body.find("prompt_name") != std::string::npos ? "prompt_name" : "input") << body;
  }
  const EmbeddingModel none{"emb", 8, 100, {}};
  EXPECT_FALSE(parse_embedding_request(R"({"input": "a", "prompt_name": "query"})", none, &e));
  EXPECT_NE(e.message.find("(it has none)"), std::string::npos) << e.message;
}

using std::chrono::milliseconds;

// The API key comparison: equal only when every byte and the length match (its timing is by
// construction, not measured: a loop over the secret with no early exit).
TEST(ServerApi, SecretsCompareWhole) {
  const std::string key = "Bearer sk-tern-0123456789";
  EXPECT_TRUE(equals_secret(key, key));
  EXPECT_TRUE(equals_secret("", ""));
  EXPECT_FALSE(equals_secret("", key));
  EXPECT_FALSE(equals_secret(key.substr(0, key.size() - 1), key));
  EXPECT_FALSE(equals_secret(key + "0", key));
  EXPECT_FALSE(equals_secret(key, ""));
  for (size_t i = 0; i < key.size(); ++i) {
    std::string wrong = key;
    wrong[i] ^= 0x01;
    EXPECT_FALSE(equals_secret(wrong, key)) << "differs at " << i;
  }
  EXPECT_FALSE(equals_secret(std::string("Bearer sk-tern-0123456789\0", 26), key));
}

TEST(SlotPool, HandsOutEachSlotOnceAndRefusesPastTheQueue) {
  SlotPool pool(2, 0);
  SlotPool::Refusal why;
  const auto a = pool.acquire(milliseconds(0), &why);
  const auto b = pool.acquire(milliseconds(0), &why);
  ASSERT_TRUE(a && b);
  EXPECT_NE(*a, *b);
  EXPECT_EQ(pool.idle(), 0u);
  EXPECT_FALSE(pool.acquire(milliseconds(1000), &why));
  EXPECT_EQ(why, SlotPool::Refusal::QueueFull);  // no room to wait: refused at once
  pool.release(*a);
  const auto c = pool.acquire(milliseconds(0), &why);
  ASSERT_TRUE(c);
  EXPECT_EQ(*c, *a);
}

TEST(SlotPool, AWaiterGetsTheReleasedSlotOrTimesOut) {
  SlotPool pool(1, 1);
  SlotPool::Refusal why;
  const auto held = pool.acquire(milliseconds(0), &why);
  ASSERT_TRUE(held);
  EXPECT_FALSE(pool.acquire(milliseconds(20), &why));
  EXPECT_EQ(why, SlotPool::Refusal::TimedOut);
  EXPECT_EQ(pool.waiting(), 0u);
  std::optional<size_t> got;
  std::thread waiter([&] {
    SlotPool::Refusal w;
    got = pool.acquire(milliseconds(10000), &w);
  });
  while (pool.waiting() == 0) std::this_thread::yield();
  // The line is full (one waiting): a third request is refused.
  EXPECT_FALSE(pool.acquire(milliseconds(10000), &why));
  EXPECT_EQ(why, SlotPool::Refusal::QueueFull);
  pool.release(*held);
  waiter.join();
  ASSERT_TRUE(got);
  EXPECT_EQ(*got, *held);
}

TEST(SlotPool, ServesWaitersFirstComeFirstServed) {
  SlotPool pool(1, 8);
  SlotPool::Refusal why;
  const auto held = pool.acquire(milliseconds(0), &why);
  ASSERT_TRUE(held);
  std::vector<int> order;
  std::mutex order_mutex;
  std::vector<std::thread> threads;
  for (int i = 0; i < 5; ++i) {
    threads.emplace_back([&, i] {
      SlotPool::Refusal w;
      const auto slot = pool.acquire(milliseconds(20000), &w);
      ASSERT_TRUE(slot);
      {
        std::lock_guard<std::mutex> lock(order_mutex);
        order.push_back(i);
      }
      pool.release(*slot);
    });
    while (pool.waiting() != static_cast<size_t>(i + 1)) std::this_thread::yield();  // queued in order i
  }
  pool.release(*held);
  for (auto& t : threads) t.join();
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4}));
}

}  // namespace
}  // namespace tern::server
