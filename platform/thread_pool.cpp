#include "platform/thread_pool.h"

namespace tern {

Result<ThreadPool> ThreadPool::create(size_t num_threads) {
  ThreadPool pool;
  if (num_threads == 1) return pool;
  pool.pool_ = pthreadpool_create(num_threads);  // 0: pthreadpool counts the cores
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
