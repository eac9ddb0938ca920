#!/bin/sh
# Estimates Arm cycles per weight of the one-token (decode) ternary loops with llvm-mca, for
# both compilers (GCC builds the shipped arm64 tree), for both layouts: t2i16 (256 weights per
# 64-byte tile) and base-3 t3i16 (320 weights per tile). kernels/tools/mca_peers.sh puts the
# t2i16 loops beside the peers'.
#   kernels/tools/mca.sh [out_dir]
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:-/tmp/tern-mca}
mkdir -p "$out"
common="-O3 -std=c++17 -fno-exceptions -fno-rtti -I$root"
clang_sys="--target=aarch64-linux-gnu -isystem /usr/aarch64-linux-gnu/include \
  -isystem /usr/aarch64-linux-gnu/include/c++/12 -isystem /usr/aarch64-linux-gnu/include/c++/12/aarch64-linux-gnu"
# layout kernel | multiplies in the loop | weights and weight bytes per loop iteration
# (the t2i16 neon loop runs one 4-row register of a tile per iteration: 8 SMLAL, 64 weights)
for spec in "t2i16 neon 8 64 16" "t2i16 neondot 16 256 64" "t3i16 neon 40 320 64" "t3i16 neondot 20 320 64"; do
  set -- $spec
  layout=$1 kernel=$2 muls=$3 weights=$4 bytes=$5
  flags=""; cpus="cortex-a72 cortex-a76"
  if [ $kernel = neondot ]; then flags="-march=armv8.2-a+dotprod"; cpus="cortex-a76"; fi
  src="$root/kernels/ternary_block_${layout}__$kernel.cpp"
  aarch64-linux-gnu-g++ $common $flags -S "$src" -o "$out/$layout.$kernel.gcc.s"
  # shellcheck disable=SC2086
  clang-14 $clang_sys $common $flags -S "$src" -o "$out/$layout.$kernel.clang.s"
  for cc in gcc clang; do
    if ! python3 "$root/kernels/tools/extract_loop.py" "$out/$layout.$kernel.$cc.s" $muls > "$out/$layout.$kernel.$cc.loop.s"; then
      echo "$layout $kernel $cc: no loop with $muls multiplies found"; continue
    fi
    for cpu in $cpus; do
      printf '%s %s %s %s: ' $layout $kernel $cc $cpu
      llvm-mca -mtriple=aarch64 -mcpu=$cpu -iterations=200 "$out/$layout.$kernel.$cc.loop.s" 2>/dev/null |
        awk -v w=$weights -v b=$bytes '/^Instructions:/ {i=$2/200} /^Total Cycles:/ {c=$3/200}
          END {printf "%d instructions, %.1f cycles per %d weights, %.3f cycles per weight byte, %.4f cycles per weight\n", i, c, w, c/b, c/w}'
    done
  done
done
