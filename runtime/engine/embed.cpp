#include "runtime/engine/embed.h"

#include <cmath>
#include <cstring>

#include "platform/clock.h"
#include "runtime/engine/model.h"
#include "runtime/engine/session.h"
#include "runtime/model/bundle.h"
#include "schema/bundle_generated.h"

namespace tern {

size_t embed_row_bytes(EmbedFormat format, uint32_t dimensions) {
  switch (format) {
    case EmbedFormat::Float32: return static_cast<size_t>(dimensions) * sizeof(float);
    case EmbedFormat::Int8: return dimensions;
    case EmbedFormat::Binary: return (static_cast<size_t>(dimensions) + 7) / 8;
  }
  return 0;
}

namespace {

void l2_normalize(float* v, uint32_t n) {
  double sum = 0.0;
  for (uint32_t i = 0; i < n; ++i) sum += static_cast<double>(v[i]) * v[i];
  if (!(sum > 0.0)) return;
  const float inv = static_cast<float>(1.0 / std::sqrt(sum));
  for (uint32_t i = 0; i < n; ++i) v[i] *= inv;
}

bool valid_format(EmbedFormat f) {
  return f == EmbedFormat::Float32 || f == EmbedFormat::Int8 || f == EmbedFormat::Binary;
}

// The text put in front of every input: an explicit instruction, a named prompt of the
// bundle, or its default prompt.
Result<const char*> resolve_prompt(const Model& model, const EmbedOptions& options) {
  if (options.instruction != nullptr) return options.instruction;
  const schema::Embedding* e = model.bundle() != nullptr ? model.bundle()->embedding() : nullptr;
  const char* name = options.prompt_name;
  if (name == nullptr) {
    if (e == nullptr || e->default_prompt() == nullptr || e->default_prompt()->size() == 0) return "";
    name = e->default_prompt()->c_str();
  }
  if (*name == '\0') return "";
  if (e != nullptr && e->prompts() != nullptr) {
    for (const schema::EmbeddingPrompt* p : *e->prompts()) {
      if (p->name() != nullptr && std::strcmp(p->name()->c_str(), name) == 0) {
        return p->text() != nullptr ? p->text()->c_str() : "";
      }
    }
  }
  char names[256] = "";
  size_t used = 0;
  if (e != nullptr && e->prompts() != nullptr) {
    for (const schema::EmbeddingPrompt* p : *e->prompts()) {
      if (p->name() == nullptr) continue;
      const int w = std::snprintf(names + used, sizeof names - used, "%s'%s'", used ? ", " : "", p->name()->c_str());
      if (w < 0 || static_cast<size_t>(w) >= sizeof names - used) break;
      used += static_cast<size_t>(w);
    }
  }
  return fail(Error::InvalidArgument, "the model has no prompt named '%s' (it has %s)", name, used ? names : "none");
}

}  // namespace

void embed_finish(float* v, uint32_t n, uint32_t dims, bool normalize, EmbedFormat format, void* out, float* scale) {
  if (normalize) l2_normalize(v, n);
  if (dims < n && normalize) l2_normalize(v, dims);
  switch (format) {
    case EmbedFormat::Float32: std::memcpy(out, v, static_cast<size_t>(dims) * sizeof(float)); break;
    case EmbedFormat::Int8: {
      float max_abs = 0.0f;
      for (uint32_t i = 0; i < dims; ++i) max_abs = std::fabs(v[i]) > max_abs ? std::fabs(v[i]) : max_abs;
      const float s = max_abs / 127.0f;
      int8_t* q = static_cast<int8_t*>(out);
      for (uint32_t i = 0; i < dims; ++i) {
        q[i] = s > 0.0f ? static_cast<int8_t>(std::nearbyint(v[i] / s)) : 0;
      }
      if (scale != nullptr) *scale = s;
      break;
    }
    case EmbedFormat::Binary: {
      uint8_t* bits = static_cast<uint8_t*>(out);
      std::memset(bits, 0, embed_row_bytes(format, dims));
      for (uint32_t i = 0; i < dims; ++i) {
        if (v[i] > 0.0f) bits[i / 8] |= static_cast<uint8_t>(0x80u >> (i % 8));
      }
      break;
    }
  }
}

// The rows assembled for the next forward pass and where the text in progress stands.
struct Session::EmbedBatch {
  uint32_t rows = 0;      // rows assembled
  uint32_t position = 0;  // cache position of the next row
  uint32_t pooled = 0;    // rows of the text in progress pooled so far
  EmbedStats* stats = nullptr;
};

Error Session::embed_run_batch(EmbedBatch& b, bool last_text_complete, const EmbedOptions& options, uint32_t dims,
                               void* out, float* scales) {
  if (b.rows == 0) return Error::Ok;
  const ModelConfig& c = model_->config();
  scratch_.segment_start = buffers_.embed_segments;
  const Error e = forward(*model_, *kv_, scratch_, buffers_.embed_tokens, b.rows, b.position - b.rows, false, &abort_);
  scratch_.segment_start = nullptr;
  TERN_RETURN_IF_ERROR(e);
  ++b.stats->batches;
  const size_t row_bytes = embed_row_bytes(options.format, dims);
  float* pool = buffers_.embed_pool;
  float* row = buffers_.embed_row;
  for (uint32_t r = 0; r < b.rows; ++r) {
    const uint32_t text = buffers_.embed_texts[r];
    const bool last = r + 1 < b.rows ? buffers_.embed_texts[r + 1] != text : last_text_complete;
    const bool needed = c.pooling == Pooling::Mean || (c.pooling == Pooling::First && b.pooled == 0) || last;
    if (needed) {
      rms_norm(scratch_.x + static_cast<size_t>(r) * c.hidden, model_->final_norm(), c.hidden, c.norm_eps, row);
    }
    if (c.pooling == Pooling::Mean) {
      for (uint32_t i = 0; i < c.hidden; ++i) pool[i] = (b.pooled == 0 ? 0.0f : pool[i]) + row[i];
    } else if (b.pooled == 0 || c.pooling == Pooling::Last) {
      std::memcpy(pool, row, c.hidden * sizeof(float));
    }
    ++b.pooled;
    if (!last) continue;
    if (c.pooling == Pooling::Mean) {
      for (uint32_t i = 0; i < c.hidden; ++i) pool[i] /= static_cast<float>(b.pooled);
    }
    embed_finish(pool, c.hidden, dims, c.embedding_normalize, options.format,
                 static_cast<uint8_t*>(out) + text * row_bytes, scales != nullptr ? &scales[text] : nullptr);
    b.pooled = 0;
  }
  b.rows = 0;
  return Error::Ok;
}

Error Session::embed(const char* const* texts, const size_t* sizes, size_t count, const EmbedOptions& options,
                     void* out, size_t out_bytes, float* scales, EmbedStats* stats) {
  return embed(EmbedInputs::of_texts(texts, sizes, count), options, out, out_bytes, scales, stats);
}

Result<uint32_t> Session::embed_input_tokens(const EmbedInputs& inputs, size_t i, const char* prompt,
                                             size_t prompt_size, int32_t end_token, bool truncate, EmbedStats& st) {
  const ModelConfig& c = model_->config();
  Tokenizer* tokenizer = model_->tokenizer();
  const uint32_t room = context_ - (end_token >= 0 ? 1 : 0);  // token ids an input may have before its end token
  uint32_t n = 0;
  if (inputs.tokens == nullptr) {
    const char* text = inputs.texts[i] != nullptr ? inputs.texts[i] : "";
    size_t size = inputs.sizes != nullptr ? inputs.sizes[i] : std::strlen(text);
    if (prompt_size > 0) {  // joined first: the tokens at the seam depend on both sides
      TERN_CHECK_OR_RETURN(prompt_size + size <= buffers_.embed_text_bytes, Error::PromptTooLong,
                           "text %zu with its %zu-byte prompt is %zu bytes; at most %zu can be joined", i, prompt_size,
                           prompt_size + size, buffers_.embed_text_bytes);
      std::memcpy(buffers_.embed_text, prompt, prompt_size);
      if (size > 0) std::memcpy(buffers_.embed_text + prompt_size, text, size);
      text = buffers_.embed_text;
      size += prompt_size;
    }
    size_t needed = 0;
    auto encoded = model_->encode(text, size, tokenizer->add_bos_default(), true, buffers_.prompt, room, &needed);
    if (encoded.ok()) {
      n = static_cast<uint32_t>(*encoded);
    } else if (encoded.error() == Error::OutOfRange && truncate) {
      n = room;  // the first `room` ids are in place
      ++st.truncated;
    } else if (encoded.error() == Error::OutOfRange) {
      return fail(Error::PromptTooLong, "text %zu is %zu tokens; the context holds %u%s", i,
                  needed + (end_token >= 0 ? 1 : 0), context_, " (embed with truncation to keep the first tokens)");
    } else {
      return encoded.error();
    }
  } else {
    const int32_t* ids = inputs.tokens[i];
    size_t last = inputs.token_counts[i];
    TERN_CHECK_OR_RETURN(ids != nullptr || last == 0, Error::InvalidArgument, "input %zu is null", i);
    TERN_CHECK_OR_RETURN(last > 0, Error::InvalidArgument, "input %zu has no token ids", i);
    for (size_t k = 0; k < last; ++k) {
      TERN_CHECK_OR_RETURN(ids[k] >= 0 && static_cast<uint32_t>(ids[k]) < c.vocab, Error::InvalidToken,
                           "token id %d of input %zu is outside the vocabulary (0 to %u)", static_cast<int>(ids[k]), i,
                           c.vocab - 1);
    }
    // The BOS and the end token as a text gets them, once: ids that carry them keep one.
    size_t first = 0;
    const int32_t bos = tokenizer->bos_id();
    if (tokenizer->add_bos_default() && bos >= 0) {
      buffers_.prompt[n++] = bos;
      if (ids[0] == bos) first = 1;
    }
    if (end_token >= 0 && last > first && ids[last - 1] == end_token) --last;
    if (prompt_size > 0) {
      size_t needed = 0;
      auto encoded = model_->encode(prompt, prompt_size, false, true, buffers_.prompt + n, room - n, &needed);
      if (!encoded.ok() && encoded.error() == Error::OutOfRange) {
        return fail(Error::PromptTooLong, "input %zu's prompt alone is %zu tokens; the context holds %u", i, needed,
                    context_);
      }
      TERN_RETURN_IF_ERROR(encoded.error());
      n += static_cast<uint32_t>(*encoded);
    }
    size_t take = last - first;
    if (take > room - n) {
      TERN_CHECK_OR_RETURN(truncate, Error::PromptTooLong, "input %zu is %zu tokens; the context holds %u%s", i,
                           n + take + (end_token >= 0 ? 1 : 0), context_,
                           " (embed with truncation to keep the first tokens)");
      take = room - n;
      ++st.truncated;
    }
    std::memcpy(buffers_.prompt + n, ids + first, take * sizeof(int32_t));
    n += static_cast<uint32_t>(take);
  }
  if (end_token >= 0) buffers_.prompt[n++] = end_token;
  TERN_CHECK_OR_RETURN(n > 0, Error::InvalidArgument,
                       "text %zu has no tokens (empty, and the model adds no BOS or EOS)", i);
  return n;
}

Error Session::embed(const EmbedInputs& inputs, const EmbedOptions& options, void* out, size_t out_bytes, float* scales,
                     EmbedStats* stats) {
  EmbedStats local;
  EmbedStats& st = stats != nullptr ? *stats : local;
  st = EmbedStats{};
  const size_t count = inputs.count;
  const ModelConfig& c = model_->config();
  TERN_CHECK_OR_RETURN(c.embedding, Error::NotSupported, "not an embedding model (it generates text)");
  Tokenizer* tokenizer = model_->tokenizer();
  TERN_CHECK_OR_RETURN(tokenizer != nullptr, Error::InvalidState, "the model has no tokenizer (not from a bundle)");
  TERN_CHECK_OR_RETURN(inputs.texts != nullptr || inputs.tokens != nullptr || count == 0, Error::InvalidArgument,
                       "null texts");
  TERN_CHECK_OR_RETURN(inputs.tokens == nullptr || inputs.token_counts != nullptr, Error::InvalidArgument,
                       "null token counts");
  TERN_CHECK_OR_RETURN(count <= UINT32_MAX, Error::InvalidArgument, "%zu texts", count);
  TERN_CHECK_OR_RETURN(valid_format(options.format), Error::InvalidArgument, "unknown embedding format %d",
                       static_cast<int>(options.format));
  const uint32_t dims = options.dimensions == 0 ? c.hidden : options.dimensions;
  TERN_CHECK_OR_RETURN(dims <= c.hidden, Error::InvalidArgument, "%u dimensions asked of a %u-dimensional model", dims,
                       c.hidden);
  const size_t row_bytes = embed_row_bytes(options.format, dims);
  TERN_CHECK_OR_RETURN(out != nullptr || count == 0, Error::InvalidArgument, "null output");
  TERN_CHECK_OR_RETURN(out_bytes / row_bytes >= count, Error::OutOfRange,
                       "%zu texts need %zu bytes of output (%zu each), have %zu", count, count * row_bytes, row_bytes,
                       out_bytes);
  for (size_t i = 0; i < count && inputs.tokens == nullptr; ++i) {
    TERN_CHECK_OR_RETURN(inputs.texts[i] != nullptr || (inputs.sizes != nullptr && inputs.sizes[i] == 0),
                         Error::InvalidArgument, "text %zu is null", i);
  }
  TERN_ASSIGN_OR_RETURN(const char* prompt, resolve_prompt(*model_, options));
  const size_t prompt_size = std::strlen(prompt);
  const int32_t end_token = c.embedding_append_eos ? tokenizer->eos_id() : -1;
  TERN_CHECK_OR_RETURN(!c.embedding_append_eos || end_token >= 0, Error::InvalidBundle,
                       "the model appends EOS to every text but its tokenizer has none");

  const uint64_t t0 = monotonic_ns();
  reset();
  EmbedBatch b;
  b.stats = &st;
  for (size_t i = 0; i < count; ++i) {
    auto framed = embed_input_tokens(inputs, i, prompt, prompt_size, end_token, options.truncate, st);
    if (!framed.ok()) {
      reset();
      return framed.error();
    }
    const uint32_t n = *framed;
    // A text starts where the cache has room for all of it (every earlier one is finished
    // by then: its rows ran in an earlier batch or run in the next one).
    if (b.position + n > context_) {
      if (Error e = embed_run_batch(b, true, options, dims, out, scales); e != Error::Ok) {
        reset();
        return e;
      }
      b.position = 0;
    }
    const uint32_t start = b.position;
    for (uint32_t j = 0; j < n; ++j) {
      buffers_.embed_tokens[b.rows] = buffers_.prompt[j];
      buffers_.embed_segments[b.rows] = start;
      buffers_.embed_texts[b.rows] = static_cast<uint32_t>(i);
      ++b.rows;
      ++b.position;
      if (b.rows == scratch_.batch) {
        if (Error e = embed_run_batch(b, j + 1 == n, options, dims, out, scales); e != Error::Ok) {
          reset();
          return e;
        }
      }
    }
    st.tokens += n;
    ++st.texts;
  }
  const Error e = embed_run_batch(b, true, options, dims, out, scales);
  reset();
  st.seconds = static_cast<double>(monotonic_ns() - t0) * 1e-9;
  return e;
}

}  // namespace tern
