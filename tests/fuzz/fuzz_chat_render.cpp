// Chat rendering of hostile messages (tern_chat_apply) in each format the repository's bundles
// carry: plain, BitNet 2B-4T's template, LLaMA-3's. The first byte picks the bundle and
// whether the generation prefix is added; the rest is messages separated by 0x1e, each a role
// byte (system, user, assistant, or a role the API refuses) and its content. Invariants: a
// size query and the render agree; the text is valid UTF-8 when every content was; a refusal
// says why.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "tests/fuzz/fuzz_models.h"
#include "tools/server/server_api.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static tern_model* models[] = {tern::fuzz::load_model(tern::fuzz::kPlainBundle),
                                 tern::fuzz::load_model(tern::fuzz::kChatBundle),
                                 tern::fuzz::load_model(tern::fuzz::kLlama3Bundle)};
  if (size < 1) return 0;
  tern_model* model = models[(data[0] & 0x7f) % 3];
  const int add_prefix = data[0] >> 7;
  static const char* const roles[] = {"system", "user", "assistant", "tool"};
  std::vector<std::string> contents, role_names;
  bool all_utf8 = true;
  for (size_t at = 1; at < size;) {
    size_t end = at;
    while (end < size && data[end] != 0x1e) ++end;
    role_names.push_back(roles[data[at] % 4]);
    contents.emplace_back(reinterpret_cast<const char*>(data) + at + 1, end > at ? end - at - 1 : 0);
    contents.back().resize(std::strlen(contents.back().c_str()));  // C strings: content ends at a NUL
    all_utf8 = all_utf8 && tern::server::valid_utf8(contents.back());
    at = end + 1;
  }
  std::vector<tern_chat_message> messages;
  for (size_t i = 0; i < contents.size(); ++i) messages.push_back({role_names[i].c_str(), contents[i].c_str()});
  size_t needed = 0;
  const tern_status st = tern_chat_apply(model, messages.data(), messages.size(), add_prefix, nullptr, 0, &needed);
  if (st != TERN_OK && st != TERN_OUT_OF_RANGE) {
    if (tern_last_error_message()[0] == '\0') __builtin_trap();
    return 0;
  }
  // Too small by one: refused with the size, nothing past the buffer written.
  std::vector<char> small(needed + 1 > 1 ? needed : 1, '\x7f');
  size_t reported = 0;
  if (needed > 0 && tern_chat_apply(model, messages.data(), messages.size(), add_prefix, small.data(), small.size(),
                                    &reported) != TERN_OUT_OF_RANGE) {
    __builtin_trap();
  }
  std::vector<char> buf(needed + 1);
  size_t written = 0;
  if (tern_chat_apply(model, messages.data(), messages.size(), add_prefix, buf.data(), buf.size(), &written) !=
          TERN_OK ||
      written != needed || buf[written] != '\0') {
    __builtin_trap();
  }
  if (all_utf8 && !tern::server::valid_utf8(std::string(buf.data(), written))) __builtin_trap();
  return 0;
}
