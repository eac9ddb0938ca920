# shellcheck shell=bash
# Shared by kernels/tools/mca.sh and mca_peers.sh (bash, sourced): compile a file for
# AArch64 with one of the compilers, cut a function's decode loop (extract_loop.py) and
# time it with llvm-mca, every loop the same way.
#
#   MCA       llvm-mca to use (default llvm-mca-19: LLVM 14's counts a post-indexed load's
#             base update at the load's latency, a 9-cycle loop-carried chain in clang's
#             loops that the cores do not have)
#   COMPILERS the compilers to run, of gcc (aarch64-linux-gnu-g++ / -gcc, GCC 12), clang-14,
#             clang-19 (default: those installed)
MCA=${MCA:-llvm-mca-19}
tools=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
clang_sys=(--target=aarch64-linux-gnu -isystem /usr/aarch64-linux-gnu/include
  -isystem /usr/aarch64-linux-gnu/include/c++/12 -isystem /usr/aarch64-linux-gnu/include/c++/12/aarch64-linux-gnu)
if [ -z "${COMPILERS:-}" ]; then
  COMPILERS=""
  command -v aarch64-linux-gnu-g++ > /dev/null && COMPILERS="gcc"
  for c in clang-14 clang-19; do command -v $c > /dev/null && COMPILERS="$COMPILERS $c"; done
fi
command -v "$MCA" > /dev/null || { echo "no $MCA (apt-get install llvm-19, or MCA=llvm-mca)" >&2; exit 1; }

# compile CC SRC OUT.s FLAGS...: -O3 -S (C for .c files); its stderr in OUT.s.err
compile() {
  local cc=$1 src=$2 out=$3
  shift 3
  local c=()
  case "$cc:$src" in
    gcc:*.c) c=(aarch64-linux-gnu-gcc) ;;
    gcc:*) c=(aarch64-linux-gnu-g++) ;;
    *) c=("$cc" "${clang_sys[@]}") ;;
  esac
  "${c[@]}" -O3 "$@" -S "$src" -o "$out" 2> "$out.err"
}

# mca_cycles CPU LOOP.s: steady-state cycles per iteration, (cycles of 400 iterations - of 200)
# / 200, so the pipeline's fill and drain do not count; then llvm-mca's resource bound for one
# iteration (Block RThroughput) and the instructions per iteration.
mca_cycles() {
  local cpu=$1 loop=$2 c200 c400 bound instr
  c200=$("$MCA" -mtriple=aarch64 -mcpu="$cpu" -iterations=200 "$loop" 2> /dev/null | awk '/^Total Cycles:/ {print $3}')
  read -r c400 bound instr < <("$MCA" -mtriple=aarch64 -mcpu="$cpu" -iterations=400 "$loop" 2> /dev/null |
    awk '/^Total Cycles:/ {c=$3} /^Instructions:/ {i=$2/400} /^Block RThroughput:/ {b=$3} END {print c, b, i}')
  [ -n "$c200" ] && [ -n "$c400" ] || return 1
  awk -v a="$c200" -v b="$c400" -v r="$bound" -v i="$instr" 'BEGIN {printf "%.2f %.2f %d\n", (b - a) / 200, r, i}'
}

# loop_row CC CPU ASM FUNC OPS: "instructions ops weights cycles bound" of FUNC's loop
# (weights: 8-bit products per iteration; one token, so one weight each), or nothing.
loop_row() {
  local cpu=$2 asm=$3 func=$4 ops=$5 counts m n w c b i
  counts=$(python3 "$tools/extract_loop.py" "$asm" "$func" "$ops" 2>&1 > "$asm.$cpu.loop.s") || return 1
  m=$(mca_cycles "$cpu" "$asm.$cpu.loop.s") || return 1
  read -r n w <<< "$counts"
  read -r c b i <<< "$m"
  echo "$i $n $w $c $b"
}

# mul_floor CPU MNEMONICS...: the core's multiply floor, cycles per 8-bit product of the best of
# the given multiply forms, each timed alone as 16 independent accumulations (no other work).
mul_floor() {
  local cpu=$1 f=$TMPDIR_MCA/floor.s best="" form c p
  shift
  for form in "$@"; do
    case $form in
      smlal) p=8; for i in $(seq 0 15); do echo "smlal v$i.8h, v30.8b, v31.8b"; done > "$f" ;;
      smlal2) p=8; for i in $(seq 0 15); do echo "smlal2 v$i.8h, v30.16b, v31.16b"; done > "$f" ;;
      sdot) p=16; for i in $(seq 0 15); do echo "sdot v$i.4s, v30.16b, v31.16b"; done > "$f" ;;
      sdot8) p=8; for i in $(seq 0 15); do echo "sdot v$i.2s, v30.8b, v31.8b"; done > "$f" ;;
    esac
    c=$(mca_cycles "$cpu" "$f" | awk -v p=$p '{printf "%.4f", $1 / 16 / p}')
    if [ -z "$best" ] || awk -v a="$c" -v b="$best" 'BEGIN {exit !(a < b)}'; then best=$c; fi
  done
  echo "$best"
}
TMPDIR_MCA=$(mktemp -d)
trap 'rm -rf "$TMPDIR_MCA"' EXIT
