#!/usr/bin/env bash
# Cycles per weight of the one-token (decode) inner loops on Arm, Tern's beside the peers',
# per core and per compiler, every loop cut the same way (kernels/tools/extract_loop.py: the
# innermost loop with the most SMULL/SMLAL(2)/SDOT in the named function, as that compiler
# unrolled it; its weights are the 8-bit products of those instructions) and timed by the
# same llvm-mca model (kernels/tools/mca_lib.sh: LLVM 19, steady state).
#
#   kernels/tools/mca_peers.sh PEERS [out_dir]
#     PEERS: folder with bitnet/ (microsoft/BitNet, with its 3rdparty/llama.cpp for the ggml
#     headers), ik_llama.cpp/ and llama.cpp/ source trees; the peers' files are compiled from
#     there, at run time, and nothing of theirs is kept in this repository.
#
# Loops: Tern's t2i16 one-token loops (neon, neondot), bitnet.cpp's I2_S
# ggml_vec_dot_i2_i8_s_1x1 (what its GEMV runs for one token), ik_llama.cpp's IQ2_BN_R4
# (mul_mat_iq2_bn_r4_q8_k16<1>, what -rtr 1 runs; its iqk kernels need dotprod) and
# llama.cpp's TQ2_0 (ggml_vec_dot_tq2_0_q8_K). Cores (llvm-mca -mcpu): Cortex-A72
# (cortex-a72; no dotprod, the plain-NEON loops), Cortex-A55 (cortex-a55) and Cortex-A76
# (neoverse-n1: LLVM has no A76 model of its own; the N1 is an A76 derivative), both with
# dotprod, so the dotprod loops. GCC 12 fails on bitnet.cpp's file (an internal compiler error
# in quantize_i2_s's loop vectorization), so bitnet.cpp's GCC cells are built with
# -fno-tree-loop-vectorize, which leaves its intrinsic loops to the intrinsics.
#
# Prints one row per loop, core and compiler, then per core a table of cycles per weight by
# compiler with the core's multiply floor (mca_lib.sh's mul_floor) and, per compiler, Tern's
# loop against the best peer's.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
peers=$(realpath "${1:?usage: mca_peers.sh PEERS [out_dir]}")
out=${2:-/tmp/tern-mca-peers}
mkdir -p "$out"
# shellcheck source=kernels/tools/mca_lib.sh
. "$root/kernels/tools/mca_lib.sh"

dot="-march=armv8.2-a+dotprod"
cxx="-std=c++17 -fno-exceptions"
bitnet_inc="-I$peers/bitnet/include -I$peers/bitnet/3rdparty/llama.cpp/ggml/include -I$peers/bitnet/3rdparty/llama.cpp/ggml/src"
ik_inc="-I$peers/ik_llama.cpp/ggml/src -I$peers/ik_llama.cpp/ggml/include -I$peers/ik_llama.cpp/ggml/src/iqk"
llama_inc="-I$peers/llama.cpp/ggml/include -I$peers/llama.cpp/ggml/src -I$peers/llama.cpp/ggml/src/ggml-cpu"
bitnet_src=$peers/bitnet/src/ggml-bitnet-mad.cpp
tern_neon=$root/kernels/ternary_block_t2i16__neon.cpp
tern_dot=$root/kernels/ternary_block_t2i16__neondot.cpp
ik_src=$peers/ik_llama.cpp/ggml/src/iqk/iqk_gemm_1bit.cpp
llama_src=$peers/llama.cpp/ggml/src/ggml-cpu/arch/arm/quants.c

# name; cores; source; flags; flags added for GCC; function regex
kernels=(
  "Tern t2i16;A72;$tern_neon;$cxx -fno-rtti -I$root;;block_t2i16_smull_1"
  "Tern t2i16;A55 A76;$tern_dot;$dot $cxx -fno-rtti -I$root;;block_t2i16_sdot_1"
  "bitnet.cpp I2_S 1x1;A72;$bitnet_src;$cxx $bitnet_inc;-fno-tree-loop-vectorize;ggml_vec_dot_i2_i8_s_1x1"
  "bitnet.cpp I2_S 1x1;A55 A76;$bitnet_src;$dot $cxx $bitnet_inc;-fno-tree-loop-vectorize;ggml_vec_dot_i2_i8_s_1x1"
  "ik_llama.cpp IQ2_BN_R4;A55 A76;$ik_src;$dot $cxx -flax-vector-conversions $ik_inc;;mul_mat_iq2_bn_r4_q8_k16ILi1E"
  "llama.cpp TQ2_0;A72;$llama_src;-std=c11 $llama_inc;;ggml_vec_dot_tq2_0_q8_K"
  "llama.cpp TQ2_0;A55 A76;$llama_src;$dot -std=c11 $llama_inc;;ggml_vec_dot_tq2_0_q8_K"
)
# More kernels (e.g. a Tern loop being tried) in EXTRA_KERNELS, same format, one per line.
if [ -n "${EXTRA_KERNELS:-}" ]; then
  while IFS= read -r k; do [ -n "$k" ] && kernels+=("$k"); done <<< "$EXTRA_KERNELS"
fi
declare -A mcpu=([A55]=cortex-a55 [A72]=cortex-a72 [A76]=neoverse-n1)

summary=$out/summary.tsv
: > "$summary"
printf '%-4s %-24s %-8s %5s %4s %7s %8s %7s %12s\n' core loop compiler instr mul weights cycles bound cycles/weight
i=0
for k in "${kernels[@]}"; do
  IFS=';' read -r name cores src flags gcc_flags func <<< "$k"
  i=$((i + 1))
  if [ ! -f "$src" ]; then
    echo "$name: no source at $src, skipped"
    continue
  fi
  for cc in $COMPILERS; do
    s=$out/$i.$cc.s
    extra=""
    [ "$cc" = gcc ] && extra=$gcc_flags
    # shellcheck disable=SC2086
    if ! compile "$cc" "$src" "$s" $flags $extra; then
      echo "$name $cc: does not compile ($s.err)"
      continue
    fi
    for core in $cores; do
      if ! row=$(loop_row "$cc" "${mcpu[$core]}" "$s" "$func" 'smull2?|smlal2?|sdot'); then
        echo "$name $cc $core: no loop in $func"
        continue
      fi
      read -r instr mul weights cycles bound <<< "$row"
      cpw=$(awk -v c="$cycles" -v w="$weights" 'BEGIN {printf "%.4f", c / w}')
      printf '%-4s %-24s %-8s %5d %4d %7d %8.2f %7.2f %12s\n' "$core" "$name" "$cc" "$instr" "$mul" "$weights" \
        "$cycles" "$bound" "$cpw"
      printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$core" "$name" "$cc" "$cpw" "$cycles" "$weights" >> "$summary"
    done
  done
done

# Per core: cycles per weight by compiler (cycles per iteration / weights per iteration), the
# multiply floor, and Tern against the best peer per compiler.
declare -A floor_forms=([A55]="smlal smlal2 sdot sdot8" [A72]="smlal smlal2" [A76]="smlal smlal2 sdot sdot8")
for core in A55 A72 A76; do
  # shellcheck disable=SC2086
  floor=$(mul_floor "${mcpu[$core]}" ${floor_forms[$core]})
  echo
  echo "$core (llvm-mca -mcpu=${mcpu[$core]}), cycles per weight (cycles / weights per loop iteration); multiply floor $floor"
  awk -F'\t' -v core="$core" -v floor="$floor" -v ccs="$COMPILERS" '
    $1 == core { v[$2, $3] = $4; d[$2, $3] = $5 " / " $6; if (!($2 in seen)) { seen[$2] = 1; order[++n] = $2 } }
    END {
      m = split(ccs, cc, " ")
      head = "| loop |"; sep = "| --- |"
      for (j = 1; j <= m; j++) { head = head " " cc[j] " |"; sep = sep " ---: |" }
      print head; print sep
      for (r = 1; r <= n; r++) {
        line = "| " order[r] " |"
        for (j = 1; j <= m; j++) {
          key = order[r] SUBSEP cc[j]
          line = line ((key in v) ? sprintf(" %.3f (%s) |", v[key], d[key]) : " – |")
        }
        print line
      }
      line = "| Tern / best peer |"
      for (j = 1; j <= m; j++) {
        best = 0
        for (r = 1; r <= n; r++) {
          key = order[r] SUBSEP cc[j]
          if (order[r] !~ /^Tern/ && (key in v) && (best == 0 || v[key] < best)) best = v[key]
        }
        tk = "Tern t2i16" SUBSEP cc[j]
        line = line ((best > 0 && (tk in v)) ? sprintf(" %.2fx |", best / v[tk]) : " – |")
      }
      print line
      line = "| Tern / floor |"
      for (j = 1; j <= m; j++) {
        tk = "Tern t2i16" SUBSEP cc[j]
        line = line ((tk in v) ? sprintf(" %.2f |", v[tk] / floor) : " – |")
      }
      print line
    }' "$summary"
done
