// Session state files: the header, its checksum, and saving and loading a conversation.
#include "runtime/engine/session.h"

#include <cstdio>
#include <cstring>

#include "runtime/base/hash.h"
#include "runtime/engine/model.h"

namespace tern {

namespace {

// A saved session: this header, then the token history, the logits (when there are any) and
// the KV cache's state. Same-endian devices only (every platform Tern targets is little-endian).
constexpr char kStateMagic[8] = {'T', 'E', 'R', 'N', 'S', 'E', 'S', 'S'};
// 2: the checksum covers the header too, so a damaged sampler field or RNG state is caught
// (1, still read: the payload only).
constexpr uint32_t kStateVersion = 2;

struct StateHeader {
  char magic[8];
  uint32_t version;
  uint32_t header_bytes;
  uint64_t bundle_identity;
  uint64_t kv_layout_identity;
  char kv_mode[32];
  uint32_t vocab;
  uint32_t capacity;
  uint32_t position;
  uint32_t history_len;
  uint32_t has_logits;
  int32_t top_k;
  int32_t repeat_last_n;
  float temperature, top_p, min_p, repeat_penalty, presence_penalty, frequency_penalty;
  uint32_t reserved;
  uint64_t seed;
  uint64_t rng[4];
  uint64_t kv_bytes;
  uint64_t payload_bytes;
  uint64_t payload_checksum;  // FNV-1a 64 of the header (this field zero) and the payload
};

uint64_t state_checksum(const StateHeader& h, const uint8_t* payload) {
  if (h.version == 1) return fnv1a(payload, h.payload_bytes);
  StateHeader zeroed = h;
  zeroed.payload_checksum = 0;
  return fnv1a(payload, h.payload_bytes, fnv1a(&zeroed, sizeof zeroed));
}

}  // namespace

size_t Session::state_size() const {
  return sizeof(StateHeader) + static_cast<size_t>(history_len_) * sizeof(int32_t) +
         (has_logits_ ? static_cast<size_t>(model_->config().vocab) * sizeof(float) : 0) +
         kv_->state_bytes(position_ < context_ ? position_ : context_);
}

Result<size_t> Session::save_state(void* buf, size_t capacity) const {
  TERN_CHECK_OR_RETURN(!needs_reset_, Error::InvalidState,
                       "an earlier failed batch left the KV cache inconsistent; nothing to save");
  const size_t size = state_size();
  TERN_CHECK_OR_RETURN(buf != nullptr && capacity >= size, Error::OutOfRange,
                       "session state needs %zu bytes, the buffer has %zu", size, buf == nullptr ? 0 : capacity);
  uint8_t* out = static_cast<uint8_t*>(buf);
  StateHeader h;
  std::memset(&h, 0, sizeof h);
  std::memcpy(h.magic, kStateMagic, sizeof h.magic);
  h.version = kStateVersion;
  h.header_bytes = sizeof h;
  h.bundle_identity = model_->bundle_identity();
  h.kv_layout_identity = model_->kv_layout_identity();
  std::snprintf(h.kv_mode, sizeof h.kv_mode, "%s", model_->kv_mode());
  h.vocab = model_->config().vocab;
  h.capacity = context_;
  h.position = position_;
  h.history_len = history_len_;
  h.has_logits = has_logits_ ? 1 : 0;
  const SamplerParams& sp = sampler_.params();
  h.top_k = sp.top_k;
  h.repeat_last_n = sp.repeat_last_n;
  h.temperature = sp.temperature, h.top_p = sp.top_p, h.min_p = sp.min_p, h.repeat_penalty = sp.repeat_penalty;
  h.presence_penalty = sp.presence_penalty, h.frequency_penalty = sp.frequency_penalty;
  h.seed = sp.seed;
  sampler_.rng().get_state(h.rng);
  const uint32_t kv_positions = position_ < context_ ? position_ : context_;
  h.kv_bytes = kv_->state_bytes(kv_positions);
  h.payload_bytes = size - sizeof h;
  uint8_t* payload = out + sizeof h;
  uint8_t* p = payload;
  std::memcpy(p, buffers_.history, static_cast<size_t>(history_len_) * sizeof(int32_t));
  p += static_cast<size_t>(history_len_) * sizeof(int32_t);
  if (has_logits_) {
    std::memcpy(p, scratch_.logits, static_cast<size_t>(h.vocab) * sizeof(float));
    p += static_cast<size_t>(h.vocab) * sizeof(float);
  }
  kv_->save_state(position_, p);
  h.payload_checksum = state_checksum(h, payload);
  std::memcpy(out, &h, sizeof h);
  return size;
}

Error Session::load_state(const void* buf, size_t size) {
  TERN_CHECK_OR_RETURN(!model_->config().embedding, Error::NotSupported, "an embedding session holds no state");
  TERN_CHECK_OR_RETURN(buf != nullptr || size == 0, Error::InvalidArgument, "session state: null buffer");
  StateHeader h;
  TERN_CHECK_OR_RETURN(size >= sizeof h, Error::Truncated,
                       "session state of %zu bytes is shorter than its header (%zu)", size, sizeof h);
  std::memcpy(&h, buf, sizeof h);
  TERN_CHECK_OR_RETURN(std::memcmp(h.magic, kStateMagic, sizeof h.magic) == 0, Error::BadMagic,
                       "not a Tern session state (bad magic)");
  TERN_CHECK_OR_RETURN((h.version == kStateVersion || h.version == 1) && h.header_bytes == sizeof h,
                       Error::VersionMismatch,
                       "session state version %u (header %u bytes); this build reads version %u", h.version,
                       h.header_bytes, kStateVersion);
  TERN_CHECK_OR_RETURN(h.payload_bytes == size - sizeof h, Error::Truncated,
                       "session state holds %zu payload bytes, its header says %llu", size - sizeof h,
                       static_cast<unsigned long long>(h.payload_bytes));
  const uint8_t* payload = static_cast<const uint8_t*>(buf) + sizeof h;
  TERN_CHECK_OR_RETURN(state_checksum(h, payload) == h.payload_checksum, Error::CorruptFile,
                       "session state is damaged (checksum mismatch)");
  TERN_CHECK_OR_RETURN(h.bundle_identity == model_->bundle_identity(), Error::InvalidArgument,
                       "the session state was saved with another bundle");
  h.kv_mode[sizeof h.kv_mode - 1] = '\0';
  TERN_CHECK_OR_RETURN(h.kv_layout_identity == model_->kv_layout_identity() && h.capacity == context_,
                       Error::InvalidArgument,
                       "the session state was saved with KV mode %s and a %u-token cache; this session has %s with %u",
                       h.kv_mode, h.capacity, model_->kv_mode(), context_);
  const uint32_t vocab = model_->config().vocab;
  const size_t logits_bytes = h.has_logits ? static_cast<size_t>(vocab) * sizeof(float) : 0;
  const size_t history_bytes = static_cast<size_t>(h.history_len) * sizeof(int32_t);
  TERN_CHECK_OR_RETURN(h.vocab == vocab && h.history_len <= buffers_.history_capacity && h.history_len <= h.position &&
                           (evicting_ || h.position <= context_) && h.kv_bytes <= h.payload_bytes &&
                           history_bytes + logits_bytes == h.payload_bytes - h.kv_bytes,
                       Error::CorruptFile, "session state: position %u, %u history tokens and %llu KV bytes do not fit",
                       h.position, h.history_len, static_cast<unsigned long long>(h.kv_bytes));
  SamplerParams sp;
  sp.top_k = h.top_k, sp.repeat_last_n = h.repeat_last_n, sp.temperature = h.temperature, sp.top_p = h.top_p;
  sp.min_p = h.min_p, sp.repeat_penalty = h.repeat_penalty, sp.presence_penalty = h.presence_penalty;
  sp.frequency_penalty = h.frequency_penalty, sp.seed = h.seed;
  TERN_RETURN_IF_ERROR(validate(sp));
  const uint8_t* p = payload;
  for (uint32_t i = 0; i < h.history_len; ++i) {
    int32_t t;
    std::memcpy(&t, p + i * sizeof(int32_t), sizeof t);
    TERN_CHECK_OR_RETURN(t >= 0 && static_cast<uint32_t>(t) < vocab, Error::CorruptFile,
                         "session state: history token %d outside the vocabulary", t);
  }
  // Everything checked that can be without touching the session; the cache's own checks
  // come last (a failure there leaves the session reset).
  const uint32_t kv_positions = h.position < context_ ? h.position : context_;
  const Error e = kv_->load_state(evicting_ ? h.position : kv_positions, p + history_bytes + logits_bytes, h.kv_bytes);
  if (e != Error::Ok) {
    reset();
    return e;
  }
  std::memcpy(buffers_.history, p, history_bytes);
  history_len_ = h.history_len;
  position_ = h.position;
  has_logits_ = h.has_logits != 0;
  if (has_logits_) std::memcpy(scratch_.logits, p + history_bytes, logits_bytes);
  needs_reset_ = false;
  forced_next_ = -1;
  grammar_.restart();                      // a grammar's state is not saved: it starts again
  if (draft_ != nullptr) draft_->reset();  // it catches up from the history when it next drafts
  (void)sampler_.configure(sp);
  sampler_.rng().set_state(h.rng);
  return Error::Ok;
}

}  // namespace tern
