// The reply grammar each tool_choice and response_format gives, checked against the automaton
// on a byte vocabulary (what it must accept and refuse), and a request's tools read back out
// of a reply whole or one byte at a time.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "runtime/chat/reply_grammar.h"
#include "runtime/chat/tool_call_scanner.h"
#include "runtime/structured/grammar.h"
#include "runtime/structured/json_schema.h"
#include "tests/support/byte_vocab.h"

namespace tern::chat {
namespace {

constexpr const char* kWeather =
    R"({"type":"object","properties":{"city":{"type":"string"},"unit":{"enum":["C","F"]}},"required":["city","unit"],"additionalProperties":false})";
// A tool whose parameters are a $ref into its own document: moved into the composed schema,
// the pointer must follow it.
constexpr const char* kTime =
    R"({"$ref":"#/$defs/zone","$defs":{"zone":{"type":"object","properties":{"tz":{"type":"string"}},"required":["tz"],"additionalProperties":false}}})";
const Tool kTools[] = {{"get_weather", "The weather in a city.", kWeather}, {"get_time", nullptr, kTime}};

const Turn kUser[] = {{"user", "Weather in Paris?", nullptr, 0, nullptr}};

Request request(ToolChoice choice, size_t n_tools = 2) {
  Request r;
  r.messages = kUser;
  r.n_messages = 1;
  r.tools = kTools;
  r.n_tools = n_tools;
  r.tool_choice = choice;
  return r;
}

// A request's grammar, compiled on the 256 bytes: whether whole texts are its sentences.
class ReplyGrammar {
 public:
  explicit ReplyGrammar(const Request& r) : buf_(kBuf), work_(json_schema_work_bytes()), region_(new uint8_t[kRegion]) {
    EXPECT_EQ(vocab_.build(), Error::Ok);
    error_ = reply_grammar(r, buf_.data(), buf_.size(), work_.data(), work_.size(), &text_, &size_);
    if (error_ == Error::Ok && size_ > 0) {
      EXPECT_EQ(g_.compile(text_, size_, vocab_.vocab(), region_.get(), kRegion), Error::Ok)
          << last_error_message() << "\n"
          << std::string(text_, size_);
    }
  }
  Error error() const { return error_; }
  size_t size() const { return size_; }
  bool accepts(const std::string& text) {
    g_.restart();
    auto r = g_.accept_bytes(reinterpret_cast<const uint8_t*>(text.data()), text.size());
    return r.ok() && *r && g_.accepting();
  }

 private:
  static constexpr size_t kBuf = 1 << 16, kRegion = size_t{8} << 20;
  std::vector<char> buf_;
  std::vector<char> work_;
  std::unique_ptr<uint8_t[]> region_;
  testing::ByteVocab vocab_;
  Grammar g_;
  const char* text_ = nullptr;
  size_t size_ = 0;
  Error error_ = Error::Ok;
};

const std::string kCall = R"({"name": "get_weather", "arguments": {"city": "Paris", "unit": "C"}})";
const std::string kBadUnit = R"({"name": "get_weather", "arguments": {"city": "Paris", "unit": "K"}})";
const std::string kTimeCall = R"({"name":"get_time","arguments":{"tz":"CET"}})";

TEST(ReplyGrammar, ARequiredCallIsOneOfTheToolsWithValidArguments) {
  ReplyGrammar g(request(ToolChoice::Required));
  ASSERT_EQ(g.error(), Error::Ok) << last_error_message();
  EXPECT_TRUE(g.accepts(kCall));
  EXPECT_TRUE(g.accepts(kTimeCall));
  EXPECT_FALSE(g.accepts(kBadUnit));
  EXPECT_FALSE(g.accepts("It is sunny."));
  EXPECT_FALSE(g.accepts(R"({"name": "get_news", "arguments": {}})"));
}

TEST(ReplyGrammar, ANamedFunctionIsTheOnlyCall) {
  Request r = request(ToolChoice::Function);
  r.tool_name = "get_time";
  ReplyGrammar g(r);
  ASSERT_EQ(g.error(), Error::Ok) << last_error_message();
  EXPECT_TRUE(g.accepts(kTimeCall));
  EXPECT_FALSE(g.accepts(kCall));
}

TEST(ReplyGrammar, AutoIsACallOrTextThatDoesNotOpenLikeOne) {
  ReplyGrammar g(request(ToolChoice::Auto, 1));
  ASSERT_EQ(g.error(), Error::Ok) << last_error_message();
  EXPECT_TRUE(g.accepts(kCall));
  EXPECT_TRUE(g.accepts("It is sunny."));
  EXPECT_FALSE(g.accepts("{\"name\": \"other\"}"));
}

TEST(ReplyGrammar, AutoWithAJsonReplyIsACallOrTheReplysSchema) {
  Request r = request(ToolChoice::Auto, 1);
  r.response_format = ResponseFormat::JsonSchema;
  r.response_schema = R"({"type":"integer"})";
  ReplyGrammar g(r);
  ASSERT_EQ(g.error(), Error::Ok) << last_error_message();
  EXPECT_TRUE(g.accepts(kCall));
  EXPECT_TRUE(g.accepts("42"));
  EXPECT_FALSE(g.accepts("It is sunny."));
}

TEST(ReplyGrammar, WithoutToolsTheSchemaHoldsTheReply) {
  Request r = request(ToolChoice::None);
  ReplyGrammar text(r);
  EXPECT_EQ(text.error(), Error::Ok);
  EXPECT_EQ(text.size(), 0u);  // tools turned off, plain text: no grammar
  r.response_format = ResponseFormat::JsonObject;
  ReplyGrammar object(r);
  ASSERT_EQ(object.error(), Error::Ok) << last_error_message();
  EXPECT_TRUE(object.accepts("{\"a\": [1, {\"b\": null}]}"));
  EXPECT_FALSE(object.accepts("[1]"));
  r.response_format = ResponseFormat::JsonSchema;
  r.response_schema = R"({"type":"string","pattern":"a+"})";
  ReplyGrammar pattern(r);
  EXPECT_EQ(pattern.error(), Error::UnsupportedSchema);
  EXPECT_NE(std::string(last_error_message()).find("'pattern'"), std::string::npos) << last_error_message();
}

TEST(ReplyGrammar, SchemasLargerThanTheChatMemoryAreRefusedWithTheirSize) {
  std::vector<char> buf(64), work(json_schema_work_bytes());
  const Request r = request(ToolChoice::Required);
  const char* text = nullptr;
  size_t size = 0;
  EXPECT_EQ(reply_grammar(r, buf.data(), buf.size(), work.data(), work.size(), &text, &size), Error::GrammarTooLarge);
  EXPECT_NE(std::string(last_error_message()).find("chat memory holds 64"), std::string::npos) << last_error_message();
}

// What the scanner's sink was told.
struct Recorded final : ToolCallScanner::Sink {
  std::string text, name, args;
  int calls = 0;
  bool content(const char* t, size_t n) override {
    text.append(t, n);
    return true;
  }
  bool call(const char* t, size_t n) override {
    name.assign(t, n);
    ++calls;
    return true;
  }
  bool arguments(const char* t, size_t n) override {
    args.append(t, n);
    return true;
  }
};

TEST(ToolCallScanner, ReadsCallsWholeAndByTheByte) {
  const std::string reply =
      "{\n  \"name\" : \"get_weather\",\"arguments\": {\"city\": \"Pa\\\"ris}\", \"unit\": \"C\"} }\n";
  const std::string arguments = "{\"city\": \"Pa\\\"ris}\", \"unit\": \"C\"}";
  Recorded whole;
  ToolCallScanner a(kTools, 2, whole);
  a.push(reply.data(), reply.size());
  EXPECT_TRUE(a.complete_call());
  EXPECT_EQ(whole.name, "get_weather");
  EXPECT_EQ(whole.args, arguments);
  Recorded bytes;
  ToolCallScanner b(kTools, 2, bytes);
  for (char c : reply) {
    b.push(&c, 1);
    if (b.kind() == ToolCallScanner::Kind::Undecided) {
      EXPECT_EQ(bytes.calls, 0);
    }
  }
  EXPECT_EQ(bytes.args, arguments);
  EXPECT_EQ(bytes.calls, 1);
  EXPECT_TRUE(b.complete_call());
  EXPECT_EQ(bytes.text, "");
}

TEST(ToolCallScanner, TextIsContentOnceItCannotBeACall) {
  Recorded r;
  ToolCallScanner text(kTools, 2, r);
  text.push("{\"na", 4);
  EXPECT_EQ(text.kind(), ToolCallScanner::Kind::Undecided);
  EXPECT_EQ(r.text, "");
  text.push("me\": 3", 6);
  EXPECT_EQ(text.kind(), ToolCallScanner::Kind::Content);
  EXPECT_EQ(r.text, "{\"name\": 3");
  Recorded none;
  ToolCallScanner no_tools(nullptr, 0, none);
  no_tools.push("{\"name\"", 7);
  EXPECT_EQ(none.text, "{\"name\"");
  // Held text that ends undecided is content, unless the reply was cut while opening a call.
  Recorded held;
  ToolCallScanner ended(kTools, 2, held);
  ended.push("{\"name\": \"get_w", 15);
  EXPECT_TRUE(ended.finish(false));
  EXPECT_EQ(held.text, "{\"name\": \"get_w");
  Recorded cut;
  ToolCallScanner cut_scanner(kTools, 2, cut);
  cut_scanner.push("{\"name\": \"get_w", 15);
  EXPECT_TRUE(cut_scanner.finish(true));
  EXPECT_EQ(cut_scanner.kind(), ToolCallScanner::Kind::Call);
  EXPECT_FALSE(cut_scanner.complete_call());
  EXPECT_EQ(cut.name, "get_weather");  // the only function whose name starts so
  EXPECT_EQ(cut.text, "");
}

}  // namespace
}  // namespace tern::chat
