// tern-schema-generate BUNDLE: JSON generated under JSON Schemas, for tests that validate it
// with an independent validator. Reads JSON lines
//   {"schema": {...}, "seeds": [1, 2, 3], "max_tokens": 300, "prompt": "..."}
// from stdin; for each, converts the schema (tern_json_schema_to_grammar), sets the grammar
// and generates once per seed at temperature 1 (the other sampler settings at their
// defaults), writing one line:
//   {"ok": true, "grammar_bytes": N, "outputs": [{"seed": 1, "text": "...", "stop": "end", "tokens": 41}, ...]}
// or, when the schema is refused, {"ok": false, "status": "UNSUPPORTED_SCHEMA", "error": "..."}.
#include <nlohmann/json.hpp>

#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "include/tern.h"

using nlohmann::json;

namespace {

int append(const char* text, size_t size, void* user) {
  static_cast<std::string*>(user)->append(text, size);
  return 0;
}

json refusal(tern_status s) {
  return json{{"ok", false}, {"status", tern_status_string(s)}, {"error", tern_last_error_message()}};
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: tern-schema-generate BUNDLE < requests.jsonl\n");
    return 2;
  }
  tern_model_params mp = tern_model_default_params();
  mp.grammar_bytes = 4 << 20;
  mp.n_threads = 1;
  tern_model* model = nullptr;
  tern_session* session = nullptr;
  if (tern_model_load(argv[1], &mp, &model) != TERN_OK || tern_session_create(model, nullptr, &session) != TERN_OK) {
    std::fprintf(stderr, "tern-schema-generate: %s\n", tern_last_error_message());
    return 1;
  }
  static const char* const kStops[] = {"max tokens", "end", "stop string", "callback", "context full"};
  std::string line;
  while (std::getline(std::cin, line)) {
    const nlohmann::ordered_json in = nlohmann::ordered_json::parse(line);  // keeps the schema's key order
    const std::string schema = in.at("schema").dump();
    size_t size = 0;
    tern_status s = tern_json_schema_to_grammar(schema.data(), schema.size(), nullptr, 0, &size);
    std::vector<char> grammar(size + 1);
    if (s == TERN_OUT_OF_RANGE)
      s = tern_json_schema_to_grammar(schema.data(), schema.size(), grammar.data(), grammar.size(), &size);
    if (s == TERN_OK) s = tern_session_set_grammar(session, grammar.data(), size);
    if (s != TERN_OK) {
      std::cout << refusal(s).dump() << std::endl;
      continue;
    }
    json outputs = json::array();
    const std::string prompt = in.value("prompt", std::string("The record, as JSON:\n"));
    for (const auto& seed : in.at("seeds")) {
      tern_sampler_params sp = tern_sampler_default_params();
      sp.temperature = 1.0f;
      sp.seed = seed.get<uint64_t>();
      tern_generate_params gp = tern_generate_default_params();
      gp.max_new_tokens = in.value("max_tokens", 300u);
      std::string text;
      tern_generate_stats st{};
      if ((s = tern_session_set_sampler(session, &sp)) == TERN_OK && (s = tern_session_reset(session)) == TERN_OK) {
        s = tern_generate(session, prompt.data(), prompt.size(), &gp, append, &text, &st);
      }
      if (s != TERN_OK) {
        outputs.push_back(
            json{{"seed", seed}, {"error", std::string(tern_status_string(s)) + ": " + tern_last_error_message()}});
        continue;
      }
      outputs.push_back(
          json{{"seed", seed}, {"text", text}, {"stop", kStops[st.stop_reason]}, {"tokens", st.generated_tokens}});
    }
    std::cout << json{{"ok", true}, {"grammar_bytes", size}, {"outputs", outputs}}.dump(-1, ' ', false,
                                                                                        json::error_handler_t::replace)
              << std::endl;
  }
  tern_session_free(session);
  tern_model_free(model);
  return 0;
}
