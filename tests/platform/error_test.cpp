#include "platform/error.h"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <thread>

namespace tern {
namespace {

TEST(Error, CodesAreGroupedAndUnique) {
  std::set<int32_t> seen;
  std::set<std::string> names;
#define TERN_X(name, cname, value, msg)                                  \
  EXPECT_TRUE(seen.insert(value).second) << "duplicate value " << value; \
  EXPECT_TRUE(names.insert(#name).second);                               \
  EXPECT_STREQ(to_string(Error::name), #name);                           \
  EXPECT_STREQ(default_message(Error::name), msg);                       \
  EXPECT_TRUE(is_known_error_code(value));
  TERN_ERROR_LIST(TERN_X)
#undef TERN_X
  EXPECT_EQ(static_cast<int32_t>(Error::Ok), 0);
  // Families by high nibble.
  EXPECT_EQ(static_cast<int32_t>(Error::BudgetTooSmall) >> 4, 0x1);
  EXPECT_EQ(static_cast<int32_t>(Error::FileNotFound) >> 4, 0x2);
  EXPECT_EQ(static_cast<int32_t>(Error::Truncated) >> 4, 0x3);
  EXPECT_EQ(static_cast<int32_t>(Error::InvalidUtf8) >> 4, 0x4);
  EXPECT_FALSE(is_known_error_code(0x7fff));
  EXPECT_STREQ(to_string(static_cast<Error>(0x7fff)), "Unknown");
}

TEST(Error, FailRecordsMessageAndCode) {
  clear_last_error();
  EXPECT_STREQ(last_error_message(), "");
  const Error e = fail(Error::Truncated, "%s: %d bytes short", "model.tern", 12);
  EXPECT_EQ(e, Error::Truncated);
  EXPECT_EQ(last_error_code(), Error::Truncated);
  EXPECT_STREQ(last_error_message(), "model.tern: 12 bytes short");
}

TEST(Error, LongMessagesAreTruncatedNotOverflowed) {
  std::string big(4000, 'x');
  EXPECT_EQ(fail(Error::Internal, "%s", big.c_str()), Error::Internal);
  const size_t n = std::strlen(last_error_message());
  EXPECT_GT(n, 100u);
  EXPECT_LT(n, 4000u);
}

TEST(Error, LastErrorIsPerThread) {
  EXPECT_EQ(fail(Error::NotFound, "main thread"), Error::NotFound);
  std::string other;
  std::thread t([&] {
    other = last_error_message();
    EXPECT_EQ(fail(Error::IoError, "worker"), Error::IoError);
  });
  t.join();
  EXPECT_EQ(other, "");
  EXPECT_STREQ(last_error_message(), "main thread");
}

Result<int> parse_positive(int v) {
  if (v <= 0) return fail(Error::InvalidArgument, "%d is not positive", v);
  return v;
}

Result<int> twice(int v) {
  TERN_ASSIGN_OR_RETURN(const int x, parse_positive(v));
  return 2 * x;
}

Error check_small(int v) {
  TERN_CHECK_OR_RETURN(v < 10, Error::OutOfRange, "%d too big", v);
  return Error::Ok;
}

Error chain(int v) {
  TERN_RETURN_IF_ERROR(check_small(v));
  return Error::Ok;
}

TEST(Result, ValueAndErrorPropagate) {
  auto ok = twice(21);
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(*ok, 42);
  EXPECT_EQ(ok.error(), Error::Ok);

  auto bad = twice(-1);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error(), Error::InvalidArgument);
  EXPECT_STREQ(last_error_message(), "-1 is not positive");

  EXPECT_EQ(chain(3), Error::Ok);
  EXPECT_EQ(chain(30), Error::OutOfRange);
  EXPECT_STREQ(last_error_message(), "30 too big");
}

TEST(Result, OkIsNotAnError) {
  // Constructing a Result from Error::Ok would claim failure without a cause.
  Result<int> r(Error::Ok);
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.error(), Error::Internal);
}

struct Counted {
  static int live;
  int v;
  explicit Counted(int x) : v(x) { ++live; }
  Counted(Counted&& o) noexcept : v(o.v) { ++live; }
  ~Counted() { --live; }
};
int Counted::live = 0;

TEST(Result, HoldsMoveOnlyTypesAndDestroysThem) {
  {
    Result<std::unique_ptr<int>> r(std::make_unique<int>(7));
    ASSERT_TRUE(r.ok());
    std::unique_ptr<int> p = std::move(r).value();
    EXPECT_EQ(*p, 7);
  }
  {
    Result<Counted> a(Counted(1));
    EXPECT_EQ(Counted::live, 1);
    Result<Counted> b(Error::IoError);
    b = std::move(a);
    EXPECT_TRUE(b.ok());
    EXPECT_EQ(b->v, 1);
  }
  EXPECT_EQ(Counted::live, 0);
}

}  // namespace
}  // namespace tern
