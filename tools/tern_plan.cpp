// tern-plan BUNDLE --budget 2G|available[-25%] | --context 8192 | --device pi4|pi5|android6g|iphone4g|all
//           [--budget B --context N: how many sessions of N tokens fit] [--sessions N] [--json]
//           [--draft-max K] [--draft DRAFT_BUNDLE with --context: a draft model's plan beside each mode's]
// Before loading anything big: per KV mode (fp16, q8, q4, q2, and adaptive at every average
// the bundle is calibrated at), what the weights, scratch and KV cache cost, and the largest
// context a budget holds (or the budget a context needs). The numbers are tern_plan()'s,
// computed by the same code tern_model_load() plans with. Uses only the public C API.
// With a budget it also answers which mode kv_mode "auto" loads (memory_plan.h: the least
// estimated KL that holds the context), or what each mode would hold instead.
// With --device pi4, pi5 or android6g it also predicts decode tok/s at 1 and 4 threads for the bundle's
// ternary layout and the other one (kernels/ternary_decode_model.h), and says which is
// faster there; that part reads the bundle's tensor shapes through the runtime's Bundle.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <string>
#include <vector>

#include "include/tern.h"
#include "kernels/ternary_decode_model.h"
#include "runtime/model/bundle.h"
#include "tools/common/cli_sizes.h"
#include "tools/common/decode_work.h"
#include "tools/common/model_options.h"

namespace {

// Memory an app can count on, as a share of the device's RAM (the rest is the OS, other
// apps and the page cache). Chosen conservatively:
//   pi4 / pi5: Raspberry Pi OS Lite runs in ~0.3-0.5 GB; 75 % leaves room for it, the
//     page cache of other files and a desktop session.
//   android6g: Android's low-memory killer reclaims a foreground app long before it has
//     all the RAM (system, GPU, cached apps); ~40 % of a 6 GB phone (2.4 GB) is what large
//     apps sustain in practice.
//   iphone4g: iOS jetsam ends an app at about half of a 4 GB device's RAM (without the
//     increased-memory-limit entitlement): 2 GB.
struct Device {
  const char* name;
  const char* description;
  double ram_gib;
  double app_share;
};
constexpr Device kDevices[] = {
    {"pi4", "Raspberry Pi 4, 4 GB", 4.0, 0.75},
    {"pi5", "Raspberry Pi 5, 8 GB", 8.0, 0.75},
    {"android6g", "Android phone, 6 GB", 6.0, 0.40},
    {"iphone4g", "iPhone, 4 GB", 4.0, 0.50},
};

using tern::cli::mib;

struct Table {
  std::string label;  // "budget 2.00 GiB" / "context 8192" / device
  std::string device;
  uint64_t budget = 0;
  uint32_t context = 0;
  std::vector<tern_plan_row> rows;
  // kv_mode "auto" with a budget: the least-KL mode that holds the context, or why none does.
  tern_plan_row auto_row{};
  std::string auto_message;
  // --draft: the draft bundle's plan per row (same KV mode and context), or its status.
  std::vector<tern_plan_row> draft_rows;
};

// What kv_mode "auto" resolves to under this table's budget and context (the C API's answer).
void plan_auto(const std::string& bundle, const tern_model_params& p, Table* t) {
  const char* modes[] = {"auto"};
  size_t count = 0;
  const tern_status s = tern_plan(bundle.c_str(), &p, modes, 1, &t->auto_row, 1, &count);
  if (s != TERN_OK) t->auto_row.status = s;
  if (t->auto_row.status != TERN_OK) t->auto_message = tern_last_error_message();
}

void print_auto(const Table& t) {
  if (t.budget == 0) return;
  const std::string n = t.context > 0 ? std::to_string(t.context) + " tokens" : "the full context";
  if (t.auto_row.status == TERN_OK) {
    std::printf(
        "auto: %s (kv_mode \"auto\" loads it: of the modes holding %s in this budget, the least KL "
        "estimated from the bundle's calibration, or the most bits without one; %u positions, %.1f MiB)\n\n",
        t.auto_row.kv_mode, n.c_str(), t.auto_row.context_tokens, mib(t.auto_row.total_bytes));
  } else {
    std::printf("%s\n\n",
                t.auto_message.c_str());  // "auto: ... no mode holds N tokens ...; the context each gets: ..."
  }
}

void print_text(const Table& t) {
  std::printf("%s\n", t.label.c_str());
  std::printf("%-14s %9s %10s %10s %10s %10s %11s %11s %9s\n", "kv mode", "context", "KV B/tok", "weights", "scratch",
              "KV cache", t.budget > 0 ? "total" : "budget", "min budget", "sessions");
  for (const tern_plan_row& r : t.rows) {
    if (r.status != TERN_OK && r.minimum_budget_bytes == 0) {
      std::printf("%-14s %s\n", r.kv_mode, tern_status_string(r.status));
      continue;
    }
    if (r.status != TERN_OK) {
      std::printf("%-14s %9s %10.1f %8.1f M %10s %10s %11s %9.1f M  (%s)\n", r.kv_mode, "-", r.kv_bytes_per_token,
                  mib(r.weights_bytes), "-", "-", "-", mib(r.minimum_budget_bytes), tern_status_string(r.status));
      continue;
    }
    std::printf("%-14s %9u %10.1f %8.1f M %8.1f M %8.1f M %9.1f M %9.1f M %9u\n", r.kv_mode, r.context_tokens,
                r.kv_bytes_per_token, mib(r.weights_bytes), mib(r.scratch_bytes), mib(r.kv_bytes), mib(r.total_bytes),
                mib(r.minimum_budget_bytes), r.sessions_that_fit);
  }
  std::printf(
      "(MiB; process overhead %.0f MiB included in the totals; KV cache and scratch are per session; "
      "sessions: %s)\n\n",
      t.rows.empty() ? 0.0 : mib(t.rows[0].process_overhead_bytes),
      t.budget > 0 ? "how many of that context fit the budget" : "planned");
}

// A draft model is a second tern_model in the same process: its plan's total counts the
// process overhead again, which the process pays once.
void print_draft(const Table& t, const std::string& draft) {
  if (t.draft_rows.empty()) return;
  std::printf("with the draft model %s (loaded with the same KV mode and context)\n", draft.c_str());
  std::printf("%-14s %9s %10s %12s %14s\n", "kv mode", "context", "weights", "draft total", "both, one process");
  for (size_t i = 0; i < t.rows.size(); ++i) {
    const tern_plan_row& r = t.rows[i];
    const tern_plan_row& d = t.draft_rows[i];
    if (r.status != TERN_OK || d.status != TERN_OK) {
      std::printf("%-14s %s\n", r.kv_mode, tern_status_string(r.status != TERN_OK ? r.status : d.status));
      continue;
    }
    std::printf("%-14s %9u %8.1f M %10.1f M %12.1f M\n", r.kv_mode, d.context_tokens, mib(d.weights_bytes),
                mib(d.total_bytes), mib(r.total_bytes + d.total_bytes - d.process_overhead_bytes));
  }
  std::printf("(MiB; the draft total includes its own process overhead, counted once in the last column)\n\n");
}

void print_json_row(const tern_plan_row& r, bool last) {
  std::printf(
      "      {\"kv_mode\": \"%s\", \"status\": \"%s\", \"context_tokens\": %u, \"kv_bytes_per_token\": %.3f, "
      "\"weights_bytes\": %llu, \"process_overhead_bytes\": %llu, \"arena_bytes\": %llu, \"scratch_bytes\": %llu, "
      "\"kv_bytes\": %llu, \"total_bytes\": %llu, \"minimum_budget_bytes\": %llu, \"session_bytes\": %llu, "
      "\"sessions_that_fit\": %u}%s\n",
      r.kv_mode, tern_status_string(r.status), r.context_tokens, r.kv_bytes_per_token,
      static_cast<unsigned long long>(r.weights_bytes), static_cast<unsigned long long>(r.process_overhead_bytes),
      static_cast<unsigned long long>(r.arena_bytes), static_cast<unsigned long long>(r.scratch_bytes),
      static_cast<unsigned long long>(r.kv_bytes), static_cast<unsigned long long>(r.total_bytes),
      static_cast<unsigned long long>(r.minimum_budget_bytes), static_cast<unsigned long long>(r.session_bytes),
      r.sessions_that_fit, last ? "" : ",");
}

// What a decoded token of this bundle multiplies and reads, with its ternary matrices in
// each tiled layout.
struct BundleDecodeWork {
  bool ok = false;
  tern::TernaryLayout layout = tern::TernaryLayout::T2Interleaved16;  // the first ternary tensor's
  tern::DecodeWork t2i16, t3i16;
};

BundleDecodeWork decode_work_per_layout(const std::string& path) {
  BundleDecodeWork w;
  auto b = tern::Bundle::open(path.c_str());
  if (!b.ok()) return w;
  for (size_t i = 0; i < b->tensor_count(); ++i) {
    auto v = b->tensor_at(i);
    if (v.ok() && v->type == tern::TensorType::Ternary) {
      w.layout = v->layout;
      break;
    }
  }
  auto t2 = tern::cli::bundle_decode_work(*b, tern::TernaryLayout::T2Interleaved16);
  auto t3 = tern::cli::bundle_decode_work(*b, tern::TernaryLayout::T3Interleaved16);
  if (!t2.ok() || !t3.ok()) return w;
  w.t2i16 = *t2;
  w.t3i16 = *t3;
  w.ok = w.t2i16.ternary_weights > 0;
  return w;
}

// The predicted decode speed on one device per layout, and which layout wins there.
void print_decode_prediction(const BundleDecodeWork& w, const char* device_name) {
  const tern::DecodeDevice* d = tern::find_decode_device(device_name);
  if (d == nullptr) {
    std::printf(
        "decode speed on %s: no prediction (no kernel cycle counts for its CPU; pi4, pi5 and android6g have them)\n\n",
        device_name);
    return;
  }
  if (!w.ok) {
    std::printf("decode speed on %s: no prediction (the bundle has no ternary matrices)\n\n", device_name);
    return;
  }
  std::printf(
      "decode speed on %s, predicted (%s %.1f GHz, %s kernels, %.2f GB/s read; compute or bandwidth bound, "
      "attention left out: an upper bound)\n",
      d->name, d->cores, d->clock_ghz, tern::to_string(d->ternary_isa), d->read_gb_per_s);
  std::printf("  %-18s %12s %16s %17s\n", "layout", "MB / token", "tok/s 1 thread", "tok/s 4 threads");
  const unsigned kThreads[2] = {1, 4};
  const tern::TernaryLayout layouts[2] = {tern::TernaryLayout::T2Interleaved16, tern::TernaryLayout::T3Interleaved16};
  double tok_s[2][2];
  for (int l = 0; l < 2; ++l) {
    const tern::DecodeWork& work = l == 0 ? w.t2i16 : w.t3i16;
    for (int t = 0; t < 2; ++t) tok_s[l][t] = tern::predict_decode_tok_s(*d, layouts[l], work, kThreads[t]);
    std::printf("  %-18s %12.1f %16.1f %17.1f%s\n", tern::to_string(layouts[l]),
                (work.ternary_bytes + work.other_bytes) / 1e6, tok_s[l][0], tok_s[l][1],
                w.layout == layouts[l] ? "   (this bundle)" : "");
  }
  for (int t = 0; t < 2; ++t) {
    const int best = tok_s[1][t] > tok_s[0][t] ? 1 : 0;
    const char* packing = best == 1 ? "base3" : "2bit";
    std::printf("  %u thread%s: %s is faster (%.2fx)%s\n", kThreads[t], kThreads[t] == 1 ? "" : "s",
                tern::to_string(layouts[best]), tok_s[best][t] / tok_s[1 - best][t],
                w.layout == layouts[best] ? ", this bundle's layout"
                                          : (std::string(", re-convert with --ternary-packing ") + packing).c_str());
  }
  std::printf("\n");
}

// The command line.
struct PlanOptions {
  std::string bundle, budget_text, device;
  unsigned context = 0, batch = 0;
  int sinks = -1, window = -1;
  bool json = false, no_evict = false;
  std::vector<std::string> modes;
  unsigned sessions = 1;
  std::string draft;
  unsigned draft_max = 0;
};

void add_plan_options(CLI::App& app, PlanOptions* o) {
  app.add_option("BUNDLE", o->bundle, ".tern bundle")->required();
  app.add_option("--budget", o->budget_text,
                 "memory budget, e.g. 2G or available-25%: the largest context per mode (with --context: how many "
                 "sessions of that context fit)");
  app.add_option("--sessions", o->sessions, "sessions the model holds at once (default 1)")->check(CLI::PositiveNumber);
  app.add_option("--context", o->context, "context tokens: the budget each mode needs");
  app.add_option("--device", o->device, "pi4, pi5, android6g, iphone4g or all (budget = the app's share of RAM)")
      ->check(CLI::IsMember({"pi4", "pi5", "android6g", "iphone4g", "all"}));
  app.add_option("--kv", o->modes,
                 "KV modes to plan (default: fp16 q8 q4 q2 and every calibrated adaptive:B; aging tiers: "
                 "q4>2@96 = blocks more than 96 tokens past the exact window at 2 bits; per-head budgets: q4/hh)");
  tern::cli::add_batch_option(app, &o->batch);  // 0: the default
  tern::cli::add_kv_layout_options(app, &o->window, &o->sinks, "32; adaptive: the bundle's",
                                   "4; adaptive: the bundle's");
  app.add_flag("--no-evict", o->no_evict, "plan without eviction");
  app.add_option("--draft-max", o->draft_max, "room for speculative decoding: drafted tokens per step (0-15)")
      ->check(CLI::Range(0, 15));
  app.add_option("--draft", o->draft, "a draft model's bundle: its plan beside each mode's (with --context)");
  app.add_flag("--json", o->json, "JSON output");
}

// Which question was asked (--budget, --context, --device, or --budget with --context); 0, or the exit code.
int check_question(PlanOptions* o) {
  const bool budget_and_context = !o->budget_text.empty() && o->context > 0 && o->device.empty();
  const int choices = !o->budget_text.empty() + (o->context > 0) + !o->device.empty();
  if (choices != 1 && !budget_and_context) {
    std::fprintf(stderr, "tern-plan: give one of --budget, --context, --device (or --budget with --context)\n");
    return 2;
  }
  if (!o->draft.empty() && (o->context == 0 || !o->budget_text.empty())) {
    std::fprintf(stderr,
                 "tern-plan: --draft plans with --context (a budget would have to be split between the models)\n");
    return 2;
  }
  if (!o->draft.empty() && o->draft_max == 0) o->draft_max = 4;
  return 0;
}

// One table for the budget or the context, or one per device; 0, or the exit code.
int make_tables(const PlanOptions& o, std::vector<Table>* tables) {
  const unsigned context = o.context;
  if (!o.budget_text.empty()) {
    Table t;
    if (tern_parse_memory_budget(o.budget_text.c_str(), &t.budget) != TERN_OK || t.budget == 0) {
      std::fprintf(stderr, "tern-plan: --budget '%s': %s\n", o.budget_text.c_str(), tern_last_error_message());
      return 2;
    }
    t.context = context;
    char label[160];
    if (context > 0) {
      std::snprintf(label, sizeof label, "budget %.2f MiB (%s): how many sessions of %u tokens fit", mib(t.budget),
                    o.budget_text.c_str(), context);
    } else {
      std::snprintf(label, sizeof label, "budget %.2f MiB (%s): the largest context per KV mode", mib(t.budget),
                    o.budget_text.c_str());
    }
    t.label = label;
    tables->push_back(t);
  } else if (context > 0) {
    Table t;
    t.context = context;
    t.label = "context " + std::to_string(context) + " tokens (or the model's, if smaller): the budget it needs";
    tables->push_back(t);
  } else {
    for (const Device& d : kDevices) {
      if (o.device != "all" && o.device != d.name) continue;
      Table t;
      t.device = d.name;
      t.budget = static_cast<uint64_t>(d.ram_gib * d.app_share * 1024.0 * 1024.0 * 1024.0);
      char label[160];
      std::snprintf(label, sizeof label, "%s (%s): %.0f %% of RAM for the app = %.2f GiB", d.name, d.description,
                    d.app_share * 100.0, static_cast<double>(t.budget) / (1024.0 * 1024.0 * 1024.0));
      t.label = label;
      tables->push_back(t);
    }
  }
  return 0;
}

// The table's rows from tern_plan(), with "auto" under a budget and the draft's rows; 0, or the exit code.
int plan_table(const PlanOptions& o, const std::vector<const char*>& mode_ptrs, Table* table) {
  Table& t = *table;
  const std::string& bundle = o.bundle;
  tern_model_params p = tern_model_default_params();
  p.memory_budget_bytes = t.budget;
  p.n_ctx = t.context;
  p.n_sessions = o.sessions;
  if (o.batch > 0) p.n_batch = o.batch;
  p.kv_sink_tokens = o.sinks;
  p.kv_recent_window = o.window;
  p.kv_eviction = o.no_evict ? 0 : -1;
  p.n_draft = o.draft_max;
  const char* const* kv_modes = mode_ptrs.empty() ? nullptr : mode_ptrs.data();
  size_t count = 0;
  tern_status s = tern_plan(bundle.c_str(), &p, kv_modes, mode_ptrs.size(), nullptr, 0, &count);
  if (s != TERN_OK && s != TERN_OUT_OF_RANGE) {
    std::fprintf(stderr, "tern-plan: %s (%s)\n", tern_last_error_message(), tern_status_string(s));
    return 1;
  }
  t.rows.resize(count);
  s = tern_plan(bundle.c_str(), &p, kv_modes, mode_ptrs.size(), t.rows.data(), t.rows.size(), &count);
  if (s != TERN_OK) {
    std::fprintf(stderr, "tern-plan: %s (%s)\n", tern_last_error_message(), tern_status_string(s));
    return 1;
  }
  if (t.budget > 0) plan_auto(bundle, p, &t);
  for (const tern_plan_row& r : o.draft.empty() ? std::vector<tern_plan_row>{} : t.rows) {
    tern_model_params dp = p;
    dp.n_draft = 0;
    dp.n_ctx = r.context_tokens > 0 ? r.context_tokens : t.context;
    const char* mode[] = {r.kv_mode};
    tern_plan_row d{};
    size_t n = 0;
    const tern_status ds = tern_plan(o.draft.c_str(), &dp, mode, 1, &d, 1, &n);
    if (ds != TERN_OK) d.status = ds;
    t.draft_rows.push_back(d);
  }
  return 0;
}

void print_json(const std::string& bundle, const std::vector<Table>& tables, const BundleDecodeWork& work) {
  std::printf("{\n  \"bundle\": \"%s\",\n  \"plans\": [\n", bundle.c_str());
  for (size_t i = 0; i < tables.size(); ++i) {
    const Table& t = tables[i];
    std::printf("    {\"device\": \"%s\", \"budget_bytes\": %llu, \"context_tokens\": %u, \"rows\": [\n",
                t.device.c_str(), static_cast<unsigned long long>(t.budget), t.context);
    for (size_t j = 0; j < t.rows.size(); ++j) print_json_row(t.rows[j], j + 1 == t.rows.size());
    std::printf("    ]");
    if (t.budget > 0)
      std::printf(", \"auto\": {\"kv_mode\": \"%s\", \"status\": \"%s\", \"context_tokens\": %u}",
                  t.auto_row.status == TERN_OK ? t.auto_row.kv_mode : "", tern_status_string(t.auto_row.status),
                  t.auto_row.context_tokens);
    const tern::DecodeDevice* d = tern::find_decode_device(t.device.c_str());
    if (d != nullptr && work.ok) {
      std::printf(", \"decode_tok_s\": {\"bundle_layout\": \"%s\"", tern::to_string(work.layout));
      for (const tern::TernaryLayout l : {tern::TernaryLayout::T2Interleaved16, tern::TernaryLayout::T3Interleaved16}) {
        const tern::DecodeWork& dw = l == tern::TernaryLayout::T2Interleaved16 ? work.t2i16 : work.t3i16;
        std::printf(", \"%s\": {\"bytes_per_token\": %.0f, \"threads_1\": %.3f, \"threads_4\": %.3f}",
                    tern::to_string(l), dw.ternary_bytes + dw.other_bytes, tern::predict_decode_tok_s(*d, l, dw, 1),
                    tern::predict_decode_tok_s(*d, l, dw, 4));
      }
      std::printf("}");
    }
    std::printf("}%s\n", i + 1 == tables.size() ? "" : ",");
  }
  std::printf("  ]\n}\n");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Plan a Tern bundle's memory per KV mode"};
  PlanOptions o;
  add_plan_options(app, &o);
  CLI11_PARSE(app, argc, argv);
  if (const int code = check_question(&o)) return code;

  std::vector<Table> tables;
  if (const int code = make_tables(o, &tables)) return code;

  // An embedding bundle: only the dense modes; its context is the longest input, and it
  // never decodes.
  bool embedding = false;
  if (auto opened = tern::Bundle::open(o.bundle.c_str()); opened.ok()) embedding = opened->config().embedding;
  if (embedding && o.modes.empty()) o.modes = {"f32", "fp16"};
  if (embedding && !o.json) {
    std::printf(
        "embedding model: the context is the longest input (in tokens) one session embeds; several shorter\n"
        "texts share it in a batch. No decode: no logits, sampler or decode speed.\n\n");
  }
  std::vector<const char*> mode_ptrs;
  for (const std::string& m : o.modes) mode_ptrs.push_back(m.c_str());
  for (Table& t : tables) {
    if (const int code = plan_table(o, mode_ptrs, &t)) return code;
  }

  const BundleDecodeWork work = o.device.empty() || embedding ? BundleDecodeWork{} : decode_work_per_layout(o.bundle);
  if (o.json) {
    print_json(o.bundle, tables, work);
  } else {
    for (const Table& t : tables) {
      print_text(t), print_auto(t), print_draft(t, o.draft);
      if (!t.device.empty() && !embedding) print_decode_prediction(work, t.device.c_str());
    }
  }
  return 0;
}
