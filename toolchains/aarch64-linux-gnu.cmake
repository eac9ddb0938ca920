# Cross-compile for 64-bit Arm Linux (Raspberry Pi OS 64-bit, Debian/Ubuntu arm64) with
# Debian's g++-aarch64-linux-gnu. Libraries come from arm64 .debs extracted into a private
# root (TERN_ARM64_ROOT; `.ci/arm64-root` makes one), since Debian cannot co-install the
# arm64 and amd64 XNNPACK/cpuinfo/pthreadpool packages.
#
# Tests run under qemu-aarch64: `ctest` uses CMAKE_CROSSCOMPILING_EMULATOR, and
# QEMU_CPU (cortex-a72, cortex-a76, max) picks the emulated CPU.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)

set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)

if(NOT TERN_ARM64_ROOT)
  if(DEFINED ENV{TERN_ARM64_ROOT})
    set(TERN_ARM64_ROOT "$ENV{TERN_ARM64_ROOT}")
  else()
    get_filename_component(TERN_ARM64_ROOT "${CMAKE_CURRENT_LIST_DIR}/../.deps/arm64-root" ABSOLUTE)
  endif()
endif()
set(TERN_ARM64_ROOT "${TERN_ARM64_ROOT}" CACHE PATH "Root with extracted arm64 packages")
# try_compile projects re-read this file; pass the root on to them.
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES TERN_ARM64_ROOT)

set(CMAKE_FIND_ROOT_PATH "${TERN_ARM64_ROOT}" /usr/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)   # flatc runs on the host
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

set(ENV{PKG_CONFIG_LIBDIR} "${TERN_ARM64_ROOT}/usr/lib/aarch64-linux-gnu/pkgconfig")
set(ENV{PKG_CONFIG_SYSROOT_DIR} "${TERN_ARM64_ROOT}")

# Multiarch headers of the extracted packages (OpenSSL's opensslconf.h, for cpp-httplib).
set(CMAKE_C_FLAGS_INIT "-isystem ${TERN_ARM64_ROOT}/usr/include/aarch64-linux-gnu")
set(CMAKE_CXX_FLAGS_INIT "-isystem ${TERN_ARM64_ROOT}/usr/include/aarch64-linux-gnu")

# The extracted shared libraries depend on each other (XNNPACK -> cpuinfo, pthreadpool).
# Some (zlib) are in /lib rather than /usr/lib.
set(TERN_ARM64_LIBDIR "${TERN_ARM64_ROOT}/usr/lib/aarch64-linux-gnu")
set(TERN_ARM64_LIBDIRS "${TERN_ARM64_LIBDIR}:${TERN_ARM64_ROOT}/lib/aarch64-linux-gnu")
set(CMAKE_EXE_LINKER_FLAGS_INIT "-Wl,-rpath-link,${TERN_ARM64_LIBDIRS}")
set(CMAKE_SHARED_LINKER_FLAGS_INIT "-Wl,-rpath-link,${TERN_ARM64_LIBDIRS}")

find_program(TERN_QEMU_AARCH64 qemu-aarch64)
if(TERN_QEMU_AARCH64)
  set(CMAKE_CROSSCOMPILING_EMULATOR
      "${TERN_QEMU_AARCH64};-L;/usr/aarch64-linux-gnu;-E;LD_LIBRARY_PATH=${TERN_ARM64_LIBDIRS}")
endif()
