// One routine for a session slot's layout: what the planner counts is what Session::init carves.
#include "runtime/engine/session_layout.h"

#include "runtime/engine/arena_carver.h"
#include "runtime/engine/session.h"
#include "runtime/structured/json_schema.h"

namespace tern {

namespace {

// Room to join an embedding prompt and a text before tokenizing.
size_t embed_text_bytes(uint32_t context) { return 16384 + 8 * static_cast<size_t>(context); }

// The KV cache first, then the forward scratch sized for it.
Error layout_forward(const SessionShape& shape, ArenaAllocator* arena, SessionMemory& m, SessionBytes& b) {
  const ModelConfig& c = *shape.config;
  const uint32_t group = c.heads / c.kv_heads;
  size_t scores = 0;
  if (arena == nullptr) {
    b.kv = kv_cache_arena_bytes(*shape.kv, shape.context);
    scores = kv_cache_scores_per_head(*shape.kv, group, shape.context);
  } else {
    TERN_ASSIGN_OR_RETURN(m.kv, create_kv_cache(*shape.kv, shape.context, *arena));
    TERN_CHECK_OR_RETURN(m.kv->capacity_tokens() == shape.context, Error::Internal,
                         "KV cache capacity %u differs from the planned %u", m.kv->capacity_tokens(), shape.context);
    scores = m.kv->attention_scores_per_head(group);
  }
  const Error e = carve_forward_scratch(c, shape.batch, scores, arena, &m.scratch, &b.scratch);
  // A shape the forward pass refuses is counted without its scratch; carving it fails.
  return arena == nullptr ? Error::Ok : e;
}

// The logit steering, the drafts' room, the grammar memory and the sampler.
Error layout_decoding(const SessionShape& shape, ArenaAllocator* arena, Sampler* sampler, SessionBuffers& s,
                      SessionBytes& b) {
  const ModelConfig& c = *shape.config;
  ArenaCarver scratch(arena, &b.scratch);
  TERN_RETURN_IF_ERROR(scratch.take(&s.biased_logits, c.vocab));
  TERN_RETURN_IF_ERROR(scratch.take(&s.bias, kMaxLogitBias));
  s.draft_room = shape.draft_tokens;
  if (s.draft_room > 0) {
    // The verified tokens, and one distribution per draft for speculative sampling with a
    // draft model (which draft source a session uses is decided after load).
    TERN_RETURN_IF_ERROR(scratch.take(&s.verify_tokens, static_cast<size_t>(s.draft_room) + 1));
    TERN_RETURN_IF_ERROR(scratch.take(&s.draft_probs, static_cast<size_t>(s.draft_room) * c.vocab));
    TERN_RETURN_IF_ERROR(scratch.take(&s.verify_logits, (static_cast<size_t>(s.draft_room) + 1) * c.vocab));
  }
  s.chat_text_bytes = chat_text_bytes(shape.context);
  TERN_RETURN_IF_ERROR(scratch.take(&s.chat_text, s.chat_text_bytes));
  if (shape.grammar_bytes > 0) {
    s.chat_work_bytes = json_schema_work_bytes();
    uint8_t* work = nullptr;
    TERN_RETURN_IF_ERROR(scratch.take(&work, s.chat_work_bytes));
    s.chat_work = work;
  }
  ArenaCarver sampling(arena, &b.sampler);
  if (shape.grammar_bytes > 0) {
    s.grammar_bytes = shape.grammar_bytes;
    uint8_t* grammar = nullptr;
    TERN_RETURN_IF_ERROR(sampling.take(&grammar, s.grammar_bytes, ArenaPurpose::Sampler));
    s.grammar = grammar;
  }
  if (arena == nullptr) {
    b.sampler += Sampler::required_arena_bytes(shape.sample_vocab) + 64;
    return Error::Ok;
  }
  return sampler->init(shape.sample_vocab, *arena);
}

// Embedding models: the buffers Session::embed assembles batches and pools in.
Error layout_embedding(const SessionShape& shape, ArenaAllocator* arena, SessionBuffers& s, SessionBytes& b) {
  const ModelConfig& c = *shape.config;
  ArenaCarver scratch(arena, &b.scratch);
  TERN_RETURN_IF_ERROR(scratch.take(&s.embed_tokens, shape.batch));
  TERN_RETURN_IF_ERROR(scratch.take(&s.embed_segments, shape.batch));
  TERN_RETURN_IF_ERROR(scratch.take(&s.embed_texts, shape.batch));
  TERN_RETURN_IF_ERROR(scratch.take(&s.embed_pool, c.hidden));
  TERN_RETURN_IF_ERROR(scratch.take(&s.embed_row, c.hidden));
  s.embed_text_bytes = embed_text_bytes(shape.context);
  return scratch.take(&s.embed_text, s.embed_text_bytes);
}

}  // namespace

size_t chat_text_bytes(uint32_t context) { return 65536 + 16 * static_cast<size_t>(context); }

Error layout_session(const SessionShape& shape, ArenaAllocator* arena, Sampler* sampler, SessionMemory* memory,
                     SessionBytes* bytes) {
  SessionMemory unused_memory;
  SessionBytes unused_bytes;
  SessionMemory& m = memory != nullptr ? *memory : unused_memory;
  SessionBytes& b = bytes != nullptr ? *bytes : unused_bytes;
  TERN_CHECK_OR_RETURN(arena == nullptr || sampler != nullptr, Error::InvalidArgument, "session layout: no sampler");
  b = SessionBytes{};
  b.object = align_up(sizeof(Session), 64) + 64;
  TERN_RETURN_IF_ERROR(layout_forward(shape, arena, m, b));
  SessionBuffers& s = m.buffers;
  s.history_capacity = shape.kv->evicting() ? 2 * shape.context : shape.context;
  ArenaCarver scratch(arena, &b.scratch);
  TERN_RETURN_IF_ERROR(scratch.take(&s.history, s.history_capacity));
  TERN_RETURN_IF_ERROR(scratch.take(&s.prompt, shape.context));
  if (shape.config->embedding) return layout_embedding(shape, arena, s, b);
  return layout_decoding(shape, arena, sampler, s, b);
}

SessionBytes session_bytes(const SessionShape& shape) {
  SessionBytes b;
  (void)layout_session(shape, nullptr, nullptr, nullptr, &b);
  return b;
}

}  // namespace tern
