#!/usr/bin/env bash
# Estimates Arm cycles per weight of Tern's one-token (decode) ternary loops with llvm-mca, for
# each compiler (GCC 12 builds the shipped arm64 tree, clang the Android and Apple ones) and
# both layouts: t2i16 (256 weights per 64-byte tile) and base-3 t3i16 (320 weights per tile).
# Each loop is cut out of its own function (kernels/tools/extract_loop.py) and timed the same
# way as kernels/tools/mca_peers.sh, which puts the t2i16 loops beside the peers'.
#   kernels/tools/mca.sh [out_dir]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:-/tmp/tern-mca}
mkdir -p "$out"
# shellcheck source=kernels/tools/mca_lib.sh
. "$root/kernels/tools/mca_lib.sh"
flags="-std=c++17 -fno-exceptions -fno-rtti -I$root"
dot="-march=armv8.2-a+dotprod"
# layout kernel | function | llvm-mca cores (Cortex-A72 has no dotprod; A55 and A76 have it,
# the A76 through LLVM's Neoverse-N1 model)
specs=(
  "t2i16 neon|block_t2i16_smull_1|cortex-a72"
  "t2i16 neondot|block_t2i16_sdot_1|cortex-a55 neoverse-n1"
  "t3i16 neon|block_n.*T3iPlanes.*SmullELm1E|cortex-a72"
  "t3i16 neondot|block_n.*T3iPlanes.*SdotELm1E|cortex-a55 neoverse-n1"
)
printf '%-14s %-8s %-12s %5s %4s %7s %8s %7s %12s\n' kernel compiler core instr mul weights cycles bound cycles/weight
for spec in "${specs[@]}"; do
  IFS='|' read -r name func cpus <<< "$spec"
  read -r layout kernel <<< "$name"
  extra=""
  [ "$kernel" = neondot ] && extra=$dot
  for cc in $COMPILERS; do
    s=$out/$layout.$kernel.$cc.s
    # shellcheck disable=SC2086
    compile "$cc" "$root/kernels/ternary_block_${layout}__$kernel.cpp" "$s" $flags $extra ||
      { echo "$name $cc: does not compile ($s.err)"; continue; }
    for cpu in $cpus; do
      if ! row=$(loop_row "$cc" "$cpu" "$s" "$func" 'smull2?|smlal2?|sdot'); then
        echo "$name $cc $cpu: no loop in $func"
        continue
      fi
      read -r instr mul weights cycles bound <<< "$row"
      printf '%-14s %-8s %-12s %5d %4d %7d %8.2f %7.2f %12.4f\n' "$name" "$cc" "$cpu" "$instr" "$mul" "$weights" \
        "$cycles" "$bound" "$(awk -v c="$cycles" -v w="$weights" 'BEGIN {print c / w}')"
    done
  done
done
