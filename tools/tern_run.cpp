// tern-run BUNDLE -p PROMPT: loads a bundle within a memory budget and generates text,
// streaming it to stdout; stats and the memory breakdown go to stderr. --chat runs an
// interactive conversation in the bundle's chat format (tern_chat_apply: LLaMA-3 headers,
// BitNet 2B-4T's "User: ...<|eot_id|>Assistant:", or the plain fallback); -p is then the
// system message.
// Uses only the public C API, like an app would.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "include/tern.h"
#include "tools/common/cli_sizes.h"
#include "tools/common/grammar_options.h"
#include "tools/common/model_options.h"

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
  std::fprintf(stderr, "  weights              %10.2f MiB\n", mib(r.weights_bytes));
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
  tern::cli::print_weights_pages(stderr, model);
}

void print_stats(const tern_generate_stats& st) {
  const double pp = st.prefill_seconds > 0 ? st.prompt_tokens / st.prefill_seconds : 0.0;
  const double tg = st.decode_seconds > 0 ? st.decoded_tokens / st.decode_seconds : 0.0;
  std::fprintf(stderr, "prefill: %u tokens, %.2f tok/s\n", st.prompt_tokens, pp);
  std::fprintf(stderr, "decode: %u tokens, %.2f tok/s\n", st.decoded_tokens, tg);
  static const char* const reasons[] = {"max tokens", "end of generation", "stop string", "callback", "context full"};
  const int r = static_cast<int>(st.stop_reason);
  std::fprintf(stderr, "stop: %s (%u tokens generated)\n", r >= 0 && r < 5 ? reasons[r] : "?", st.generated_tokens);
  if (st.verify_steps > 0) {
    std::fprintf(stderr, "draft: %u drafted, %u accepted (%.1f %%), %u verification passes\n", st.drafted_tokens,
                 st.accepted_tokens, st.drafted_tokens ? 100.0 * st.accepted_tokens / st.drafted_tokens : 0.0,
                 st.verify_steps);
  }
}

// What tern-run's flags ask for.
struct RunOptions {
  std::string bundle, prompt, draft;
  int n_new = 128;
  tern_sampler_params sampler = tern_sampler_default_params();
  bool greedy = false;
  std::vector<std::string> logit_bias;
  tern::cli::ModelOptions model;
  bool no_evict = false, evict = false, chat = false, no_bos = false;
  unsigned draft_max = 8;
  tern::cli::GrammarOptions grammar;
};

// The sampler's flags, but for the penalties --presence-penalty and --frequency-penalty.
void add_sampler_options(CLI::App& app, RunOptions* o) {
  tern_sampler_params& sampler = o->sampler;
  app.add_option("--temp", sampler.temperature, "temperature (0 = greedy)");
  app.add_option("--top-k", sampler.top_k, "top-k (0 = off)");
  app.add_option("--top-p", sampler.top_p, "top-p (1 = off)");
  app.add_option("--min-p", sampler.min_p, "min-p (0 = off)");
  app.add_option("--repeat-penalty", sampler.repeat_penalty, "repetition penalty (1 = off)");
  app.add_option("--repeat-last-n", sampler.repeat_last_n, "tokens the penalty looks back");
  app.add_option("--seed", sampler.seed, "sampler seed");
  app.add_flag("--greedy", o->greedy, "same as --temp 0");
}

// Every flag, in the order --help lists them.
void add_run_options(CLI::App& app, RunOptions* o) {
  app.add_option("BUNDLE", o->bundle, ".tern bundle")->required();
  app.add_option("-p,--prompt", o->prompt, "prompt text");
  app.add_option("-n,--n-predict", o->n_new, "new tokens to generate")->check(CLI::NonNegativeNumber);
  add_sampler_options(app, o);
  tern::cli::ModelOptions& model = o->model;
  tern::cli::add_threads_option(app, &model.threads);
  tern::cli::add_memory_budget_option(app, &model.memory_budget);
  tern::cli::add_ctx_option(app, &model.ctx);
  tern::cli::add_batch_option(app, &model.batch)->check(CLI::PositiveNumber);
  tern::cli::add_kv_option(app, &model.kv);
  tern::cli::add_kv_layout_options(app, &model.kv_window, &model.kv_sinks, "32; adaptive: the bundle's",
                                   "4; adaptive: the bundle's");
  tern::cli::add_verify_bundle_option(app, &model.verify_bundle);
  tern::cli::add_weights_pages_option(app, &model.weights_pages);
  app.add_flag("--no-evict", o->no_evict, "stop at the KV capacity instead of evicting old blocks");
  app.add_flag("--evict", o->evict, "evict with f32/fp16 too (a compressed cache of exact heads)");
  app.add_option("--presence-penalty", o->sampler.presence_penalty, "subtracted from every token seen (0 = off)");
  app.add_option("--frequency-penalty", o->sampler.frequency_penalty, "subtracted per occurrence (0 = off)");
  app.add_option("--logit-bias", o->logit_bias,
                 "ID=BIAS added to a token's logit before sampling, e.g. 13=-100 "
                 "(repeatable; -inf bans)");
  app.add_flag("--chat", o->chat, "interactive chat on stdin (-p: the system message)");
  app.add_flag("--no-bos", o->no_bos, "do not prepend BOS");
  app.add_option("--draft", o->draft,
                 "speculative decoding: 'lookup' drafts by prompt lookup, a bundle path drafts with that smaller "
                 "model (same tokenizer; loaded with the same KV mode, context and threads). Greedy: the same text; "
                 "sampling: speculative sampling (the same distribution)");
  app.add_option("--draft-max", o->draft_max, "most drafted tokens per verification pass (1-15, default 8)")
      ->check(CLI::Range(1, 15));
  tern::cli::add_grammar_options(app, &o->grammar);
}

// --logit-bias ID=BIAS, each; false with a message on stderr.
bool parse_logit_biases(const std::vector<std::string>& texts, std::vector<tern_logit_bias>* out) {
  for (const std::string& b : texts) {
    const size_t eq = b.find('=');
    char* end = nullptr;
    tern_logit_bias e{};
    e.token = eq == std::string::npos ? -1 : static_cast<int32_t>(std::strtol(b.c_str(), &end, 10));
    if (eq == std::string::npos || end != b.c_str() + eq) {
      std::fprintf(stderr, "tern-run: --logit-bias '%s' is not ID=BIAS\n", b.c_str());
      return false;
    }
    e.bias = std::strtof(b.c_str() + eq + 1, &end);
    if (end == b.c_str() + eq + 1 || *end != '\0') {
      std::fprintf(stderr, "tern-run: --logit-bias '%s' is not ID=BIAS\n", b.c_str());
      return false;
    }
    out->push_back(e);
  }
  return true;
}

// The model, the draft model (--draft BUNDLE) and the session over them; freed together.
struct Loaded {
  tern_model* model = nullptr;
  tern_model* draft = nullptr;
  tern_session* session = nullptr;
  Loaded() = default;
  Loaded(const Loaded&) = delete;
  Loaded& operator=(const Loaded&) = delete;
  ~Loaded() {
    tern_session_free(session);
    tern_model_free(model);
    tern_model_free(draft);
  }
};

// The draft model beside `model`: its own plan and arena, the same context as the target's.
tern_status load_draft(const tern_model* model, const tern_model_params& mp, const std::string& path,
                       tern_model** out) {
  tern_model_params dp = mp;
  dp.n_draft = 0;
  tern_model_info info;
  tern_model_get_info(model, &info);
  dp.n_ctx = info.context_tokens;
  dp.memory_budget_bytes = 0;
  return tern_model_load(path.c_str(), &dp, out);
}

// The prompt, then what the model adds to it; the exit code.
int run_prompt(tern_session* session, const std::string& prompt, const tern_generate_params& gp) {
  std::fwrite(prompt.data(), 1, prompt.size(), stdout);
  std::fflush(stdout);
  tern_generate_stats st{};
  const tern_status s = tern_generate(session, prompt.data(), prompt.size(), &gp, print_piece, nullptr, &st);
  std::fputc('\n', stdout);
  std::fflush(stdout);
  const int rc = s != TERN_OK ? die("generate", s) : 0;
  print_stats(st);
  return rc;
}

// A chat's stats: its turns' summed.
void add_stats(const tern_generate_stats& st, tern_generate_stats* total) {
  total->prompt_tokens += st.prompt_tokens;
  total->decoded_tokens += st.decoded_tokens;
  total->drafted_tokens += st.drafted_tokens;
  total->accepted_tokens += st.accepted_tokens;
  total->verify_steps += st.verify_steps;
  total->generated_tokens += st.generated_tokens;
  total->stop_reason = st.stop_reason;
  total->prefill_seconds += st.prefill_seconds;
  total->decode_seconds += st.decode_seconds;
}

// --chat: a conversation on stdin until an empty line or EOF (`system`: the system message);
// the exit code.
int run_chat(const tern_model* model, tern_session* session, const std::string& system, tern_generate_params gp) {
  tern_model_info info;
  tern_model_get_info(model, &info);
  // The conversation is rendered whole each turn; only the text past what the session
  // already holds is fed (the format's rendering of earlier turns does not change).
  const char* stops[] = {info.chat_stop};
  if (info.chat_stop != nullptr) {
    gp.stop_strings = stops;
    gp.n_stop_strings = 1;
  }
  gp.add_bos = 0;  // the rendered text carries the BOS token's text
  gp.parse_special = 1;
  std::fprintf(stderr, "chat (%s format); an empty line or EOF ends it\n", info.chat_format);
  std::vector<std::string> roles, contents;
  if (!system.empty()) roles.push_back("system"), contents.push_back(system);
  std::string fed;  // the rendered text the session has run
  std::vector<char> text(4096);
  std::string line;
  tern_generate_stats total{};
  int rc = 0;
  while (std::fprintf(stdout, "> "), std::fflush(stdout), std::getline(std::cin, line) && !line.empty()) {
    roles.push_back("user");
    contents.push_back(line);
    std::vector<tern_chat_message> messages;
    for (size_t i = 0; i < roles.size(); ++i) messages.push_back({roles[i].c_str(), contents[i].c_str()});
    size_t size = 0;
    tern_status s = tern_chat_apply(model, messages.data(), messages.size(), 1, text.data(), text.size(), &size);
    if (s == TERN_OUT_OF_RANGE) {
      text.resize(size + 1);
      s = tern_chat_apply(model, messages.data(), messages.size(), 1, text.data(), text.size(), &size);
    }
    if (s != TERN_OK) {
      rc = die("chat", s);
      break;
    }
    const std::string rendered(text.data(), size);
    const std::string turn = rendered.compare(0, fed.size(), fed) == 0 ? rendered.substr(fed.size()) : rendered;
    if (turn.size() == rendered.size() && !fed.empty()) tern_session_reset(session);
    std::string reply;
    auto collect = [](const char* piece, size_t n, void* user) {
      static_cast<std::string*>(user)->append(piece, n);
      return print_piece(piece, n, nullptr);
    };
    tern_generate_stats st{};
    s = tern_generate(session, turn.data(), turn.size(), &gp, collect, &reply, &st);
    std::fputc('\n', stdout);
    std::fflush(stdout);
    if (s != TERN_OK) {
      rc = die("generate", s);
      break;
    }
    roles.push_back("assistant");
    contents.push_back(reply);
    // What the session holds now, as text: the reply, and the end-of-turn token when the
    // model ended its turn with one (the format's message suffix).
    fed = rendered + reply;
    if (st.stop_reason == TERN_STOP_END_OF_GENERATION) {
      messages.push_back({"assistant", contents.back().c_str()});
      if (tern_chat_apply(model, messages.data(), messages.size(), 0, text.data(), text.size(), &size) == TERN_OK) {
        fed.assign(text.data(), size);
      }
    }
    add_stats(st, &total);
  }
  print_stats(total);
  return rc;
}

void print_draft_memory(const tern_model* draft) {
  tern_memory_report r{};
  tern_memory_report_get(draft, &r);
  std::fprintf(stderr, "draft model: planned %.2f MiB (arena %.2f MiB, context %u tokens, kv %s)\n",
               r.planned_total_bytes / 1048576.0, r.arena_bytes / 1048576.0, r.context_tokens, r.kv_mode);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Generate text with a Tern bundle"};
  RunOptions o;
  add_run_options(app, &o);
  CLI11_PARSE(app, argc, argv);
  std::string grammar;
  if (!tern::cli::grammar_text(o.grammar, "tern-run", &grammar)) return 2;
  if (o.greedy) o.sampler.temperature = 0.0f;

  tern_model_params mp;
  if (tern::cli::to_model_params(o.model, &mp) != TERN_OK) {
    std::fprintf(stderr, "tern-run: --memory-budget '%s': %s\n", o.model.memory_budget.c_str(),
                 tern_last_error_message());
    return 2;
  }
  std::vector<tern_logit_bias> biases;
  if (!parse_logit_biases(o.logit_bias, &biases)) return 2;
  mp.kv_eviction = o.no_evict ? 0 : (o.evict ? 1 : -1);
  mp.n_draft = o.draft.empty() ? 0 : o.draft_max;
  if (!tern::cli::grammar_memory(o.grammar, "tern-run", &mp.grammar_bytes)) return 2;
  Loaded m;
  tern_status s = tern::cli::verify_bundle_if_asked(o.model, o.bundle.c_str(), "tern-run");
  if (s == TERN_OK && !o.draft.empty() && o.draft != "lookup") {
    s = tern::cli::verify_bundle_if_asked(o.model, o.draft.c_str(), "tern-run");
  }
  if (s != TERN_OK) return die("--verify-bundle", s);
  s = tern_model_load(o.bundle.c_str(), &mp, &m.model);
  if (s != TERN_OK) return die("load", s);
  if (!o.draft.empty() && o.draft != "lookup" && (s = load_draft(m.model, mp, o.draft, &m.draft)) != TERN_OK) {
    return die("--draft", s);
  }
  tern_session_params sp = tern_session_default_params();
  sp.sampler = o.sampler;
  sp.n_draft = mp.n_draft;
  sp.draft_model = m.draft;
  if ((s = tern_session_create(m.model, &sp, &m.session)) != TERN_OK) return die("session", s);
  if (!grammar.empty() && (s = tern_session_set_grammar(m.session, grammar.data(), grammar.size())) != TERN_OK) {
    return die(o.grammar.grammar_file.empty() ? "--json-schema" : "--grammar", s);
  }
  if (!biases.empty() && (s = tern_session_set_logit_bias(m.session, biases.data(), biases.size())) != TERN_OK) {
    return die("--logit-bias", s);
  }

  tern_generate_params gp = tern_generate_default_params();
  gp.max_new_tokens = static_cast<uint32_t>(o.n_new);
  gp.add_bos = o.no_bos ? 0 : 1;
  const int rc = o.chat ? run_chat(m.model, m.session, o.prompt, gp) : run_prompt(m.session, o.prompt, gp);
  print_memory(m.model);
  if (m.draft != nullptr) print_draft_memory(m.draft);
  return rc;
}
