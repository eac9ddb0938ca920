// A fixed set of worker threads (pthreadpool) created at load time. Work is split by
// index ranges; the calling thread takes part, and nothing is allocated per call.
#pragma once

#include <pthreadpool.h>

#include <cstddef>

#include "platform/error.h"

namespace tern {

// Cores this process may run on (its CPU affinity mask on Linux and Android; the online
// processors elsewhere), at least 1.
size_t available_cores();

class ThreadPool {
 public:
  // num_threads == 0 picks one per available core, and more than that is clamped to it
  // (threads beyond the cores only wait on each other); 1 runs everything on the calling
  // thread. num_threads() says what the pool got.
  static Result<ThreadPool> create(size_t num_threads);

  ThreadPool() = default;
  ThreadPool(ThreadPool&& other) noexcept : pool_(other.pool_), threads_(other.threads_) {
    other.pool_ = nullptr;
    other.threads_ = 1;
  }
  ThreadPool& operator=(ThreadPool&& other) noexcept;
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;
  ~ThreadPool();

  size_t num_threads() const { return threads_; }
  // For libraries that take a pthreadpool (XNNPACK); nullptr means single-threaded.
  pthreadpool_t handle() const { return pool_; }

  // Calls fn(i) for every i in [0, range), spread over the threads.
  template <typename F>
  void parallel_for(size_t range, F& fn) const {
    pthreadpool_parallelize_1d(pool_, &call_1d<F>, &fn, range, PTHREADPOOL_FLAG_DISABLE_DENORMALS);
  }
  // Calls fn(start, count) over tiles of `tile` indices covering [0, range).
  template <typename F>
  void parallel_for_tiles(size_t range, size_t tile, F& fn) const {
    pthreadpool_parallelize_1d_tile_1d(pool_, &call_tile<F>, &fn, range, tile == 0 ? 1 : tile,
                                       PTHREADPOOL_FLAG_DISABLE_DENORMALS);
  }

 private:
  template <typename F>
  static void call_1d(void* ctx, size_t i) {
    (*static_cast<F*>(ctx))(i);
  }
  template <typename F>
  static void call_tile(void* ctx, size_t start, size_t count) {
    (*static_cast<F*>(ctx))(start, count);
  }

  pthreadpool_t pool_ = nullptr;
  size_t threads_ = 1;
};

}  // namespace tern
