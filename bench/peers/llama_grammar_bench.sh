#!/usr/bin/env bash
# Builds bench/peers/llama_grammar_bench.cpp (llama.cpp's decode speed with common_sampler,
# unconstrained and under GBNF grammars; docs/perf/2026-11-26-structured-output.md) outside
# the repository, against a llama.cpp source tree and a CMake build of it with the common
# library (LLAMA_BUILD_COMMON=ON, the default). Static libraries are used when the build has
# them (BUILD_SHARED_LIBS=OFF), else the shared ones with an rpath. Not part of CI.
#
# usage: bench/peers/llama_grammar_bench.sh LLAMA_SRC LLAMA_BUILD OUT
#   LLAMA_SRC    llama.cpp checkout (include/, common/, ggml/include/)
#   LLAMA_BUILD  its build folder
#   OUT          the executable to write (outside the repository)
set -euo pipefail

if [ $# -ne 3 ]; then
  sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
  exit 2
fi
SRC=$(realpath "$1")
BUILD=$(realpath "$2")
OUT=$3
REPO=$(cd "$(dirname "$0")/../.." && pwd)
CXX=${CXX:-g++}

if [ -f "$BUILD/common/libllama-common.a" ] && [ -f "$BUILD/src/libllama.a" ]; then
  libs=("$BUILD/common/libllama-common.a")
  [ -f "$BUILD/common/libllama-common-base.a" ] && libs+=("$BUILD/common/libllama-common-base.a")
  libs+=("$BUILD/src/libllama.a" "$BUILD/ggml/src/libggml.a" "$BUILD/ggml/src/libggml-cpu.a"
         "$BUILD/ggml/src/libggml-base.a")
  link=(-Wl,--start-group "${libs[@]}" -Wl,--end-group)
else
  common=$(find "$BUILD" -name 'libllama-common.so' -o -name 'libllama-common.a' | head -1)
  [ -n "$common" ] || { echo "no common library in $BUILD (build its llama-common target)" >&2; exit 1; }
  link=("$common" -L"$BUILD/bin" -lllama -lggml -lggml-cpu -lggml-base -Wl,-rpath,"$BUILD/bin")
fi
"$CXX" -std=c++17 -O2 -DNDEBUG -I"$REPO" -I"$SRC/include" -I"$SRC/common" -I"$SRC/ggml/include" -I"$SRC/vendor" \
  "$REPO/bench/peers/llama_grammar_bench.cpp" -o "$OUT" "${link[@]}" -fopenmp -lpthread -ldl
echo "$OUT"
