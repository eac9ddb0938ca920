# Converts the shared models the runtime tests need into OUT with the native converter
# CONVERT. Run as a CTest fixture: cmake -DCONVERT=... -DSHARED=... -DSOURCE=... -DOUT=... -P make_bundles.cmake
# A model whose source is absent is skipped (the tests then skip, or fail under CI).
file(MAKE_DIRECTORY "${OUT}")
# tiny-austen-calibrated carries a calibrated KV profile (adaptive:B modes, the planner's rows).
# bitllama2c keeps f32 embeddings: they are also its classifier, and f16 rounding moves
# its logits enough to flip the reference text's 0.021-gap decision.
# The -base3 bundles are the same models packed 5 weights per byte (t3_interleaved16).
set(models
  "bitllama2c-3M.tern|models/bitllama2c-3M/bit_model.bin|--embed,f32"
  "bitllama2c-1M.tern|models/bitllama2c-1M/bit_model.bin|--embed,f32"
  "tiny-austen-bf16.tern|models/tiny-austen/bf16"
  "tiny-austen-packed.tern|models/tiny-austen/packed"
  "tiny-austen-base3.tern|models/tiny-austen/packed|--ternary-packing,base3"
  "bitllama2c-3M-base3.tern|models/bitllama2c-3M/bit_model.bin|--embed,f32,--ternary-packing,base3"
  "tiny-austen-calibrated.tern|models/tiny-austen/packed|--calibrate=${SHARED}/corpus/austen_all.txt"
  "tiny-f16.tern|models/synthetic-tiny-gguf/tiny-f16.gguf"
  "tiny-tq2_0.tern|models/synthetic-tiny-gguf/tiny-tq2_0.gguf"
  "tiny-tq1_0.tern|models/synthetic-tiny-gguf/tiny-tq1_0.gguf"
  "tiny-i2_s.tern|models/synthetic-tiny-gguf/tiny-b158-i2_s.gguf"
  "tiny-austen-2b4t-chat.tern|models/tiny-austen/packed|--chat-template,${SOURCE}/tests/runtime/data/bitnet-2b4t.chat_template.jinja"
  "tiny-llama3.tern|tokenizers/llama3/tokenizer.json|--synthetic,tiny,--embed,q4,--tokenizer")
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
  if(NOT EXISTS "${SHARED}/${source}")
    message(STATUS "skip ${name}: ${SHARED}/${source} not present")
    continue()
  endif()
  # Up to date: newer than its source and the converter.
  if(EXISTS "${OUT}/${name}" AND NOT "${SHARED}/${source}" IS_NEWER_THAN "${OUT}/${name}"
     AND NOT "${CONVERT}" IS_NEWER_THAN "${OUT}/${name}")
    continue()
  endif()
  # Write beside and rename: a test (or a cross build's emulated test) may have the old
  # bundle mapped, and truncating a mapped file kills it with SIGBUS.
  # "--tokenizer" last in the extra arguments takes the source as its value (synthetic weights).
  list(LENGTH extra n_extra)
  set(input "${SHARED}/${source}")
  if(n_extra GREATER 0)
    list(GET extra -1 last)
    if(last STREQUAL "--tokenizer")
      list(APPEND extra "${SHARED}/${source}")
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
  foreach(side kv-report.md kv-heatmap.png)
    if(EXISTS "${OUT}/${name}.partial.${side}")
      file(RENAME "${OUT}/${name}.partial.${side}" "${OUT}/${name}.${side}")
    endif()
  endforeach()
endforeach()
