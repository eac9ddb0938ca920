# cmake -DEXAMPLE=... -DRUN=... -DBUNDLE=... [-DEMULATOR=...] -P example_generate_test.cmake
# examples/generate.c and tern-run, same bundle, prompt and greedy length: same stdout.
if(NOT EXISTS "${BUNDLE}")
  message(FATAL_ERROR "${BUNDLE} is missing (ctest's runtime_make_bundles converts it)")
endif()
set(prompt "It is a truth universally acknowledged")
execute_process(COMMAND ${EMULATOR} "${EXAMPLE}" "${BUNDLE}" "${prompt}" 48 64M
                OUTPUT_VARIABLE example_out ERROR_VARIABLE example_err RESULT_VARIABLE example_rc)
execute_process(COMMAND ${EMULATOR} "${RUN}" "${BUNDLE}" -p "${prompt}" -n 48 --temp 0 --memory-budget 64M
                OUTPUT_VARIABLE run_out ERROR_VARIABLE run_err RESULT_VARIABLE run_rc)
if(NOT example_rc EQUAL 0 OR NOT run_rc EQUAL 0)
  message(FATAL_ERROR "example rc ${example_rc}: ${example_err}\ntern-run rc ${run_rc}: ${run_err}")
endif()
string(LENGTH "${prompt}" prompt_length)
string(LENGTH "${example_out}" out_length)
if(NOT out_length GREATER prompt_length)
  message(FATAL_ERROR "the example generated nothing: '${example_out}'")
endif()
if(NOT example_out STREQUAL run_out)
  message(FATAL_ERROR "examples/generate.c printed\n${example_out}\ntern-run printed\n${run_out}")
endif()
message("same text: ${example_out}")
