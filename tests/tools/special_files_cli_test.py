#!/usr/bin/python3
"""Every CLI input that is not a regular file is refused at once, naming what it is: a FIFO, a
device (/dev/zero, /dev/null), a directory, a unix socket, given as tern-run's, tern-plan's,
tern-inspect's and tern-convert's bundle or input, as tern-run's --grammar / --json-schema, as
tern-convert's --chat-template and --calibrate text, and as tern-server's bundle (the loader
fails, and a SIGTERM while it is "loading" ends the server). Before, a FIFO blocked each of them
forever (tern-server ignored SIGTERM) and /dev/zero as a grammar was read until memory ran out.

usage: special_files_cli_test.py TOOLS_DIR SERVER BUNDLE_DIR
Each run has a deadline, so a blocked tool fails the test rather than hanging it."""
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

DEADLINE = 20  # seconds; a refusal takes milliseconds


def special_files(tmp):
    fifo = os.path.join(tmp, "fifo.tern")
    os.mkfifo(fifo)
    directory = os.path.join(tmp, "dir.tern")
    os.mkdir(directory)
    sock_path = os.path.join(tmp, "sock.tern")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(sock_path)
    sock.listen(1)
    kinds = [("FIFO", fifo), ("character device", "/dev/zero"), ("character device", "/dev/null"),
             ("directory", directory), ("socket", sock_path)]
    return kinds, sock


def refused(name, argv, kind, path):
    """The tool exits non-zero before the deadline and names the path and what it is."""
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=DEADLINE, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        print(f"FAIL: {name} on {kind} {path}: still running after {DEADLINE} s")
        return False
    err = r.stderr + r.stdout
    if r.returncode == 0 or path not in err or kind not in err:
        print(f"FAIL: {name} on {kind} {path}: exit {r.returncode}, said: {err.strip()[:300]!r}")
        return False
    return True


def server_refuses(server, kind, path):
    """tern-server with PATH as its bundle: the loader fails (exit 1, naming the kind), and a
    SIGTERM sent once it listens ends it within the deadline either way."""
    p = subprocess.Popen([server, path, "--port", "0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    port = p.stdout.readline()  # the port once it listens (empty if it ended first)
    if port.strip():
        p.send_signal(signal.SIGTERM)
    try:
        _, err = p.communicate(timeout=DEADLINE)
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()
        print(f"FAIL: tern-server on {kind} {path}: still running {DEADLINE} s after SIGTERM")
        return False
    if p.returncode != 1 or kind not in err:
        print(f"FAIL: tern-server on {kind} {path}: exit {p.returncode}, said: {err.strip()[:300]!r}")
        return False
    return True


def main():
    tools, server, bundles = sys.argv[1], sys.argv[2], sys.argv[3]
    bundle = os.path.join(bundles, "tiny-austen-packed.tern")
    if not os.path.exists(bundle):
        sys.exit(f"FAIL: {bundle} is missing (ctest converts it first, in runtime_make_bundles)")
    tool = lambda name: os.path.join(tools, name)
    checks = failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        kinds, sock = special_files(tmp)
        out = os.path.join(tmp, "out.tern")
        for kind, path in kinds:
            cases = {
                "tern-run BUNDLE": [tool("tern-run"), path, "-p", "Hi", "-n", "1"],
                "tern-run --grammar": [tool("tern-run"), bundle, "-p", "Hi", "-n", "1", "--grammar", path],
                "tern-run --json-schema": [tool("tern-run"), bundle, "-p", "Hi", "-n", "1", "--json-schema", path],
                "tern-plan BUNDLE": [tool("tern-plan"), path, "--budget", "64M"],
                "tern-inspect BUNDLE": [tool("tern-inspect"), path],
                "tern-convert INPUT": [tool("tern-convert"), path, "-o", out, "-q"],
                "tern-convert --chat-template": [tool("tern-convert"), "--synthetic", "tiny", "-o", out, "-q",
                                                 "--chat-template", path],
                "tern-convert --calibrate": [tool("tern-convert"), "--synthetic", "tiny", "-o", out, "-q",
                                             "--calibrate", path],
            }
            if kind == "directory":  # a directory is tern-convert's Hugging Face input: its own message
                del cases["tern-convert INPUT"]
            for name, argv in cases.items():
                checks += 1
                failures += not refused(name, argv, kind, path)
            checks += 1
            failures += not server_refuses(server, kind, path)
        sock.close()
    print(f"{checks - failures} of {checks} refusals as expected")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
