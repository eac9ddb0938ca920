#!/bin/sh
# llvm-mca cycles per 64-byte T2Interleaved16 tile, one token, of the LUT probe loop
# next to the shipped plain-NEON loop, in one run, same method as kernels/tools/mca.sh.
#   kernels/tools/lut_mca/mca_lut.sh [out_dir]
set -eu
root=$(cd "$(dirname "$0")/../../.." && pwd)
out=${1:-/tmp/tern-mca-lut}
mkdir -p "$out"
common="-O3 -std=c++17 -fno-exceptions -fno-rtti -I$root"
clang_sys="--target=aarch64-linux-gnu -isystem /usr/aarch64-linux-gnu/include \
  -isystem /usr/aarch64-linux-gnu/include/c++/12 -isystem /usr/aarch64-linux-gnu/include/c++/12/aarch64-linux-gnu"
# kernel, source, counted ops per tile, their regex
for spec in "neon:kernels/ternary_block_t2i16__neon.cpp:32:smull|smlal" \
            "lut:kernels/tools/lut_mca/ternary_lut_t2i16_neon_probe.cpp:16:tbl" \
            "lut_d:kernels/tools/lut_mca/ternary_lut_t2i16_neon_probe.cpp:32:tbl"; do
  kernel=${spec%%:*}; rest=${spec#*:}; src=$root/${rest%%:*}; rest=${rest#*:}; n=${rest%%:*}; ops=${rest#*:}
  # shellcheck disable=SC2086
  aarch64-linux-gnu-g++ $common -S "$src" -o "$out/$kernel.gcc.s"
  # shellcheck disable=SC2086
  clang-14 $clang_sys $common -S "$src" -o "$out/$kernel.clang.s"
  for cc in gcc clang; do
    if ! python3 "$root/kernels/tools/extract_loop.py" "$out/$kernel.$cc.s" "$n" "$ops" > "$out/$kernel.$cc.loop.s"; then
      echo "t2i16 $kernel $cc: no loop with $n $ops found"; continue
    fi
    for cpu in cortex-a72 cortex-a76; do
      printf 't2i16 %s %s %s: ' "$kernel" $cc $cpu
      llvm-mca -mtriple=aarch64 -mcpu=$cpu -iterations=200 "$out/$kernel.$cc.loop.s" 2>/dev/null |
        awk '/^Instructions:/ {i=$2/200} /^Total Cycles:/ {c=$3/200} END {printf "%d instructions, %.1f cycles per tile, %.4f cycles per weight\n", i, c, c/256}'
    done
  done
done
# What-if: the GCC 16-byte-TBL loop with each TBL costed as one single-pipe ASIMD op
# (ORR), i.e. the loop's cost if a 16-byte TBL were as cheap as the model's 8-byte one.
if [ -s "$out/lut.gcc.loop.s" ]; then
  sed -E 's/tbl\t(v[0-9]+)\.16b, \{ ?(v[0-9]+)\.16b ?\}, (v[0-9]+)\.16b/orr\t\1.16b, \2.16b, \3.16b/' \
    "$out/lut.gcc.loop.s" > "$out/lut_whatif.gcc.loop.s"
  printf 't2i16 lut (what-if TBL = 1 op) gcc cortex-a72: '
  llvm-mca -mtriple=aarch64 -mcpu=cortex-a72 -iterations=200 "$out/lut_whatif.gcc.loop.s" 2>/dev/null |
    awk '/^Instructions:/ {i=$2/200} /^Total Cycles:/ {c=$3/200} END {printf "%d instructions, %.1f cycles per tile, %.4f cycles per weight\n", i, c, c/256}'
fi
# Table build (lut_build_tables_neon), cycles per 16 columns: paid once per token and
# input vector, then shared by every 16-row block of the matrices reading that vector.
for cc in gcc clang; do
  if python3 "$root/kernels/tools/extract_loop.py" "$out/lut.$cc.s" 32 'mul|mla' > "$out/build.$cc.loop.s"; then
    printf 'lut table build %s cortex-a72: ' $cc
    llvm-mca -mtriple=aarch64 -mcpu=cortex-a72 -iterations=200 "$out/build.$cc.loop.s" 2>/dev/null |
      awk '/^Instructions:/ {i=$2/200} /^Total Cycles:/ {c=$3/200} END {printf "%d instructions, %.1f cycles per 16 columns\n", i, c}'
  else
    echo "lut table build $cc: no loop with 32 mul/mla found"
  fi
done
