# CPACK_POST_BUILD_SCRIPTS (cmake/TernPackages.cmake): CPack's DEB generator adds postinst and
# postrm scripts calling ldconfig to every package with a library in /usr/lib. Debian packages
# use dpkg's ldconfig trigger instead (libtern0's control `triggers` file), so those two scripts
# are dropped from each .deb that has a triggers file, and the .deb is packed again.
foreach(deb IN LISTS CPACK_PACKAGE_FILES)
  if(NOT deb MATCHES "\\.deb$")
    continue()
  endif()
  set(dir "${deb}.unpacked")
  file(REMOVE_RECURSE "${dir}")
  execute_process(COMMAND dpkg-deb --raw-extract "${deb}" "${dir}" COMMAND_ERROR_IS_FATAL ANY)
  if(EXISTS "${dir}/DEBIAN/triggers")
    foreach(script postinst postrm)
      if(NOT EXISTS "${dir}/DEBIAN/${script}")
        continue()
      endif()
      file(STRINGS "${dir}/DEBIAN/${script}" lines)
      list(FILTER lines EXCLUDE REGEX "^(#!/bin/sh|set -e|if \\[ \"\\$1\" = \"(configure|remove)\" \\]; then|fi|[ \t]*ldconfig|)$")
      if(lines)
        message(FATAL_ERROR "${deb}: ${script} does more than call ldconfig: ${lines}")
      endif()
      file(REMOVE "${dir}/DEBIAN/${script}")
    endforeach()
    execute_process(COMMAND dpkg-deb --root-owner-group -Zxz --build "${dir}" "${deb}" OUTPUT_QUIET
                    COMMAND_ERROR_IS_FATAL ANY)
  endif()
  file(REMOVE_RECURSE "${dir}")
endforeach()
