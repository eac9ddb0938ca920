# iOS arm64 device build with Xcode's clang (macOS host). Not exercised here; usage:
#   cmake -B build-ios -G Xcode -DCMAKE_TOOLCHAIN_FILE=toolchains/ios-arm64.cmake \
#         -DTERN_BUILD_TESTS=OFF -DTERN_BUILD_CONVERTER=OFF
# then merge per-platform static libraries with `xcodebuild -create-xcframework`.
# Dependencies as for Android: built for the target and found through CMAKE_FIND_ROOT_PATH.
set(CMAKE_SYSTEM_NAME iOS)
set(CMAKE_OSX_ARCHITECTURES arm64 CACHE STRING "")
set(CMAKE_OSX_DEPLOYMENT_TARGET 14.0 CACHE STRING "")
set(CMAKE_XCODE_ATTRIBUTE_ONLY_ACTIVE_ARCH NO)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
