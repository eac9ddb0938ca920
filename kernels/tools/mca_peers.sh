#!/usr/bin/env bash
# Cycles per weight of the one-token (decode) inner loops on Arm, Tern's beside the peers',
# from the same llvm-mca model: Tern's t2i16 kernels, bitnet.cpp's I2_S (its 1x1 vec_dot, what
# its GEMV runs for one token) and TL1 (the preset table-lookup kernel), ik_llama.cpp's IQ2_BN
# (the run-time-repacked IQ2_BN_R4 loop -rtr 1 runs, and the plain one). The peers' loops are
# compiled from their own checkouts here, at run time, with GCC 12 and clang 14 (bitnet.cpp
# builds with clang, the others with the system GCC); nothing of theirs is kept in this
# repository. Cortex-A72 runs the kernels without dotprod, Cortex-A76 those with it.
#
#   kernels/tools/mca_peers.sh PEERS [out_dir]
#     PEERS: folder with bitnet/ (microsoft/BitNet) and ik_llama.cpp/ checkouts (bench/build_peers.sh)
#
# Prints one line per loop, compiler and core, then the best per core. Caveat (as in
# kernels/README.md): LLVM 14's llvm-mca models Cortex-A72 and A76 with the Cortex-A57 schedule.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
peers=$(realpath "${1:?usage: mca_peers.sh PEERS [out_dir]}")
out=${2:-/tmp/tern-mca-peers}
mkdir -p "$out"
MCA=${MCA:-llvm-mca}
common="-O3 -fno-exceptions"
clang_sys="--target=aarch64-linux-gnu -isystem /usr/aarch64-linux-gnu/include \
  -isystem /usr/aarch64-linux-gnu/include/c++/12 -isystem /usr/aarch64-linux-gnu/include/c++/12/aarch64-linux-gnu"
dot="-march=armv8.2-a+dotprod"
bitnet_inc="-I$peers/bitnet/include -I$peers/bitnet/3rdparty/llama.cpp/ggml/include -I$peers/bitnet/3rdparty/llama.cpp/ggml/src"
ik_inc="-I$peers/ik_llama.cpp/ggml/src -I$peers/ik_llama.cpp/ggml/include -I$peers/ik_llama.cpp/ggml/src/iqk"
# TL1's kernels are generated per model; the preset for bitnet_b1_58-3B stands in (the loop
# body does not depend on the shapes), compiled on its own (ggml-bitnet-lut.cpp needs the rest
# of ggml's CPU backend).
mkdir -p "$out/tl1"
cp "$peers/bitnet/preset_kernels/bitnet_b1_58-3B/bitnet-lut-kernels-tl1.h" "$out/tl1/bitnet-lut-kernels.h"
printf '#include <arm_neon.h>\n#include <cstdlib>\n#include <cstring>\n#include "bitnet-lut-kernels.h"\n' > "$out/tl1/tl1.cpp"

summary=$out/summary.tsv
: > "$summary"

# name; core; compilers; source; extra flags; function regex; counted ops (regex); their count
# per iteration (0: as the compiler unrolled it); weights per counted op. Tern's one-token tile
# loop has a fixed count (256 weights); a peer's loop is unrolled as its compiler chose, so its
# weights per iteration are its op count times the weights each op covers: 8 per SMULL/SMLAL(2),
# 16 per SDOT or per TBL of 16 bytes. bitnet.cpp builds with clang only (GCC 12 fails on its
# TL1 header and crashes on ggml-bitnet-mad.cpp); ik_llama.cpp's iqk kernels need dotprod (on
# a Cortex-A72 it has no NEON IQ2_BN loop).
kernels=(
  "tern t2i16 neon;cortex-a72;gcc clang;$root/kernels/ternary_block_t2i16__neon.cpp;-std=c++17 -fno-rtti -I$root;.;smull|smlal;8;8"
  "bitnet.cpp i2_s 1x1;cortex-a72;clang;$peers/bitnet/src/ggml-bitnet-mad.cpp;-std=c++17 $bitnet_inc;ggml_vec_dot_i2_i8_s_1x1;smull|smlal;0;8"
  "bitnet.cpp tl1;cortex-a72;clang;$out/tl1/tl1.cpp;-std=c++17 -DGGML_BITNET_ARM_TL1 -I$out/tl1 $bitnet_inc;tbl_impl;tbl;0;16"
  "tern t2i16 neondot;cortex-a76;gcc clang;$root/kernels/ternary_block_t2i16__neondot.cpp;$dot -std=c++17 -fno-rtti -I$root;.;sdot;16;16"
  "bitnet.cpp i2_s 1x1;cortex-a76;clang;$peers/bitnet/src/ggml-bitnet-mad.cpp;$dot -std=c++17 $bitnet_inc;ggml_vec_dot_i2_i8_s_1x1;sdot;0;16"
  "bitnet.cpp tl1;cortex-a76;clang;$out/tl1/tl1.cpp;$dot -std=c++17 -DGGML_BITNET_ARM_TL1 -I$out/tl1 $bitnet_inc;tbl_impl;tbl;0;16"
  "ik_llama.cpp iq2_bn_r4 (-rtr);cortex-a76;gcc clang;$peers/ik_llama.cpp/ggml/src/iqk/iqk_gemm_1bit.cpp;$dot -std=c++17 -flax-vector-conversions $ik_inc;mul_mat_iq2_bn_r4_q8_k16ILi1E;sdot;0;16"
  "ik_llama.cpp iq2_bn;cortex-a76;gcc clang;$peers/ik_llama.cpp/ggml/src/iqk/iqk_gemm_1bit.cpp;$dot -std=c++17 -flax-vector-conversions $ik_inc;mul_mat_iq2bn_q8_K64ILi1E;sdot;0;16"
)
# More kernels (e.g. a Tern kernel being tried) in EXTRA_KERNELS, same format, one per line.
if [ -n "${EXTRA_KERNELS:-}" ]; then
  while IFS= read -r k; do [ -n "$k" ] && kernels+=("$k"); done <<< "$EXTRA_KERNELS"
fi

i=0
for k in "${kernels[@]}"; do
  IFS=';' read -r name cpu compilers src flags func ops want per <<< "$k"
  i=$((i + 1))
  if [ ! -f "$src" ]; then
    echo "$name: no source at $src, skipped"
    continue
  fi
  for cc in $compilers; do
    s=$out/$i.$cc.s
    # shellcheck disable=SC2086
    if [ $cc = gcc ]; then
      aarch64-linux-gnu-g++ $common $flags -S "$src" -o "$s" 2> "$s.err" || { echo "$name $cc: does not compile ($s.err)"; continue; }
    else
      clang-14 $clang_sys $common $flags -S "$src" -o "$s" 2> "$s.err" || { echo "$name $cc: does not compile ($s.err)"; continue; }
    fi
    if ! count=$(python3 "$root/kernels/tools/extract_loop.py" "$s" "$want" "$ops" "$func" 2>&1 > "$s.loop"); then
      echo "$name $cc: no loop with $ops in $func"
      continue
    fi
    [ "$want" != 0 ] && count=$want
    weights=$((count * per))
    "$MCA" -mtriple=aarch64 -mcpu="$cpu" -iterations=200 "$s.loop" 2>/dev/null |
      awk -v n="$name" -v cc=$cc -v cpu="$cpu" -v w=$weights -v s="$summary" '
        /^Instructions:/ {i=$2/200} /^Total Cycles:/ {c=$3/200}
        END {printf "%-32s %-5s %-10s %4d instr, %6.1f cycles per iteration of %4d weights: %.4f cycles/weight\n", n, cc, cpu, i, c, w, c/w;
             printf "%s\t%s\t%s\t%.4f\n", cpu, n, cc, c/w >> s}'
  done
done

echo
echo "best per core (cycles per weight, lower is better):"
sort -t$'\t' -k1,1 -k4,4g "$summary" | awk -F'\t' '
  { key=$1 SUBSEP $2; if (!(key in best)) { best[key]=$4; cc[key]=$3; order[++n]=key } }
  END { for (j=1; j<=n; j++) { split(order[j], p, SUBSEP); printf "  %-10s %-32s %.4f (%s)\n", p[1], p[2], best[order[j]], cc[order[j]] } }'
