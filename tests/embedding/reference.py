#!/usr/bin/python3
"""An independent float64 reference for the BitNet embedding models (numpy only).

Reads a model as gen_models.py (or a real checkpoint) writes it: config.json,
model.safetensors (bf16/f32/f16), the sentence-transformers pooling and Normalize modules.
Computes each text's embedding from its token ids as the Hugging Face model does with
BitNet's BitLinear in every projection:

  x -> RMSNorm(x, linear's norm) -> int8 absmax per token (s = 127 / max|x|,
       q = clip(round(x * s), -128, 127), x = q / s) -> x @ (W quantized absmean: round(W / m)
       clipped to [-1, 1], times m = mean|W|)^T

Qwen3 layers: input_layernorm, q/k/v BitLinear, q_norm/k_norm per head, RoPE (rotate half),
causal attention (sliding window on sliding layers), o BitLinear, residual,
post_attention_layernorm, gate/up BitLinear, SiLU(gate) * up, down BitLinear, residual.
Gemma3: norms are x * (1 + w), embeddings times sqrt(hidden), scale query_pre_attn_scalar^-1/2,
sliding layers use rope_local_base_freq, post-attention / post-FFN norms before each residual,
GELU (tanh). Then the final norm, pooling (last / mean / first token) and L2 normalization.

usage: reference.py IDS.jsonl OUT.jsonl MODEL_DIR...
  IDS.jsonl lines: {"model": name (a MODEL_DIR's base name), "ids": [...], ...}; OUT gets each
  line back with "embedding" added.
"""
import json
import math
import os
import struct
import sys

import numpy as np


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        a, b = info["data_offsets"]
        raw = data[a:b]
        if info["dtype"] == "BF16":
            v = (np.frombuffer(raw, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)
        elif info["dtype"] == "F16":
            v = np.frombuffer(raw, dtype=np.float16)
        elif info["dtype"] == "F32":
            v = np.frombuffer(raw, dtype=np.float32)
        else:
            raise ValueError(f"{path}: {name} has dtype {info['dtype']}")
        out[name[6:] if name.startswith("model.") else name] = v.astype(np.float64).reshape(info["shape"])
    return out


class Model:
    def __init__(self, path):
        self.cfg = json.load(open(os.path.join(path, "config.json")))
        self.w = read_safetensors(os.path.join(path, "model.safetensors"))
        self.gemma = self.cfg["model_type"] == "gemma3_text"
        self.pooling, self.normalize = "last", True
        modules_path = os.path.join(path, "modules.json")
        if os.path.exists(modules_path):
            self.normalize = False
            for m in json.load(open(modules_path)):
                if m["type"].endswith("Normalize"):
                    self.normalize = True
                if m["type"].endswith("Pooling"):
                    p = json.load(open(os.path.join(path, m["path"], "config.json")))
                    self.pooling = ("last" if p.get("pooling_mode_lasttoken") else
                                    "mean" if p.get("pooling_mode_mean_tokens") else
                                    "first" if p.get("pooling_mode_cls_token") else None)
        c = self.cfg
        L = c["num_hidden_layers"]
        if "layer_types" in c and c["layer_types"] is not None and (self.gemma or c.get("use_sliding_window")):
            self.sliding = [t == "sliding_attention" for t in c["layer_types"]]
        elif self.gemma:
            pattern = c.get("sliding_window_pattern", 6)
            self.sliding = [(i + 1) % pattern != 0 for i in range(L)]
        else:
            self.sliding = [bool(c.get("use_sliding_window")) and i >= c.get("max_window_layers", L) for i in range(L)]
        self.window = c.get("sliding_window") or 0

    def norm(self, x, w, own=True):
        eps = self.cfg["rms_norm_eps"]
        scale = (1.0 + w) if (self.gemma and own) else w
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * scale

    @staticmethod
    def act_quant(x):
        s = 127.0 / np.maximum(np.max(np.abs(x), axis=-1, keepdims=True), 1e-5)
        return np.clip(np.round(x * s), -128, 127) / s

    @staticmethod
    def weight_quant(w):
        m = max(np.mean(np.abs(w)), 1e-5)
        return np.clip(np.round(w / m), -1, 1) * m

    def bitlinear(self, x, name):
        y = self.norm(x, self.w[name + ".norm.weight"], own=False)
        return self.act_quant(y) @ self.weight_quant(self.w[name + ".weight"]).T

    def rope(self, x, theta):  # x [T, H, d], rotate half
        T, _, d = x.shape
        inv = 1.0 / theta ** (np.arange(0, d, 2, dtype=np.float64) / d)
        ang = np.outer(np.arange(T, dtype=np.float64), inv)
        cos, sin = np.cos(np.concatenate([ang, ang], -1))[:, None, :], np.sin(np.concatenate([ang, ang], -1))[:, None, :]
        rot = np.concatenate([-x[..., d // 2:], x[..., :d // 2]], -1)
        return x * cos + rot * sin

    def embed(self, ids):
        c, w = self.cfg, self.w
        T, H, KV, hd = len(ids), c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]
        x = w["embed_tokens.weight"][ids]
        if self.gemma:
            x = x * math.sqrt(c["hidden_size"])
        scale = c["query_pre_attn_scalar"] ** -0.5 if self.gemma else hd ** -0.5
        for l in range(c["num_hidden_layers"]):
            p = f"layers.{l}."
            a = self.norm(x, w[p + "input_layernorm.weight"])
            q = self.bitlinear(a, p + "self_attn.q_proj").reshape(T, H, hd)
            k = self.bitlinear(a, p + "self_attn.k_proj").reshape(T, KV, hd)
            v = self.bitlinear(a, p + "self_attn.v_proj").reshape(T, KV, hd)
            q = self.norm(q, w[p + "self_attn.q_norm.weight"])
            k = self.norm(k, w[p + "self_attn.k_norm.weight"])
            theta = c["rope_theta"]
            if self.gemma and self.sliding[l]:
                theta = c.get("rope_local_base_freq", 10000.0)
            q, k = self.rope(q, theta), self.rope(k, theta)
            att = np.zeros((T, H, hd))
            for i in range(T):
                lo = max(0, i - self.window + 1) if self.sliding[l] else 0
                for h in range(H):
                    kh = h // (H // KV)
                    s = k[lo:i + 1, kh] @ q[i, h] * scale
                    p_ = np.exp(s - s.max())
                    att[i, h] = (p_ / p_.sum()) @ v[lo:i + 1, kh]
            o = self.bitlinear(att.reshape(T, H * hd), p + "self_attn.o_proj")
            if self.gemma:
                o = self.norm(o, w[p + "post_attention_layernorm.weight"])
            x = x + o
            a = self.norm(x, w[p + ("pre_feedforward_layernorm.weight" if self.gemma else "post_attention_layernorm.weight")])
            g = self.bitlinear(a, p + "mlp.gate_proj")
            u = self.bitlinear(a, p + "mlp.up_proj")
            if self.gemma:
                g = 0.5 * g * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (g + 0.044715 * g ** 3)))
            else:
                g = g / (1.0 + np.exp(-g))
            d = self.bitlinear(g * u, p + "mlp.down_proj")
            if self.gemma:
                d = self.norm(d, w[p + "post_feedforward_layernorm.weight"])
            x = x + d
        x = self.norm(x, w["norm.weight"])
        e = {"last": x[-1], "mean": x.mean(axis=0), "first": x[0]}[self.pooling]
        if self.normalize:
            e = e / np.linalg.norm(e)
        return e


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    models = {os.path.basename(os.path.normpath(d)): Model(d) for d in sys.argv[3:]}
    with open(sys.argv[1], encoding="utf-8") as f, open(sys.argv[2] + ".partial", "w", encoding="utf-8") as out:
        for line in f:
            item = json.loads(line)
            item["embedding"] = models[item["model"]].embed(np.array(item["ids"], dtype=np.int64)).tolist()
            out.write(json.dumps(item, ensure_ascii=False) + "\n")
    os.replace(sys.argv[2] + ".partial", sys.argv[2])


if __name__ == "__main__":
    main()
