// Session state files (tern_session_state_load) into sessions of every KV layout. The first
// byte picks the KV mode (kStateModes, low bits), whether the input is resealed (bit 7: its
// checksum rewritten; the state header is self-describing: header_bytes at offset 12, the
// checksum in its last 8 bytes) so mutations get past the checksum to the counts, the history
// and each cache's own checks, and whether a state that loads is decoded from (bit 6: a
// crafted state may load, but must not crash what comes after; one decode costs more than
// many loads, so only some inputs pay it).
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "tests/fuzz/fuzz_models.h"

namespace {

__attribute__((no_sanitize("coverage"))) uint64_t fnv1a(const uint8_t* p, size_t n, uint64_t h) {
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

// Not instrumented: its loops are the harness's, not code under test.
__attribute__((no_sanitize("coverage"))) void reseal(std::vector<uint8_t>& s) {
  uint32_t header = 0, version = 0;
  if (s.size() < 16) return;
  std::memcpy(&version, s.data() + 8, 4);
  std::memcpy(&header, s.data() + 12, 4);
  if (header < 16 || header > s.size()) return;
  std::memset(s.data() + header - 8, 0, 8);
  uint64_t sum = version == 1 ? 0xcbf29ce484222325ull : fnv1a(s.data(), header, 0xcbf29ce484222325ull);
  sum = fnv1a(s.data() + header, s.size() - header, sum);
  std::memcpy(s.data() + header - 8, &sum, 8);
}

struct Slot {
  tern_model* model;
  tern_session* session;
};

Slot& slot(size_t mode) {
  static Slot slots[tern::fuzz::kStateModeCount] = {};
  Slot& s = slots[mode];
  if (s.model == nullptr) {
    const tern::fuzz::StateMode& m = tern::fuzz::kStateModes[mode];
    s.model = tern::fuzz::load_model(tern::fuzz::kPlainBundle, m.kv_mode, m.context);
    if (tern_session_create(s.model, nullptr, &s.session) != TERN_OK) __builtin_trap();
  }
  return s;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const size_t mode = (data[0] & 0x3f) % tern::fuzz::kStateModeCount;
  const uint8_t* state = data + 1;
  if (data[0] & 0x80) {
    static std::vector<uint8_t> copy;  // reused: a fresh 100 KB buffer per run costs more than the load
    copy.assign(data + 1, data + size);
    reseal(copy);
    state = copy.data();
  }
  Slot& s = slot(mode);
  const tern_status st = tern_session_state_load(s.session, state, size - 1);
  if (st == TERN_OK) {
    int32_t token = 0;
    if ((data[0] & 0x40) && tern_sample(s.session, &token) == TERN_OK) (void)tern_decode(s.session, token);
    tern_session_reset(s.session);  // (a refused load leaves the session as it was: reset)
  } else if (tern_last_error_message()[0] == '\0') {
    __builtin_trap();  // a refusal always says why
  }
  return 0;
}
