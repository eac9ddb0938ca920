// tern_decode_batch: several sessions of one model stepped together (Session::prefill_together).
#include "include/tern.h"
#include "runtime/api/c_api_support.h"
#include "runtime/engine/session.h"

using namespace tern;

extern "C" {

tern_status tern_decode_batch(tern_batch_entry* entries, size_t count) {
  if (entries == nullptr && count != 0) return null_argument(__func__, "entries");
  // In groups whose pointers fit on the stack; Session::prefill_together checks each group.
  constexpr size_t kGroup = 64;
  tern_status first = TERN_OK;
  for (size_t g0 = 0; g0 < count; g0 += kGroup) {
    const size_t n = count - g0 < kGroup ? count - g0 : kGroup;
    Session* sessions[kGroup];
    const int32_t* tokens[kGroup];
    size_t counts[kGroup];
    Error statuses[kGroup];
    for (size_t i = 0; i < n; ++i) {
      const tern_batch_entry& e = entries[g0 + i];
      if (e.tokens == nullptr && e.n_tokens != 0) return null_argument(__func__, "entries[].tokens");
      sessions[i] = reinterpret_cast<Session*>(e.session);
      tokens[i] = e.tokens;
      counts[i] = e.n_tokens;
      statuses[i] = Error::Ok;
    }
    const tern_status group = status(Session::prefill_together(sessions, tokens, counts, n, statuses));
    for (size_t i = 0; i < n; ++i) entries[g0 + i].status = status(statuses[i]);
    if (first == TERN_OK) first = group;
  }
  return first;
}

}  // extern "C"
