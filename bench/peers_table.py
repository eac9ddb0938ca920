#!/usr/bin/env python3
"""The tables bench/peers.sh prints, from its results.tsv.

  peers_table.py RESULTS LOADS ENGINES MODELS PP TG

RESULTS: isa, label, threads, test, tok/s, round (one line per measurement); LOADS: the 1-, 5-
and 15-minute load averages before each run; ENGINES: peers.sh's engine list (label|engine|
weights|model file|folder|extra). Per ISA path: median tokens/s per engine and cell, min-max
over the rounds, each engine's lm_head bytes (the tied token embedding, read from the model
file), then the best peer per cell and each Tern variant against it.
"""
import os
import statistics
import sys
from collections import defaultdict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_peer_models import gguf_tensors  # noqa: E402

# ggml type id -> (weights per block, bytes per block), for the lm_head types the peers use.
GGML_BLOCKS = {0: (1, 4), 1: (1, 2), 8: (32, 34), 12: (256, 144), 13: (256, 176), 14: (256, 210), 20: (32, 18)}


def gguf_tensor(path, want):
    """(type id, element count) of one tensor, from the GGUF header."""
    for name, dims, ty in gguf_tensors(path):
        if name == want:
            n = 1
            for d in dims:
                n *= d
            return ty, n
    return None


def tern_embedding_bytes(path):
    """Bytes of a Tern bundle's tok_embeddings (the tied lm_head), from tern-inspect's listing."""
    inspect = os.path.join(os.environ.get("TERN_BUILD", ""), "tools", "tern-inspect")
    if not os.access(inspect, os.X_OK):
        return None
    for line in os.popen(f"'{inspect}' '{path}' 2>/dev/null"):
        parts = line.split()
        if parts and parts[0] == "tok_embeddings":
            return int(parts[5])
    return None


def lm_head_mb(path):
    if not os.path.exists(path):
        return None
    if path.endswith(".tern"):
        b = tern_embedding_bytes(path)
        return None if b is None else b / 1e6
    t = gguf_tensor(path, "output.weight") or gguf_tensor(path, "token_embd.weight")
    if t is None or t[0] not in GGML_BLOCKS:
        return None
    per, size = GGML_BLOCKS[t[0]]
    return t[1] // per * size / 1e6


def main():
    results, loads, engines_path, models, pp, tg = sys.argv[1:]
    engines = []
    for line in open(engines_path):
        label, engine, weights, model, folder, _ = line.rstrip("\n").split("|")
        engines.append((label, engine, weights, os.path.join(models, model), folder == "tern"))
    cells = defaultdict(list)
    isas = []
    for line in open(results):
        isa, label, threads, test, rate, _ = line.rstrip("\n").split("\t")
        if isa not in isas:
            isas.append(isa)
        cells[(isa, label, test, int(threads))].append(float(rate))
    load_by_isa = defaultdict(list)
    for line in open(loads):
        parts = line.split()
        load_by_isa[parts[0]].append(float(parts[3]))
    cols = [(f"pp{pp}", 1), (f"pp{pp}", 2), (f"tg{tg}", 1), (f"tg{tg}", 2)]
    mb = {label: lm_head_mb(path) for label, _, _, path, _ in engines}
    for isa in isas:
        rows = [e for e in engines if any(cells.get((isa, e[0], t, n)) for t, n in cols)]
        ld = load_by_isa.get(isa, [])
        title = "AVX2 path (peers built for AVX2 only, Tern with TERN_ISA=avx2)" if isa == "avx2" else \
            f"{isa} build (each engine's best kernels for this CPU)"
        print(f"### {title}\n")
        if ld:
            print(f"1-minute load average before each run: median {statistics.median(ld):.2f}, "
                  f"min {min(ld):.2f}, max {max(ld):.2f}\n")
        print("median (min-max) tokens/s over the rounds\n")
        print("| engine | weights (lm_head) | lm_head MB | " + " | ".join(f"{t} {n}T" for t, n in cols) + " | rounds |")
        print("| --- | --- | ---: |" + " ---: |" * len(cols) + " ---: |")
        med = {}
        for label, engine, weights, _, _ in rows:
            vals = [cells.get((isa, label, t, n), []) for t, n in cols]
            for (t, n), v in zip(cols, vals):
                if v:
                    med[(label, t, n)] = statistics.median(v)
            txt = [f"{statistics.median(v):.1f} ({min(v):.1f}-{max(v):.1f})" if v else "-" for v in vals]
            size = f"{mb[label]:.0f}" if mb[label] else "?"
            print(f"| {engine} | {weights} | {size} | " + " | ".join(txt) + f" | {min(len(v) for v in vals)} |")
        print("\nTern against the best peer per cell (median tokens/s)\n")
        print("| cell | best peer | its tok/s | " + " | ".join(f"{e[1]} {e[2]} / best" for e in rows if e[4]) + " |")
        print("| --- | --- | ---: |" + " ---: |" * sum(1 for e in rows if e[4]))
        for t, n in cols:
            peers = [(med[(e[0], t, n)], e) for e in rows if not e[4] and (e[0], t, n) in med]
            if not peers:
                continue
            best, be = max(peers, key=lambda p: p[0])
            ratios = [f"{med[(e[0], t, n)] / best:.2f}x" if (e[0], t, n) in med else "-" for e in rows if e[4]]
            print(f"| {t} {n}T | {be[1]} {be[2]} | {best:.1f} | " + " | ".join(ratios) + " |")
        print()


if __name__ == "__main__":
    main()
