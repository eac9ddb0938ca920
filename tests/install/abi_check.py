#!/usr/bin/env python3
"""libtern's ABI against the one kept in cmake/libtern.abi.

  abi_check.py --library libtern.so --header include/tern.h --abi cmake/libtern.abi
               [--nm NM] [--readelf READELF] [--clang CLANG] [--target TRIPLE] [--write]

Fails when the library exports anything but the header's tern_* functions, when a kept
symbol is gone or a kept struct's layout (size, alignment, each field's offset and type)
changed while the SONAME stayed, and when the library or header has something the file does
not list yet (add it: additions need no new SONAME). --write prints the file for what is
built now: after a deliberate break, bump TERN_SOVERSION and keep that output instead.

Symbols come from `nm -D`, the SONAME from `readelf -d`, struct layouts from clang's record
layout dump of the header for the library's target (no program runs, so cross builds check
the same way).
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

HEADER_NOTE = """\
# libtern's ABI, kept on purpose: tests/install/abi_check.py (ctest install_abi_test) compares
# the built library and include/tern.h with it; bindings/python checks its ctypes mirror too.
# Adding a function or struct: add its lines (no SONAME change). Removing a function or
# changing a struct (size, a field's offset or type; appending a field changes the size)
# breaks apps built against the old header: bump TERN_SOVERSION in CMakeLists.txt and write
# this file anew (abi_check.py --write). Struct layouts are the LP64 ones (x86-64, aarch64).
"""


def run(cmd):
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit("abi_check: %s failed:\n%s" % (" ".join(cmd), result.stderr))
    return result.stdout


def soname(args):
    m = re.search(r"\(SONAME\)\s+Library soname: \[([^\]]+)\]", run([args.readelf, "-d", args.library]))
    return m.group(1) if m else None


def exported(args):
    names = set()
    for line in run([args.nm, "-D", "--defined-only", args.library]).splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[1] != "A":  # "A": a version node's name, not a symbol
            names.add(parts[2].split("@")[0])
    return names


def declared(header_text):
    return set(re.findall(r"\bTERN_API\b[^;{]*?\b(tern_\w+)\s*\(", header_text))


def layouts(args, header_text):
    """{struct: (size, align, [(offset, type, field)])} for every typedef'd struct of the header."""
    names = re.findall(r"typedef struct (tern_\w+) \{", header_text)
    with tempfile.NamedTemporaryFile("w", suffix=".c") as source:
        source.write('#include "%s"\n' % os.path.abspath(args.header))
        source.write("int tern_abi_sizes[] = {%s};\n" % ", ".join("(int)sizeof(%s)" % n for n in names))
        source.flush()
        cmd = [args.clang, "-fsyntax-only", "-Xclang", "-fdump-record-layouts", source.name]
        if args.target:
            cmd[1:1] = ["--target=" + args.target]
        dump = run(cmd)
    out = {}
    for block in dump.split("*** Dumping AST Record Layout")[1:]:
        lines = [l for l in block.splitlines() if "|" in l]
        title = re.match(r"\s*0 \| struct (\w+)$", lines[0])
        if not title or title.group(1) not in names:
            continue
        fields = []
        for line in lines[1:]:
            m = re.match(r"\s*(\d+) \|   (\S.*) (\w+)$", line)  # two spaces deeper: a nested struct's own fields
            if m:
                fields.append((int(m.group(1)), m.group(2), m.group(3)))
        size = re.search(r"\[sizeof=(\d+), align=(\d+)\]", block)
        out[title.group(1)] = (int(size.group(1)), int(size.group(2)), fields)
    missing = set(names) - set(out)
    if missing:
        sys.exit("abi_check: clang dumped no layout for %s" % ", ".join(sorted(missing)))
    return out


def render(name, symbols, structs):
    lines = [HEADER_NOTE, "soname %s" % name]
    lines += ["symbol %s" % s for s in sorted(symbols)]
    for struct in sorted(structs):
        size, align, fields = structs[struct]
        lines.append("struct %s size %d align %d" % (struct, size, align))
        lines += ["  %d %s %s" % f for f in fields]
    return "\n".join(lines) + "\n"


def parse(path):
    kept_soname, symbols, structs, struct = None, set(), {}, None
    for number, line in enumerate(open(path), 1):
        if not line.strip() or line.startswith("#"):
            continue
        if line.startswith("soname "):
            kept_soname = line.split()[1]
        elif line.startswith("symbol "):
            symbols.add(line.split()[1])
        elif line.startswith("struct "):
            m = re.match(r"struct (\w+) size (\d+) align (\d+)$", line.strip())
            struct = m.group(1)
            structs[struct] = (int(m.group(2)), int(m.group(3)), [])
        elif line.startswith("  ") and struct:
            m = re.match(r"  (\d+) (.*) (\w+)$", line.rstrip("\n"))
            structs[struct][2].append((int(m.group(1)), m.group(2), m.group(3)))
        else:
            sys.exit("abi_check: %s:%d: cannot read %r" % (path, number, line))
    return kept_soname, symbols, structs


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--library", required=True)
    parser.add_argument("--header", required=True)
    parser.add_argument("--abi", required=True)
    parser.add_argument("--nm", default="nm")
    parser.add_argument("--readelf", default="readelf")
    parser.add_argument("--clang", default="clang")
    parser.add_argument("--target")
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()

    header_text = open(args.header).read()
    built_soname, built_symbols, built_structs = soname(args), exported(args), layouts(args, header_text)
    if args.write:
        sys.stdout.write(render(built_soname, built_symbols, built_structs))
        return 0
    kept_soname, kept_symbols, kept_structs = parse(args.abi)
    problems = []

    strays = sorted(s for s in built_symbols if not s.startswith("tern_"))
    if strays:
        problems.append("exports more than the C API: %s (cmake/libtern.map)" % ", ".join(strays[:20]))
    undeclared = sorted(built_symbols - declared(header_text) - set(strays))
    if undeclared:
        problems.append("exports tern_* functions include/tern.h does not declare with TERN_API: %s" %
                        ", ".join(undeclared))
    unexported = sorted(declared(header_text) - built_symbols)
    if unexported:
        problems.append("include/tern.h declares functions the library does not export: %s" % ", ".join(unexported))

    if built_soname != kept_soname:
        problems.append("the SONAME is %s, cmake/libtern.abi was kept for %s: after a deliberate ABI break, "
                        "write the file anew (abi_check.py --write)" % (built_soname, kept_soname))
    else:
        gone = sorted(kept_symbols - built_symbols)
        if gone:
            problems.append("ABI break without a new SONAME: %s no longer exported (removing a function needs "
                            "TERN_SOVERSION bumped)" % ", ".join(gone))
        for struct in sorted(kept_structs):
            if struct not in built_structs:
                problems.append("ABI break without a new SONAME: struct %s is gone from include/tern.h" % struct)
            elif built_structs[struct] != kept_structs[struct]:
                was, now = kept_structs[struct], built_structs[struct]
                what = ["size %d -> %d" % (was[0], now[0])] if was[0] != now[0] else []
                what += ["align %d -> %d" % (was[1], now[1])] if was[1] != now[1] else []
                what += ["-%d %s %s" % f for f in was[2] if f not in now[2]]
                what += ["+%d %s %s" % f for f in now[2] if f not in was[2]]
                if was[:2] == now[:2] and [f[:2] for f in was[2]] == [f[:2] for f in now[2]]:
                    problems.append("struct %s renamed fields (binary compatible, no SONAME change): %s; update "
                                    "cmake/libtern.abi" % (struct, ", ".join(what)))
                else:
                    problems.append("ABI break without a new SONAME: struct %s changed (%s); bump TERN_SOVERSION" %
                                    (struct, ", ".join(what)))
        new_symbols = sorted(built_symbols - kept_symbols - set(strays))
        new_structs = sorted(set(built_structs) - set(kept_structs))
        if new_symbols or new_structs:
            problems.append("not in cmake/libtern.abi yet (additions keep the SONAME; add their lines, "
                            "abi_check.py --write prints them): %s" % ", ".join(new_symbols + new_structs))

    print("%s: %d symbols exported, %d structs; kept: %s, %d symbols, %d structs" %
          (built_soname, len(built_symbols), len(built_structs), kept_soname, len(kept_symbols), len(kept_structs)))
    for p in problems:
        print("FAIL: " + p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
