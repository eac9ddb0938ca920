#!/usr/bin/env python3
"""Random sentences of every grammar the converter makes from the JSON-Schema-Test-Suite,
validated by an independent validator (python3-jsonschema, Draft202012Validator or
Draft7Validator by the schema's draft).

tern-schema-sentences walks each grammar's token masks over the byte vocabulary with a seeded
RNG and prints the finished walks; every one must parse as JSON (Python's json module) and be
valid against its schema. Also fails when too few sentences come out (the walks stopped
finishing) or too few schemas have any.

  json_schema_sentences_test.py --sentences TERN_SCHEMA_SENTENCES [--emulator=QEMU,ARG,...]
                                [--per-schema 24] [--seed 1]
"""
import argparse
import json
import subprocess
import sys
import time

try:
    import jsonschema
except ImportError:
    print("FAILED: python3-jsonschema is not installed (.ci/deps installs it)")
    sys.exit(1)

VALIDATORS = {"draft2020-12": jsonschema.Draft202012Validator, "draft7": jsonschema.Draft7Validator}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sentences", required=True)
    ap.add_argument("--emulator", default="")
    ap.add_argument("--per-schema", type=int, default=24)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--min-sentences", type=int, default=3000)
    args = ap.parse_args()
    cmd = [a for a in args.emulator.split(",") if a] + [args.sentences, "--per-schema", str(args.per_schema),
                                                        "--seed", str(args.seed)]
    start = time.monotonic()
    out = subprocess.run(cmd, capture_output=True, text=True, encoding="utf-8")
    if out.returncode != 0:
        print(f"FAILED: {' '.join(cmd)} exited with {out.returncode}: {out.stderr}")
        return 1
    generated = time.monotonic() - start
    schemas = sentences = 0
    per_draft = {}
    failures = []
    rows = [json.loads(line) for line in out.stdout.split("\n") if line]  # not splitlines(): U+2028 is text
    for row in rows:
        validator = VALIDATORS[row["draft"]](row["schema"])
        schemas += 1
        per_draft[row["draft"]] = per_draft.get(row["draft"], 0) + len(row["sentences"])
        for text in row["sentences"]:
            sentences += 1
            where = f"{row['draft']}/{row['keyword']}.json group {row['group']}: {json.dumps(row['schema'])}"
            try:
                value = json.loads(text)
            except ValueError as e:
                failures.append(f"{where}\n  not JSON ({e}): {text!r}")
                continue
            errors = [e.message for e in validator.iter_errors(value)]
            if errors:
                failures.append(f"{where}\n  invalid: {text!r}\n  {errors[0]}")
    with_sentences = sum(1 for row in rows if row["sentences"])
    print(f"{sentences} sentences from {with_sentences} of {schemas} grammars "
          f"({', '.join(f'{d}: {n}' for d, n in sorted(per_draft.items()))}); generated in {generated:.1f} s, "
          f"{len(failures)} invalid")
    for f in failures[:40]:
        print("FAILED: " + f)
    if failures:
        return 1
    if sentences < args.min_sentences or with_sentences < schemas * 9 // 10:
        print(f"FAILED: too few sentences ({sentences}, at least {args.min_sentences}) or grammars with any "
              f"({with_sentences} of {schemas})")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
