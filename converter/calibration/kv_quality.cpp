#include "converter/calibration/kv_quality.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>

#include "converter/calibration/kv_calibration.h"
#include "runtime/engine/forward.h"
#include "runtime/kv/compressed_kv_cache.h"
#include "runtime/kv/kv_profile.h"
#include "runtime/model/bundle.h"
#include "schema/bundle_generated.h"

namespace tern::kvq {

const KvCacheSpec& KvMode::resolved() {
  if (!bits.empty()) spec.profile.head_bits = bits.data();
  return spec;
}

double KvMode::bytes_per_token() const {
  KvCacheSpec s = spec;
  if (!bits.empty()) s.profile.head_bits = bits.data();
  return kv_cache_bytes_per_token(s);
}

double KvMode::bits_per_element() const {
  const KvShape& shape = spec.profile.shape;
  const double elements = 2.0 * shape.layers * shape.kv_heads * shape.head_dim;
  return elements > 0 ? bytes_per_token() * 8.0 / elements : 0.0;
}

double ModeStats::ppl() const { return predictions ? std::exp(nll / static_cast<double>(predictions)) : 0.0; }

namespace {

// log_softmax of `logits` into out[0..vocab) (in double); returns the argmax.
int32_t log_softmax_argmax(const float* logits, uint32_t vocab, double* out) {
  double mx = logits[0];
  int32_t best = 0;
  for (uint32_t i = 1; i < vocab; ++i)
    if (logits[i] > mx) mx = logits[i], best = static_cast<int32_t>(i);
  double sum = 0;
  for (uint32_t i = 0; i < vocab; ++i) sum += std::exp(double(logits[i]) - mx);
  const double lse = mx + std::log(sum);
  for (uint32_t i = 0; i < vocab; ++i) out[i] = double(logits[i]) - lse;
  return best;
}
// Standard error of the mean of n samples given their sum and sum of squares.
double mean_standard_error(double sum, double sum_sq, double n) {
  const double mean = sum / n;
  return std::sqrt(std::max(0.0, (sum_sq / n - mean * mean) / (n - 1.0)));
}
}  // namespace

double ModeStats::delta_ppl_percent() const {
  return predictions ? 100.0 * (std::exp(dnll / static_cast<double>(predictions)) - 1.0) : 0.0;
}

Result<Comparison> compare(const ModeStats& a, const ModeStats& b) {
  const size_t n = a.position_nll.size();
  TERN_CHECK_OR_RETURN(
      n >= 2 && n == b.position_nll.size() && n == a.position_agree.size() && n == b.position_agree.size(),
      Error::InvalidArgument, "compare: both modes need the same per-position records (%zu, %zu)", n,
      b.position_nll.size());
  double sd = 0, sd2 = 0, sg = 0, sg2 = 0;
  for (size_t i = 0; i < n; ++i) {
    const double d = double(a.position_nll[i]) - double(b.position_nll[i]);
    const double g = double(a.position_agree[i]) - double(b.position_agree[i]);
    sd += d, sd2 += d * d, sg += g, sg2 += g * g;
  }
  const double nn = static_cast<double>(n);
  auto se = [&](double s1, double s2) { return mean_standard_error(s1, s2, nn); };
  Comparison c;
  c.positions = n;
  c.delta_ppl_percent = 100.0 * (std::exp(sd / nn) - 1.0);
  c.delta_ppl_se_percent = 100.0 * std::exp(sd / nn) * se(sd, sd2);
  c.delta_agreement_points = 100.0 * sg / nn;
  c.delta_agreement_se_points = 100.0 * se(sg, sg2);
  return c;
}

double ModeStats::delta_ppl_se_percent() const {
  if (predictions < 2) return 0.0;
  const double n = static_cast<double>(predictions);
  return 100.0 * std::exp(dnll / n) * mean_standard_error(dnll, dnll_sq, n);
}

KvMode compressed_mode(const std::string& name, const ModelConfig& config, const KvSettings& s,
                       std::vector<KvHeadBits> bits) {
  KvMode m;
  m.name = name;
  m.spec.compressed = true;
  std::snprintf(m.spec.name, sizeof m.spec.name, "%s", name.c_str());
  KvCacheProfile& p = m.spec.profile;
  p.shape = kv_shape_of(config);
  p.exact_type = s.exact_type;
  p.sink_tokens = s.sink_tokens;
  p.recent_window = s.recent_window;
  p.block_tokens = s.block_tokens;
  p.value_group = std::min(s.value_group, config.head_dim);
  p.rotate = true;
  p.eviction = KvEviction::None;
  m.bits = std::move(bits);
  return m;
}

KvSettings settings_from_model(const Model& model, const KvSettings& fallback) {
  KvSettings s = fallback;
  const schema::KvProfile* p = model.bundle() ? model.bundle()->kv_profile() : nullptr;
  if (p == nullptr) return s;
  s.sink_tokens = p->sink_tokens();
  s.recent_window = p->recent_window();
  if (p->group_size()) s.block_tokens = p->group_size();
  if (p->value_group()) s.value_group = p->value_group();
  return s;
}

Result<KvMode> mode_by_name(const Model& model, const std::string& name, const KvSettings& settings) {
  const ModelConfig& c = model.config();
  const size_t heads = static_cast<size_t>(c.layers) * c.kv_heads;
  const schema::KvProfile* bundle_profile = model.bundle() ? model.bundle()->kv_profile() : nullptr;
  if (const size_t hh = name.find('/'); hh != std::string::npos) {
    // Any compressed mode with heavy-hitter eviction: "q4/hh", "uniform:2.5/hh=equal", ...
    bool equal_shares = false;
    uint8_t recent_percent = 0;
    TERN_RETURN_IF_ERROR(parse_kv_heavy_hitter(name.c_str() + hh, &equal_shares, &recent_percent));
    TERN_ASSIGN_OR_RETURN(KvMode m, mode_by_name(model, name.substr(0, hh), settings));
    if (!m.spec.compressed) {  // fp16/hh, f32/hh: a compressed cache of exact heads
      const KvType exact = m.spec.dense_type;
      m = compressed_mode(name, c, settings, std::vector<KvHeadBits>(heads, KvHeadBits{0, 0}));
      m.spec.profile.exact_type = exact;
    }
    m.name = name;
    std::snprintf(m.spec.name, sizeof m.spec.name, "%s", name.c_str());
    if (m.bits.empty())
      m.bits.resize(heads);
    else
      m.spec.profile.head_bits = m.bits.data();
    TERN_RETURN_IF_ERROR(kv_make_heavy_hitter(equal_shares ? nullptr : bundle_profile, recent_percent, c.max_context,
                                              m.bits.data(), &m.spec.profile));
    return m;
  }
  if (const size_t aging = name.find('>'); aging != std::string::npos) {
    // Any compressed mode with aging tiers: "q4>2@96", "uniform:2.5>2@64", ...
    uint8_t aged_bits = 0;
    uint32_t aged_after = 0;
    uint8_t aged_percent = 0;
    TERN_RETURN_IF_ERROR(parse_kv_aging(name.c_str() + aging, &aged_bits, &aged_after, &aged_percent));
    TERN_ASSIGN_OR_RETURN(KvMode m, mode_by_name(model, name.substr(0, aging), settings));
    TERN_CHECK_OR_RETURN(m.spec.compressed, Error::InvalidArgument, "KV mode '%s': exact modes have nothing to age",
                         name.c_str());
    m.name = name;
    std::snprintf(m.spec.name, sizeof m.spec.name, "%s", name.c_str());
    m.spec.profile.aged_bits = aged_bits;
    m.spec.profile.aged_after_tokens = aged_after;
    m.spec.profile.aged_after_percent = aged_percent;
    return m;
  }
  if (name.rfind("uniform:", 0) == 0) {
    char* end = nullptr;
    const double avg = std::strtod(name.c_str() + 8, &end);
    if (end == name.c_str() + 8 || *end != '\0' || avg < 2.0 || avg > 8.0)
      return fail(Error::InvalidArgument, "KV mode '%s': uniform:B with 2 <= B <= 8", name.c_str());
    // The same heads as adaptive:B stay exact (when the bundle has that allocation).
    std::vector<KvHeadBits> bits(heads, KvHeadBits{1, 1});
    auto adaptive = mode_by_name(model, "adaptive:" + name.substr(8), settings);
    if (adaptive.ok())
      for (size_t i = 0; i < heads; ++i)
        if (adaptive->bits[i].exact()) bits[i] = KvHeadBits{0, 0};
    size_t quantized = 0;
    for (const KvHeadBits& b : bits) quantized += !b.exact();
    const kvcal::Allocation u = kvcal::allocate_uniform(quantized, avg);
    if (u.bits.size() != quantized) return fail(Error::InvalidArgument, "KV mode '%s': no uniform mix", name.c_str());
    for (size_t i = 0, k = 0; i < heads; ++i)
      if (!bits[i].exact()) bits[i] = KvHeadBits{u.bits[k], u.bits[k]}, ++k;
    KvMode m =
        compressed_mode(name, c, adaptive.ok() ? settings_from_model(model, settings) : settings, std::move(bits));
    return m;
  }
  KvModeName spec;
  TERN_RETURN_IF_ERROR(parse_kv_mode(name.c_str(), &spec));
  switch (spec.kind) {
    case KvModeName::Kind::Exact: {
      KvMode m;
      m.name = name;
      KvModeRequest request;
      request.mode = name.c_str();
      TERN_RETURN_IF_ERROR(make_kv_cache_spec(request, c, nullptr, nullptr, &m.spec));
      return m;
    }
    case KvModeName::Kind::Uniform:
      return compressed_mode(name, c, settings, std::vector<KvHeadBits>(heads, spec.bits));
    case KvModeName::Kind::Adaptive: {
      std::vector<KvHeadBits> bits(heads);
      KvCacheProfile p;
      p.exact_type = settings.exact_type;
      p.value_group = std::min(settings.value_group, c.head_dim);
      TERN_RETURN_IF_ERROR(kv_profile_for_average(bundle_profile, kv_shape_of(c), spec.average_bits, bits.data(), &p));
      KvMode m;
      m.name = name;
      m.spec.compressed = true;
      std::snprintf(m.spec.name, sizeof m.spec.name, "%s", name.c_str());
      m.spec.profile = p;
      m.spec.profile.eviction = KvEviction::None;
      m.spec.profile.head_bits = nullptr;
      m.bits = std::move(bits);
      return m;
    }
  }
  return fail(Error::InvalidArgument, "KV mode '%s'", name.c_str());
}

namespace {

// Everything one run (reference or mode) owns: arena, scratch, cache, comparison state.
struct Lane {
  KvMode* mode = nullptr;  // null: the reference
  KvCacheSpec spec;        // the mode's (profile.head_bits into mode->bits), or dense f32
  std::vector<uint8_t> buffer;
  ForwardScratch scratch;
  KvCache* kv = nullptr;
  AttentionObserver observer;
  ModeStats stats;
  // Observer state.
  const ModelConfig* config = nullptr;
  float* ref_outputs = nullptr;  // [layers][heads*head_dim] of the current position (reference's)
  bool is_reference = false;
  const RunOptions* options = nullptr;
  std::vector<double> log_probs;  // [vocab] of the current position
  int32_t best = 0;
  Error error = Error::Ok;
};

void on_output(void* user, uint32_t layer, uint32_t, uint32_t n, const float* att) {
  Lane& lane = *static_cast<Lane*>(user);
  const ModelConfig& c = *lane.config;
  const size_t width = static_cast<size_t>(c.heads) * c.head_dim;
  if (n != 1) return;
  float* ref = lane.ref_outputs + static_cast<size_t>(layer) * width;
  if (lane.is_reference) {
    std::memcpy(ref, att, width * sizeof(float));
    return;
  }
  for (uint32_t h = 0; h < c.heads; ++h) {
    const float* a = att + static_cast<size_t>(h) * c.head_dim;
    const float* b = ref + static_cast<size_t>(h) * c.head_dim;
    double dot = 0, na = 0, nb = 0;
    for (uint32_t i = 0; i < c.head_dim; ++i)
      dot += double(a[i]) * b[i], na += double(a[i]) * a[i], nb += double(b[i]) * b[i];
    lane.stats.cosine += (na > 0 && nb > 0) ? dot / std::sqrt(na * nb) : (na == nb ? 1.0 : 0.0);
    lane.stats.cosine_rows++;
  }
}

void on_probs(void* user, uint32_t layer, uint32_t head, uint32_t pos, const float* probs, uint32_t len) {
  const Lane& lane = *static_cast<const Lane*>(user);
  if (lane.options->on_probs) lane.options->on_probs(layer, head, pos, probs, len);
}

Error setup_lane(const Model& model, Lane& lane, uint32_t context) {
  const ModelConfig& c = model.config();
  if (lane.mode != nullptr) {
    lane.spec = lane.mode->resolved();
  } else {
    lane.spec = KvCacheSpec{};  // the reference: exact, dense f32
    lane.spec.profile.shape = kv_shape_of(c);
  }
  const KvCacheSpec& spec = lane.spec;
  if (spec.compressed) TERN_RETURN_IF_ERROR(kv_profile_validate(spec.profile));
  size_t scratch_bytes = 0;
  ForwardScratch probe;
  const uint32_t capacity = kv_cache_capacity(spec, context);
  TERN_RETURN_IF_ERROR(carve_forward_scratch(c, 1, kv_cache_scores_per_head(spec, c.heads / c.kv_heads, capacity),
                                             nullptr, &probe, &scratch_bytes));
  lane.buffer.assign(scratch_bytes + kv_cache_arena_bytes(spec, context) + 4096, 0);
  return Error::Ok;
}

// A fresh cache and scratch for the next window.
Error reset_lane(const Model& model, Lane& lane, uint32_t context) {
  const ModelConfig& c = model.config();
  const KvCacheSpec& spec = lane.spec;
  ArenaAllocator arena(lane.buffer.data(), lane.buffer.size());
  size_t bytes = 0;
  const uint32_t capacity = kv_cache_capacity(spec, context);
  TERN_RETURN_IF_ERROR(carve_forward_scratch(c, 1, kv_cache_scores_per_head(spec, c.heads / c.kv_heads, capacity),
                                             &arena, &lane.scratch, &bytes));
  TERN_ASSIGN_OR_RETURN(lane.kv, create_kv_cache(spec, context, arena));
  lane.scratch.observer = &lane.observer;
  return Error::Ok;
}

}  // namespace

Result<RunResult> run_modes(const Model& model, std::vector<KvMode>& modes, const std::vector<int32_t>& ids,
                            const RunOptions& options) {
  const ModelConfig& c = model.config();
  const uint32_t context = options.context ? std::min(options.context, c.max_context) : c.max_context;
  TERN_CHECK_OR_RETURN(context >= 2, Error::InvalidArgument, "context %u too short", context);
  // Windows: complete ones, plus the remainder when it predicts something.
  std::vector<std::pair<size_t, uint32_t>> windows;
  for (size_t at = 0; at + 1 < ids.size(); at += context) {
    if (options.max_windows && windows.size() >= options.max_windows) break;
    const uint32_t len = static_cast<uint32_t>(std::min<size_t>(context, ids.size() - at));
    if (len >= 2) windows.emplace_back(at, len);
  }
  TERN_CHECK_OR_RETURN(!windows.empty(), Error::InvalidArgument, "text too short: %zu tokens", ids.size());

  const size_t width = static_cast<size_t>(c.heads) * c.head_dim;
  std::vector<float> ref_outputs(static_cast<size_t>(c.layers) * width);
  std::vector<Lane> lanes(modes.size() + 1);
  for (size_t i = 0; i < lanes.size(); ++i) {
    Lane& lane = lanes[i];
    lane.mode = i == 0 ? nullptr : &modes[i - 1];
    lane.is_reference = i == 0;
    lane.config = &c;
    lane.ref_outputs = ref_outputs.data();
    lane.options = &options;
    lane.observer.user = &lane;
    if (options.attention_cosine) lane.observer.on_output = on_output;
    if (i == 0 && options.on_probs) lane.observer.on_probs = on_probs;
    if (Error e = setup_lane(model, lane, context); e != Error::Ok) {
      return fail(e, "KV mode %s: %s", lane.mode ? lane.mode->name.c_str() : "reference", last_error_message());
    }
  }
  uint64_t total = 0, done = 0;
  for (const auto& w : windows) total += static_cast<uint64_t>(w.second - 1) * lanes.size();

  for (Lane& lane : lanes) lane.log_probs.resize(c.vocab);
  // One position of one lane; the reference's must be done before the others start.
  auto step = [&](Lane& lane, const int32_t* tokens, uint32_t pos) {
    lane.error = forward(model, *lane.kv, lane.scratch, tokens + pos, 1, pos, true, nullptr);
    if (lane.error != Error::Ok) return;
    const int32_t next = tokens[pos + 1];
    lane.best = log_softmax_argmax(lane.scratch.logits, c.vocab, lane.log_probs.data());
    lane.stats.nll -= lane.log_probs[next];
    lane.stats.predictions++;
    if (lane.is_reference) {
      lane.stats.agree++;
      return;
    }
    const Lane& ref = lanes[0];
    const double d = ref.log_probs[next] - lane.log_probs[next];
    lane.stats.dnll += d;
    lane.stats.dnll_sq += d * d;
    lane.stats.agree += lane.best == ref.best;
    if (lane.options->per_position) {
      lane.stats.position_nll.push_back(static_cast<float>(-lane.log_probs[next]));
      lane.stats.position_agree.push_back(lane.best == ref.best);
    }
    double kl = 0;
    for (uint32_t v = 0; v < c.vocab; ++v) kl += std::exp(ref.log_probs[v]) * (ref.log_probs[v] - lane.log_probs[v]);
    lane.stats.kl += std::max(0.0, kl);
  };
  const uint32_t threads =
      std::max<uint32_t>(1, std::min<uint32_t>(options.threads, static_cast<uint32_t>(modes.size())));
  for (const auto& [start, len] : windows) {
    for (Lane& lane : lanes) {
      if (Error e = reset_lane(model, lane, context); e != Error::Ok) {
        return fail(e, "KV mode %s: %s", lane.mode ? lane.mode->name.c_str() : "reference", last_error_message());
      }
    }
    const int32_t* tokens = ids.data() + start;
    for (uint32_t pos = 0; pos + 1 < len; ++pos) {
      step(lanes[0], tokens, pos);
      auto work = [&](uint32_t t) {
        for (size_t i = 1 + t; i < lanes.size(); i += threads) step(lanes[i], tokens, pos);
      };
      if (threads == 1) {
        work(0);
      } else {
        std::vector<std::thread> pool;
        for (uint32_t t = 1; t < threads; ++t) pool.emplace_back(work, t);
        work(0);
        for (std::thread& th : pool) th.join();
      }
      for (const Lane& lane : lanes) {
        if (lane.error != Error::Ok)
          return fail(lane.error, "KV mode %s at position %u failed", lane.mode ? lane.mode->name.c_str() : "reference",
                      pos);
      }
      done += lanes.size();
      if (options.progress) options.progress(done, total);
    }
  }
  RunResult r;
  r.reference = lanes[0].stats;
  r.reference.cosine_rows = 0;
  for (size_t i = 1; i < lanes.size(); ++i) r.modes.push_back(lanes[i].stats);
  return r;
}

namespace {

// One stream: its cache (in its own buffer), scratch and the current position's distribution.
struct StreamLane {
  KvCacheSpec spec;
  uint32_t capacity = 0;
  std::vector<uint8_t> buffer;
  ForwardScratch scratch;
  KvCache* kv = nullptr;
  std::vector<double> log_probs, probs;  // probs only for references
  int32_t best = 0;
  Error error = Error::Ok;
  StreamTrace* trace = nullptr;
};

// The largest capacity on the spec's ladder within `context` that is at most `tokens`
// (tokens > 0) or whose cache fits `budget` bytes (budget > 0).
Result<uint32_t> stream_capacity(const KvCacheSpec& spec, uint32_t context, uint32_t tokens, uint64_t budget,
                                 const std::string& name) {
  TERN_ASSIGN_OR_RETURN(KvCapacityLadder ladder, kv_capacity_ladder(spec, 1, context, 0));
  uint32_t best = 0;
  for (uint32_t step = 0; step <= ladder.steps; ++step) {
    const uint32_t cap = ladder.at(step);
    if (cap > context) break;
    if (budget > 0 ? kv_cache_arena_bytes(spec, cap) <= budget : cap <= tokens) best = cap;
  }
  TERN_CHECK_OR_RETURN(best > 0, Error::InvalidArgument,
                       "KV mode %s: its smallest evicting cache (%u positions, %zu bytes) exceeds the %s", name.c_str(),
                       ladder.at(0), kv_cache_arena_bytes(spec, ladder.at(0)), budget > 0 ? "byte budget" : "capacity");
  return best;
}

Error setup_stream_lane(const Model& model, StreamLane& lane) {
  const ModelConfig& c = model.config();
  TERN_RETURN_IF_ERROR(kv_profile_validate(lane.spec.profile));
  size_t scratch_bytes = 0;
  ForwardScratch probe;
  const size_t scores = kv_cache_scores_per_head(lane.spec, c.heads / c.kv_heads, lane.capacity);
  TERN_RETURN_IF_ERROR(carve_forward_scratch(c, 1, scores, nullptr, &probe, &scratch_bytes));
  lane.buffer.assign(scratch_bytes + kv_cache_arena_bytes(lane.spec, lane.capacity) + 4096, 0);
  ArenaAllocator arena(lane.buffer.data(), lane.buffer.size());
  size_t bytes = 0;
  TERN_RETURN_IF_ERROR(carve_forward_scratch(c, 1, scores, &arena, &lane.scratch, &bytes));
  TERN_ASSIGN_OR_RETURN(lane.kv, create_kv_cache(lane.spec, lane.capacity, arena));
  TERN_CHECK_OR_RETURN(lane.kv->capacity_tokens() == lane.capacity, Error::Internal,
                       "stream cache holds %u positions, not %u", lane.kv->capacity_tokens(), lane.capacity);
  lane.log_probs.resize(c.vocab);
  lane.trace->capacity = lane.capacity;
  lane.trace->cache_bytes = kv_cache_arena_bytes(lane.spec, lane.capacity);
  return Error::Ok;
}

// A cache of exact f32 heads with `like`'s sinks, window and block length, evicting.
KvCacheSpec exact_streaming_spec(const KvCacheProfile& like, const char* name) {
  KvCacheSpec spec;
  spec.compressed = true;
  std::snprintf(spec.name, sizeof spec.name, "%s", name);
  KvCacheProfile& p = spec.profile;
  p.shape = like.shape;
  p.exact_type = KvType::F32;
  p.sink_tokens = like.sink_tokens;
  p.recent_window = like.recent_window;
  p.block_tokens = like.block_tokens;
  p.value_group = like.value_group;
  p.eviction = KvEviction::Streaming;
  p.head_bits = nullptr;
  p.uniform = KvHeadBits{0, 0};
  return spec;
}

// Where positions 0..next-1 are, averaged over the cache's heads (see StreamTrace).
void record_fractions(const KvCache& kv, uint32_t next, StreamTrace& t) {
  const CompressedKvCache* cc = kv.compressed();
  if (cc == nullptr) {
    t.exact_fraction.push_back(1.0f), t.compressed_fraction.push_back(0.0f), t.evicted_fraction.push_back(0.0f);
    return;
  }
  const KvCacheProfile& p = cc->profile();
  const uint32_t S = p.sink_tokens, W = p.recent_window, G = p.block_tokens, ring = W + G;
  const uint32_t sinks = std::min(next, S), n = next - sinks;
  const uint32_t window = n <= ring ? n : W + (n - ring - 1) % G + 1;
  double exact = 0, compressed = 0, evicted = 0;
  const KvShape shape = kv.shape();
  for (uint32_t l = 0; l < shape.layers; ++l)
    for (uint32_t h = 0; h < shape.kv_heads; ++h) {
      const uint32_t gone = cc->evicted_positions(l, h);
      const uint32_t middle = next - sinks - window - gone;
      evicted += gone;
      if (p.bits_of(l, h).exact()) {
        exact += sinks + window + middle;
      } else {
        exact += sinks + window;
        compressed += middle;
      }
    }
  const double total = static_cast<double>(next) * shape.layers * shape.kv_heads;
  t.exact_fraction.push_back(static_cast<float>(exact / total));
  t.compressed_fraction.push_back(static_cast<float>(compressed / total));
  t.evicted_fraction.push_back(static_cast<float>(evicted / total));
}

void parallel_for(size_t count, uint32_t threads, const std::function<void(size_t)>& fn) {
  const size_t t = std::max<size_t>(1, std::min<size_t>(threads, count));
  if (t == 1) {
    for (size_t i = 0; i < count; ++i) fn(i);
    return;
  }
  auto work = [&](size_t first) {
    for (size_t i = first; i < count; i += t) fn(i);
  };
  std::vector<std::thread> pool;
  for (size_t k = 1; k < t; ++k) pool.emplace_back(work, k);
  work(0);
  for (std::thread& th : pool) th.join();
}

}  // namespace

Result<StreamResult> run_stream(const Model& model, std::vector<KvMode>& modes, const std::vector<int32_t>& ids,
                                const StreamOptions& options) {
  const ModelConfig& c = model.config();
  TERN_CHECK_OR_RETURN(ids.size() >= 2, Error::InvalidArgument, "text too short: %zu tokens", ids.size());
  TERN_CHECK_OR_RETURN(!modes.empty(), Error::InvalidArgument, "no KV mode to stream");
  const uint32_t context = c.max_context;
  const uint32_t full_context = options.full_context ? std::min(options.full_context, context) : context;
  const uint32_t tokens = options.capacity ? std::min(options.capacity, context) : context;

  StreamResult r;
  r.modes.resize(modes.size());
  std::vector<StreamLane> mode_lanes(modes.size());
  std::vector<StreamLane> ref_lanes;  // [0] full context, then one per distinct layout
  std::vector<KvCacheSpec> same_specs;
  r.same.reserve(modes.size());
  for (size_t i = 0; i < modes.size(); ++i) {
    KvMode& m = modes[i];
    TERN_CHECK_OR_RETURN(m.spec.compressed, Error::InvalidArgument,
                         "KV mode %s: a stream needs an evicting (compressed) cache", m.name.c_str());
    StreamLane& lane = mode_lanes[i];
    lane.spec = m.resolved();
    if (lane.spec.profile.eviction != KvEviction::HeavyHitter) lane.spec.profile.eviction = KvEviction::Streaming;
    TERN_ASSIGN_OR_RETURN(lane.capacity, stream_capacity(lane.spec, context, tokens, options.budget_bytes, m.name));
    r.modes[i].name = m.name;
    // The exact stream under the same eviction: shared by modes of the same layout.
    const KvCacheSpec same = exact_streaming_spec(lane.spec.profile, "f32");
    size_t k = 0;
    for (; k < same_specs.size(); ++k) {
      const KvCacheProfile& a = same_specs[k].profile;
      if (a.sink_tokens == same.profile.sink_tokens && a.recent_window == same.profile.recent_window &&
          a.block_tokens == same.profile.block_tokens && r.same[k].capacity == lane.capacity)
        break;
    }
    if (k == same_specs.size()) {
      same_specs.push_back(same);
      StreamTrace t;
      t.name = "f32 stream, " + std::to_string(lane.capacity) + " positions";
      t.capacity = lane.capacity;
      r.same.push_back(t);
    }
    r.modes[i].same_reference = k;
  }
  ref_lanes.resize(1 + same_specs.size());
  {
    StreamLane& full = ref_lanes[0];
    full.spec = exact_streaming_spec(mode_lanes[0].spec.profile, "f32");
    // A window a little longer than the modes' so the capacity S + W + G + M*G is the
    // whole context, not the block below it.
    KvCacheProfile& p = full.spec.profile;
    if (full_context > p.sink_tokens + p.recent_window + p.block_tokens)
      p.recent_window += (full_context - p.sink_tokens - p.recent_window - p.block_tokens) % p.block_tokens;
    TERN_ASSIGN_OR_RETURN(full.capacity, stream_capacity(full.spec, context, full_context, 0, "f32"));
    r.full.name = "f32 stream, full context";
    full.trace = &r.full;
  }
  for (size_t k = 0; k < same_specs.size(); ++k) {
    ref_lanes[1 + k].spec = same_specs[k];
    ref_lanes[1 + k].capacity = r.same[k].capacity;
    ref_lanes[1 + k].trace = &r.same[k];
  }
  for (StreamLane& lane : ref_lanes) {
    if (Error e = setup_stream_lane(model, lane); e != Error::Ok)
      return fail(e, "exact stream: %s", last_error_message());
    lane.probs.resize(c.vocab);
  }
  for (size_t i = 0; i < modes.size(); ++i) {
    mode_lanes[i].trace = &r.modes[i];
    if (Error e = setup_stream_lane(model, mode_lanes[i]); e != Error::Ok)
      return fail(e, "KV mode %s: %s", modes[i].name.c_str(), last_error_message());
  }

  auto forward_one = [&](StreamLane& lane, uint32_t pos) {
    lane.error = forward(model, *lane.kv, lane.scratch, ids.data() + pos, 1, pos, true, nullptr);
    if (lane.error != Error::Ok) return;
    const int32_t best = log_softmax_argmax(lane.scratch.logits, c.vocab, lane.log_probs.data());
    if (!lane.probs.empty())
      for (uint32_t v = 0; v < c.vocab; ++v) lane.probs[v] = std::exp(lane.log_probs[v]);
    lane.best = best;
    lane.trace->nll.push_back(static_cast<float>(-lane.log_probs[ids[pos + 1]]));
  };
  auto kl = [&](const StreamLane& ref, const StreamLane& lane) {
    double d = 0;
    for (uint32_t v = 0; v < c.vocab; ++v) d += ref.probs[v] * (ref.log_probs[v] - lane.log_probs[v]);
    return static_cast<float>(std::max(0.0, d));
  };
  const uint64_t positions = ids.size() - 1;
  const uint64_t total = positions * (ref_lanes.size() + mode_lanes.size());
  for (uint32_t pos = 0; pos < positions; ++pos) {
    parallel_for(ref_lanes.size(), options.threads, [&](size_t i) { forward_one(ref_lanes[i], pos); });
    parallel_for(mode_lanes.size(), options.threads, [&](size_t i) {
      StreamLane& lane = mode_lanes[i];
      forward_one(lane, pos);
      if (lane.error != Error::Ok) return;
      StreamTrace& t = *lane.trace;
      const StreamLane& same = ref_lanes[1 + t.same_reference];
      const StreamLane& full = ref_lanes[0];
      t.kl_same.push_back(kl(same, lane));
      t.kl_full.push_back(kl(full, lane));
      t.agree_same.push_back(lane.best == same.best);
      t.agree_full.push_back(lane.best == full.best);
      record_fractions(*lane.kv, pos + 1, t);
    });
    for (const auto* lanes : {&ref_lanes, &mode_lanes})
      for (const StreamLane& lane : *lanes)
        if (lane.error != Error::Ok)
          return fail(lane.error, "stream %s at position %u failed: %s", lane.trace->name.c_str(), pos,
                      last_error_message());
    if (options.progress)
      options.progress(static_cast<uint64_t>(pos + 1) * (ref_lanes.size() + mode_lanes.size()), total);
  }
  for (StreamLane& lane : ref_lanes) record_fractions(*lane.kv, static_cast<uint32_t>(positions), *lane.trace);
  return r;
}

StreamSummary summarize(const StreamTrace& mode, const StreamTrace& reference, size_t begin, size_t end,
                        bool against_full) {
  StreamSummary s;
  end = std::min({end, mode.nll.size(), reference.nll.size()});
  begin = std::min(begin, end);
  s.begin = begin, s.end = end;
  const size_t n = end - begin;
  if (n == 0) return s;
  double nll = 0, ref = 0, d = 0, d2 = 0, kl = 0, agree = 0;
  const std::vector<float>& kls = against_full ? mode.kl_full : mode.kl_same;
  const std::vector<uint8_t>& agrees = against_full ? mode.agree_full : mode.agree_same;
  for (size_t i = begin; i < end; ++i) {
    const double x = mode.nll[i] - double(reference.nll[i]);
    nll += mode.nll[i], ref += reference.nll[i], d += x, d2 += x * x;
    if (i < kls.size()) kl += kls[i];
    agree += i < agrees.size() ? agrees[i] : 1;
  }
  const double nn = static_cast<double>(n);
  s.ppl = std::exp(nll / nn);
  s.ppl_reference = std::exp(ref / nn);
  s.delta_ppl_percent = 100.0 * (std::exp(d / nn) - 1.0);
  s.delta_ppl_se_percent = n >= 2 ? 100.0 * std::exp(d / nn) * mean_standard_error(d, d2, nn) : 0.0;
  s.mean_kl = kl / nn;
  s.agreement = agree / nn;
  if (end - 1 < mode.exact_fraction.size()) {
    s.exact_fraction = mode.exact_fraction[end - 1];
    s.compressed_fraction = mode.compressed_fraction[end - 1];
    s.evicted_fraction = mode.evicted_fraction[end - 1];
  }
  return s;
}

Result<std::vector<int32_t>> tokenize_text(Model& model, std::string text, bool bos_per_paragraph, size_t tail_bytes) {
  Tokenizer* tok = model.tokenizer();
  TERN_CHECK_OR_RETURN(tok != nullptr, Error::InvalidArgument, "the bundle has no tokenizer");
  if (tail_bytes > 0 && tail_bytes < text.size()) {
    text = text.substr(text.size() - tail_bytes);
    const size_t space = text.find(' ');
    text = text.substr(space == std::string::npos ? 0 : space + 1);  // start at a word
  }
  std::vector<std::string> parts;
  if (bos_per_paragraph) {
    // Paragraphs separated by blank lines, each encoded on its own after a BOS.
    std::string part;
    size_t at = 0;
    while (at <= text.size()) {
      size_t end = text.find('\n', at);
      if (end == std::string::npos) end = text.size();
      const std::string line = text.substr(at, end - at);
      if (line.empty() || line == "\r") {
        if (!part.empty()) parts.push_back(part), part.clear();
      } else {
        part += (part.empty() ? "" : "\n") + line;
      }
      at = end + 1;
    }
    if (!part.empty()) parts.push_back(part);
  } else {
    parts.push_back(text);
  }
  std::vector<int32_t> ids;
  for (const std::string& p : parts) {
    std::vector<int32_t> out(p.size() + 8);
    std::vector<uint8_t> scratch(tok->encode_scratch_bytes(p.size()));
    auto n =
        tok->encode(p.data(), p.size(), true, false, out.data(), out.size(), nullptr, scratch.data(), scratch.size());
    if (!n.ok()) return n.error();
    ids.insert(ids.end(), out.begin(), out.begin() + static_cast<std::ptrdiff_t>(*n));
  }
  return ids;
}

}  // namespace tern::kvq
