# cmake -DINCLUDE=include -DCC=gcc -DCLANG=clang -DWORK=dir -P public_header_test.cmake
# The public header on its own: plain C99 and C11 with -pedantic (GCC and clang), nothing
# included from outside include/, and the module map importable (Swift's `import
# Tern`, checked as Objective-C's `@import Tern` since this host has no Swift compiler).
file(MAKE_DIRECTORY "${WORK}")
file(STRINGS "${INCLUDE}/tern.h" includes REGEX "^#include")
foreach(line ${includes})
  if(NOT line MATCHES "^#include (<stddef.h>|<stdint.h>|\"tern_error_codes.h\")$")
    message(FATAL_ERROR "tern.h includes something outside its folder or the C library: ${line}")
  endif()
endforeach()
file(WRITE "${WORK}/use.c" "#include \"tern.h\"\nint main(void) {\n  tern_model_params p = tern_model_default_params();\n  return p.n_batch == 0;\n}\n")
foreach(compiler ${CC} ${CLANG})
  foreach(std c99 c11)
    execute_process(COMMAND ${compiler} -fsyntax-only -std=${std} -pedantic -Wall -Wextra -Werror -I "${INCLUDE}"
                            "${WORK}/use.c" RESULT_VARIABLE rc ERROR_VARIABLE err)
    if(NOT rc EQUAL 0)
      message(FATAL_ERROR "tern.h as ${std} with ${compiler}: ${err}")
    endif()
  endforeach()
endforeach()
# C++ apps copy the params struct: no warning for the deprecated field with either compiler.
# And the deprecation works where it is meant to: setting kv_type from C is reported.
file(WRITE "${WORK}/use.cpp" "#include \"tern.h\"\nint main() {\n  tern_model_params p = tern_model_default_params();\n  tern_model_params q = p;\n  q.kv_mode = \"q4\";\n  return q.n_batch == 0;\n}\n")
foreach(compiler ${CXX} ${CLANG}++)
  if(compiler STREQUAL "++")
    continue()
  endif()
  execute_process(COMMAND ${compiler} -fsyntax-only -std=c++17 -Wall -Wextra -Werror -I "${INCLUDE}" "${WORK}/use.cpp"
                  RESULT_VARIABLE rc ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "tern.h in C++ with ${compiler}: ${err}")
  endif()
endforeach()
file(WRITE "${WORK}/deprecated.c" "#include \"tern.h\"\nint main(void) {\n  tern_model_params p = tern_model_default_params();\n  p.kv_type = TERN_KV_F16;\n  return p.n_batch == 0;\n}\n")
execute_process(COMMAND ${CC} -fsyntax-only -std=c11 -Werror=deprecated-declarations -I "${INCLUDE}" "${WORK}/deprecated.c"
                RESULT_VARIABLE rc ERROR_VARIABLE err)
if(rc EQUAL 0 OR NOT err MATCHES "kv_mode")
  message(FATAL_ERROR "setting the deprecated kv_type from C was not reported with its replacement: ${err}")
endif()
if(CLANG)
  file(WRITE "${WORK}/use.m" "@import Tern;\nint main(void) { tern_model_params p = tern_model_default_params(); return p.n_batch == 0; }\n")
  execute_process(COMMAND ${CLANG} -fsyntax-only -x objective-c -fmodules "-fmodules-cache-path=${WORK}/modules"
                          -I "${INCLUDE}" "${WORK}/use.m" RESULT_VARIABLE rc ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "module.modulemap: @import Tern failed: ${err}")
  endif()
  message("C99 and C11 (-pedantic) with ${CC} and ${CLANG}; @import Tern through module.modulemap")
else()
  message("C99 and C11 (-pedantic) with ${CC}; no clang here, so the module map was not checked")
endif()
