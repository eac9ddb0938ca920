# Android arm64-v8a through the NDK's own toolchain file. Not exercised here (no NDK in
# Debian); usage:
#   cmake -B build-android -DCMAKE_TOOLCHAIN_FILE=toolchains/android-arm64.cmake \
#         -DANDROID_NDK=/path/to/ndk -DTERN_BUILD_TESTS=OFF -DTERN_BUILD_CONVERTER=OFF
# XNNPACK, pthreadpool, cpuinfo and FlatBuffers headers must be found for the target, e.g.
# built with the same NDK and listed in CMAKE_FIND_ROOT_PATH; flatc runs on the host.
if(NOT ANDROID_NDK AND DEFINED ENV{ANDROID_NDK})
  set(ANDROID_NDK "$ENV{ANDROID_NDK}")
endif()
if(NOT ANDROID_NDK)
  message(FATAL_ERROR "Set ANDROID_NDK to the NDK root (or the ANDROID_NDK environment variable)")
endif()
set(ANDROID_ABI arm64-v8a CACHE STRING "")
set(ANDROID_PLATFORM android-26 CACHE STRING "")  # AAudio-era minimum; any API >= 21 builds
set(ANDROID_STL c++_static CACHE STRING "")
set(ANDROID_ARM_NEON ON CACHE BOOL "")
include("${ANDROID_NDK}/build/cmake/android.toolchain.cmake")
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
