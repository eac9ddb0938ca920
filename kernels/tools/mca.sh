#!/bin/sh
# Estimates Arm cycles per 64-byte weight tile of the one-token ternary loops with
# llvm-mca, for both compilers (GCC builds the shipped arm64 tree).
#   kernels/tools/mca.sh [out_dir]
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:-/tmp/tern-mca}
mkdir -p "$out"
common="-O3 -std=c++17 -fno-exceptions -fno-rtti -I$root"
clang_sys="--target=aarch64-linux-gnu -isystem /usr/aarch64-linux-gnu/include \
  -isystem /usr/aarch64-linux-gnu/include/c++/12 -isystem /usr/aarch64-linux-gnu/include/c++/12/aarch64-linux-gnu"
for kernel in neon neondot; do
  flags=""; muls=32; cpus="cortex-a72 cortex-a76"
  if [ $kernel = neondot ]; then flags="-march=armv8.2-a+dotprod"; muls=16; cpus="cortex-a76"; fi
  src="$root/kernels/ternary_block_t2i16__$kernel.cpp"
  aarch64-linux-gnu-g++ $common $flags -S "$src" -o "$out/$kernel.gcc.s"
  # shellcheck disable=SC2086
  clang-14 $clang_sys $common $flags -S "$src" -o "$out/$kernel.clang.s"
  for cc in gcc clang; do
    python3 "$root/kernels/tools/extract_loop.py" "$out/$kernel.$cc.s" $muls > "$out/$kernel.$cc.loop.s"
    for cpu in $cpus; do
      printf '%s %s %s: ' $kernel $cc $cpu
      llvm-mca -mtriple=aarch64 -mcpu=$cpu -iterations=200 "$out/$kernel.$cc.loop.s" 2>/dev/null |
        awk '/^Instructions:/ {i=$2/200} /^Total Cycles:/ {c=$3/200} END {printf "%d instructions, %.1f cycles per tile, %.3f cycles per weight byte\n", i, c, c/64}'
    done
  done
done
