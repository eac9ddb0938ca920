// Session::prefill_together: several sessions' tokens through one forward pass at a time
// (the model's ForwardQueue, which also merges them with passes other threads ask for).
#include <cstdio>

#include "runtime/engine/model.h"
#include "runtime/engine/session.h"

namespace tern {

namespace {

// Sequences handed to the queue at once (on the stack); more sessions go in several groups.
constexpr size_t kGroup = 16;

Error check_sessions(Session* const* sessions, const int32_t* const* tokens, const size_t* counts, size_t count) {
  TERN_CHECK_OR_RETURN(sessions != nullptr && tokens != nullptr && counts != nullptr, Error::InvalidArgument,
                       "sessions, tokens and counts must not be null");
  for (size_t i = 0; i < count; ++i) {
    TERN_CHECK_OR_RETURN(sessions[i] != nullptr, Error::InvalidArgument, "session %zu is null", i);
    TERN_CHECK_OR_RETURN(&sessions[i]->model() == &sessions[0]->model(), Error::InvalidArgument,
                         "session %zu belongs to another model than session 0", i);
    for (size_t j = 0; j < i; ++j) {
      TERN_CHECK_OR_RETURN(sessions[j] != sessions[i], Error::InvalidArgument, "session %zu is listed twice (%zu)", i,
                           j);
    }
  }
  return Error::Ok;
}

}  // namespace

Error Session::prefill_together(Session* const* sessions, const int32_t* const* tokens, const size_t* counts,
                                size_t count, Error* statuses) {
  if (const Error e = check_sessions(sessions, tokens, counts, count); e != Error::Ok) {
    for (size_t i = 0; statuses != nullptr && i < count; ++i) statuses[i] = e;
    return e;
  }
  Error first = Error::Ok;
  char first_message[sizeof ForwardSequence::message] = {};
  auto record = [&](size_t i, Error e) {
    if (statuses != nullptr) statuses[i] = e;
    if (e != Error::Ok && first == Error::Ok) {
      first = e;
      std::snprintf(first_message, sizeof first_message, "%s", last_error_message());
    }
  };
  for (size_t g0 = 0; g0 < count; g0 += kGroup) {
    ForwardSequence seqs[kGroup];
    size_t index[kGroup];
    size_t n = 0;
    for (size_t i = g0; i < count && i < g0 + kGroup; ++i) {
      Session& s = *sessions[i];
      const Error e = s.check_prefill(tokens[i], counts[i]);
      if (e != Error::Ok || counts[i] == 0) {
        record(i, e);
        continue;
      }
      seqs[n] = s.sequence(tokens[i], static_cast<uint32_t>(counts[i]));
      seqs[n].want_logits = true;
      index[n++] = i;
    }
    sessions[0]->model().forward_queue().run(seqs, n);
    for (size_t k = 0; k < n; ++k) record(index[k], sessions[index[k]]->finish_prefill(seqs[k]));
  }
  return first == Error::Ok ? Error::Ok : fail(first, "%s", first_message);
}

}  // namespace tern
