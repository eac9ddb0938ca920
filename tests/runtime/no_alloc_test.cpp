// Prefill, decode, sampling and generate must not touch the heap: this binary interposes
// malloc/calloc/realloc/free/aligned allocation and operator new/delete, and counts every
// call made (from any thread) while counting is on.
#include <gtest/gtest.h>
#include <malloc.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

#include "runtime/include/tern.h"
#include "tests/runtime/bundle_util.h"

extern "C" {
void* __libc_malloc(size_t);
void* __libc_calloc(size_t, size_t);
void* __libc_realloc(void*, size_t);
void __libc_free(void*);
void* __libc_memalign(size_t, size_t);
}

namespace {
std::atomic<bool> g_counting{false};
std::atomic<long> g_calls{0};
inline void note() {
  if (g_counting.load(std::memory_order_relaxed)) g_calls.fetch_add(1, std::memory_order_relaxed);
}
}  // namespace

extern "C" {
void* malloc(size_t n) {
  note();
  return __libc_malloc(n);
}
void* calloc(size_t a, size_t b) {
  note();
  return __libc_calloc(a, b);
}
void* realloc(void* p, size_t n) {
  note();
  return __libc_realloc(p, n);
}
void free(void* p) {
  if (p != nullptr) note();
  __libc_free(p);
}
void* aligned_alloc(size_t alignment, size_t n) {
  note();
  return __libc_memalign(alignment, n);
}
void* memalign(size_t alignment, size_t n) {
  note();
  return __libc_memalign(alignment, n);
}
int posix_memalign(void** out, size_t alignment, size_t n) {
  note();
  *out = __libc_memalign(alignment, n);
  return *out == nullptr ? ENOMEM : 0;
}
}

void* operator new(size_t n) {
  note();
  void* p = __libc_malloc(n == 0 ? 1 : n);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}
void* operator new[](size_t n) { return operator new(n); }
void* operator new(size_t n, const std::nothrow_t&) noexcept {
  note();
  return __libc_malloc(n == 0 ? 1 : n);
}
void* operator new[](size_t n, const std::nothrow_t& t) noexcept { return operator new(n, t); }
void operator delete(void* p) noexcept {
  if (p != nullptr) note();
  __libc_free(p);
}
void operator delete[](void* p) noexcept { operator delete(p); }
void operator delete(void* p, size_t) noexcept { operator delete(p); }
void operator delete[](void* p, size_t) noexcept { operator delete(p); }

namespace {

class Counting {
 public:
  Counting() {
    g_calls = 0;
    g_counting = true;
  }
  ~Counting() { g_counting = false; }
  long calls() const { return g_calls.load(); }
};

int sink(const char* text, size_t size, void* user) {
  *static_cast<size_t*>(user) += size;
  return 0;
}

TEST(NoAlloc, TheShimCountsAllocations) {
  Counting counting;
  void* p = std::malloc(16);
  std::free(p);
  auto* q = new (std::nothrow) int(3);
  delete q;
  EXPECT_EQ(counting.calls(), 4);
}

void run_without_allocating(const char* bundle, const char* source, uint32_t threads) {
  const std::string path = tern::testing::bundle_path(bundle);
  tern_model_params mp = tern_model_default_params();
  mp.n_threads = threads;
  mp.n_batch = 8;
  tern_model* model = nullptr;
  ASSERT_EQ(tern_model_load(path.c_str(), &mp, &model), TERN_OK) << tern_last_error_message();
  tern_session_params sp = tern_session_default_params();
  sp.sampler.temperature = 0.9f;
  sp.sampler.top_k = 0;  // full-vocabulary sort
  sp.sampler.repeat_penalty = 1.1f;
  tern_session* session = nullptr;
  ASSERT_EQ(tern_session_create(model, &sp, &session), TERN_OK) << tern_last_error_message();
  std::vector<int32_t> prompt(40);
  size_t n = 0;
  const char text[] = "It is a truth universally acknowledged, that a single man";
  ASSERT_EQ(tern_tokenize(model, text, sizeof text - 1, 1, 0, prompt.data(), prompt.size(), &n), TERN_OK);
  long calls = 0;
  size_t bytes = 0;
  {
    Counting counting;
    tern_status s = tern_prefill(session, prompt.data(), n);  // batches of 8: the GEMM path
    for (int i = 0; i < 12 && s == TERN_OK; ++i) {
      int32_t token = 0;
      s = tern_sample(session, &token);
      if (s == TERN_OK) s = tern_decode(session, token);
    }
    EXPECT_EQ(s, TERN_OK) << tern_last_error_message();
    tern_generate_params gp = tern_generate_default_params();
    gp.max_new_tokens = 12;
    const char* stops[] = {"\n\n"};
    gp.stop_strings = stops;
    gp.n_stop_strings = 1;
    ASSERT_EQ(tern_session_reset(session), TERN_OK);
    EXPECT_EQ(tern_generate(session, text, sizeof text - 1, &gp, sink, &bytes, nullptr), TERN_OK)
        << tern_last_error_message();
    calls = counting.calls();
  }
  EXPECT_EQ(calls, 0) << "heap calls during prefill/decode/sample/generate with " << threads << " thread(s)";
  EXPECT_GT(bytes, 0u);
  tern_session_free(session);
  tern_model_free(model);
}

TEST(NoAlloc, PrefillDecodeSampleGenerateOneThread) {
  TERN_REQUIRE_BUNDLE("tiny-austen-packed.tern", "models/tiny-austen/packed/model.safetensors");
  run_without_allocating("tiny-austen-packed.tern", "", 1);
}

TEST(NoAlloc, PrefillDecodeSampleGenerateTwoThreads) {
  TERN_REQUIRE_BUNDLE("tiny-austen-packed.tern", "models/tiny-austen/packed/model.safetensors");
  run_without_allocating("tiny-austen-packed.tern", "", 2);
}

}  // namespace
