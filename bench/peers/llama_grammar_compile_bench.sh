#!/usr/bin/env bash
# Builds bench/peers/llama_grammar_compile_bench.cpp (llama.cpp's grammar sampler: init time and
# per-token apply time on a vocabulary alone; docs/perf/2026-11-28-grammar-compile.md) outside
# the repository, against a llama.cpp source tree and a CMake build of it with static
# libraries (BUILD_SHARED_LIBS=OFF; only the `llama` target is needed, not the common
# library). Not part of CI.
#
# usage: bench/peers/llama_grammar_compile_bench.sh LLAMA_SRC LLAMA_BUILD OUT
#   LLAMA_SRC    llama.cpp source tree (include/, ggml/include/)
#   LLAMA_BUILD  its build folder (src/libllama.a, ggml/src/libggml*.a)
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

libs=("$BUILD/src/libllama.a" "$BUILD/ggml/src/libggml.a" "$BUILD/ggml/src/libggml-cpu.a"
      "$BUILD/ggml/src/libggml-base.a")
for lib in "${libs[@]}"; do
  [ -f "$lib" ] || { echo "$lib is missing (build llama.cpp's llama target with BUILD_SHARED_LIBS=OFF)" >&2; exit 1; }
done
omp=()
grep -q '^GGML_OPENMP:BOOL=ON' "$BUILD/CMakeCache.txt" && omp=(-fopenmp)
"$CXX" -std=c++17 -O2 -DNDEBUG -I"$SRC/include" -I"$SRC/ggml/include" \
  "$REPO/bench/peers/llama_grammar_compile_bench.cpp" -o "$OUT" -Wl,--start-group "${libs[@]}" -Wl,--end-group \
  "${omp[@]}" -lpthread -ldl
echo "$OUT"
