#!/usr/bin/python3
"""tern-embed end to end: the texts of the embedding reference, one per line of a file,
embedded by the CLI into JSON and .npy (float32, int8 with its scales, binary), checked
against the independent reference (cosine >= 0.999) and against each other.

usage: cli_test.py TERN_EMBED EMBEDDING_DIR
Fails (never skips) when an input is missing."""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np


def main():
    tool, root = sys.argv[1], sys.argv[2]
    reference = os.path.join(root, "reference.jsonl")
    for path in (tool, reference, os.path.join(root, "gemma3.tern")):
        if not os.path.exists(path):
            sys.exit(f"FAIL: {path} is missing (ctest makes it first, in embedding_make_models)")
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        for model in ("qwen3", "gemma3"):
            cases = [json.loads(l) for l in open(reference, encoding="utf-8")]
            cases = [c for c in cases if c["model"] == model and not c["prompt"] and "\n" not in c["text"]]
            texts = os.path.join(tmp, f"{model}.txt")
            with open(texts, "w", encoding="utf-8") as f:
                f.write("\n".join(c["text"] for c in cases) + "\n")
            bundle = os.path.join(root, f"{model}.tern")
            run = lambda *a: subprocess.run([tool, bundle, "-f", texts, "--no-prompt", "-q", *a], check=True,
                                            capture_output=True, text=True).stdout
            out = json.loads(run())
            got = np.array(out["embeddings"], dtype=np.float64)
            ref = np.array([c["embedding"] for c in cases])
            cos = (got * ref).sum(1) / np.linalg.norm(got, axis=1) / np.linalg.norm(ref, axis=1)
            print(f"{model}: {len(cases)} texts from a file, worst cosine to the reference {cos.min():.6f}")
            if len(cases) < 15 or cos.min() < 0.999 or out["dimensions"] != ref.shape[1]:
                print(f"FAIL: {model}: cosine {cos.min()} over {len(cases)} texts, dimensions {out['dimensions']}")
                failures += 1
            npy = os.path.join(tmp, f"{model}.npy")
            run("-o", npy)
            arr = np.load(npy)
            if arr.dtype != np.float32 or arr.shape != got.shape or np.abs(arr - got).max() > 1e-6:
                print(f"FAIL: {model}: .npy {arr.dtype} {arr.shape} differs from the JSON"); failures += 1
            run("-o", npy, "--format", "int8", "--dimensions", "32")
            q, scales = np.load(npy), np.load(npy[:-4] + ".scales.npy")
            cut = ref[:, :32] / np.linalg.norm(ref[:, :32], axis=1, keepdims=True)
            deq = q.astype(np.float64) * scales
            cos8 = (deq * cut).sum(1) / np.linalg.norm(deq, axis=1)
            if q.dtype != np.int8 or q.shape != (len(cases), 32) or cos8.min() < 0.995:
                print(f"FAIL: {model}: int8 {q.dtype} {q.shape}, cosine {cos8.min()}"); failures += 1
            run("-o", npy, "--format", "binary")
            bits = np.unpackbits(np.load(npy), axis=1)[:, :ref.shape[1]]
            sure = np.abs(ref) > 0.02
            if (bits[sure] != (ref[sure] > 0)).any():
                print(f"FAIL: {model}: sign bits differ from the reference"); failures += 1
        bad = subprocess.run([tool, os.path.join(root, "qwen3.tern"), "-p", "x", "--prompt", "nope"], capture_output=True,
                             text=True)
        if bad.returncode == 0 or "no prompt named 'nope'" not in bad.stderr:
            print(f"FAIL: an unknown prompt gave {bad.returncode}: {bad.stderr}"); failures += 1
    print(f"{0 if failures else 1} passed, {failures} failed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
