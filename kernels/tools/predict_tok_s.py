#!/usr/bin/env python3
"""Predicted decode tok/s of BitNet 2B-4T on a Pi 4 / Pi 5 / phone per ternary layout.

time per token = max(ternary weights x cycles per weight / (GHz x threads), bytes per token / bandwidth)
Cycles per weight: kernels/tools/mca.sh (GCC 12, one token). Bandwidth: see docs/perf/2026-11-24-base3.md.
The lm_head (q4 per 64 columns, 4.5 bits) counts as bytes only; attention and KV are left out.
"""

HIDDEN, FFN, LAYERS, KV = 2560, 6912, 30, 640
VOCAB = 128256
# (rows, cols) of the ternary matrices of one layer: q, k, v, o, gate, up, down
MATS = [(HIDDEN, HIDDEN), (KV, HIDDEN), (KV, HIDDEN), (HIDDEN, HIDDEN), (FFN, HIDDEN), (FFN, HIDDEN), (HIDDEN, FFN)]


def up(n, m):
    return -(-n // m) * m


def layout_bytes(tile_cols):
    # 64-byte tiles of 16 rows x tile_cols columns (16 for t2i16, 20 for t3i16)
    return LAYERS * sum(up(r, 16) // 16 * up(c, tile_cols) // tile_cols * 64 for r, c in MATS)


WEIGHTS = LAYERS * sum(r * c for r, c in MATS)
LM_HEAD = VOCAB * HIDDEN * 4.5 / 8
DEVICES = {  # name: (GHz, GB/s, {layout: cycles per weight})
    "pi4": (1.8, 5.56, {"t2i16": 0.1263, "t3i16": 0.2270}),  # neon (A72 has no dotprod)
    "pi5": (2.4, 7.4, {"t2i16": 0.0627, "t3i16": 0.1769}),   # neondot
    # Snapdragon 855-class phone: Cortex-A76 big cores at 2.42 GHz (the prime core's 2.84 left
    # out), LPDDR4X 34.1 GB/s peak at the Pi 4's 43 % STREAM efficiency: an estimate.
    "android6g": (2.42, 14.7, {"t2i16": 0.0627, "t3i16": 0.1769}),  # neondot
}
LAYOUTS = {"t2i16": 16, "t3i16": 20}

print(f"ternary weights per token: {WEIGHTS / 1e9:.3f} G; lm_head {LM_HEAD / 1e6:.0f} MB")
for name, cols in LAYOUTS.items():
    print(f"{name}: {layout_bytes(cols) / 1e6:.1f} MB ternary + lm_head = {(layout_bytes(cols) + LM_HEAD) / 1e6:.1f} MB")
print("| device | layout | cycles/weight | compute s (1 thr) | memory s | tok/s 1 thread | tok/s 4 threads |")
print("| --- | --- | --- | --- | --- | --- | --- |")
for dev, (ghz, bw, cpw) in DEVICES.items():
    for name, cols in LAYOUTS.items():
        compute = WEIGHTS * cpw[name] / (ghz * 1e9)
        memory = (layout_bytes(cols) + LM_HEAD) / (bw * 1e9)
        t1, t4 = max(compute, memory), max(compute / 4, memory)
        print(f"| {dev} | {name} | {cpw[name]} | {compute:.3f} | {memory:.3f} | {1 / t1:.1f} | {1 / t4:.1f} |")
