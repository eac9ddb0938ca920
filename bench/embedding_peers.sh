#!/usr/bin/env bash
# Embedding speed against bitnet.cpp on this machine, interleaved (docs/perf/2026-11-26-embeddings.md):
#   bench/embedding_peers.sh BITNET_BIN_DIR TERN_BUILD_DIR MODEL_DIR [ROUNDS]
# MODEL_DIR holds syn-embed-0.6b.tern / syn-embed-270m.tern (tern-convert --synthetic embed-0.6b /
# embed-270m) and peer-embed-0.6b-i2_s.gguf / peer-embed-270m-i2_s.gguf (bench/make_embedding_peer_gguf.py).
# Each round runs, per model and thread count, bitnet.cpp's llama-bench pp128 (one repetition after its
# warm-up) and then tern-bench's embedding mode (32 texts of 128 tokens, one repetition after a warm-up).
# Prints every sample (TSV) and the medians with min-max in tokens/s. Not part of CI.
set -euo pipefail
bitnet="$1" tern="$2" models="$3" rounds="${4:-3}"
out="$models/embedding-peers-$(date -u +%Y%m%d-%H%M%S).tsv"
echo -e "round\tmodel\tthreads\tengine\ttokens_per_s" > "$out"
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq 1 "$rounds"); do
  for m in 0.6b 270m; do
    for t in 1 2; do
      b=$("$bitnet/llama-bench" -m "$models/peer-embed-$m-i2_s.gguf" -p 128 -n 0 -t "$t" -r 1 -o csv 2>/dev/null |
          tail -1 | awk -F, '{gsub(/"/,"",$(NF-1)); print $(NF-1)}')
      x=$("$tern/tools/tern-bench" "$models/syn-embed-$m.tern" -t "$t" -r 1 2>/dev/null |
          awk -F'|' '/embed 32/ {split($6, a, " "); print a[1]}')
      echo -e "$r\t$m\t$t\tbitnet.cpp\t$b" >> "$out"
      echo -e "$r\t$m\t$t\ttern\t$x" >> "$out"
      echo "round $r $m ${t}T: bitnet.cpp $b, tern $x"
    done
  done
done
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
/usr/bin/python3 - "$out" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
print(f"\nsamples: {sys.argv[1]}\n")
print("| model | threads | bitnet.cpp tok/s (median, min-max) | Tern tok/s (median, min-max) | Tern / bitnet.cpp |")
print("| --- | ---: | ---: | ---: | ---: |")
for m in ("0.6b", "270m"):
    for t in ("1", "2"):
        v = {e: [float(r["tokens_per_s"]) for r in rows if r["model"] == m and r["threads"] == t and r["engine"] == e]
             for e in ("bitnet.cpp", "tern")}
        b, x = statistics.median(v["bitnet.cpp"]), statistics.median(v["tern"])
        print(f"| {m} | {t} | {b:.1f} ({min(v['bitnet.cpp']):.1f}-{max(v['bitnet.cpp']):.1f}) | "
              f"{x:.1f} ({min(v['tern']):.1f}-{max(v['tern']):.1f}) | {x / b:.2f}x |")
PY
