#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Builds the tern wheel that carries libtern.so.0, for a machine that has no libtern:

    python3 bindings/python/build_wheel.py --library build/release/runtime/libtern.so.0 --out dist

The wheel holds the package, libtern.so.0 and the libraries it needs beyond glibc and the
GCC runtime (libpthreadpool.so.0 and libcpuinfo.so.0, from Debian's libpthreadpool0 and
libcpuinfo0), their licences in the dist-info's licenses/, and bundled-libraries.txt, the
order the package loads them in before libtern. Its tag is py3-none-linux_<machine>, the
machine read from the library's ELF header (an arm64 library makes a linux_aarch64 wheel).
Prints the wheel's path. Standard library only, any CPython >= 3.9.
"""

import argparse
import os
import struct
import sys

sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "backend"))
import tern_backend  # noqa: E402

SONAME = "libtern.so.0"
# ELF e_machine: the platform tag's machine, the Debian multiarch triplet.
MACHINES = {62: ("x86_64", "x86_64-linux-gnu"), 183: ("aarch64", "aarch64-linux-gnu")}
# Every glibc/GCC system has these; a wheel does not carry them (manylinux's rule too).
SYSTEM = {"libc.so.6", "libm.so.6", "libpthread.so.0", "libdl.so.2", "librt.so.1", "libstdc++.so.6",
          "libgcc_s.so.1", "ld-linux-x86-64.so.2", "ld-linux-aarch64.so.1"}
# What the wheel may carry: the library and the Debian package whose copyright file is its
# licence (both BSD-2-Clause).
CARRIED = {"libpthreadpool.so.0": "libpthreadpool0", "libcpuinfo.so.0": "libcpuinfo0"}


class Elf:
    """The header fields and dynamic entries a wheel needs, from a 64-bit little-endian ELF."""

    def __init__(self, path):
        with open(path, "rb") as f:
            data = f.read()
        if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
            raise SystemExit("%s: not a 64-bit little-endian ELF file" % path)
        self.machine = struct.unpack_from("<H", data, 18)[0]
        shoff, = struct.unpack_from("<Q", data, 40)
        shentsize, shnum = struct.unpack_from("<HH", data, 58)
        sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
        self.needed, self.soname = [], None
        for _, sh_type, _, _, offset, size, link, _, _, entsize in sections:
            if sh_type != 6:  # SHT_DYNAMIC
                continue
            strtab = sections[link][4]
            for i in range(size // entsize):
                tag, value = struct.unpack_from("<qQ", data, offset + i * entsize)
                if tag in (1, 14):  # DT_NEEDED, DT_SONAME
                    name = data[strtab + value:data.index(b"\0", strtab + value)].decode()
                    if tag == 1:
                        self.needed.append(name)
                    else:
                        self.soname = name


def find(name, directories, machine):
    for d in directories:
        path = os.path.join(d, name)
        if os.path.exists(path) and Elf(path).machine == machine:
            return os.path.realpath(path)
    raise SystemExit("%s: not found for this machine in %s (--lib-dir adds a folder)" % (name, ", ".join(directories)))


def licence_of(library, package, licence_dirs):
    """The Debian copyright file of `package`: in a --licence-dir, else in the root the library
    sits in (/usr/share/doc for /usr/lib/<triplet>, or an unpacked .deb's)."""
    candidates = [os.path.join(d, package, "copyright") for d in licence_dirs]
    parts = library.split(os.sep)
    for cut in ("usr", "lib"):
        if cut in parts:
            root = os.sep.join(parts[:len(parts) - 1 - parts[::-1].index(cut)]) or os.sep
            candidates.append(os.path.join(root, "usr", "share", "doc", package, "copyright"))
    for path in candidates:
        if os.path.isfile(path):
            return path
    raise SystemExit("%s: no licence for %s found in %s (--licence-dir adds a folder)" % (library, package,
                                                                                       ", ".join(candidates)))


def carried_libraries(library, machine, triplet, lib_dirs):
    """(file name, path) of each library to carry, each after those it needs."""
    directories = lib_dirs + [os.path.dirname(library), "/usr/lib/" + triplet, "/lib/" + triplet]
    order, seen = [], set()

    def visit(path):
        for name in Elf(path).needed:
            if name in SYSTEM or name in seen:
                continue
            if name not in CARRIED:
                raise SystemExit("%s needs %s, which this script does not know how to carry" % (path, name))
            seen.add(name)
            found = find(name, directories, machine)
            visit(found)
            order.append((name, found))

    visit(library)
    return order


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--library", required=True, help="the libtern.so.0 to carry")
    parser.add_argument("--out", required=True, help="folder to write the wheel into")
    parser.add_argument("--lib-dir", action="append", default=[],
                        help="a folder to look for the libraries libtern needs in, before the system's")
    parser.add_argument("--licence-dir", action="append", default=[],
                        help="a folder of PACKAGE/copyright files (like /usr/share/doc), before the system's")
    args = parser.parse_args()

    library = os.path.realpath(args.library)
    elf = Elf(library)
    if elf.soname != SONAME:
        raise SystemExit("%s: its SONAME is %s, not %s" % (args.library, elf.soname, SONAME))
    if elf.machine not in MACHINES:
        raise SystemExit("%s: ELF machine %d is not one this script tags" % (args.library, elf.machine))
    machine, triplet = MACHINES[elf.machine]
    carried = carried_libraries(library, elf.machine, triplet, args.lib_dir)

    files = [(name, data, False) for name, data, _ in tern_backend._pure_files()]
    files.append(("tern/" + SONAME, tern_backend._read(library), True))
    for name, path in carried:
        files.append(("tern/" + name, tern_backend._read(path), True))
    listing = "".join(name + "\n" for name, _ in carried)
    files.append(("tern/bundled-libraries.txt", listing.encode(), False))
    files += tern_backend.extra_licences(
        [(CARRIED[name] + ".copyright", tern_backend._read(licence_of(path, CARRIED[name], args.licence_dir)))
         for name, path in carried])
    name = tern_backend.wheel(args.out, "py3-none-linux_" + machine, files, False)
    print(os.path.join(args.out, name))


if __name__ == "__main__":
    main()
