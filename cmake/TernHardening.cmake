# Hardening: what Debian's dpkg-buildflags gives a package built with hardening=+all (Debian 12):
# -fstack-protector-strong, -D_FORTIFY_SOURCE=2, -Wformat -Werror=format-security, and the links
# with -z relro -z now, executables as PIE. On for every Linux build that can make packages;
# off under the sanitizers (their runtime replaces the checked functions) and for Android (the
# NDK's clang has its own defaults). The kernels' hot loops hold no arrays on the stack and call
# no fortified functions, so the generated code there is the same (packaging/debian/README.md
# gives tern-bench before and after).
option(TERN_HARDENING "Build with Debian's hardening flags (dpkg-buildflags, hardening=+all)" ON)
if(NOT TERN_HARDENING OR TERN_SANITIZE OR TERN_SANITIZE_THREAD OR ANDROID OR NOT CMAKE_SYSTEM_NAME STREQUAL "Linux")
  return()
endif()
# _FORTIFY_SOURCE needs optimisation (glibc's #warning would be an error under -Werror), so the
# Debug build goes without; -U first, as a toolchain that defines it already would warn.
add_compile_options(-fstack-protector-strong -Wformat -Werror=format-security
                    "$<$<NOT:$<CONFIG:Debug>>:-U_FORTIFY_SOURCE;-D_FORTIFY_SOURCE=2>")
add_link_options(-Wl,-z,relro -Wl,-z,now)
# PIE executables (CMAKE_POSITION_INDEPENDENT_CODE is on; CMP0083 is NEW since CMake 3.14):
# CMake links them with -pie once check_pie_supported() says the toolchain can.
include(CheckPIESupported)
check_pie_supported(LANGUAGES C CXX)
