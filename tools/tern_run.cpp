// tern-run BUNDLE -p PROMPT: loads a bundle within a memory budget and generates text,
// streaming it to stdout; stats and the memory breakdown go to stderr. --chat runs an
// interactive conversation using the bundle's chat template (LLaMA-3 headers when the
// template has them, else a plain "User:/Assistant:" transcript).
// Uses only the public C API, like an app would.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "tools/cli_sizes.h"
#include "runtime/include/tern.h"

namespace {

int die(const char* what, tern_status s) {
  std::fprintf(stderr, "tern-run: %s: %s (%s)\n", what, tern_last_error_message(), tern_status_string(s));
  return 1;
}

int print_piece(const char* text, size_t size, void*) {
  std::fwrite(text, 1, size, stdout);
  std::fflush(stdout);
  return 0;
}

using tern::cli::mib;

void print_memory(const tern_model* model) {
  tern_memory_report r;
  if (tern_memory_report_get(model, &r) != TERN_OK) return;
  std::fprintf(stderr, "memory: budget %s, planned %.2f MiB (minimum %.2f MiB), context %u tokens\n",
               r.budget_bytes == 0 ? "unlimited" : (std::to_string(r.budget_bytes) + " B").c_str(),
               mib(r.planned_total_bytes), mib(r.minimum_budget_bytes), r.context_tokens);
  std::fprintf(stderr, "  process overhead     %10.2f MiB\n", mib(r.process_overhead_bytes));
  std::fprintf(stderr, "  weights (mapped)     %10.2f MiB\n", mib(r.weights_bytes));
  std::fprintf(stderr, "  arena                %10.2f MiB, used %.2f MiB (arena_used_bytes %llu)\n", mib(r.arena_bytes),
               mib(r.arena_used_bytes), static_cast<unsigned long long>(r.arena_used_bytes));
  std::fprintf(stderr, "    weights            %10.2f MiB\n", mib(r.arena_weights_bytes));
  std::fprintf(stderr, "    tokenizer          %10.2f MiB\n", mib(r.arena_tokenizer_bytes));
  std::fprintf(stderr, "    scratch            %10.2f MiB\n", mib(r.arena_scratch_bytes));
  std::fprintf(stderr, "    kv_cache           %10.2f MiB\n", mib(r.arena_kv_cache_bytes));
  std::fprintf(stderr, "    sampler            %10.2f MiB\n", mib(r.arena_sampler_bytes));
  std::fprintf(stderr, "    other              %10.2f MiB\n", mib(r.arena_other_bytes));
  std::fprintf(stderr, "kv: mode %s, %s, %.1f bytes/token, capacity %u tokens, eviction %s\n", r.kv_mode,
               r.kv_compressed ? "compressed per-head cache" : "dense cache", r.kv_bytes_per_token, r.context_tokens,
               r.kv_evicting ? "on (generation continues past the capacity)" : "off");
}

void print_stats(const tern_generate_stats& st) {
  const double pp = st.prefill_seconds > 0 ? st.prompt_tokens / st.prefill_seconds : 0.0;
  const double tg = st.decode_seconds > 0 ? st.decoded_tokens / st.decode_seconds : 0.0;
  std::fprintf(stderr, "prefill: %u tokens, %.2f tok/s\n", st.prompt_tokens, pp);
  std::fprintf(stderr, "decode: %u tokens, %.2f tok/s\n", st.decoded_tokens, tg);
  static const char* const reasons[] = {"max tokens", "end of generation", "stop string", "callback", "context full"};
  const int r = static_cast<int>(st.stop_reason);
  std::fprintf(stderr, "stop: %s (%u tokens generated)\n", r >= 0 && r < 5 ? reasons[r] : "?", st.generated_tokens);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Generate text with a Tern bundle"};
  std::string bundle, prompt, budget_text = "0", kv = "f32";
  int n_new = 128;
  tern_sampler_params sampler = tern_sampler_default_params();
  unsigned threads = 1, ctx = 0, batch = 64;
  int kv_window = -1, kv_sinks = -1;
  bool chat = false, no_bos = false, greedy = false, no_evict = false, evict = false;
  app.add_option("BUNDLE", bundle, ".tern bundle")->required();
  app.add_option("-p,--prompt", prompt, "prompt text");
  app.add_option("-n,--n-predict", n_new, "new tokens to generate")->check(CLI::NonNegativeNumber);
  app.add_option("--temp", sampler.temperature, "temperature (0 = greedy)");
  app.add_option("--top-k", sampler.top_k, "top-k (0 = off)");
  app.add_option("--top-p", sampler.top_p, "top-p (1 = off)");
  app.add_option("--min-p", sampler.min_p, "min-p (0 = off)");
  app.add_option("--repeat-penalty", sampler.repeat_penalty, "repetition penalty (1 = off)");
  app.add_option("--repeat-last-n", sampler.repeat_last_n, "tokens the penalty looks back");
  app.add_option("--seed", sampler.seed, "sampler seed");
  app.add_flag("--greedy", greedy, "same as --temp 0");
  app.add_option("-t,--threads", threads, "threads (0 = one per core)");
  app.add_option("--memory-budget", budget_text, "bytes the process may use, e.g. 512M (0 = unlimited)");
  app.add_option("-c,--ctx", ctx, "context tokens (0 = as many as the budget allows)");
  app.add_option("-b,--batch", batch, "prefill batch")->check(CLI::PositiveNumber);
  app.add_option("--kv", kv,
                 "KV mode: f32 (default), fp16|f16 (dense); q8, q4, q3, q2, k4v2 (compressed per head, eviction on); "
                 "adaptive:B (the bundle's calibrated widths at B average bits)");
  app.add_option("--kv-window", kv_window, "exact recent tokens of a compressed cache (default 32)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--kv-sinks", kv_sinks, "sink tokens kept exact and never evicted (default 4)")
      ->check(CLI::NonNegativeNumber);
  app.add_flag("--no-evict", no_evict, "stop at the KV capacity instead of evicting old blocks");
  app.add_flag("--evict", evict, "evict with f32/fp16 too (a compressed cache of exact heads)");
  app.add_flag("--chat", chat, "interactive chat on stdin");
  app.add_flag("--no-bos", no_bos, "do not prepend BOS");
  CLI11_PARSE(app, argc, argv);
  if (greedy) sampler.temperature = 0.0f;

  tern_model_params mp = tern_model_default_params();
  if (tern_parse_byte_size(budget_text.c_str(), &mp.memory_budget_bytes) != TERN_OK) {
    std::fprintf(stderr, "tern-run: --memory-budget '%s' is not a size like 512M\n", budget_text.c_str());
    return 2;
  }
  mp.n_threads = threads;
  mp.n_ctx = ctx;
  mp.n_batch = batch;
  mp.kv_mode = kv.c_str();
  mp.kv_sink_tokens = kv_sinks;
  mp.kv_recent_window = kv_window;
  mp.kv_eviction = no_evict ? 0 : (evict ? 1 : -1);
  tern_model* model = nullptr;
  tern_status s = tern_model_load(bundle.c_str(), &mp, &model);
  if (s != TERN_OK) return die("load", s);
  tern_session_params sp = tern_session_default_params();
  sp.sampler = sampler;
  tern_session* session = nullptr;
  s = tern_session_create(model, &sp, &session);
  if (s != TERN_OK) {
    tern_model_free(model);
    return die("session", s);
  }

  tern_generate_params gp = tern_generate_default_params();
  gp.max_new_tokens = static_cast<uint32_t>(n_new);
  gp.add_bos = no_bos ? 0 : 1;
  int rc = 0;
  if (!chat) {
    std::fwrite(prompt.data(), 1, prompt.size(), stdout);
    std::fflush(stdout);
    tern_generate_stats st{};
    s = tern_generate(session, prompt.data(), prompt.size(), &gp, print_piece, nullptr, &st);
    std::fputc('\n', stdout);
    std::fflush(stdout);
    if (s != TERN_OK) rc = die("generate", s);
    print_stats(st);
  } else {
    tern_model_info info;
    tern_model_get_info(model, &info);
    const bool llama3 = info.chat_template != nullptr &&
                        std::string(info.chat_template).find("<|start_header_id|>") != std::string::npos;
    const char* plain_stops[] = {"\nUser:"};
    if (!llama3) {
      gp.stop_strings = plain_stops;
      gp.n_stop_strings = 1;
    }
    std::fprintf(stderr, "chat (%s format); an empty line or EOF ends it\n", llama3 ? "LLaMA-3" : "plain");
    std::string line;
    tern_generate_stats total{};
    while (std::fprintf(stdout, "> "), std::fflush(stdout), std::getline(std::cin, line) && !line.empty()) {
      if (!prompt.empty()) line = prompt + "\n" + line, prompt.clear();  // -p acts as a system preamble
      const std::string turn =
          llama3 ? "<|start_header_id|>user<|end_header_id|>\n\n" + line +
                       "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"
                 : "User: " + line + "\nAssistant:";
      tern_generate_stats st{};
      s = tern_generate(session, turn.data(), turn.size(), &gp, print_piece, nullptr, &st);
      std::fputc('\n', stdout);
      std::fflush(stdout);
      if (s != TERN_OK) {
        rc = die("generate", s);
        break;
      }
      total.prompt_tokens += st.prompt_tokens;
      total.decoded_tokens += st.decoded_tokens;
      total.generated_tokens += st.generated_tokens;
      total.stop_reason = st.stop_reason;
      total.prefill_seconds += st.prefill_seconds;
      total.decode_seconds += st.decode_seconds;
    }
    print_stats(total);
  }
  print_memory(model);
  tern_session_free(session);
  tern_model_free(model);
  return rc;
}
