#include "platform/thread_pool.h"

#if defined(__linux__)
#include <sched.h>
#endif
#include <unistd.h>

namespace tern {

size_t available_cores() {
#if defined(__linux__)
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    const int n = CPU_COUNT(&set);
    if (n > 0) return static_cast<size_t>(n);
  }
#endif
  const long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<size_t>(n) : 1;
}

Result<ThreadPool> ThreadPool::create(size_t num_threads) {
  ThreadPool pool;
  const size_t cores = available_cores();
  if (num_threads == 0 || num_threads > cores) num_threads = cores;
  if (num_threads == 1) return pool;
  pool.pool_ = pthreadpool_create(num_threads);
  if (pool.pool_ == nullptr) {
    return fail(Error::ThreadError, "cannot create a pool of %zu threads", num_threads);
  }
  pool.threads_ = pthreadpool_get_threads_count(pool.pool_);
  return pool;
}

ThreadPool& ThreadPool::operator=(ThreadPool&& other) noexcept {
  if (this != &other) {
    if (pool_ != nullptr) pthreadpool_destroy(pool_);
    pool_ = other.pool_;
    threads_ = other.threads_;
    other.pool_ = nullptr;
    other.threads_ = 1;
  }
  return *this;
}

ThreadPool::~ThreadPool() {
  if (pool_ != nullptr) pthreadpool_destroy(pool_);
}

}  // namespace tern
