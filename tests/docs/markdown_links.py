#!/usr/bin/env python3
"""Every relative link in the repository's Markdown files points at a file or folder that
exists, and every `#anchor` at a heading of its target (GitHub's anchor spelling)."""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from markdown_blocks import markdown_files  # noqa: E402

LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)|!\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})")


def prose_lines(path):
    """The file's lines outside fenced blocks and inline code."""
    fence = None
    for number, line in enumerate(open(path, encoding="utf-8"), 1):
        m = FENCE.match(line)
        if m and (fence is None or m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence)):
            fence = None if fence else m.group(1)
            continue
        if fence is None:
            yield number, re.sub(r"`[^`]*`", "", line)


def anchors(path):
    found = set()
    for _, line in prose_lines(path):
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if m:
            slug = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-")
            base, n = slug, 1
            while slug in found:
                slug, n = "%s-%d" % (base, n), n + 1
            found.add(slug)
    return found


def main():
    checkout = os.path.realpath(sys.argv[1] if len(sys.argv) > 1 else os.getcwd())
    broken, count = [], 0
    for path in markdown_files(checkout):
        rel = os.path.relpath(path, checkout)
        if rel.startswith("tests" + os.sep + "docs" + os.sep):
            continue
        for number, line in prose_lines(path):
            for m in LINK.finditer(line):
                target = m.group(1) or m.group(2)
                if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("//"):
                    continue  # http:, https:, mailto:
                count += 1
                file_part, _, anchor = target.partition("#")
                resolved = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) if file_part else path
                if not os.path.exists(resolved):
                    broken.append("%s:%d: %s (no such file)" % (rel, number, target))
                elif anchor and resolved.endswith(".md") and anchor not in anchors(resolved):
                    broken.append("%s:%d: %s (no heading #%s)" % (rel, number, target, anchor))
    for b in broken:
        print(b)
    print("%d relative links checked, %d broken" % (count, len(broken)))
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
