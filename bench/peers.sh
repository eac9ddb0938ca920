#!/usr/bin/env bash
# Peers on the same machine, in one run: llama.cpp (tq2_0, tq1_0), bitnet.cpp (i2_s) and Tern
# on one synthetic model with the bitnet-b1.58-2B-4T shapes and the same random ternary
# weights (bench/make_peer_models.py). pp128 and tg64 at 1 and 2 threads, each peer run
# followed by a Tern run, for ROUNDS rounds; prints the median tokens/s of every cell and the
# load average at start and end. Not part of CI; docs/perf/peers.md has a run and its setup.
#
# usage: bench/peers.sh LLAMA_BIN BITNET_BIN TERN_BUILD MODELS [ROUNDS]
#   LLAMA_BIN   llama.cpp build/bin (llama-bench, llama-quantize)
#   BITNET_BIN  bitnet.cpp build/bin (its llama-bench, llama-quantize)
#   TERN_BUILD  Tern's build folder (tools/tern-convert, tools/tern-bench)
#   MODELS      folder for the model files (~7 GB; made when missing)
#   ROUNDS      default 3
# environment:
#   LLAMA_SRC  llama.cpp source tree, for its gguf-py (default: LLAMA_BIN/../..)
#   TOKENIZER  LLaMA-3 tokenizer.json (default: ../shared/tokenizers/llama3 beside the repo)
#   PYTHON     a python3 with numpy (default: /usr/bin/python3, Debian's python3-numpy)
set -euo pipefail

if [ $# -lt 4 ]; then
  sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
  exit 2
fi
LLAMA_BIN=$(realpath "$1")
BITNET_BIN=$(realpath "$2")
TERN_BUILD=$(realpath "$3")
mkdir -p "$4"
MODELS=$(realpath "$4")
ROUNDS=${5:-3}
REPO=$(cd "$(dirname "$0")/.." && pwd)
LLAMA_SRC=${LLAMA_SRC:-$(realpath "$LLAMA_BIN/../..")}
TOKENIZER=${TOKENIZER:-$REPO/../shared/tokenizers/llama3/tokenizer.json}
PYTHON=${PYTHON:-/usr/bin/python3}
PP=128
TG=64
THREADS=1,2

# ---- models (each step is skipped when its file exists) ----
"$PYTHON" "$REPO/bench/make_peer_models.py" --gguf-py "$LLAMA_SRC/gguf-py" --llama-bin "$LLAMA_BIN" \
  --bitnet-bin "$BITNET_BIN" --tokenizer "$TOKENIZER" --out "$MODELS"
# Tern's bundle comes from the i2_s file: the same ternary codes and scales, and f16
# embeddings (the tq*_0 files hold q6_K ones), which --embed q4 re-quantizes per 64 columns.
BUNDLE=$MODELS/peer-2b4t.tern
if [ ! -f "$BUNDLE" ]; then
  "$TERN_BUILD/tools/tern-convert" "$MODELS/peer-2b4t-i2_s.gguf" -o "$BUNDLE" --embed q4
fi

# ---- runs ----
OUT=$MODELS/run-$(date +%Y%m%d-%H%M%S)
mkdir -p "$OUT"
RESULTS=$OUT/results.tsv   # engine  model  threads  test  tok/s  round
: > "$RESULTS"
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)

# llama-bench's JSON -> result rows
peer() {  # ENGINE MODEL BIN ROUND
  local log=$OUT/$1-$2-r$4.json
  "$3/llama-bench" -m "$MODELS/peer-2b4t-$2.gguf" -p $PP -n $TG -t $THREADS -r 1 -o json > "$log" 2> "$log.err"
  "$PYTHON" - "$log" "$1" "$2" "$4" >> "$RESULTS" <<'EOF'
import json, sys
log, engine, model, rnd = sys.argv[1:]
for r in json.load(open(log)):
    test = f"pp{r['n_prompt']}" if r["n_gen"] == 0 else f"tg{r['n_gen']}"
    print(engine, model, r["n_threads"], test, r["avg_ts"], rnd, sep="\t")
EOF
}

# tern-bench's markdown rows "| bundle | threads | ppN | mean ± sd |" -> result rows
tern() {  # ROUND AFTER
  local log=$OUT/tern-r$1-after-$2.md
  "$TERN_BUILD/tools/tern-bench" "$BUNDLE" -p $PP -n $TG -t ${THREADS//,/ } -r 1 > "$log" 2> "$log.err"
  awk -F'|' -v r="$1" '$4 ~ /(pp|tg)[0-9]/ { gsub(/ /, "", $3); gsub(/ /, "", $4); split($5, v, " ");
        printf "tern\tternary + q4 embed\t%s\t%s\t%s\t%s\n", $3, $4, v[1], r }' "$log" >> "$RESULTS"
}

for round in $(seq 1 "$ROUNDS"); do
  for run in "llama.cpp tq2_0 $LLAMA_BIN" "llama.cpp tq1_0 $LLAMA_BIN" "bitnet.cpp i2_s $BITNET_BIN"; do
    set -- $run
    echo "round $round/$ROUNDS: $1 $2, then tern" >&2
    peer "$1" "$2" "$3" "$round"
    tern "$round" "$1-$2"
  done
done
LOAD_END=$(cut -d' ' -f1-3 /proc/loadavg)

# ---- table of medians ----
"$PYTHON" - "$RESULTS" "$LOAD_START" "$LOAD_END" "$PP" "$TG" <<'EOF' | tee "$OUT/table.md"
import statistics, sys
from collections import defaultdict
path, load_start, load_end, pp, tg = sys.argv[1:]
cells, rows = defaultdict(list), []
for line in open(path):
    engine, model, threads, test, rate, _ = line.split("\t")
    if (engine, model) not in rows:
        rows.append((engine, model))
    cells[(engine, model, test, int(threads))].append(float(rate))
cols = [(f"pp{pp}", 1), (f"pp{pp}", 2), (f"tg{tg}", 1), (f"tg{tg}", 2)]
print(f"load average (1, 5, 15 min) at start: {load_start}; at end: {load_end}\n")
print("| engine | weights | " + " | ".join(f"{t} {n}T" for t, n in cols) + " | samples |")
print("| --- | --- |" + " ---: |" * len(cols) + " ---: |")
for engine, model in rows:
    vals = [cells.get((engine, model, t, n), []) for t, n in cols]
    med = [f"{statistics.median(v):.2f}" if v else "-" for v in vals]
    print(f"| {engine} | {model} | " + " | ".join(med) + f" | {min(len(v) for v in vals)} |")
EOF
echo "raw logs: $OUT" >&2
