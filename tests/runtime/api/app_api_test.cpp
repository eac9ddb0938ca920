// What an app needs beyond generate: several sessions per model, saving and restoring a
// conversation, rewinding it, biasing logits, penalties, the memory that is really there.
// Each check compares against an independent run (a session never saved, a fresh session
// fed the same tokens, logits penalized by hand), through the public C API.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "include/tern.h"
#include "platform/memory.h"
#include "tests/support/bundle_util.h"

namespace {

constexpr const char* kAusten = "tiny-austen-packed.tern";
constexpr const char* kCalibrated = "tiny-austen-calibrated.tern";
// The same model from its bf16 master weights: another bundle of the same shape.
constexpr const char* kOther = "tiny-austen-bf16.tern";
constexpr const char* kLlama = "bitllama2c-3M.tern";
constexpr const char* kLlamaSource = "models/bitllama2c-3M/bit_model.bin";

std::string message() { return tern_last_error_message(); }

struct Loaded {
  tern_model* model = nullptr;
  std::vector<tern_session*> sessions;
  ~Loaded() {
    for (tern_session* s : sessions) tern_session_free(s);
    tern_model_free(model);
  }
};

tern_model_params params_for(const char* mode, uint32_t ctx = 0, uint32_t sessions = 1) {
  tern_model_params p = tern_model_default_params();
  p.kv_mode = mode;
  p.n_ctx = ctx;
  p.n_sessions = sessions;
  return p;
}

tern_status load(Loaded& l, const char* bundle, const tern_model_params& p) {
  return tern_model_load(tern::testing::bundle_path(bundle).c_str(), &p, &l.model);
}

tern_session* open_session(Loaded& l, float temperature, uint64_t seed) {
  tern_session_params sp = tern_session_default_params();
  sp.sampler.temperature = temperature;
  sp.sampler.seed = seed;
  sp.sampler.top_k = 40;
  tern_session* s = nullptr;
  EXPECT_EQ(tern_session_create(l.model, &sp, &s), TERN_OK) << message();
  if (s != nullptr) l.sessions.push_back(s);
  return s;
}

std::vector<int32_t> tokenize(tern_model* m, const char* text) {
  std::vector<int32_t> ids(512);
  size_t n = 0;
  EXPECT_EQ(tern_tokenize(m, text, std::strlen(text), 1, 1, ids.data(), ids.size(), &n), TERN_OK) << message();
  ids.resize(n);
  return ids;
}

// Samples and decodes n tokens; returns them.
std::vector<int32_t> step(tern_session* s, int n) {
  std::vector<int32_t> out;
  for (int i = 0; i < n; ++i) {
    int32_t t = -1;
    if (tern_sample(s, &t) != TERN_OK) {
      ADD_FAILURE() << message();
      break;
    }
    out.push_back(t);
    if (tern_decode(s, t) != TERN_OK) {
      ADD_FAILURE() << message();
      break;
    }
  }
  return out;
}

std::vector<float> logits_of(const tern_session* s) {
  const float* l = nullptr;
  size_t n = 0;
  EXPECT_EQ(tern_get_logits(s, &l, &n), TERN_OK) << message();
  return l != nullptr ? std::vector<float>(l, l + n) : std::vector<float>();
}

TEST(AppApi, SeveralSessionsShareOneModelAndEachGetsItsSlot) {
  TERN_REQUIRE_BUNDLE(kAusten);
  const std::string path = tern::testing::bundle_path(kAusten);
  Loaded one, two;
  tern_model_params p = params_for("q4", 200, 1);
  ASSERT_EQ(tern_model_load(path.c_str(), &p, &one.model), TERN_OK) << message();
  p.n_sessions = 3;
  ASSERT_EQ(tern_model_load(path.c_str(), &p, &two.model), TERN_OK) << message();
  tern_memory_report r1, r3;
  ASSERT_EQ(tern_memory_report_get(one.model, &r1), TERN_OK);
  ASSERT_EQ(tern_memory_report_get(two.model, &r3), TERN_OK);
  EXPECT_EQ(r3.sessions, 3u);
  EXPECT_EQ(r3.session_bytes, r1.session_bytes);  // same context, same slot
  EXPECT_GE(r3.arena_bytes, r1.arena_bytes + 2 * r1.session_bytes);
  tern_model_info info;
  ASSERT_EQ(tern_model_get_info(two.model, &info), TERN_OK);
  EXPECT_EQ(info.n_sessions, 3u);

  const std::vector<int32_t> prompt = tokenize(one.model, "It was a bright cold day");
  tern_session* ref = open_session(one, 0.0f, 1);
  ASSERT_EQ(tern_prefill(ref, prompt.data(), prompt.size()), TERN_OK);
  const std::vector<int32_t> want = step(ref, 24);

  std::vector<tern_session*> s;
  for (int i = 0; i < 3; ++i) s.push_back(open_session(two, 0.0f, 1));
  tern_session* fourth = nullptr;
  EXPECT_EQ(tern_session_create(two.model, nullptr, &fourth), TERN_INVALID_STATE);
  EXPECT_NE(message().find("3 session slots"), std::string::npos) << message();
  ASSERT_EQ(tern_memory_report_get(two.model, &r3), TERN_OK);
  EXPECT_EQ(r3.sessions_in_use, 3u);
  // Interleaved, each session's text is its own: the same as the one-session model's.
  for (tern_session* x : s) ASSERT_EQ(tern_prefill(x, prompt.data(), prompt.size()), TERN_OK);
  std::vector<std::vector<int32_t>> got(3);
  for (int i = 0; i < 24; ++i)
    for (int k = 0; k < 3; ++k) got[k].push_back(step(s[k], 1)[0]);
  for (int k = 0; k < 3; ++k) EXPECT_EQ(got[k], want) << "session " << k;
  // A freed slot is reused.
  tern_session_free(s[1]);
  two.sessions.erase(std::find(two.sessions.begin(), two.sessions.end(), s[1]));
  EXPECT_NE(open_session(two, 0.0f, 1), nullptr);
}

// Planning "how many sessions of N tokens fit": loading that many at the plan's total works,
// one more does not.
TEST(AppApi, PlanSaysHowManySessionsFit) {
  TERN_REQUIRE_BUNDLE(kAusten);
  const std::string path = tern::testing::bundle_path(kAusten);
  tern_model_params p = params_for(nullptr, 256);
  p.memory_budget_bytes = uint64_t{24} << 20;
  const char* modes[] = {"q4"};
  tern_plan_row row{};
  size_t count = 0;
  ASSERT_EQ(tern_plan(path.c_str(), &p, modes, 1, &row, 1, &count), TERN_OK) << message();
  ASSERT_EQ(row.status, TERN_OK) << message();
  ASSERT_GE(row.sessions_that_fit, 2u);
  p.kv_mode = "q4";
  p.n_sessions = row.sessions_that_fit;
  Loaded fits;
  ASSERT_EQ(tern_model_load(path.c_str(), &p, &fits.model), TERN_OK) << message();
  tern_memory_report r;
  ASSERT_EQ(tern_memory_report_get(fits.model, &r), TERN_OK);
  EXPECT_LE(r.planned_total_bytes, p.memory_budget_bytes);
  EXPECT_GE(r.context_tokens, 256u);
  p.n_sessions = row.sessions_that_fit + 1;
  Loaded too_many;
  // One more session: the budget either refuses or shrinks each session's context.
  const tern_status s = tern_model_load(path.c_str(), &p, &too_many.model);
  if (s == TERN_OK) {
    ASSERT_EQ(tern_memory_report_get(too_many.model, &r), TERN_OK);
    EXPECT_LT(r.context_tokens, 256u);
  } else {
    EXPECT_EQ(s, TERN_BUDGET_TOO_SMALL);
  }
}

// Saving mid-conversation and restoring into a fresh session continues with exactly the
// tokens the session would have produced had it never been saved: greedy and sampled, every
// KV mode, and past the capacity for an evicting one.
void save_restore_continues_exactly(const char* bundle, const char* mode, uint32_t ctx, int before, int after,
                                    float temperature) {
  SCOPED_TRACE(std::string(bundle) + " " + mode + " temp " + std::to_string(temperature));
  Loaded l;
  ASSERT_EQ(load(l, bundle, params_for(mode, ctx, 2)), TERN_OK) << message();
  tern_session* a = open_session(l, temperature, 99);
  const std::vector<int32_t> prompt = tokenize(l.model, "Once upon a time there was");
  ASSERT_EQ(tern_prefill(a, prompt.data(), prompt.size()), TERN_OK);
  step(a, before);
  size_t size = 0;
  ASSERT_EQ(tern_session_state_size(a, &size), TERN_OK);
  std::vector<uint8_t> state(size);
  size_t written = 0;
  EXPECT_EQ(tern_session_state_save(a, state.data(), size - 1, &written), TERN_OUT_OF_RANGE);
  EXPECT_EQ(written, size);
  ASSERT_EQ(tern_session_state_save(a, state.data(), state.size(), &written), TERN_OK) << message();
  ASSERT_EQ(written, size);
  const std::vector<int32_t> want = step(a, after);

  tern_session* b = open_session(l, 0.7f, 12345);  // other sampler settings: the state brings its own
  ASSERT_EQ(tern_decode(b, prompt[0]), TERN_OK);   // and a conversation to replace
  ASSERT_EQ(tern_session_state_load(b, state.data(), state.size()), TERN_OK) << message();
  EXPECT_EQ(step(b, after), want);

  // Through a file, into the first session after it moved on.
  tern::testing::TempFile file(".state");
  ASSERT_EQ(tern_session_state_save_file(b, file.path().c_str()), TERN_OK) << message();
  const std::vector<int32_t> more = step(b, 8);
  ASSERT_EQ(tern_session_state_load_file(a, file.path().c_str()), TERN_OK) << message();
  EXPECT_EQ(step(a, 8), more);
}

TEST(AppApi, SavedSessionContinuesExactlyInEveryKvMode) {
  TERN_REQUIRE_BUNDLE(kAusten);
  for (const char* mode : {"f32", "fp16", "q8", "q4", "q2", "k4v2"}) {
    for (float temperature : {0.0f, 0.8f}) save_restore_continues_exactly(kAusten, mode, 200, 20, 24, temperature);
  }
  // An evicting cache saved past its capacity (132 positions: 4 sinks, 2 blocks, window 64).
  save_restore_continues_exactly(kAusten, "q4", 132, 150, 40, 0.8f);
  TERN_REQUIRE_BUNDLE(kCalibrated);
  save_restore_continues_exactly(kCalibrated, "adaptive:3", 200, 20, 20, 0.8f);
}

// The other family (bitllama2.c: SiLU-gated FFN, no sub-norms).
TEST(AppApi, SavedBitllama2cSessionContinuesExactly) {
  TERN_REQUIRE_SHARED_BUNDLE(kLlama, kLlamaSource);
  save_restore_continues_exactly(kLlama, "f32", 0, 30, 30, 0.0f);
}

TEST(AppApi, StateFromAnotherModeOrBundleOrDamagedIsRefused) {
  TERN_REQUIRE_BUNDLE(kAusten);
  TERN_REQUIRE_BUNDLE(kOther);
  Loaded q4, q2, other;
  tern_model_params p = params_for("q4", 200, 2);
  ASSERT_EQ(tern_model_load(tern::testing::bundle_path(kAusten).c_str(), &p, &q4.model), TERN_OK);
  p.kv_mode = "q2";
  ASSERT_EQ(tern_model_load(tern::testing::bundle_path(kAusten).c_str(), &p, &q2.model), TERN_OK);
  p.kv_mode = "q4";
  ASSERT_EQ(tern_model_load(tern::testing::bundle_path(kOther).c_str(), &p, &other.model), TERN_OK);
  tern_session* a = open_session(q4, 0.0f, 1);
  const std::vector<int32_t> prompt = tokenize(q4.model, "It is a truth");
  ASSERT_EQ(tern_prefill(a, prompt.data(), prompt.size()), TERN_OK);
  size_t size = 0, written = 0;
  ASSERT_EQ(tern_session_state_size(a, &size), TERN_OK);
  std::vector<uint8_t> state(size);
  ASSERT_EQ(tern_session_state_save(a, state.data(), size, &written), TERN_OK);

  tern_session* b = open_session(q2, 0.0f, 1);
  ASSERT_EQ(tern_prefill(b, prompt.data(), 3), TERN_OK);
  const std::vector<float> before = logits_of(b);
  EXPECT_EQ(tern_session_state_load(b, state.data(), state.size()), TERN_INVALID_ARGUMENT);
  EXPECT_NE(message().find("KV mode q4"), std::string::npos) << message();
  // Nothing was lost: the session goes on where it was.
  uint32_t pos = 0;
  ASSERT_EQ(tern_session_position(b, &pos), TERN_OK);
  EXPECT_EQ(pos, 3u);
  EXPECT_EQ(logits_of(b), before);

  tern_session* c = open_session(other, 0.0f, 1);
  EXPECT_EQ(tern_session_state_load(c, state.data(), state.size()), TERN_INVALID_ARGUMENT);
  EXPECT_NE(message().find("another bundle"), std::string::npos) << message();

  tern_session* d = open_session(q4, 0.0f, 1);
  std::vector<uint8_t> bad = state;
  bad[bad.size() / 2] ^= 0x40;
  EXPECT_EQ(tern_session_state_load(d, bad.data(), bad.size()), TERN_CORRUPT_FILE) << message();
  EXPECT_EQ(tern_session_state_load(d, state.data(), state.size() - 9), TERN_TRUNCATED) << message();
  EXPECT_EQ(tern_session_state_load(d, state.data(), 10), TERN_TRUNCATED) << message();
  bad = state;
  bad[0] = 'X';
  EXPECT_EQ(tern_session_state_load(d, bad.data(), bad.size()), TERN_BAD_MAGIC) << message();
  EXPECT_EQ(tern_session_state_load_file(d, "/nonexistent/state"), TERN_FILE_NOT_FOUND) << message();
  EXPECT_EQ(tern_session_state_load(nullptr, state.data(), state.size()), TERN_INVALID_ARGUMENT);
  EXPECT_EQ(tern_session_state_save(a, nullptr, 5, &written), TERN_INVALID_ARGUMENT);
}

// ---- State files: crash-safe saves, hostile files ----

// What a saved state file holds, by its self-describing header: header_bytes at offset 12,
// the checksum in the header's last 8 bytes (FNV-1a 64 over the header with that field zero,
// then the payload; version 1: the payload only).
uint64_t fnv1a(const uint8_t* p, size_t n, uint64_t h = 0xcbf29ce484222325ull) {
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}
void reseal_state(std::vector<uint8_t>& state, uint32_t version) {
  uint32_t header = 0;
  std::memcpy(&header, state.data() + 12, 4);
  std::memcpy(state.data() + 8, &version, 4);
  const uint64_t zero = 0;
  std::memcpy(state.data() + header - 8, &zero, 8);
  uint64_t sum = version == 1 ? 0xcbf29ce484222325ull : fnv1a(state.data(), header);
  sum = fnv1a(state.data() + header, state.size() - header, sum);
  std::memcpy(state.data() + header - 8, &sum, 8);
}

// A session with `text` prefilled.
tern_session* session_after(Loaded& l, const char* text, float temperature, uint64_t seed) {
  tern_session* s = open_session(l, temperature, seed);
  const std::vector<int32_t> prompt = tokenize(l.model, text);
  EXPECT_EQ(tern_prefill(s, prompt.data(), prompt.size()), TERN_OK) << message();
  return s;
}

std::vector<uint8_t> saved_state(tern_session* s) {
  size_t size = 0, written = 0;
  EXPECT_EQ(tern_session_state_size(s, &size), TERN_OK);
  std::vector<uint8_t> state(size);
  EXPECT_EQ(tern_session_state_save(s, state.data(), size, &written), TERN_OK) << message();
  return state;
}

// The next n tokens of a session restored from `state`.
std::vector<int32_t> continuation(tern_session* s, const std::vector<uint8_t>& state, int n) {
  EXPECT_EQ(tern_session_state_load(s, state.data(), state.size()), TERN_OK) << message();
  return step(s, n);
}

std::vector<std::string> files_starting_with(const std::string& path) {
  const std::string dir = path.substr(0, path.rfind('/')), base = path.substr(path.rfind('/') + 1);
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.compare(0, base.size(), base) == 0 && name != base) out.push_back(e.path().string());
  }
  return out;
}

// A process killed at a random point of a save leaves the previous file (byte for byte, and it
// continues exactly) or the complete new one, never anything else. The child saves a newer
// state in a loop; the parent kills it at a random time within two save times of seeing it at
// work: in even rounds from its first temporary file (mostly before the rename), in odd rounds
// from its first rename (inside a later save). Watching the child, not a clock, keeps the
// kills inside saves however busy the machine is.
TEST(AppApi, KilledSaveLeavesThePreviousStateFileWhole) {
  TERN_REQUIRE_BUNDLE(kAusten);
  Loaded l;
  ASSERT_EQ(load(l, kAusten, params_for("f32", 512, 3)), TERN_OK) << message();
  tern_session* old_session = session_after(l, "It is a truth universally acknowledged", 0.8f, 7);
  tern_session* new_session = open_session(l, 0.8f, 7);
  tern_session* check = open_session(l, 0.0f, 1);
  step(old_session, 100);
  const std::vector<uint8_t> old_state = saved_state(old_session);
  ASSERT_EQ(tern_session_state_load(new_session, old_state.data(), old_state.size()), TERN_OK);
  step(new_session, 300);  // a bigger state: more of each save is spent writing
  const std::vector<uint8_t> new_state = saved_state(new_session);
  const std::vector<int32_t> old_next = continuation(check, old_state, 16);
  const std::vector<int32_t> new_next = continuation(check, new_state, 16);
  ASSERT_NE(old_next, new_next);

  tern::testing::TempDir dir;
  const std::string path = dir.path() + "/conversation.state";
  auto save_seconds = [&] {
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_EQ(tern_session_state_save_file(new_session, path.c_str()), TERN_OK) << message();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  std::vector<double> times = {save_seconds(), save_seconds(), save_seconds()};
  std::sort(times.begin(), times.end());
  const double save_s = times[1];

  std::mt19937 rng(2026);
  const int rounds = std::getenv("TERN_SLOW_EMULATION") != nullptr ? 12 : 40;
  int kept_old = 0, replaced = 0, left_temp = 0;
  auto inode = [&] {
    struct stat st {};
    return stat(path.c_str(), &st) == 0 ? st.st_ino : 0;
  };
  for (int round = 0; round < rounds; ++round) {
    ASSERT_EQ(tern_session_state_save_file(old_session, path.c_str()), TERN_OK) << message();
    const ino_t before = inode();
    std::fflush(nullptr);
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      for (;;) tern_session_state_save_file(new_session, path.c_str());
    }
    const std::string temp_prefix = ".tmp." + std::to_string(pid) + ".";
    bool seen = false;
    for (int i = 0; i < 100000 && !seen; ++i) {  // at most ~10 s
      if (round % 2 == 0) {
        for (const std::string& f : files_starting_with(path)) seen = seen || f.find(temp_prefix) != std::string::npos;
      } else {
        seen = inode() != before;
      }
      if (!seen) std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    if (seen) {
      std::this_thread::sleep_for(
          std::chrono::duration<double>(std::uniform_real_distribution<double>(0, 2 * save_s)(rng)));
    }
    kill(pid, SIGKILL);
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(seen) << "round " << round << ": the saver was not seen at work within 10 s";
    ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "the saver ended on its own";

    const std::vector<uint8_t> on_disk = tern::testing::read_file_bytes(path);
    const bool is_old = on_disk == old_state, is_new = on_disk == new_state;
    ASSERT_TRUE(is_old || is_new) << "round " << round << ": the file (" << on_disk.size()
                                  << " bytes) is neither the previous state nor the new one";
    kept_old += is_old;
    replaced += is_new;
    ASSERT_EQ(tern_session_state_load_file(check, path.c_str()), TERN_OK) << message();
    EXPECT_EQ(step(check, 16), is_old ? old_next : new_next) << "round " << round;
    // A save killed before its rename leaves its temporary beside the file, never in its place.
    for (const std::string& temp : files_starting_with(path)) {
      EXPECT_NE(temp.find(temp_prefix), std::string::npos) << temp;
      std::filesystem::remove(temp);
      ++left_temp;
    }
  }
  std::printf("%d kills (one save: %.2f ms, %zu bytes): %d left the previous file, %d the new one, %d a temporary\n",
              rounds, save_s * 1e3, new_state.size(), kept_old, replaced, left_temp);
  // Kills landed inside saves: some before a rename (the previous file stayed), some after,
  // some mid-write (a temporary left).
  EXPECT_GT(kept_old, 0);
  EXPECT_GT(replaced, 0);
  EXPECT_GT(left_temp, 0);
}

// A save that cannot complete (its directory is missing, or is a file) fails with a message
// and leaves what was there; loading hostile files returns a status and a message, and the
// session still holds its conversation (or is reset) and can load the good file afterwards.
TEST(AppApi, HostileStateFilesGetAStatusAndAMessage) {
  TERN_REQUIRE_BUNDLE(kAusten);
  TERN_REQUIRE_BUNDLE(kOther);
  Loaded l, other;
  ASSERT_EQ(load(l, kAusten, params_for("q4", 200, 2)), TERN_OK) << message();
  ASSERT_EQ(load(other, kOther, params_for("q4", 200, 1)), TERN_OK) << message();
  tern_session* a = session_after(l, "Mr. Bennet was so odd a mixture", 0.8f, 5);
  tern_session* b = open_session(l, 0.8f, 6);
  tern_session* foreign = session_after(other, "Mr. Bennet was so odd a mixture", 0.8f, 5);
  step(a, 40);
  const std::vector<uint8_t> state = saved_state(a);
  const std::vector<int32_t> want = step(a, 12);

  tern::testing::TempDir dir;
  const std::string good = dir.path() + "/good.state";
  ASSERT_EQ(tern_session_state_load(b, state.data(), state.size()), TERN_OK);
  ASSERT_EQ(tern_session_state_save_file(b, good.c_str()), TERN_OK) << message();
  EXPECT_EQ(tern_session_state_save_file(b, (dir.path() + "/missing/x.state").c_str()), TERN_IO_ERROR);
  EXPECT_NE(message().find("missing/x.state"), std::string::npos) << message();
  EXPECT_EQ(tern_session_state_save_file(b, (good + "/x.state").c_str()), TERN_IO_ERROR) << message();
  EXPECT_EQ(tern::testing::read_file_bytes(good), state);
  EXPECT_TRUE(files_starting_with(good).empty()) << "a failed save leaves no temporary";

  struct Case {
    const char* name;
    std::vector<uint8_t> bytes;
    tern_status status;
    const char* says;
  };
  std::vector<Case> cases;
  cases.push_back({"empty", {}, TERN_TRUNCATED, "shorter than its header"});
  cases.push_back({"half a header", {state.begin(), state.begin() + 90}, TERN_TRUNCATED, "shorter than its header"});
  for (size_t cut : {size_t{184}, size_t{185}, state.size() / 2, state.size() - 1}) {
    cases.push_back({"truncated", {state.begin(), state.begin() + cut}, TERN_TRUNCATED, "payload bytes"});
  }
  std::vector<uint8_t> longer = state;
  longer.push_back(0);
  cases.push_back({"one byte too many", longer, TERN_TRUNCATED, "payload bytes"});
  // A flipped bit anywhere the checksum covers: payload, the sampler's fields, its RNG state.
  for (size_t at : {state.size() - 1, state.size() / 2, size_t{200}, size_t{96}, size_t{130}, size_t{20}}) {
    std::vector<uint8_t> bad = state;
    bad[at] ^= 0x10;
    cases.push_back({"a flipped bit", bad, TERN_CORRUPT_FILE, "checksum"});
  }
  std::vector<uint8_t> magic = state;
  std::memcpy(magic.data(), "GGUF", 4);
  cases.push_back({"another format", magic, TERN_BAD_MAGIC, "bad magic"});
  std::vector<uint8_t> future = state;
  reseal_state(future, 3);
  cases.push_back({"a future version", future, TERN_VERSION_MISMATCH, "version 3"});
  std::vector<uint8_t> wide = state;
  const uint32_t header_bytes = 200;
  std::memcpy(wide.data() + 12, &header_bytes, 4);
  cases.push_back({"another header size", wide, TERN_VERSION_MISMATCH, "header 200 bytes"});
  cases.push_back({"another model's state", saved_state(foreign), TERN_INVALID_ARGUMENT, "another bundle"});
  // A well-sealed state whose counts are made up.
  std::vector<uint8_t> made_up = state;
  const uint32_t position = 150;
  std::memcpy(made_up.data() + 72, &position, 4);
  reseal_state(made_up, 2);
  cases.push_back({"a made-up position", made_up, TERN_CORRUPT_FILE, "position 150"});

  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string path = dir.path() + "/hostile.state";
    {
      std::ofstream out(path, std::ios::binary | std::ios::trunc);
      out.write(reinterpret_cast<const char*>(c.bytes.data()), static_cast<std::streamsize>(c.bytes.size()));
    }
    EXPECT_EQ(tern_session_state_load_file(b, path.c_str()), c.status) << message();
    EXPECT_NE(message().find(c.says), std::string::npos) << message();
    if (!c.bytes.empty()) {  // (an empty buffer is a NULL pointer: INVALID_ARGUMENT)
      EXPECT_EQ(tern_session_state_load(b, c.bytes.data(), c.bytes.size()), c.status) << message();
    }
  }
  EXPECT_EQ(tern_session_state_load_file(b, dir.path().c_str()), TERN_IO_ERROR);
  EXPECT_NE(message().find("not a regular file"), std::string::npos) << message();

  // Still whole: the good file loads and continues exactly; so does a version-1 state.
  ASSERT_EQ(tern_session_state_load_file(b, good.c_str()), TERN_OK) << message();
  EXPECT_EQ(step(b, 12), want);
  std::vector<uint8_t> v1 = state;
  reseal_state(v1, 1);
  EXPECT_EQ(continuation(b, v1, 12), want);
}

// Truncating to k tokens leaves logits equal to a fresh session that ran just those k tokens
// (one at a time, as the truncated session did), whether the cache rolls back in place or
// runs them again.
void truncate_matches_fresh(const char* mode, uint32_t ctx, int generated, uint32_t keep_from_end) {
  SCOPED_TRACE(std::string(mode) + " keep all but " + std::to_string(keep_from_end));
  Loaded l;
  ASSERT_EQ(load(l, kAusten, params_for(mode, ctx, 2)), TERN_OK) << message();
  tern_session* s = open_session(l, 0.0f, 1);
  const std::vector<int32_t> prompt = tokenize(l.model, "It is a truth universally");
  std::vector<int32_t> all = prompt;
  for (int32_t t : prompt) ASSERT_EQ(tern_decode(s, t), TERN_OK);
  for (int32_t t : step(s, generated)) all.push_back(t);
  const uint32_t keep = static_cast<uint32_t>(all.size()) - keep_from_end;
  ASSERT_EQ(tern_session_truncate(s, keep), TERN_OK) << message();
  uint32_t pos = 0;
  ASSERT_EQ(tern_session_position(s, &pos), TERN_OK);
  EXPECT_EQ(pos, keep);
  tern_session* fresh = open_session(l, 0.0f, 1);
  for (uint32_t i = 0; i < keep; ++i) ASSERT_EQ(tern_decode(fresh, all[i]), TERN_OK);
  const std::vector<float> a = logits_of(s), b = logits_of(fresh);
  float worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::fabs(a[i] - b[i]));
  EXPECT_EQ(worst, 0.0f);
  // And it generates on from there like the fresh one.
  EXPECT_EQ(step(s, 10), step(fresh, 10));
}

TEST(AppApi, TruncateRewindsExactly) {
  TERN_REQUIRE_BUNDLE(kAusten);
  truncate_matches_fresh("f32", 0, 30, 12);
  truncate_matches_fresh("fp16", 0, 30, 1);
  truncate_matches_fresh("q4", 300, 20, 5);    // inside the exact window: rolled back in place
  truncate_matches_fresh("q4", 300, 120, 70);  // blocks were flushed since: the kept tokens run again
  Loaded l;
  ASSERT_EQ(load(l, kAusten, params_for("q4", 132)), TERN_OK) << message();
  tern_session* s = open_session(l, 0.0f, 1);
  const std::vector<int32_t> prompt = tokenize(l.model, "It is");
  ASSERT_EQ(tern_prefill(s, prompt.data(), prompt.size()), TERN_OK);
  EXPECT_EQ(tern_session_truncate(s, 99), TERN_INVALID_ARGUMENT);
  step(s, 300);  // past the capacity: early positions are evicted
  EXPECT_EQ(tern_session_truncate(s, 20), TERN_INVALID_STATE);
  EXPECT_NE(message().find("evicted"), std::string::npos) << message();
  EXPECT_EQ(tern_session_truncate(s, 0), TERN_OK);
}

// The history is what was fed and sampled, in order (what a server compares a new prompt
// with); too small a buffer gets the newest tokens and OUT_OF_RANGE.
TEST(AppApi, HistoryHoldsThePromptAndTheSampledTokens) {
  TERN_REQUIRE_BUNDLE(kAusten);
  Loaded l;
  ASSERT_EQ(load(l, kAusten, params_for("f32", 128)), TERN_OK) << message();
  tern_session* s = open_session(l, 0.9f, 3);
  size_t n = 99;
  ASSERT_EQ(tern_session_history(s, nullptr, 0, &n), TERN_OK) << message();
  EXPECT_EQ(n, 0u);
  std::vector<int32_t> all = tokenize(l.model, "It is a truth universally");
  ASSERT_EQ(tern_prefill(s, all.data(), all.size()), TERN_OK) << message();
  for (int32_t t : step(s, 17)) all.push_back(t);
  std::vector<int32_t> got(all.size() + 5, -7);
  ASSERT_EQ(tern_session_history(s, got.data(), got.size(), &n), TERN_OK) << message();
  ASSERT_EQ(n, all.size());
  got.resize(n);
  EXPECT_EQ(got, all);
  std::vector<int32_t> last(4);
  EXPECT_EQ(tern_session_history(s, last.data(), last.size(), &n), TERN_OUT_OF_RANGE);
  EXPECT_EQ(n, all.size());
  EXPECT_EQ(last, std::vector<int32_t>(all.end() - 4, all.end()));
  // After a rewind it is the kept prefix.
  ASSERT_EQ(tern_session_truncate(s, 9), TERN_OK) << message();
  got.assign(32, 0);
  ASSERT_EQ(tern_session_history(s, got.data(), got.size(), &n), TERN_OK);
  got.resize(n);
  EXPECT_EQ(got, std::vector<int32_t>(all.begin(), all.begin() + 9));
  EXPECT_EQ(tern_session_history(nullptr, got.data(), got.size(), &n), TERN_INVALID_ARGUMENT);
  EXPECT_EQ(tern_session_history(s, nullptr, 4, &n), TERN_INVALID_ARGUMENT);
  EXPECT_EQ(tern_session_history(s, got.data(), got.size(), nullptr), TERN_INVALID_ARGUMENT);
}

// With the bias or hook in place, sampling picks what the biased logits say: checked against
// the raw logits, biased by hand.
TEST(AppApi, LogitBiasAndHookSteerSampling) {
  TERN_REQUIRE_BUNDLE(kAusten);
  Loaded l;
  ASSERT_EQ(load(l, kAusten, params_for("f32", 128)), TERN_OK) << message();
  tern_session* s = open_session(l, 0.0f, 1);
  const std::vector<int32_t> prompt = tokenize(l.model, "It is a truth universally");
  ASSERT_EQ(tern_prefill(s, prompt.data(), prompt.size()), TERN_OK);
  std::vector<float> raw = logits_of(s);
  const int32_t best = static_cast<int32_t>(std::max_element(raw.begin(), raw.end()) - raw.begin());
  raw[best] = -INFINITY;
  const int32_t second = static_cast<int32_t>(std::max_element(raw.begin(), raw.end()) - raw.begin());
  const tern_logit_bias ban[] = {{best, -INFINITY}};
  ASSERT_EQ(tern_session_set_logit_bias(s, ban, 1), TERN_OK);
  int32_t t = -1;
  ASSERT_EQ(tern_sample(s, &t), TERN_OK);
  EXPECT_EQ(t, second);
  const tern_logit_bias favour[] = {{7, 1000.0f}};
  ASSERT_EQ(tern_session_set_logit_bias(s, favour, 1), TERN_OK);
  ASSERT_EQ(tern_sample(s, &t), TERN_OK);
  EXPECT_EQ(t, 7);
  ASSERT_EQ(tern_session_set_logit_bias(s, nullptr, 0), TERN_OK);
  ASSERT_EQ(tern_sample(s, &t), TERN_OK);
  EXPECT_EQ(t, best);
  // The raw logits are untouched by either.
  const std::vector<float> after = logits_of(s);
  EXPECT_EQ(after[best], *std::max_element(after.begin(), after.end()));

  struct Hook {
    static void only_odd(float* logits, size_t n, const int32_t*, size_t n_history, void* user) {
      *static_cast<size_t*>(user) = n_history;
      for (size_t i = 0; i < n; i += 2) logits[i] = -INFINITY;
    }
  };
  size_t seen_history = 0;
  ASSERT_EQ(tern_session_set_logit_hook(s, &Hook::only_odd, &seen_history), TERN_OK);
  for (int32_t u : step(s, 12)) EXPECT_EQ(u % 2, 1);
  EXPECT_GE(seen_history, prompt.size());
  ASSERT_EQ(tern_session_set_logit_hook(s, nullptr, nullptr), TERN_OK);

  const tern_logit_bias out_of_range[] = {{1 << 30, 1.0f}};
  EXPECT_EQ(tern_session_set_logit_bias(s, out_of_range, 1), TERN_INVALID_TOKEN);
  const tern_logit_bias nan_bias[] = {{3, NAN}};
  EXPECT_EQ(tern_session_set_logit_bias(s, nan_bias, 1), TERN_INVALID_ARGUMENT);
  std::vector<tern_logit_bias> too_many(1025, tern_logit_bias{1, 1.0f});
  EXPECT_EQ(tern_session_set_logit_bias(s, too_many.data(), too_many.size()), TERN_INVALID_ARGUMENT);
}

// Presence and frequency penalties: the greedy pick equals the argmax of the logits with
// c * frequency + presence subtracted for every token seen c times in the window.
TEST(AppApi, PresenceAndFrequencyPenaltiesFollowTheFormula) {
  TERN_REQUIRE_BUNDLE(kAusten);
  Loaded l;
  ASSERT_EQ(load(l, kAusten, params_for("f32", 256)), TERN_OK) << message();
  tern_session_params sp = tern_session_default_params();
  sp.sampler.temperature = 0.0f;
  sp.sampler.presence_penalty = 0.7f;
  sp.sampler.frequency_penalty = 0.9f;
  sp.sampler.repeat_last_n = 16;
  tern_session* s = nullptr;
  ASSERT_EQ(tern_session_create(l.model, &sp, &s), TERN_OK);
  l.sessions.push_back(s);
  const std::vector<int32_t> prompt = tokenize(l.model, "the the the of the of a");
  std::vector<int32_t> history = prompt;
  ASSERT_EQ(tern_prefill(s, prompt.data(), prompt.size()), TERN_OK);
  int differs = 0;
  for (int i = 0; i < 30; ++i) {
    std::vector<float> raw = logits_of(s);
    const int32_t plain = static_cast<int32_t>(std::max_element(raw.begin(), raw.end()) - raw.begin());
    const size_t n = std::min<size_t>(history.size(), 16);
    std::vector<int> count(raw.size(), 0);
    for (size_t k = history.size() - n; k < history.size(); ++k) ++count[history[k]];
    for (size_t v = 0; v < raw.size(); ++v) {
      if (count[v] > 0) raw[v] -= static_cast<float>(count[v]) * 0.9f + 0.7f;
    }
    const int32_t want = static_cast<int32_t>(std::max_element(raw.begin(), raw.end()) - raw.begin());
    int32_t got = -1;
    ASSERT_EQ(tern_sample(s, &got), TERN_OK);
    ASSERT_EQ(got, want) << "step " << i;
    differs += got != plain;
    history.push_back(got);
    ASSERT_EQ(tern_decode(s, got), TERN_OK);
  }
  EXPECT_GT(differs, 0) << "the penalties never changed a pick: the test checks nothing";
  sp.sampler.presence_penalty = NAN;
  EXPECT_EQ(tern_session_set_sampler(s, &sp.sampler), TERN_INVALID_ARGUMENT);
}

// Available memory from fixture files (MemAvailable, then a cgroup limit below it), and on
// this machine against /proc/meminfo read independently.
TEST(AppApi, AvailableMemoryIsMemAvailableCappedByTheCgroup) {
  tern::testing::TempDir dir;
  const std::string meminfo = dir.path() + "/meminfo";
  std::ofstream(meminfo) << "MemTotal:       16000000 kB\nMemFree:         100000 kB\nMemAvailable:    2000000 kB\n";
  auto plain = tern::available_memory_from(meminfo.c_str(), nullptr);
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(*plain, uint64_t{2000000} * 1024);
  std::ofstream(dir.path() + "/memory.max") << "1073741824\n";
  std::ofstream(dir.path() + "/memory.current") << "268435456\n";
  auto capped = tern::available_memory_from(meminfo.c_str(), dir.path().c_str());
  ASSERT_TRUE(capped.ok());
  EXPECT_EQ(*capped, uint64_t{768} << 20);
  std::ofstream(dir.path() + "/memory.max") << "max\n";
  EXPECT_EQ(*tern::available_memory_from(meminfo.c_str(), dir.path().c_str()), uint64_t{2000000} * 1024);
  std::ofstream(meminfo) << "MemTotal: 1 kB\n";
  EXPECT_EQ(tern::available_memory_from(meminfo.c_str(), nullptr).error(), tern::Error::NotSupported);

  uint64_t real = 0;
  ASSERT_EQ(tern_available_memory(&real), TERN_OK) << message();
  std::ifstream in("/proc/meminfo");
  std::string key;
  uint64_t kib = 0, total = 0;
  while (in >> key >> kib) {
    if (key == "MemTotal:") total = kib * 1024;
    in.ignore(64, '\n');
  }
  EXPECT_GT(real, 0u);
  EXPECT_LE(real, total);
  uint64_t budget = 0;
  ASSERT_EQ(tern_parse_memory_budget("available-25%", &budget), TERN_OK);
  EXPECT_NEAR(static_cast<double>(budget), 0.75 * static_cast<double>(real), 0.05 * static_cast<double>(real));
  ASSERT_EQ(tern_parse_memory_budget("512M", &budget), TERN_OK);
  EXPECT_EQ(budget, uint64_t{512} << 20);
  for (const char* bad : {"available-", "available-100%", "available-5", "availablex", "lots"}) {
    EXPECT_EQ(tern_parse_memory_budget(bad, &budget), TERN_INVALID_ARGUMENT) << bad;
  }
}

// The plain fallback (tiny-austen's checkpoint has no chat template), checked against the
// format's definition, and the errors an app can make.
TEST(AppApi, ChatApplyRendersAndRejectsBadInput) {
  TERN_REQUIRE_BUNDLE(kAusten);
  Loaded l;
  ASSERT_EQ(tern_model_load(tern::testing::bundle_path(kAusten).c_str(), nullptr, &l.model), TERN_OK);
  tern_model_info info;
  ASSERT_EQ(tern_model_get_info(l.model, &info), TERN_OK);
  EXPECT_STREQ(info.chat_format, "plain");
  EXPECT_STREQ(info.chat_stop, "\nUser:");
  const tern_chat_message chat[] = {{"system", "Be brief."}, {"user", "Who is Emma?"}, {"assistant", " A heroine. "}};
  char buf[256];
  size_t size = 0;
  ASSERT_EQ(tern_chat_apply(l.model, chat, 3, 1, buf, sizeof buf, &size), TERN_OK) << message();
  EXPECT_STREQ(buf, "<|begin_of_text|>System: Be brief.\nUser: Who is Emma?\nAssistant: A heroine.\nAssistant:");
  EXPECT_EQ(size, std::strlen(buf));
  ASSERT_EQ(tern_chat_apply(l.model, chat, 2, 0, buf, sizeof buf, &size), TERN_OK);
  EXPECT_STREQ(buf, "<|begin_of_text|>System: Be brief.\nUser: Who is Emma?\n");
  char small[8];
  EXPECT_EQ(tern_chat_apply(l.model, chat, 2, 0, small, sizeof small, &size), TERN_OUT_OF_RANGE);
  EXPECT_EQ(size, std::strlen(buf));  // says how large the buffer must be
  EXPECT_EQ(tern_chat_apply(l.model, chat, 2, 0, nullptr, 0, &size), TERN_OUT_OF_RANGE);
  EXPECT_EQ(size, std::strlen(buf));
  const tern_chat_message unknown[] = {{"robot", "hi"}};
  EXPECT_EQ(tern_chat_apply(l.model, unknown, 1, 1, buf, sizeof buf, &size), TERN_INVALID_ARGUMENT);
  EXPECT_NE(message().find("robot"), std::string::npos) << message();
  const tern_chat_message invalid[] = {{"user", "caf\xC3"}};
  EXPECT_EQ(tern_chat_apply(l.model, invalid, 1, 1, buf, sizeof buf, &size), TERN_INVALID_UTF8);
  const tern_chat_message null_content[] = {{"user", nullptr}};
  EXPECT_EQ(tern_chat_apply(l.model, null_content, 1, 1, buf, sizeof buf, &size), TERN_INVALID_ARGUMENT);
  EXPECT_EQ(tern_chat_apply(nullptr, chat, 1, 1, buf, sizeof buf, &size), TERN_INVALID_ARGUMENT);
  EXPECT_EQ(tern_chat_apply(l.model, nullptr, 1, 1, buf, sizeof buf, &size), TERN_INVALID_ARGUMENT);
}

}  // namespace
