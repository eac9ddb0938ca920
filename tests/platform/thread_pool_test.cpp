#include "platform/thread_pool.h"

#include <gtest/gtest.h>

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

namespace tern {
namespace {

// More threads than cores are clamped to the cores this process may use: its affinity mask,
// checked from a thread pinned to one CPU.
TEST(ThreadPool, ClampsToTheAvailableCores) {
  EXPECT_GE(available_cores(), 1u);
  EXPECT_LE(available_cores(), std::max(1u, std::thread::hardware_concurrency()));
  auto many = ThreadPool::create(9999);
  ASSERT_TRUE(many.ok()) << last_error_message();
  EXPECT_EQ(many->num_threads(), available_cores());
#if defined(__linux__)
  size_t pinned_cores = 0, pinned_threads = 0;
  std::thread pinned([&] {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(sched_getcpu() < 0 ? 0 : sched_getcpu(), &one);
    if (sched_setaffinity(0, sizeof one, &one) != 0) return;
    pinned_cores = available_cores();
    auto pool = ThreadPool::create(4);
    if (pool.ok()) pinned_threads = pool->num_threads();
  });
  pinned.join();
  EXPECT_EQ(pinned_cores, 1u);
  EXPECT_EQ(pinned_threads, 1u);
#endif
}

class ThreadPoolSizes : public ::testing::TestWithParam<size_t> {};

TEST_P(ThreadPoolSizes, EveryIndexRunsExactlyOnce) {
  auto pool = ThreadPool::create(GetParam());
  ASSERT_TRUE(pool.ok()) << last_error_message();
  EXPECT_EQ(pool->num_threads(), GetParam() == 0 ? available_cores() : std::min(GetParam(), available_cores()));
  for (size_t range : {size_t{0}, size_t{1}, size_t{7}, size_t{1000}, size_t{100003}}) {
    std::vector<std::atomic<int>> hits(range);
    auto body = [&](size_t i) { hits[i].fetch_add(1); };
    pool->parallel_for(range, body);
    for (size_t i = 0; i < range; ++i) ASSERT_EQ(hits[i].load(), 1) << "index " << i;
  }
}

TEST_P(ThreadPoolSizes, TilesCoverTheRange) {
  auto pool = ThreadPool::create(GetParam());
  ASSERT_TRUE(pool.ok());
  const size_t range = 1001, tile = 64;
  std::vector<std::atomic<int>> hits(range);
  std::atomic<size_t> calls{0};
  auto body = [&](size_t start, size_t count) {
    EXPECT_LE(count, tile);
    EXPECT_LE(start + count, range);
    for (size_t i = start; i < start + count; ++i) hits[i].fetch_add(1);
    calls.fetch_add(1);
  };
  pool->parallel_for_tiles(range, tile, body);
  for (size_t i = 0; i < range; ++i) ASSERT_EQ(hits[i].load(), 1);
  EXPECT_EQ(calls.load(), (range + tile - 1) / tile);
}

TEST_P(ThreadPoolSizes, ParallelSumMatchesSerial) {
  auto pool = ThreadPool::create(GetParam());
  ASSERT_TRUE(pool.ok());
  const size_t rows = 257, cols = 1000;
  std::vector<int64_t> out(rows, 0);
  auto body = [&](size_t r) {
    int64_t s = 0;
    for (size_t c = 0; c < cols; ++c) s += static_cast<int64_t>(r * c % 97) - 48;
    out[r] = s;
  };
  pool->parallel_for(rows, body);
  for (size_t r = 0; r < rows; ++r) {
    int64_t s = 0;
    for (size_t c = 0; c < cols; ++c) s += static_cast<int64_t>(r * c % 97) - 48;
    ASSERT_EQ(out[r], s);
  }
}

INSTANTIATE_TEST_SUITE_P(Threads, ThreadPoolSizes, ::testing::Values(1, 2, 3));

TEST(ThreadPool, UsesSeveralThreadsWhenAsked) {
  auto pool = ThreadPool::create(2);
  ASSERT_TRUE(pool.ok());
  std::mutex mu;
  std::set<std::thread::id> ids;
  auto body = [&](size_t) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    std::lock_guard<std::mutex> lock(mu);
    ids.insert(std::this_thread::get_id());
  };
  pool->parallel_for(64, body);
  EXPECT_EQ(ids.size(), 2u);
}

TEST(ThreadPool, SingleThreadRunsOnCaller) {
  auto pool = ThreadPool::create(1);
  ASSERT_TRUE(pool.ok());
  EXPECT_EQ(pool->handle(), nullptr);
  const auto me = std::this_thread::get_id();
  bool all_on_caller = true;
  auto body = [&](size_t) { all_on_caller &= std::this_thread::get_id() == me; };
  pool->parallel_for(100, body);
  EXPECT_TRUE(all_on_caller);
}

}  // namespace
}  // namespace tern
