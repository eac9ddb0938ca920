# Cross-compile for 64-bit Arm Linux with clang (what Android's NDK and most Apple / Android
# apps build with) instead of GCC: everything else as aarch64-linux-gnu.cmake (the arm64
# package root, qemu-aarch64 for ctest). Clang targets aarch64-linux-gnu and takes its C/C++
# runtime, headers and linker from Debian's g++-aarch64-linux-gnu.
#
#   cmake -S . -B build/arm64-clang -G Ninja -DCMAKE_TOOLCHAIN_FILE=toolchains/aarch64-clang.cmake \
#     [-DTERN_CLANG=clang-14] -DTERN_BUILD_CONVERTER=OFF ...
#
# TERN_CLANG names the C compiler (default clang-19; clang++ of the same version builds C++).
# The kernels' exactness tests under an emulated core, e.g.:
#   cmake --build build/arm64-clang --target kernels_test
#   QEMU_CPU=cortex-a72 ctest --test-dir build/arm64-clang -R '^kernels_test$'
include("${CMAKE_CURRENT_LIST_DIR}/aarch64-linux-gnu.cmake")

if(NOT TERN_CLANG)
  if(DEFINED ENV{TERN_CLANG})
    set(TERN_CLANG "$ENV{TERN_CLANG}")
  else()
    set(TERN_CLANG clang-19)
  endif()
endif()
set(TERN_CLANG "${TERN_CLANG}" CACHE STRING "clang to cross-compile with (clang-14, clang-19, ...)")
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES TERN_CLANG)
string(REPLACE "clang" "clang++" _tern_clangxx "${TERN_CLANG}")

set(CMAKE_C_COMPILER "${TERN_CLANG}")
set(CMAKE_CXX_COMPILER "${_tern_clangxx}")
set(CMAKE_C_COMPILER_TARGET aarch64-linux-gnu)
set(CMAKE_CXX_COMPILER_TARGET aarch64-linux-gnu)
