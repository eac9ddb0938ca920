"""The quick-start harness itself: it must run what is marked, compare output, and fail on a
wrong flag, a wrong path, a wrong output or a typo in a marker."""
import os
import socket
import subprocess
import sys
import textwrap

import pytest

HARNESS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "markdown_blocks.py")


def run_harness(tmp_path, markdown, *extra):
    checkout = tmp_path / "checkout"
    (checkout / "examples").mkdir(parents=True, exist_ok=True)
    (checkout / "examples" / "hello.txt").write_text("hello from the checkout\n")
    doc = checkout / "doc.md"
    doc.write_text(textwrap.dedent(markdown))
    build = tmp_path / "build-tree"
    (build / "tools").mkdir(parents=True, exist_ok=True)
    tool = build / "tools" / "greet"
    tool.write_text("#!/bin/sh\n[ \"$1\" = --name ] || { echo \"unknown option $1\" >&2; exit 2; }\necho \"hi $2\"\n")
    tool.chmod(0o755)
    cmd = [sys.executable, HARNESS, str(doc), "--checkout", str(checkout), "--build", str(build),
           "--scratch", str(tmp_path / "scratch"), *extra]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_runs_blocks_in_order_in_a_mirror_of_the_checkout(tmp_path):
    port = free_port()
    r = run_harness(tmp_path, f"""
        Illustration, not run:
        ```sh
        exit 1
        ```
        <!-- test: build -->
        ```sh
        exit 1
        ```
        <!-- test: file notes/greeting.txt -->
        ```text
        written by the doc
        ```
        <!-- test: background http://127.0.0.1:{port}/ -->
        ```sh
        python3 -m http.server {port} --bind 127.0.0.1
        ```
        <!-- test: run -->
        ```sh
        cat examples/hello.txt notes/greeting.txt
        ./build/release/tools/greet --name reader
        python3 -c 'import urllib.request; print(urllib.request.urlopen("http://127.0.0.1:{port}/notes/").status)'
        ```
        <!-- test: output -->
        ```text
        hello from the checkout
        written by ... doc
        ...
        200
        ```
        """)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "3 blocks from 1 Markdown files ran as written" in r.stdout
    assert "(output checked)" in r.stdout
    # The background server was stopped with the file.
    with socket.socket() as s:
        assert s.connect_ex(("127.0.0.1", port)) != 0


@pytest.mark.parametrize("block, message", [
    ("./build/release/tools/greet --nmae reader", "unknown option --nmae"),     # a renamed flag
    ("cat examples/no-such-file.txt", "No such file"),                          # a renamed path
])
def test_a_failing_command_fails(tmp_path, block, message):
    r = run_harness(tmp_path, f"""
        <!-- test: run -->
        ```sh
        {block}
        ```
        """)
    assert r.returncode == 1
    assert message in r.stderr and "doc.md:3: exit status" in r.stderr


def test_a_different_output_fails(tmp_path):
    r = run_harness(tmp_path, """
        <!-- test: run -->
        ```sh
        ./build/release/tools/greet --name reader
        ```
        <!-- test: output -->
        ```text
        hello reader
        ```
        """)
    assert r.returncode == 1
    assert "the output differs" in r.stderr and "hi reader" in r.stderr


@pytest.mark.parametrize("markdown, message", [
    ("<!-- test: rnu -->\n```sh\ntrue\n```\n", "unknown marker 'test: rnu'"),
    ("<!-- test: run -->\n\n```sh\ntrue\n```\n", "is not followed by a fenced block"),
    ("<!-- test: output -->\n```text\nx\n```\n", "must follow a run block"),
    ("<!-- test: run -->\n```sh\ntrue\n", "is not closed"),
])
def test_a_malformed_marker_fails(tmp_path, markdown, message):
    r = run_harness(tmp_path, markdown)
    assert r.returncode == 1
    assert message in r.stderr


def test_build_blocks_run_only_when_asked(tmp_path):
    doc = """
        <!-- test: build -->
        ```sh
        echo built > built.txt
        ```
        <!-- test: run -->
        ```sh
        cat built.txt
        ```
        """
    assert run_harness(tmp_path, doc).returncode == 1
    r = run_harness(tmp_path, doc, "--with-build")
    assert r.returncode == 0, r.stderr
