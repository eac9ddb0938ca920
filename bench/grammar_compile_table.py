#!/usr/bin/env python3
"""The Markdown tables of bench/grammar_compile_peers.sh from its raw file (RAW.tsv).

usage: grammar_compile_table.py RAW.tsv

Raw lines are tab-separated: ENGINE NAME ITEM VALUES..., ENGINE tern or llama, ITEM one of
tokens, compile_ms, compile_cpu_ms, memory_bytes, mask_ms, fast_ms, accept_ms, allowed,
timeout, failed, skipped (written by tern-grammar-compile-bench --raw and
llama_grammar_compile_bench); plus "schema NAME" (the order) and "load ROUND VALUE".
Compile times: the median over every compile of every round. Per-token times: the median and
p99 (nearest rank) over every timed step of every round, pooled.
"""
import math
import sys
from collections import defaultdict


def quantile(values, q):
    if not values:
        return math.nan
    v = sorted(values)
    rank = math.ceil(q * len(v))
    return v[max(rank, 1) - 1]


def read(path):
    order, loads = [], []
    data = defaultdict(lambda: defaultdict(list))  # (engine, name) -> item -> values (lists of runs)
    with open(path, encoding="utf-8") as f:
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if parts[0] == "schema":
                order.append(parts[1])
            elif parts[0] == "load":
                loads.append((parts[1], float(parts[2])))
            elif len(parts) >= 3:
                data[(parts[0], parts[1])][parts[2]].append(parts[3:])
    return order, loads, data


def status(runs):
    """'timeout 60 s', 'failed', 'skipped' or None when the engine ran."""
    if "skipped" in runs:
        return "skipped"
    if "timeout" in runs:
        return f"timeout > {runs['timeout'][0][0]} s"
    if "failed" in runs:
        return "failed"
    return None


def floats(runs, item):
    return [float(x) for run in runs.get(item, []) for x in run]


def ms(v, digits=1):
    return "–" if math.isnan(v) else f"{v:.{digits}f}"


def per_token(runs, item="mask_ms"):
    v = floats(runs, item)
    return f"{ms(quantile(v, 0.5), 3)}, {ms(quantile(v, 0.99), 3)}" if v else "–"


def compile_cell(runs, item="compile_ms"):
    s = status(runs)
    v = floats(runs, item)
    if not v:
        return s or "–"
    cell = f"{ms(quantile(v, 0.5), 1 if quantile(v, 0.5) >= 10 else 2)}"
    return cell + (f" ({s} later)" if s else "")


def tokens_cell(tern, llama):
    t, l = tern.get("tokens", [[]])[0], llama.get("tokens", [[]])[0]
    if t and l and t != l:
        first = next((i for i, (a, b) in enumerate(zip(t, l)) if a != b), min(len(t), len(l)))
        return f"{len(t)} / {len(l)} (differ at {first})"
    return str(len(t or l)) if (t or l) else "–"


def allowed_mean(runs):
    v = [int(x) for x in (runs.get("allowed", [[]])[-1])]
    return f"{sum(v) / len(v):.0f}" if v else "–"


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    order, loads, data = read(sys.argv[1])
    print("| schema | tokens | Tern compile ms | llama.cpp init ms | Tern mask ms/token (median, p99) "
          "| llama.cpp ms/token (median, p99) | Tern grammar memory |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name in order:
        tern, llama = data[("tern", name)], data[("llama", name)]
        mem = tern.get("memory_bytes")
        mem_cell = f"{int(mem[-1][0]) / 2**20:.2f} MiB" if mem else (status(tern) or "–")
        print(f"| {name} | {tokens_cell(tern, llama)} | {compile_cell(tern)} | {compile_cell(llama)} "
              f"| {per_token(tern)} | {per_token(llama)} | {mem_cell} |")
    print()
    print("| schema | Tern compile CPU ms | llama.cpp init CPU ms | llama.cpp fast path ms (median, p99) "
          "| llama.cpp accept ms (median, p99) | allowed per step, mean: Tern / llama.cpp | runs: Tern / llama.cpp |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name in order:
        tern, llama = data[("tern", name)], data[("llama", name)]
        runs = f"{len(tern.get('compile_ms', []))} / {len(llama.get('compile_ms', []))}"
        print(f"| {name} | {compile_cell(tern, 'compile_cpu_ms')} | {compile_cell(llama, 'compile_cpu_ms')} "
              f"| {per_token(llama, 'fast_ms')} | {per_token(llama, 'accept_ms')} "
              f"| {allowed_mean(tern)} / {allowed_mean(llama)} | {runs} |")
    reasons = [(engine, name, runs["failed"][0][0]) for (engine, name), runs in data.items() if "failed" in runs]
    if reasons:
        print("\nfailures:")
        for engine, name, why in reasons:
            print(f"- {'Tern' if engine == 'tern' else 'llama.cpp'}, {name}: {why}")
    if loads:
        print("\nload average (1 min), round: " + ", ".join(f"{r}: {v:.2f}" for r, v in loads))


if __name__ == "__main__":
    main()
