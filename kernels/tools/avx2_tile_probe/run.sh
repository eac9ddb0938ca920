#!/bin/sh
# The AVX2 token tile's loop variants (tile_loops.py): timed on this CPU (ns per 8-token
# half-tile, 5 rounds), then llvm-mca's Zen 3 model (cycles per half-tile).
#   kernels/tools/avx2_tile_probe/run.sh [out_dir]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-/tmp/tern-avx2-tile}
mkdir -p "$out"
python3 "$here/tile_loops.py" header > "$out/tile_loops.h"
g++ -O2 -std=c++17 -mavx2 -I"$out" "$here/avx2_tile_probe.cpp" -o "$out/avx2_tile_probe"
"$out/avx2_tile_probe"
for name in bcast mem reg mem_call; do
  python3 "$here/tile_loops.py" mca $name > "$out/$name.s"
  halves=1; [ $name = mem_call ] && halves=2
  printf 'llvm-mca znver3 %s: ' $name
  llvm-mca -mcpu=znver3 -iterations=200 "$out/$name.s" 2>/dev/null |
    awk -v h=$halves '/^Total Cycles:/ {printf "%.1f cycles per half-tile\n", $3 / 200 / h}'
done
