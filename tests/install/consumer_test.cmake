# cmake -DBUILD=... -DSOURCE=... -DWORK=... -DBUNDLE=... -DLIBDIR=lib/<multiarch> -DCC=...
#       -DREADELF=... [-DTOOLCHAIN=... -DEMULATOR=...] -P consumer_test.cmake
# Installs the build as a device would (components runtime + dev) and whole, then builds
# examples/generate.c against the installed prefix twice, as an app would: with
# find_package(Tern CONFIG) and with pkg-config. Both must link libtern.so.0 from the prefix and
# print what the installed tern-run prints. Cross builds do all of it for the target (the
# consumer built with the same toolchain file, everything run under the emulator).
foreach(var BUILD SOURCE WORK BUNDLE LIBDIR CC READELF)
  if(NOT ${var})
    message(FATAL_ERROR "consumer_test.cmake: -D${var}= is required")
  endif()
endforeach()
if(NOT EXISTS "${BUNDLE}")
  message(FATAL_ERROR "${BUNDLE} is missing (ctest's runtime_make_bundles converts it)")
endif()
file(REMOVE_RECURSE "${WORK}")

function(run)  # run(COMMAND...): fails the test with the output unless it exits 0
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    string(REPLACE ";" " " cmd "${ARGN}")
    message(FATAL_ERROR "${cmd}: exit ${rc}\n${out}\n${err}")
  endif()
  set(run_output "${out}" PARENT_SCOPE)
endfunction()

function(expect_files root expected what)
  file(GLOB_RECURSE found LIST_DIRECTORIES OFF RELATIVE "${root}" "${root}/*")
  list(SORT found)
  list(SORT expected)
  if(NOT found STREQUAL expected)
    string(REPLACE ";" "\n  " found "${found}")
    string(REPLACE ";" "\n  " expected "${expected}")
    message(FATAL_ERROR "${what} installed\n  ${found}\nexpected\n  ${expected}")
  endif()
endfunction()

# A device or app build: the library and what compiles against it, nothing else.
set(device "${WORK}/device")
foreach(component runtime dev)
  run(${CMAKE_COMMAND} --install "${BUILD}" --prefix "${device}" --component ${component})
endforeach()
expect_files("${device}" "${LIBDIR}/libtern.so;${LIBDIR}/libtern.so.0;${LIBDIR}/libtern.so.0.1.0;\
include/tern/tern.h;include/tern/tern_error_codes.h;include/tern/module.modulemap;${LIBDIR}/pkgconfig/tern.pc;\
${LIBDIR}/cmake/Tern/TernConfig.cmake;${LIBDIR}/cmake/Tern/TernConfigVersion.cmake;\
${LIBDIR}/cmake/Tern/TernTargets.cmake;${LIBDIR}/cmake/Tern/TernTargets-release.cmake" "--component runtime + dev")

# Everything a plain `cmake --install` installs, into another prefix.
set(prefix "${WORK}/prefix")
run(${CMAKE_COMMAND} --install "${BUILD}" --prefix "${prefix}")
foreach(file bin/tern-run bin/tern-plan bin/tern-info bin/tern-server share/tern/systemd/tern-server.service
             ${LIBDIR}/libtern.so.0 include/tern/tern.h)
  if(NOT EXISTS "${prefix}/${file}")
    message(FATAL_ERROR "cmake --install --prefix ${prefix} did not install ${file}")
  endif()
endforeach()
file(STRINGS "${prefix}/share/tern/systemd/tern-server.service" exec REGEX "^ExecStart=")
if(NOT exec MATCHES "^ExecStart=${prefix}/bin/tern-server ")
  message(FATAL_ERROR "the installed unit does not start the installed tern-server: ${exec}")
endif()

# The emulator, with the prefix's library folder added to the target's library path.
set(emulator "")
if(EMULATOR)
  string(REPLACE "LD_LIBRARY_PATH=" "LD_LIBRARY_PATH=${prefix}/${LIBDIR}:" emulator "${EMULATOR}")
endif()

# 1. CMake: find_package(Tern 0.1 CONFIG REQUIRED) -> Tern::tern.
set(cmake_args -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=${prefix}
               -DTERN_EXAMPLE=${SOURCE}/examples/generate.c)
if(TOOLCHAIN)  # cross: the prefix is a staging root the toolchain searches, as a sysroot would be
  file(WRITE "${WORK}/toolchain.cmake" "include(\"${TOOLCHAIN}\")\nlist(APPEND CMAKE_FIND_ROOT_PATH \"${prefix}\")\n")
  list(APPEND cmake_args -DCMAKE_TOOLCHAIN_FILE=${WORK}/toolchain.cmake)
endif()
run(${CMAKE_COMMAND} -S "${SOURCE}/tests/install/consumer" -B "${WORK}/cmake-consumer" ${cmake_args})
run(${CMAKE_COMMAND} --build "${WORK}/cmake-consumer")
file(STRINGS "${WORK}/cmake-consumer/tern-target.txt" target)
list(GET target 1 location)
list(GET target 2 includes)
if(NOT location MATCHES "^${prefix}/${LIBDIR}/libtern\\.so" OR NOT includes STREQUAL "${prefix}/include/tern")
  message(FATAL_ERROR "Tern::tern is not the installed library: ${target}")
endif()

# 2. pkg-config: the compiler line an app's Makefile would write.
if(TOOLCHAIN)
  set(ENV{PKG_CONFIG_LIBDIR} "${prefix}/${LIBDIR}/pkgconfig")
  set(ENV{PKG_CONFIG_SYSROOT_DIR} "")
else()
  set(ENV{PKG_CONFIG_PATH} "${prefix}/${LIBDIR}/pkgconfig")
endif()
# tern.pc is relocatable: it names the prefix relative to its own folder, never the install path.
file(STRINGS "${prefix}/${LIBDIR}/pkgconfig/tern.pc" pc_prefix REGEX "^prefix=")
if(NOT pc_prefix MATCHES "^prefix=\\\${pcfiledir}(/\\.\\.)+$")
  message(FATAL_ERROR "tern.pc: ${pc_prefix} (expected \${pcfiledir}/.. up to the prefix)")
endif()
run(pkg-config --variable=includedir tern)
string(STRIP "${run_output}" includedir)
file(REAL_PATH "${includedir}" includedir)
if(NOT includedir STREQUAL "${prefix}/include/tern")
  message(FATAL_ERROR "pkg-config tern: includedir ${includedir}, installed into ${prefix}/include/tern")
endif()
run(pkg-config --cflags --libs tern)
separate_arguments(flags UNIX_COMMAND "${run_output}")
run(${CC} -std=c99 -O2 "${SOURCE}/examples/generate.c" ${flags} ${LINK_FLAGS} -o "${WORK}/pkgconfig-generate")

# Both link libtern.so.0 (not a static copy) and print what the installed tern-run prints.
set(prompt "It is a truth universally acknowledged")
execute_process(COMMAND ${emulator} "${prefix}/bin/tern-run" "${BUNDLE}" -p "${prompt}" -n 48 --temp 0
                        --memory-budget 64M
                RESULT_VARIABLE rc OUTPUT_VARIABLE expected ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "installed tern-run: exit ${rc}\n${err}")
endif()
string(LENGTH "${prompt}\n" prompt_length)
string(LENGTH "${expected}" expected_length)
if(NOT expected_length GREATER prompt_length)
  message(FATAL_ERROR "the installed tern-run generated nothing: '${expected}'")
endif()
foreach(consumer cmake-consumer/generate pkgconfig-generate)
  run(${READELF} -d "${WORK}/${consumer}")
  if(NOT run_output MATCHES "NEEDED[^\n]*\\[libtern\\.so\\.0\\]")
    message(FATAL_ERROR "${consumer} does not link libtern.so.0:\n${run_output}")
  endif()
  set(command ${emulator} "${WORK}/${consumer}")
  if(NOT EMULATOR AND consumer STREQUAL "pkgconfig-generate")  # the CMake one has the prefix in its RUNPATH
    set(command ${CMAKE_COMMAND} -E env "LD_LIBRARY_PATH=${prefix}/${LIBDIR}" "${WORK}/${consumer}")
  endif()
  execute_process(COMMAND ${command} "${BUNDLE}" "${prompt}" 48 64M
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0 OR NOT out STREQUAL expected)
    message(FATAL_ERROR "${consumer} (exit ${rc}) printed\n${out}\n${err}\nthe installed tern-run printed\n${expected}")
  endif()
  message("${consumer}: the installed tern-run's text")
endforeach()
message("${expected}")
