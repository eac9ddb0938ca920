#!/usr/bin/env bash
# Several sequences decoded together by the peers: each peer's llama-batched-bench on the
# synthetic bitnet-b1.58-2B-4T model of bench/peers.sh (same random ternary weights, q4_K
# lm_head: the bytes of Tern's q4), llama.cpp tq2_0, ik_llama.cpp iq2_bn run-time repacked and
# bitnet.cpp i2_s. Every sequence gets a PP-token prompt of its own, then the sequences decode
# TG tokens together, one token each per forward pass; S_TG is the tokens of all sequences per
# second of that decode. One run per engine and thread count covers every NPL; every engine runs
# once per round, the order reversed every other round, for ROUNDS rounds. Prints the median
# S_TG and S_PP (min-max below them) per engine, thread count and number of sequences, and the
# load average during the run. Not part of CI.
#
# usage: bench/batched_peers.sh PEERS MODELS
#   PEERS   folder with the peers' builds, PEERS/<peer>/build-<ISA>/bin/llama-batched-bench
#           (bench/build_peers.sh, then `cmake --build PEERS/<peer>/build-<ISA> --target
#           llama-batched-bench`)
#   MODELS  folder with the peers' q4_K-lm_head files (bench/peers.sh with Q4K=1 makes them):
#           peer-2b4t-tq2_0-q4_k.gguf, peer-2b4t-iq2_bn-q4_k.gguf, peer-2b4t-i2_s-q4_k.gguf
# environment:
#   ISA          the peers' build-<ISA> to run (default native)
#   THREADS      thread counts (default "2 1")
#   NPL          numbers of sequences decoded together (default 1,2,4)
#   PP, TG       prompt tokens per sequence and tokens decoded per sequence (default 128, 64)
#   ROUNDS       default 3
#   ONLY         space-separated engine labels to run (default all; e.g. "ik-iq2_bn-q4_k")
#   DROP_CACHES  1: drop the page cache before every run (needs root), so each engine maps its
#                file as read fresh from disk (bench/peers.sh says why that matters for decode)
# An engine whose build or model file is missing is skipped (and said so). Raw logs, and every
# command as run (commands.txt), go to MODELS/batched-<date>/.
set -euo pipefail

if [ $# -lt 2 ]; then
  sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
  exit 2
fi
PEERS=$(realpath "$1")
MODELS=$(realpath "$2")
ISA=${ISA:-native}
THREADS=${THREADS:-2 1}
NPL=${NPL:-1,2,4}
PP=${PP:-128}
TG=${TG:-64}
ROUNDS=${ROUNDS:-3}
ONLY=${ONLY:-}
DROP_CACHES=${DROP_CACHES:-0}

# label  engine  weights (lm_head)  model file  peer folder  extra arguments (ik_llama.cpp's
# -rtr is a flag here, where its llama-bench takes -rtr 1)
ENGINES=(
  "llama-tq2_0-q4_k|llama.cpp|tq2_0 (q4_K)|peer-2b4t-tq2_0-q4_k.gguf|llama.cpp|"
  "ik-iq2_bn-q4_k|ik_llama.cpp|iq2_bn -rtr (q4_K)|peer-2b4t-iq2_bn-q4_k.gguf|ik_llama.cpp|-rtr"
  "bitnet-i2_s-q4_k|bitnet.cpp|i2_s (q4_K)|peer-2b4t-i2_s-q4_k.gguf|bitnet|"
)
selected() { [ -z "$ONLY" ] || [[ " $ONLY " == *" $1 "* ]]; }

# Every sequence holds PP + TG positions; llama.cpp splits the context among the sequences.
max_npl=$(tr ',' '\n' <<< "$NPL" | sort -n | tail -1)
CTX=$(((max_npl * (PP + TG) + 255) / 256 * 256))

OUT=$MODELS/batched-$(date +%Y%m%d-%H%M%S)
mkdir -p "$OUT"
RESULTS=$OUT/results.tsv  # label  threads  sequences  S_PP  S_TG  round
: > "$RESULTS"
LOADS=$OUT/load.txt       # the load average before every run
: > "$LOADS"

for round in $(seq 1 "$ROUNDS"); do
  order=("${ENGINES[@]}")
  if [ $((round % 2)) = 0 ]; then  # reversed every other round: drift in the load cancels
    order=()
    for ((i = ${#ENGINES[@]} - 1; i >= 0; i--)); do order+=("${ENGINES[$i]}"); done
  fi
  for e in "${order[@]}"; do
    IFS='|' read -r label engine weights model folder extra <<< "$e"
    selected "$label" || continue
    bin=$PEERS/$folder/build-$ISA/bin/llama-batched-bench
    if [ ! -f "$MODELS/$model" ] || [ ! -x "$bin" ]; then
      echo "round $round/$ROUNDS: skipping $engine $weights (no $MODELS/$model or $bin)" >&2
      continue
    fi
    for t in $THREADS; do
      echo "round $round/$ROUNDS: $engine $weights, $t thread(s)" >&2
      if [ "$DROP_CACHES" = 1 ]; then
        sync
        echo 3 > /proc/sys/vm/drop_caches
      fi
      echo "$label $t $round $(cut -d' ' -f1-3 /proc/loadavg)" >> "$LOADS"
      log=$OUT/$label-t$t-r$round.txt
      echo "$bin -m $MODELS/$model -c $CTX -npp $PP -ntg $TG -npl $NPL -t $t $extra" >> "$OUT/commands.txt"
      # In OUT: ik_llama.cpp writes llama.log into the working folder. A 64 MB stack: bitnet.cpp's
      # I2_S GEMM keeps a rows x tokens float array on the stack (6912 x 384 x 4 B = 10.6 MB at
      # one thread for three 128-token prompts) and overflows the default 8 MB.
      # shellcheck disable=SC2086
      (cd "$OUT" && ulimit -s 65536 &&
        "$bin" -m "$MODELS/$model" -c "$CTX" -npp "$PP" -ntg "$TG" -npl "$NPL" -t "$t" $extra > "$log" 2>&1) ||
        echo "round $round/$ROUNDS: $engine $weights, $t thread(s) failed (exit $?), see $log" >&2
      # rows "| PP | TG | B | N_KV | T_PP s | S_PP t/s | T_TG s | S_TG t/s | T s | S t/s |"
      awk -F'|' -v label="$label" -v t="$t" -v r="$round" '$2 ~ /^ *[0-9]+ *$/ && NF >= 11 {
            gsub(/ /, ""); printf "%s\t%s\t%s\t%s\t%s\t%s\n", label, t, $4, $7, $9, r }' "$log" >> "$RESULTS"
    done
  done
done

printf '%s\n' "${ENGINES[@]}" > "$OUT/engines.txt"
python3 - "$RESULTS" "$LOADS" "$OUT/engines.txt" "$PP" "$TG" "$ISA" <<'EOF' | tee "$OUT/table.md"
import statistics, sys
results, loads, engines, pp, tg, isa = sys.argv[1:]
rows = [l.split("\t") for l in open(results).read().splitlines()]
cells = {}
for label, t, b, spp, stg, _ in rows:
    cells.setdefault((label, int(t), int(b)), []).append((float(spp), float(stg)))
load1 = [float(l.split()[3]) for l in open(loads).read().splitlines()]
if load1:
    print(f"1-minute load average before each run: median {statistics.median(load1):.2f}, "
          f"min {min(load1):.2f}, max {max(load1):.2f}\n")
seqs = sorted({b for _, _, b in cells})
def fmt(v):
    return f"{statistics.median(v):.1f} ({min(v):.1f}-{max(v):.1f})"
print(f"build-{isa}; pp{pp} per sequence, then tg{tg} per sequence decoded together; "
      "median (min-max) tokens/s of all sequences")
print()
head = ["engine", "weights (lm_head)", "threads"] + [f"S_TG B={b}" for b in seqs] + \
       [f"B={seqs[-1]} / B={seqs[0]}"] + [f"S_PP B={b}" for b in seqs] + ["runs"]
print("| " + " | ".join(head) + " |")
print("| --- | --- | ---: " + "| ---: " * (2 * len(seqs) + 2) + "|")
for line in open(engines).read().splitlines():
    label, engine, weights = line.split("|")[:3]
    for t in sorted({t for l, t, _ in cells if l == label}, reverse=True):
        got = [cells.get((label, t, b), []) for b in seqs]
        tg_med = [statistics.median([s for _, s in c]) if c else None for c in got]
        ratio = f"{tg_med[-1] / tg_med[0]:.2f}x" if tg_med[0] and tg_med[-1] else "-"
        print("| " + " | ".join([engine, weights, str(t)]
                                + [fmt([s for _, s in c]) if c else "-" for c in got] + [ratio]
                                + [fmt([p for p, _ in c]) if c else "-" for c in got]
                                + [str(max(len(c) for c in got))]) + " |")
EOF
echo "raw logs: $OUT" >&2
