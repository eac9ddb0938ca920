"""Runs a test helper that answers JSON lines (tern-grammar-check, tern-schema-generate): one
request per line in, one answer per line out. Any failure to answer every request ends the
test as FAILED with the helper's stderr."""
import json
import subprocess
import sys


def ask(cmd, requests):
    out = subprocess.run(cmd, input="\n".join(json.dumps(r) for r in requests) + "\n", capture_output=True,
                         text=True, encoding="utf-8")
    answers = [json.loads(line) for line in out.stdout.splitlines()] if out.returncode == 0 else []
    if len(answers) != len(requests):
        print(f"FAILED: {' '.join(cmd)} exited with {out.returncode} after {len(answers)} of {len(requests)} "
              f"answers: {out.stderr}")
        sys.exit(1)
    return answers
