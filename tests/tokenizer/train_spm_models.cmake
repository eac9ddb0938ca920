# cmake -DSPM_TRAIN=... -DSOURCE=... -DOUT=... -P train_spm_models.cmake
# Trains the SentencePiece models tokenizer_spm_reference_test checks Tern against
# libsentencepiece with: Debian's spm_train on the repository's public-domain text, one per
# algorithm and unknown-character rule. Identity normalization (as LLaMA-2's model): Tern
# refuses the character-map normalizers. One thread and a fixed seed, so a model is the same
# on every run.
if(NOT SPM_TRAIN OR NOT EXISTS "${SPM_TRAIN}")
  message(FATAL_ERROR "spm_train not found (Debian package sentencepiece: .ci/deps installs it)")
endif()
set(corpus "${SOURCE}/tests/data/corpus/austen-head.txt,${SOURCE}/tests/data/corpus/sotu-tail.txt")
file(MAKE_DIRECTORY "${OUT}")
# name | options
set(models
  "bpe-bytes|--model_type=bpe --byte_fallback=true --remove_extra_whitespaces=false --split_digits=true"
  "unigram|--model_type=unigram"
  "unigram-bytes|--model_type=unigram --byte_fallback=true --remove_extra_whitespaces=false")
foreach(entry ${models})
  string(REPLACE "|" ";" parts "${entry}")
  list(GET parts 0 name)
  list(GET parts 1 options)
  separate_arguments(options UNIX_COMMAND "${options}")
  if(EXISTS "${OUT}/${name}.model" AND NOT "${SPM_TRAIN}" IS_NEWER_THAN "${OUT}/${name}.model")
    continue()
  endif()
  execute_process(COMMAND "${SPM_TRAIN}" --input=${corpus} --model_prefix=${OUT}/${name}.partial --vocab_size=1000
                          --character_coverage=1.0 --normalization_rule_name=identity --num_threads=1
                          --random_seed=7 --minloglevel=2 ${options}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "spm_train ${name} failed (${rc}): ${err}")
  endif()
  file(RENAME "${OUT}/${name}.partial.model" "${OUT}/${name}.model")
  file(REMOVE "${OUT}/${name}.partial.vocab")
endforeach()
message("SentencePiece models trained in ${OUT}")
