// tern-server's chat and completion request bodies through the code the server runs on them:
// the UTF-8 check, parse_generation_request, then (as its prepare step does) the chat rendered
// in the bundle's format and the prompt tokenized. The first byte picks the endpoint ('c':
// /v1/chat/completions, anything else: /v1/completions); the rest is the body.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "tests/fuzz/fuzz_models.h"
#include "tools/server/server_api.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static tern_model* model = tern::fuzz::load_model(tern::fuzz::kChatBundle);
  if (size < 1) return 0;
  const bool chat = data[0] == 'c';
  const std::string body(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (!tern::server::valid_utf8(body)) return 0;
  tern::server::ApiError error;
  const auto request = tern::server::parse_generation_request(body, chat, "tiny-austen-chat", &error);
  if (!request) {
    if (error.status < 400 || error.status > 499 || error.message.empty()) __builtin_trap();
    (void)tern::server::error_body(error).dump();
    return 0;
  }
  std::string text = request->prompt;
  if (chat) {
    std::vector<tern_chat_message> messages;
    for (const tern::server::Message& m : request->messages) messages.push_back({m.role.c_str(), m.content.c_str()});
    size_t needed = 0;
    tern_status st = tern_chat_apply(model, messages.data(), messages.size(), 1, nullptr, 0, &needed);
    if (st != TERN_OK && st != TERN_OUT_OF_RANGE) return 0;
    std::vector<char> buf(needed + 1);
    size_t written = 0;
    if (tern_chat_apply(model, messages.data(), messages.size(), 1, buf.data(), buf.size(), &written) != TERN_OK ||
        written != needed) {
      __builtin_trap();  // the size it asked for must be enough, and exactly what it writes
    }
    text.assign(buf.data(), written);
  }
  std::vector<int32_t> ids(text.size() + 2);
  size_t n = 0;
  if (tern_tokenize(model, text.data(), text.size(), chat ? 0 : 1, 1, ids.data(), ids.size(), &n) == TERN_OK &&
      n > ids.size()) {
    __builtin_trap();
  }
  return 0;
}
