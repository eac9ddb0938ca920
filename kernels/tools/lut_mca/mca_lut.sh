#!/usr/bin/env bash
# llvm-mca cycles per 64-byte T2Interleaved16 tile, one token, of the LUT probe loops next
# to the shipped plain-NEON loop, in one run, cut and timed as kernels/tools/mca.sh does
# (kernels/tools/mca_lib.sh: each loop from its own function, LLVM 19, steady state).
#   kernels/tools/lut_mca/mca_lut.sh [out_dir]
set -euo pipefail
root=$(cd "$(dirname "$0")/../../.." && pwd)
out=${1:-/tmp/tern-mca-lut}
mkdir -p "$out"
# shellcheck source=kernels/tools/mca_lib.sh
. "$root/kernels/tools/mca_lib.sh"
flags="-std=c++17 -fno-exceptions -fno-rtti -I$root"
probe=$root/kernels/tools/lut_mca/ternary_lut_t2i16_neon_probe.cpp
# kernel | source | function | counted ops (a comma for |) | how many per 256-weight tile (0:
# from their products)
specs=(
  "neon|$root/kernels/ternary_block_t2i16__neon.cpp|block_t2i16_smull_1|smull2?,smlal2?|0"
  "lut|$probe|lut_block_t2i16E|tbl|16"
  "lut_d|$probe|lut_block_t2i16_dE|tbl|32"
)
for spec in "${specs[@]}"; do
  IFS='|' read -r kernel src func ops per_tile <<< "$spec"
  ops=${ops//,/|}
  for cc in $COMPILERS; do
    s=$out/$kernel.$cc.s
    # shellcheck disable=SC2086
    compile "$cc" "$src" "$s" $flags || { echo "t2i16 $kernel $cc: does not compile ($s.err)"; continue; }
    for cpu in cortex-a72 neoverse-n1; do
      if ! row=$(loop_row "$cc" "$cpu" "$s" "$func" "$ops"); then
        echo "t2i16 $kernel $cc: no loop in $func"
        continue
      fi
      read -r instr n w c _ <<< "$row"
      awk -v k="$kernel" -v cc="$cc" -v cpu="$cpu" -v i="$instr" -v n="$n" -v w="$w" -v c="$c" -v per="$per_tile" 'BEGIN {
        tiles = per > 0 ? n / per : w / 256
        printf "t2i16 %s %s %s: %d instructions, %.1f cycles per tile, %.4f cycles per weight\n", k, cc, cpu, i, c / tiles, c / tiles / 256 }'
    done
  done
done
# What-if: the GCC 16-byte-TBL loop with each TBL costed as one single-pipe ASIMD op
# (ORR), i.e. the loop's cost if a 16-byte TBL were as cheap as the model's 8-byte one.
if [ -s "$out/lut.gcc.s.cortex-a72.loop.s" ]; then
  sed -E 's/tbl\t(v[0-9]+)\.16b, \{ ?(v[0-9]+)\.16b ?\}, (v[0-9]+)\.16b/orr\t\1.16b, \2.16b, \3.16b/' \
    "$out/lut.gcc.s.cortex-a72.loop.s" > "$out/lut_whatif.gcc.loop.s"
  read -r c _ instr <<< "$(mca_cycles cortex-a72 "$out/lut_whatif.gcc.loop.s")"
  n=$(grep -c tbl "$out/lut.gcc.s.cortex-a72.loop.s")
  awk -v c="$c" -v i="$instr" -v n="$n" 'BEGIN {
    printf "t2i16 lut (what-if TBL = 1 op) gcc cortex-a72: %d instructions, %.1f cycles per tile, %.4f cycles per weight\n",
      i, c * 16 / n, c * 16 / n / 256 }'
fi
# Table build (lut_build_tables_neon), cycles per 16 columns (32 MUL/MLA): paid once per token
# and input vector, then shared by every 16-row block of the matrices reading that vector.
for cc in $COMPILERS; do
  if row=$(loop_row "$cc" cortex-a72 "$out/lut.$cc.s" lut_build_tables_neon 'mul|mla'); then
    read -r instr n _ c _ <<< "$row"
    awk -v cc="$cc" -v i="$instr" -v n="$n" -v c="$c" 'BEGIN {
      printf "lut table build %s cortex-a72: %d instructions, %.1f cycles per 16 columns\n", cc, i, c * 32 / n }'
  else
    echo "lut table build $cc: no loop with MUL/MLA in lut_build_tables_neon"
  fi
done
