# Debian packages: `cpack --config BUILD/CPackConfig.cmake` makes, for the build's architecture
# (native: amd64; the aarch64 cross build: arm64), one .deb per install component group:
#   libtern0       libtern.so.0 (component runtime), its shlibs file and ldconfig trigger
#   libtern-dev    headers, libtern.so, tern.pc, CMake config (component dev)
#   tern-tools     the command-line tools and their man pages (component tools)
#   tern-server    tern-server, its systemd unit and man page (component server)
#   python3-tern   the ctypes package in /usr/lib/python3/dist-packages (component python3)
#   libtern-java   tern.jar in /usr/share/java (component java; TERN_BUILD_JAVA, native builds)
#   libtern-jni    libtern_jni.so in /usr/lib/<multiarch>/jni (component jni; TERN_BUILD_JAVA)
# Each package also carries its copyright file, changelog.Debian.gz and lintian overrides
# (components deb_<group>, packaged only). packaging/debian/README.md says how to build and
# install them and what lintian reports. dpkg-shlibdeps writes the dependencies from the
# binaries; a cross build points it at the target's runtime packages, unpacked (.ci/deps makes
# .deps/arm64-packages).
set(TERN_DEB_MAINTAINER "Tern developers <tern@tern-project.org>" CACHE STRING "Maintainer field of the .debs")
if(TERN_DEB_MAINTAINER MATCHES "@invalid>$")  # the old default, kept in an existing build's cache
  set(TERN_DEB_MAINTAINER "Tern developers <tern@tern-project.org>" CACHE STRING "Maintainer field of the .debs" FORCE)
endif()
set(TERN_DEB_HOMEPAGE "https://tern-project.org" CACHE STRING "Homepage field of the .debs")
set(tern_deb_dir ${PROJECT_SOURCE_DIR}/packaging/debian)
set(tern_deb_build ${PROJECT_BINARY_DIR}/packaging/debian)
set(tern_deb_version ${PROJECT_VERSION}-1)

# ---- man pages, from each program's --help (Debian's help2man), at build time ----
# A cross build runs the programs under CMAKE_CROSSCOMPILING_EMULATOR (qemu-user); with no
# emulator, or without help2man, the packages go without man pages (lintian then warns).
find_program(TERN_HELP2MAN help2man)
set(tern_man_summary_tern-run "generate text with a Tern bundle")
set(tern_man_summary_tern-bench "measure prefill and decode throughput of a Tern bundle")
set(tern_man_summary_tern-plan "plan a Tern bundle's memory per KV-cache mode")
set(tern_man_summary_tern-embed "embed texts with a Tern embedding bundle")
set(tern_man_summary_tern-info "show the CPU, instruction sets and kernels Tern uses")
set(tern_man_summary_tern-convert "turn a BitNet b1.58 checkpoint into a .tern bundle")
set(tern_man_summary_tern-inspect "print what a .tern bundle holds")
set(tern_man_summary_tern-eval "measure KV-cache mode quality on text")
set(tern_man_summary_tern-tokenize "encode JSON lines with a Tern tokenizer")
set(tern_man_summary_tern-server "OpenAI-compatible HTTP server for Tern bundles")
set(TERN_MAN_PAGES OFF)
if(TERN_HELP2MAN AND (NOT CMAKE_CROSSCOMPILING OR CMAKE_CROSSCOMPILING_EMULATOR))
  set(TERN_MAN_PAGES ON)
  set(tern_man_outputs "")
  foreach(tool tern-run tern-bench tern-plan tern-embed tern-info tern-convert tern-inspect tern-eval tern-tokenize
               tern-server)
    if(NOT TARGET ${tool})
      continue()
    endif()
    set(program $<TARGET_FILE:${tool}>)
    if(CMAKE_CROSSCOMPILING)  # a wrapper of the tool's name, so the page names the tool
      set(program ${tern_deb_build}/emulated/${tool})
      list(JOIN CMAKE_CROSSCOMPILING_EMULATOR "' '" emulator)
      file(GENERATE OUTPUT ${program} CONTENT "#!/bin/sh\nexec '${emulator}' '$<TARGET_FILE:${tool}>' \"$@\"\n"
           FILE_PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE WORLD_READ WORLD_EXECUTE)
    endif()
    set(page ${tern_deb_build}/man/${tool}.1)
    add_custom_command(OUTPUT ${page}.gz
                       COMMAND ${CMAKE_COMMAND} -E env SOURCE_DATE_EPOCH=1795867200 LC_ALL=C.UTF-8
                               ${TERN_HELP2MAN} --no-info --no-discard-stderr --version-string=${PROJECT_VERSION}
                               "--name=${tern_man_summary_${tool}}" --output=${page} ${program}
                       COMMAND gzip -9nf ${page}
                       DEPENDS ${tool} VERBATIM COMMENT "Man page ${tool}.1 (help2man)")
    list(APPEND tern_man_outputs ${page}.gz)
    set(component tools)
    if(tool STREQUAL "tern-server")
      set(component server)
    endif()
    install(FILES ${page}.gz DESTINATION ${CMAKE_INSTALL_MANDIR}/man1 COMPONENT ${component})
  endforeach()
  add_custom_target(tern_man_pages ALL DEPENDS ${tern_man_outputs})
else()
  message(STATUS "Man pages: skipped (needs help2man and, cross-compiling, an emulator)")
endif()

# ---- what only the packages carry, and the Python and Java installs ----
file(MAKE_DIRECTORY ${tern_deb_build})
execute_process(COMMAND gzip -9n -c ${tern_deb_dir}/changelog OUTPUT_FILE ${tern_deb_build}/changelog.Debian.gz
                COMMAND_ERROR_IS_FATAL ANY)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${tern_deb_dir}/changelog)
# libtern0's control files: the shlibs file (apps built against this version need at least it;
# the ABI only grows under one SONAME) and the ldconfig trigger that refreshes ld.so's cache.
file(WRITE ${tern_deb_build}/libtern0/shlibs "libtern ${TERN_SOVERSION} libtern0 (>= ${PROJECT_VERSION})\n")
file(WRITE ${tern_deb_build}/libtern0/triggers "activate-noawait ldconfig\n")

# The ctypes package for the system's python3 (dist-packages; under /usr/local it is on Debian's
# path too). It loads the system's libtern.so.0 when nothing closer is found.
file(GLOB tern_python_sources CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/bindings/python/tern/*.py)
install(FILES ${tern_python_sources} DESTINATION lib/python3/dist-packages/tern COMPONENT python3)

# The jar and the JNI library, once bindings/java has made their targets (later in the top
# directory): Debian's OpenJDK has /usr/lib/<multiarch>/jni on java.library.path.
function(tern_install_java)
  if(TARGET tern_jni)
    install(TARGETS tern_jni LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}/jni COMPONENT jni)
  endif()
  if(TARGET tern_java)  # Debian's Java policy: tern-VERSION.jar, and tern.jar linking to it
    set(jar tern-${PROJECT_VERSION}.jar)
    install(FILES $<TARGET_PROPERTY:tern_java,JAR_FILE> DESTINATION ${CMAKE_INSTALL_DATADIR}/java RENAME ${jar}
            COMPONENT java)
    file(MAKE_DIRECTORY ${tern_deb_build}/java)
    file(CREATE_LINK ${jar} ${tern_deb_build}/java/tern.jar SYMBOLIC)
    install(FILES ${tern_deb_build}/java/tern.jar DESTINATION ${CMAKE_INSTALL_DATADIR}/java COMPONENT java)
  endif()
endfunction()
cmake_language(DEFER DIRECTORY ${PROJECT_SOURCE_DIR} CALL tern_install_java)

# ---- the packages: group -> package name, components, fields ----
set(tern_deb_groups lib dev tools server python)
set(tern_deb_package_lib libtern0)
set(tern_deb_package_dev libtern-dev)
set(tern_deb_package_tools tern-tools)
set(tern_deb_package_server tern-server)
set(tern_deb_package_python python3-tern)
set(tern_deb_package_java libtern-java)
set(tern_deb_package_jni libtern-jni)
set(tern_deb_components_lib runtime)
set(tern_deb_components_dev dev)
set(tern_deb_components_tools tools)
set(tern_deb_components_server server)
set(tern_deb_components_python python3)
set(tern_deb_components_java java)
set(tern_deb_components_jni jni)
if(TERN_BUILD_JAVA)
  list(APPEND tern_deb_groups jni)
  if(NOT CMAKE_CROSSCOMPILING)  # the jar is built on the host
    list(APPEND tern_deb_groups java)
  endif()
endif()

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME tern)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT ${TERN_DEB_MAINTAINER})
set(CPACK_PACKAGE_HOMEPAGE_URL ${TERN_DEB_HOMEPAGE})
# Installed with DESTDIR and the prefix /usr, so files written at install time (the unit) say /usr.
set(CPACK_SET_DESTDIR ON)
set(CPACK_INSTALL_PREFIX /usr)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_GROUPING ONE_PER_GROUP)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_RELEASE 1)
set(CPACK_DEBIAN_COMPRESSION_TYPE xz)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_COMPONENTS_ALL "")
foreach(group IN LISTS tern_deb_groups)
  set(package ${tern_deb_package_${group}})
  string(TOUPPER ${group} G)
  set(CPACK_DEBIAN_${G}_PACKAGE_NAME ${package})
  foreach(component IN LISTS tern_deb_components_${group} ITEMS deb_${group})
    string(TOUPPER ${component} C)
    set(CPACK_COMPONENT_${C}_GROUP ${group})
    list(APPEND CPACK_COMPONENTS_ALL ${component})
  endforeach()
  set(doc ${CMAKE_INSTALL_DATADIR}/doc/${package})
  install(FILES ${tern_deb_dir}/copyright ${tern_deb_build}/changelog.Debian.gz DESTINATION ${doc}
          COMPONENT deb_${group} EXCLUDE_FROM_ALL)
  if(EXISTS ${tern_deb_dir}/${package}.lintian-overrides)
    install(FILES ${tern_deb_dir}/${package}.lintian-overrides DESTINATION ${CMAKE_INSTALL_DATADIR}/lintian/overrides
            RENAME ${package} COMPONENT deb_${group} EXCLUDE_FROM_ALL)
  endif()
endforeach()

# Descriptions: a synopsis, then lines of at most 80 columns.
set(CPACK_DEBIAN_LIB_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_LIB_DESCRIPTION "on-device runtime for BitNet b1.58 language models (library)
Tern runs BitNet b1.58 (ternary) language models on phones, single-board
computers and laptops, within a memory budget, with kernels for AVX2,
AVX-512 and NEON chosen at run time.
.
This package contains the shared library libtern.so.0 (Tern's C API).")
set(CPACK_DEBIAN_LIB_PACKAGE_CONTROL_EXTRA ${tern_deb_build}/libtern0/shlibs ${tern_deb_build}/libtern0/triggers)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_DEV_DESCRIPTION "on-device runtime for BitNet b1.58 language models (development)
Tern runs BitNet b1.58 (ternary) language models on phones, single-board
computers and laptops.
.
This package contains the C headers (/usr/include/tern), libtern.so,
pkg-config's tern.pc and the CMake package (find_package(Tern), target
Tern::tern).")
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS "libtern0 (= ${tern_deb_version})")
set(CPACK_DEBIAN_TOOLS_PACKAGE_SECTION science)
set(tern_host_tools "")
if(TARGET tern-convert)
  set(tern_host_tools ",\ntern-convert (a checkpoint into a .tern bundle), tern-inspect, tern-eval and
tern-tokenize")
endif()
set(CPACK_DEBIAN_TOOLS_DESCRIPTION "command-line tools for the Tern BitNet b1.58 runtime
Tern runs BitNet b1.58 (ternary) language models on phones, single-board
computers and laptops.
.
This package contains tern-run (generate text), tern-plan (memory plan),
tern-bench (throughput), tern-embed (embeddings), tern-info (CPU and
kernels)${tern_host_tools}.")
set(CPACK_DEBIAN_SERVER_PACKAGE_SECTION net)
set(CPACK_DEBIAN_SERVER_DESCRIPTION "OpenAI-compatible HTTP server for Tern BitNet b1.58 models
tern-server serves a .tern bundle over the OpenAI chat and completions
API, with streaming, structured output and several conversations at once.
.
This package contains tern-server and a systemd unit for it
(/usr/share/tern/systemd/tern-server.service, not enabled).")
set(CPACK_DEBIAN_PYTHON_PACKAGE_SECTION python)
set(CPACK_DEBIAN_PYTHON_PACKAGE_ARCHITECTURE all)
set(CPACK_DEBIAN_PYTHON_PACKAGE_DEPENDS "python3, libtern0 (>= ${PROJECT_VERSION})")
set(CPACK_DEBIAN_PYTHON_DESCRIPTION "Python bindings for the Tern BitNet b1.58 runtime
Tern runs BitNet b1.58 (ternary) language models on phones, single-board
computers and laptops.
.
This package contains the Python 3 module tern (ctypes over libtern.so.0).")
set(CPACK_DEBIAN_JNI_PACKAGE_SECTION java)
set(CPACK_DEBIAN_JNI_DESCRIPTION "Java bindings for the Tern BitNet b1.58 runtime (JNI library)
Tern runs BitNet b1.58 (ternary) language models on phones, single-board
computers and laptops.
.
This package contains libtern_jni.so, the native part of the Java binding,
in the folder Debian's OpenJDK loads JNI libraries from.")
set(CPACK_DEBIAN_JAVA_PACKAGE_SECTION java)
set(CPACK_DEBIAN_JAVA_PACKAGE_ARCHITECTURE all)
set(CPACK_DEBIAN_JAVA_PACKAGE_DEPENDS "libtern-jni (>= ${PROJECT_VERSION})")
set(CPACK_DEBIAN_JAVA_DESCRIPTION "Java bindings for the Tern BitNet b1.58 runtime
Tern runs BitNet b1.58 (ternary) language models on phones, single-board
computers and laptops.
.
This package contains tern.jar (package dev.tern) in /usr/share/java.")

# CPack's DEB generator writes postinst/postrm scripts that call ldconfig for every package with
# a library in /usr/lib; libtern0 has the trigger instead, so the scripts are taken out again.
set(CPACK_POST_BUILD_SCRIPTS ${tern_deb_dir}/drop-ldconfig-scripts.cmake)

if(CMAKE_CROSSCOMPILING)
  if(TERN_ARCH_AARCH64)
    set(CPACK_DEBIAN_PACKAGE_ARCHITECTURE arm64)
  elseif(TERN_ARCH_X86_64)
    set(CPACK_DEBIAN_PACKAGE_ARCHITECTURE amd64)
  endif()
  set(TERN_DEB_TARGET_PACKAGES "${PROJECT_SOURCE_DIR}/.deps/${CPACK_DEBIAN_PACKAGE_ARCHITECTURE}-packages" CACHE PATH
      "The target's runtime library packages, each unpacked with dpkg-deb -R (for dpkg-shlibdeps)")
  file(GLOB CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS LIST_DIRECTORIES ON
       "${TERN_DEB_TARGET_PACKAGES}/*/usr/${CMAKE_INSTALL_LIBDIR}" "${TERN_DEB_TARGET_PACKAGES}/*/${CMAKE_INSTALL_LIBDIR}")
endif()
include(CPack)
