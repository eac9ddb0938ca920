// One session's slot in its model's arena: its KV cache, forward scratch, sampler and buffers,
// measured by the memory planner and carved by Session::init with the same routine.
#pragma once

#include <cstddef>
#include <cstdint>

#include "platform/error.h"
#include "runtime/base/arena.h"
#include "runtime/engine/forward.h"
#include "runtime/engine/sampler.h"
#include "runtime/kv/kv_cache.h"
#include "runtime/kv/kv_cache_spec.h"
#include "runtime/model/model_config.h"

namespace tern {

// What sizes a slot: the model's dimensions and the plan's choices.
struct SessionShape {
  const ModelConfig* config = nullptr;
  const KvCacheSpec* kv = nullptr;
  uint32_t context = 0;       // positions the KV cache holds
  uint32_t batch = 0;         // the prefill batch (at most context)
  uint32_t draft_tokens = 0;  // speculative decoding: drafts one step may verify (0: none)
  size_t grammar_bytes = 0;   // a compiled grammar and its parse stacks (0: none)
  // Ids the sampler draws from: ids past the tokenizer (padded embedding rows) can never be
  // turned into text. The plan counts all of config->vocab, the most it can be.
  uint32_t sample_vocab = 0;
};

// A session's own buffers, with their sizes (pointers null when measuring).
struct SessionBuffers {
  // The token history holds the context without eviction; twice that with it (a sliding
  // buffer that always holds at least the last `context` tokens).
  uint32_t history_capacity = 0;
  uint32_t draft_room = 0;     // planned drafts (ModelParams::draft_tokens); 0 for an embedding model
  int32_t* history = nullptr;  // [history_capacity]
  int32_t* prompt = nullptr;   // [context] generate()'s tokenized prompt
  // Models that decode (an embedding model has no logits to steer, no sampler, no drafts).
  float* biased_logits = nullptr;    // [vocab] the copy sampling reads when a bias or hook is set
  LogitBias* bias = nullptr;         // [kMaxLogitBias]
  int32_t* verify_tokens = nullptr;  // [draft_room + 1]: the decoded token, then the drafts
  float* draft_probs = nullptr;      // [draft_room][vocab]: a draft model's distributions when sampling
  float* verify_logits = nullptr;    // [draft_room + 1][vocab]: every verified row's logits, from one lm_head pass
  void* grammar = nullptr;           // [grammar_bytes] (ModelParams::grammar_bytes)
  size_t grammar_bytes = 0;
  // The chat engine's memory (runtime/chat): the prompt rendered as text, or a request's
  // composed schema and its grammar; with grammar memory also the schema converter's tables.
  char* chat_text = nullptr;  // [chat_text_bytes]
  size_t chat_text_bytes = 0;
  void* chat_work = nullptr;  // [chat_work_bytes]
  size_t chat_work_bytes = 0;
  // Embedding models: the batch being assembled from several texts and the running pool.
  int32_t* embed_tokens = nullptr;     // [batch] token ids of the batch being assembled
  uint32_t* embed_segments = nullptr;  // [batch] the cache position each row's text starts at
  uint32_t* embed_texts = nullptr;     // [batch] the text each row belongs to
  float* embed_pool = nullptr;         // [hidden] the pooled states of the text in progress
  float* embed_row = nullptr;          // [hidden] one row through the final norm
  char* embed_text = nullptr;          // [embed_text_bytes] a prompt and a text joined before tokenizing
  size_t embed_text_bytes = 0;
};

// Room for a chat prompt's text: 64 KiB and 16 bytes per context token (a rendered prompt
// takes about 4 bytes per token).
size_t chat_text_bytes(uint32_t context);

// What a slot holds after the Session object.
struct SessionMemory {
  KvCache* kv = nullptr;
  ForwardScratch scratch;
  SessionBuffers buffers;
};

// A slot's bytes as the plan reports them, padding included.
struct SessionBytes {
  size_t object = 0;   // the Session object (carved by Model::create_session)
  size_t scratch = 0;  // forward scratch, history, prompt, steering, drafts, embedding buffers
  size_t sampler = 0;  // the sampler's arrays and the grammar memory
  size_t kv = 0;
  size_t total() const { return object + scratch + sampler + kv; }
};

// Measures (arena null: fills *bytes) or carves (fills *memory and carves `sampler`'s arrays)
// the slot after the Session object, in one order. Either output may be null.
Error layout_session(const SessionShape& shape, ArenaAllocator* arena, Sampler* sampler, SessionMemory* memory,
                     SessionBytes* bytes);
// layout_session's count for `shape` (measuring cannot fail).
SessionBytes session_bytes(const SessionShape& shape);

}  // namespace tern
