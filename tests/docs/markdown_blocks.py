#!/usr/bin/env python3
"""Runs the runnable blocks of Markdown files, so a quick start that a user copies runs as written.

A block is marked by an HTML comment on the line right before its opening fence (invisible
when rendered):

  <!-- test: build -->          an install or build step. Run only with --with-build (.ci/demo
                                runs the README's this way); the ctest uses its own build tree.
  <!-- test: run -->            run with `bash -euo pipefail`; must exit 0.
  <!-- test: output -->         right after a run block: its expected stdout. A line `...`
                                matches any number of lines, `...` inside a line any text;
                                trailing spaces are ignored.
  <!-- test: file NAME -->      the block's text is written to NAME, for a later block to use.
  <!-- test: background URL --> started in the background; the next block waits until URL
                                answers; stopped (SIGTERM) after the file's last block.

Blocks run in document order, one folder per Markdown file. By default that folder is a
scratch copy of the checkout's shape: each top-level entry symlinked, `build/release` the build
tree given with --build, `build/npm` the npm folder given with --npm. With --in-place they run
in the checkout itself. Unmarked blocks are illustrations and are not run.
"""

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request

MARKER = re.compile(r"^<!--\s*test:\s*(\S+)(?:\s+(.*?))?\s*-->\s*$")
FENCE = re.compile(r"^(\s{0,3})(`{3,}|~{3,})(.*)$")
KINDS = ("build", "run", "output", "file", "background")
SKIPPED_DIRS = {".git", ".deps", "build", "node_modules"}


class Block:
    def __init__(self, path, line, kind, arg, text):
        self.path, self.line, self.kind, self.arg, self.text = path, line, kind, arg, text

    def where(self):
        return "%s:%d" % (self.path, self.line)


class DocError(Exception):
    pass


def closes(line, ticks):
    s = line.strip()
    return len(s) >= len(ticks) and set(s) == {ticks[0]}


def parse(path, display):
    """The marked blocks of one Markdown file; a marker not followed by a fence is an error."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    blocks, i = [], 0
    while i < len(lines):
        m = MARKER.match(lines[i])
        if not m:
            i += 1
            continue
        kind, arg = m.group(1), (m.group(2) or "").strip()
        where = "%s:%d" % (display, i + 1)
        if kind not in KINDS:
            raise DocError("%s: unknown marker 'test: %s' (one of: %s)" % (where, kind, ", ".join(KINDS)))
        if kind in ("file", "background") and not arg:
            raise DocError("%s: 'test: %s' needs an argument" % (where, kind))
        fence = FENCE.match(lines[i + 1]) if i + 1 < len(lines) else None
        if not fence:
            raise DocError("%s: 'test: %s' is not followed by a fenced block" % (where, kind))
        indent, ticks = fence.group(1), fence.group(2)
        body, j = [], i + 2
        while j < len(lines) and not closes(lines[j], ticks):
            body.append(lines[j][len(indent):] if lines[j].startswith(indent) else lines[j])
            j += 1
        if j == len(lines):
            raise DocError("%s: the block is not closed" % where)
        blocks.append(Block(display, i + 2, kind, arg, "\n".join(body) + "\n"))
        i = j + 1
    for k, b in enumerate(blocks):
        if b.kind == "output" and (k == 0 or blocks[k - 1].kind != "run"):
            raise DocError("%s: an output block must follow a run block" % b.where())
    return blocks


def matches(expected, actual):
    """doctest-style: `...` alone on a line spans any lines; inside a line, any text."""
    exp = [l.rstrip() for l in expected.rstrip("\n").split("\n")]
    act = [l.rstrip() for l in actual.rstrip("\n").split("\n")] if actual.strip() else []

    def line_ok(e, a):
        parts = e.split("...")
        return re.fullmatch(".*".join(re.escape(p) for p in parts), a, re.S) is not None

    memo = {}

    def go(i, j):
        if (i, j) in memo:
            return memo[(i, j)]
        if i == len(exp):
            r = j == len(act)
        elif exp[i].strip() == "...":
            r = any(go(i + 1, k) for k in range(j, len(act) + 1))
        else:
            r = j < len(act) and line_ok(exp[i], act[j]) and go(i + 1, j + 1)
        memo[(i, j)] = r
        return r

    return go(0, 0)


def mirror(checkout, folder, build, npm):
    """A scratch folder shaped like the checkout, with the given build tree at build/release."""
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(os.path.join(folder, "build"))
    for name in os.listdir(checkout):
        if name not in (".git", "build"):
            os.symlink(os.path.join(checkout, name), os.path.join(folder, name))
    os.symlink(build, os.path.join(folder, "build", "release"))
    if npm:
        os.symlink(npm, os.path.join(folder, "build", "npm"))


def script_prelude():
    # The docs say `sudo apt-get ...`; a root shell without sudo (a container, CI) runs it as is.
    if os.getuid() == 0 and shutil.which("sudo") is None:
        return 'sudo() { "$@"; }\n'
    return ""


def wait_for(url, proc, block, timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            raise DocError("%s: the background command exited (%d) before %s answered" % (block.where(), proc.returncode, url))
        try:
            urllib.request.urlopen(url, timeout=2).read()
            return
        except urllib.error.HTTPError:
            return  # it answers, if not with 200
        except OSError:
            time.sleep(0.2)
    raise DocError("%s: %s did not answer within %d s" % (block.where(), url, timeout))


def stop(procs):
    for proc, log in procs:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        log.close()


def run_file(blocks, cwd, env, with_build, timeout):
    """Runs one file's blocks; returns the number run. Raises DocError on the first failure."""
    prelude, procs, pending_url, count = script_prelude(), [], None, 0
    try:
        for k, b in enumerate(blocks):
            if b.kind == "output":
                continue
            if b.kind == "build" and not with_build:
                continue
            if pending_url:
                wait_for(*pending_url)
                pending_url = None
            count += 1
            start = time.time()
            if b.kind == "file":
                target = os.path.join(cwd, b.arg)
                os.makedirs(os.path.dirname(target), exist_ok=True)
                with open(target, "w", encoding="utf-8") as f:
                    f.write(b.text)
                print("  %-40s file %s" % (b.where(), b.arg), flush=True)
                continue
            script = prelude + b.text
            if b.kind == "background":
                log = open(os.path.join(cwd, ".background-%d.log" % b.line), "w+")
                proc = subprocess.Popen(["bash", "-euo", "pipefail", "-c", script], cwd=cwd, env=env, stdout=log,
                                        stderr=subprocess.STDOUT, start_new_session=True)
                procs.append((proc, log))
                pending_url = (b.arg, proc, b)
                print("  %-40s background, waits for %s" % (b.where(), b.arg), flush=True)
                continue
            if b.kind == "build":
                # Builds take minutes on a small machine: their output streams, with no time limit.
                print("  %-40s build ..." % b.where(), flush=True)
                r = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=cwd, env=env, text=True)
                r.stdout = r.stderr = "(shown above)\n"
            else:
                r = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=cwd, env=env, capture_output=True,
                                   text=True, errors="replace", timeout=timeout)
            took = time.time() - start
            if r.returncode != 0:
                raise DocError("%s: exit status %d\n--- block\n%s--- stdout\n%s--- stderr\n%s" %
                               (b.where(), r.returncode, b.text, r.stdout[-4000:], r.stderr[-4000:]))
            nxt = blocks[k + 1] if k + 1 < len(blocks) else None
            if nxt is not None and nxt.kind == "output" and not matches(nxt.text, r.stdout):
                raise DocError("%s: the output differs from the one shown at %s\n--- shown\n%s--- got\n%s--- stderr\n%s" %
                               (b.where(), nxt.where(), nxt.text, r.stdout, r.stderr[-2000:]))
            checked = " (output checked)" if nxt is not None and nxt.kind == "output" else ""
            print("  %-40s %s ok in %.1f s%s" % (b.where(), b.kind, took, checked), flush=True)
        if pending_url:
            wait_for(*pending_url)
    finally:
        stop(procs)
    return count


def markdown_files(checkout):
    found = []
    for root, dirs, files in os.walk(checkout):
        rel = os.path.relpath(root, checkout)
        dirs[:] = sorted(d for d in dirs if d not in SKIPPED_DIRS and not (rel == "." and d.startswith("build")))
        found += [os.path.join(root, f) for f in sorted(files) if f.endswith(".md")]
    return found


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="*", help="Markdown files (default: every one in the checkout)")
    ap.add_argument("--checkout", default=os.getcwd(), help="the repository's root")
    ap.add_argument("--build", help="the build tree that stands in at build/release")
    ap.add_argument("--npm", help="the npm folder that stands in at build/npm (NODE_PATH)")
    ap.add_argument("--scratch", help="where the per-file folders are made")
    ap.add_argument("--in-place", action="store_true", help="run in the checkout itself")
    ap.add_argument("--with-build", action="store_true", help="also run the build blocks")
    ap.add_argument("--exclude", action="append", default=[], help="a path (relative to the checkout) not to read")
    ap.add_argument("--list", action="store_true", help="only list the marked blocks")
    ap.add_argument("--timeout", type=int, default=900, help="seconds per block (build blocks have no limit)")
    args = ap.parse_args()

    checkout = os.path.realpath(args.checkout)
    files = [os.path.realpath(f) for f in args.files] or markdown_files(checkout)
    excluded = {os.path.realpath(os.path.join(checkout, e)) for e in args.exclude}
    try:
        parsed = [(f, parse(f, os.path.relpath(f, checkout))) for f in files
                  if not any(f == e or f.startswith(e + os.sep) for e in excluded)]
    except DocError as e:
        print("error: %s" % e, file=sys.stderr)
        return 1
    parsed = [(f, bs) for f, bs in parsed if any(b.kind != "build" or args.with_build for b in bs)]
    if args.list:
        for f, bs in parsed:
            for b in bs:
                print("%s %s %s" % (b.where(), b.kind, b.arg))
        return 0
    if not args.in_place and not (args.build and args.scratch):
        ap.error("give --build and --scratch, or --in-place")

    env = dict(os.environ)
    if args.npm:
        env["NODE_PATH"] = os.path.join(os.path.realpath(args.npm), "node_modules")
    total = 0
    for f, blocks in parsed:
        rel = os.path.relpath(f, checkout)
        if args.in_place:
            cwd = checkout
        else:
            cwd = os.path.join(os.path.realpath(args.scratch), rel.replace(os.sep, "__"))
            mirror(checkout, cwd, os.path.realpath(args.build), os.path.realpath(args.npm) if args.npm else None)
        print("%s (in %s)" % (rel, cwd), flush=True)
        try:
            total += run_file(blocks, cwd, env, args.with_build, args.timeout)
        except (DocError, subprocess.TimeoutExpired) as e:
            print("FAILED: %s" % e, file=sys.stderr)
            return 1
    if total == 0:
        print("error: no runnable block found (a quick start lost its markers?)", file=sys.stderr)
        return 1
    print("%d blocks from %d Markdown files ran as written" % (total, len(parsed)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
