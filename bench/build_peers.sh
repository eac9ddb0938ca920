#!/usr/bin/env bash
# Builds the peers bench/peers.sh compares against, outside the repository, each in the
# strongest configuration it offers for this CPU (ISA "native") or capped at AVX2 (ISA "avx2":
# no AVX-512, no AVX-VNNI, what a Zen 3 runs). Only llama-bench and llama-quantize are built.
#
# usage: bench/build_peers.sh PEERS [ISA...]
#   PEERS  folder holding the peers' source trees (docs/perf/peers.md says where each came from):
#            PEERS/llama.cpp      ggml-org/llama.cpp
#            PEERS/bitnet         microsoft/BitNet (src/, include/gemm-config.h: the 2026 I2_S kernels)
#                                 with 3rdparty/llama.cpp taken from ygqdan/BitNet-linux
#            PEERS/ik_llama.cpp   ikawrakow/ik_llama.cpp
#   ISA    native and/or avx2 (default: both)
# Each peer lands in PEERS/<peer>/build-<ISA>/bin; a peer whose tree is missing is skipped.
# environment: JOBS (default 2)
set -euo pipefail

if [ $# -lt 1 ]; then
  sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
  exit 2
fi
PEERS=$(realpath "$1")
shift
ISAS=${*:-native avx2}
JOBS=${JOBS:-2}

isa_flags() {  # ISA PEER
  case $1 in
    native) echo "-DGGML_NATIVE=ON" ;;
    avx2)
      local vnni=-DGGML_AVX_VNNI=OFF
      [ "$2" = ik_llama.cpp ] && vnni=-DGGML_AVXVNNI=OFF
      echo "-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON $vnni" \
           "-DGGML_AVX512=OFF -DGGML_AVX512_VBMI=OFF -DGGML_AVX512_VNNI=OFF -DGGML_AVX512_BF16=OFF" ;;
    *) echo "unknown ISA $1 (native, avx2)" >&2; exit 2 ;;
  esac
}

build() {  # PEER ISA EXTRA_CMAKE_ARGS...
  local peer=$1 isa=$2
  shift 2
  local src=$PEERS/$peer
  if [ ! -f "$src/CMakeLists.txt" ]; then
    echo "skipping $peer: no tree at $src" >&2
    return
  fi
  echo "== $peer ($isa)" >&2
  # shellcheck disable=SC2046
  cmake -S "$src" -B "$src/build-$isa" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
    $(isa_flags "$isa" "$peer") "$@" > "$src/build-$isa.configure.log"
  cmake --build "$src/build-$isa" -j "$JOBS" --target llama-bench llama-quantize
}

for isa in $ISAS; do
  # llama.cpp as upstream ships it (tq2_0 / tq1_0 are its BitNet types).
  build llama.cpp "$isa" -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF \
    -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF

  # bitnet.cpp as its setup_env.py builds it for x86 (clang, TL2 off: the I2_S kernels of src/
  # with gemm-config.h's activation-parallel tiles). The vendored llama.cpp lacks the script that
  # fills common/build-info.cpp.in; this stands in for it.
  if [ -d "$PEERS/bitnet/3rdparty/llama.cpp/common" ] &&
     [ ! -f "$PEERS/bitnet/3rdparty/llama.cpp/common/cmake/build-info-gen-cpp.cmake" ]; then
    mkdir -p "$PEERS/bitnet/3rdparty/llama.cpp/common/cmake"
    cat > "$PEERS/bitnet/3rdparty/llama.cpp/common/cmake/build-info-gen-cpp.cmake" <<'EOF'
set(BUILD_NUMBER 0)
set(BUILD_COMMIT "microsoft/BitNet src + ygqdan/BitNet-linux llama.cpp")
set(BUILD_COMPILER "${CMAKE_C_COMPILER_ID} ${CMAKE_C_COMPILER_VERSION}")
set(BUILD_TARGET "x86_64")
configure_file(common/build-info.cpp.in common/build-info.cpp @ONLY)
EOF
  fi
  build bitnet "$isa" -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DBITNET_X86_TL2=OFF -DLLAMA_BUILD_EXAMPLES=ON \
    -DLLAMA_BUILD_SERVER=OFF -DLLAMA_CURL=OFF

  # ik_llama.cpp with its own BitNet types (IQ2_BN, IQ1_BN); FlashAttention kernels for the
  # default KV types only, as the issue asks, to keep the build short.
  build ik_llama.cpp "$isa" -DGGML_IQK_FA_ALL_QUANTS=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF \
    -DLLAMA_CURL=OFF
done
