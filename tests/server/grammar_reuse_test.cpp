// What tern-server keeps to spare grammar work, without HTTP or a model: the schema -> grammar
// LRU (grammar_cache.h), the slot pool's choice of a free slot by the grammar it holds
// (slot_pool.h), and the watchdog that stops compiles past their deadline or whose client left
// (compile_watchdog.h; tern_session_request_abort on a null session only fails, so the
// outcomes are checked without a model).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "tools/server/compile_watchdog.h"
#include "tools/server/grammar_cache.h"
#include "tools/server/slot_pool.h"

namespace tern::server {
namespace {

using std::chrono::milliseconds;

TEST(GrammarReuse, Fnv1aMatchesTheReferenceVectors) {
  // The FNV-1a 64 test vectors (Fowler, Noll, Vo: "FNV hash" reference code).
  EXPECT_EQ(fnv1a64(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(fnv1a64("a"), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(fnv1a64("foobar"), 0x85944171f73967e8ull);
  EXPECT_EQ(grammar_key("").size, 0u);
  EXPECT_EQ(grammar_key("root ::= \"a\"").size, 12u);
}

TEST(GrammarReuse, CacheDropsTheLeastRecentlyUsed) {
  SchemaGrammarCache cache(2, 1 << 20);
  std::string g;
  cache.insert("A", "ga");
  cache.insert("B", "gb");
  ASSERT_TRUE(cache.find("A", &g));  // A is now the most recent: C pushes B out
  EXPECT_EQ(g, "ga");
  cache.insert("C", "gc");
  EXPECT_FALSE(cache.find("B", &g));
  ASSERT_TRUE(cache.find("C", &g));
  EXPECT_EQ(g, "gc");
  EXPECT_TRUE(cache.find("A", &g));
  const SchemaGrammarCache::Stats st = cache.stats();
  EXPECT_EQ(st.entries, 2u);
  EXPECT_EQ(st.hits, 3u);
  EXPECT_EQ(st.misses, 1u);
}

TEST(GrammarReuse, CacheKeepsItsByteBound) {
  SchemaGrammarCache cache(64, 100);
  std::string g;
  cache.insert("big", std::string(30, 'x'));  // over a quarter of the bound: not kept
  EXPECT_FALSE(cache.find("big", &g));
  for (int i = 0; i < 10; ++i) cache.insert("s" + std::to_string(i), std::string(18, 'g'));  // 20 bytes each
  EXPECT_LE(cache.stats().bytes, 100u);
  EXPECT_EQ(cache.stats().entries, 5u);
  EXPECT_TRUE(cache.find("s9", &g));
  EXPECT_FALSE(cache.find("s4", &g));
}

TEST(GrammarReuse, SchemasSharingAHashNeverShareAGrammar) {
  SchemaGrammarCache cache(64, 1 << 20, [](const std::string&) -> uint64_t { return 42; });
  std::string g;
  cache.insert("{\"type\":\"integer\"}", "int");
  EXPECT_FALSE(cache.find("{\"type\":\"string\"}", &g));
  cache.insert("{\"type\":\"string\"}", "str");
  ASSERT_TRUE(cache.find("{\"type\":\"integer\"}", &g));
  EXPECT_EQ(g, "int");
  ASSERT_TRUE(cache.find("{\"type\":\"string\"}", &g));
  EXPECT_EQ(g, "str");
}

TEST(GrammarReuse, PoolPrefersTheSlotHoldingTheGrammarThenOneHoldingNone) {
  SlotPool pool(3, 4);
  const GrammarKey a = grammar_key("root ::= \"a\""), b = grammar_key("root ::= \"b\"");
  pool.set_grammar(0, a);
  pool.set_grammar(2, b);
  SlotPool::Refusal why;
  auto take = [&](GrammarKey k) { return pool.acquire(milliseconds(0), &why, nullptr, milliseconds(50), k); };
  EXPECT_EQ(take(b), std::optional<size_t>(2));  // its grammar
  pool.release(2);
  EXPECT_EQ(take(GrammarKey{}), std::optional<size_t>(1));  // no grammar: the slot holding none
  EXPECT_EQ(take(b), std::optional<size_t>(2));
  // Only slot 0 is free: any free slot rather than none.
  EXPECT_EQ(take(b), std::optional<size_t>(0));
  pool.release(1);
  EXPECT_EQ(take(a), std::optional<size_t>(1));  // a's slot is busy: the one holding none
}

TEST(GrammarReuse, PoolPrefersTheSlotHoldingTheLongestPrefixAfterTheGrammar) {
  SlotPool pool(4, 4);
  const GrammarKey a = grammar_key("root ::= \"a\"");
  pool.set_grammar(3, a);
  const size_t held[] = {10, 700, 40, 900};  // prompt tokens each slot holds
  SlotPool::Refusal why;
  auto take = [&](GrammarKey k) {
    return pool.acquire(milliseconds(0), &why, nullptr, milliseconds(50), k, [&](size_t i) { return held[i]; });
  };
  EXPECT_EQ(take(GrammarKey{}), std::optional<size_t>(1));  // no grammar: the longest prefix of those holding none
  EXPECT_EQ(take(a), std::optional<size_t>(3));             // its grammar first
  EXPECT_EQ(take(GrammarKey{}), std::optional<size_t>(2));
  pool.release(1);
  pool.release(2);
  pool.release(3);
  EXPECT_EQ(take(GrammarKey{}), std::optional<size_t>(1));  // slot 3 holds more, but a grammar
}

TEST(GrammarReuse, WatchdogStopsACompileAtItsDeadline) {
  CompileWatchdog w(milliseconds(10));
  const uint64_t id = w.watch(nullptr, milliseconds(20), nullptr);
  std::this_thread::sleep_for(milliseconds(300));
  EXPECT_EQ(w.unwatch(id), CompileWatchdog::Outcome::TimedOut);
}

TEST(GrammarReuse, WatchdogLeavesACompileThatEndsInTime) {
  CompileWatchdog w(milliseconds(10));
  std::atomic<int> asked{0};
  const uint64_t id = w.watch(nullptr, milliseconds(10000), [&] {
    ++asked;
    return false;
  });
  std::this_thread::sleep_for(milliseconds(100));
  EXPECT_EQ(w.unwatch(id), CompileWatchdog::Outcome::Running);
  EXPECT_GT(asked.load(), 0);  // the client was asked while the compile ran
  const int after = asked.load();
  std::this_thread::sleep_for(milliseconds(50));
  EXPECT_EQ(asked.load(), after);                                  // and never after it returned
  EXPECT_EQ(w.unwatch(12345), CompileWatchdog::Outcome::Running);  // an unknown watch
}

TEST(GrammarReuse, WatchdogStopsACompileWhoseClientLeft) {
  CompileWatchdog w(milliseconds(10));
  std::atomic<bool> gone{false};
  const uint64_t id = w.watch(nullptr, milliseconds(0), [&] { return gone.load(); });  // no time limit
  std::this_thread::sleep_for(milliseconds(50));
  gone = true;
  std::this_thread::sleep_for(milliseconds(200));
  EXPECT_EQ(w.unwatch(id), CompileWatchdog::Outcome::ClientGone);
}

}  // namespace
}  // namespace tern::server
