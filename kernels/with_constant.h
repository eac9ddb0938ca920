// A runtime value among a few as a compile-time constant, for the kernel files' dispatch (token
// tiles, query counts, code widths): each value gets its own instantiation of the loop.
#pragma once

#include <type_traits>

namespace tern {

// f(std::integral_constant<T, V>) for the V among First, Rest... that equals v (the last one
// when none does).
template <typename T, T First, T... Rest, typename F>
inline auto with_constant(T v, F&& f) {
  if constexpr (sizeof...(Rest) == 0) {
    return f(std::integral_constant<T, First>{});
  } else {
    if (v == First) return f(std::integral_constant<T, First>{});
    return with_constant<T, Rest...>(v, f);
  }
}

}  // namespace tern
