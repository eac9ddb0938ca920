#!/usr/bin/env python3
"""Does the README's `apt-get install` line name every Debian package the user build uses?

A new user installs exactly that line; on a development machine everything is installed, so
a missing package would go unnoticed until a newcomer's build failed. This configures the
README's user build (cmake only, in a scratch folder), then collects what it would use: the
files CMake found (libraries, programs, data, package configs) and every system header its
objects include (taken from the dependency records of the same objects in an already built
tree of this project). Each file must belong to a package the README's line installs, or to
one those depend on.
"""

import argparse
import os
import re
import shlex
import subprocess
import sys


def readme_packages(readme):
    """The package names on the `apt-get install` lines of the README's build blocks."""
    text = open(readme, encoding="utf-8").read()
    blocks = re.findall(r"<!--\s*test:\s*build\s*-->\s*\n(`{3,}|~{3,})[^\n]*\n(.*?)\n\1", text, re.S)
    packages = set()
    for _, body in blocks:
        for command in body.replace("\\\n", " ").split("\n"):
            words = shlex.split(command, comments=True)
            if "apt-get" in words and "install" in words:
                packages |= {w for w in words[words.index("install") + 1:] if not w.startswith("-")}
    return packages


def closure(packages):
    """The packages and everything they depend on (pre-depends included), as apt resolves them."""
    out = subprocess.run(["apt-cache", "depends", "--recurse", "--no-recommends", "--no-suggests", "--no-conflicts",
                          "--no-breaks", "--no-replaces", "--no-enhances", *sorted(packages)],
                         capture_output=True, text=True, check=True).stdout
    names = set()
    for line in out.split("\n"):
        line = line.strip()
        if not line:
            continue
        name = line.split(":", 1)[1].strip() if ":" in line and line.split(":")[0].endswith("epends") else line
        names.add(name.strip("<>").split(":")[0])  # virtual packages come as <name>; drop :any
    return names


def essential_packages():
    out = subprocess.run(["dpkg-query", "-W", "-f", "${Package} ${Essential} ${Priority}\\n"], capture_output=True,
                         text=True, check=True).stdout
    return {l.split()[0] for l in out.splitlines() if " yes " in l + " " or l.endswith(" required")}


def files_cmake_found(cache, optional):
    found = set()
    for line in open(cache, encoding="utf-8"):
        m = re.match(r"^([A-Za-z0-9_.+-]+):(FILEPATH|PATH)=(/usr/.*)$", line.strip())
        if not m or m.group(1).startswith("CMAKE_INSTALL") or m.group(1) in optional:
            continue
        path = m.group(3)
        if os.path.isfile(path) or (os.path.isdir(path) and m.group(1).endswith("_DIR") and "/cmake/" in path):
            found.add(path)
    return found


def headers_used(user_build, built_tree):
    """System headers the user build's objects include, from the built tree's records of them."""
    targets = subprocess.run(["ninja", "-C", user_build, "-t", "targets", "all"], capture_output=True, text=True,
                             check=True).stdout
    objects = [l.split(":")[0] for l in targets.splitlines() if re.match(r"^[^:]+\.(c|cc|cpp)\.o:", l)]
    headers, missing = set(), []
    for i in range(0, len(objects), 200):
        out = subprocess.run(["ninja", "-C", built_tree, "-t", "deps", *objects[i:i + 200]], capture_output=True,
                             text=True).stdout
        for block in out.split("\n\n"):
            lines = block.strip().split("\n")
            if not lines[0]:
                continue
            if "(VALID)" not in lines[0] and "(STALE)" not in lines[0]:
                missing.append(lines[0].split(":")[0])
            headers |= {l.strip() for l in lines[1:] if l.strip().startswith("/usr/")}
    return objects, headers, missing


def owners(paths, info="/var/lib/dpkg/info"):
    """path -> the packages that ship it (None: none does), read from dpkg's file lists."""
    wanted = {}
    for path in paths:
        for candidate in (path, os.path.realpath(path)):
            wanted.setdefault(candidate, set()).add(path)
    result = {path: None for path in paths}
    for name in os.listdir(info):
        if not name.endswith(".list"):
            continue
        package = name[:-len(".list")].split(":")[0]
        with open(os.path.join(info, name), encoding="utf-8", errors="replace") as f:
            for line in f:
                for path in wanted.get(line.rstrip("\n"), ()):
                    result[path] = (result[path] or set()) | {package}
    return result


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--readme", required=True, action="append", help="a Markdown file with the user build's line")
    ap.add_argument("--source", required=True)
    ap.add_argument("--built-tree", required=True, help="a built tree of this project (its objects' header records)")
    ap.add_argument("--scratch", required=True)
    ap.add_argument("--cmake", default="cmake")
    ap.add_argument("--optional", action="append", default=[],
                    help="a cache variable for a program the build uses only when present (help2man)")
    args = ap.parse_args()

    lines = {readme: readme_packages(readme) for readme in args.readme}
    for readme, names in lines.items():
        if not names:
            print("%s has no `apt-get install` line in a `test: build` block" % readme)
            return 1
    packages = lines[args.readme[0]]
    for readme, names in lines.items():
        if names != packages:
            print("%s and %s install different packages for the user build: %s" %
                  (args.readme[0], readme, " ".join(sorted(names ^ packages))))
            return 1
    user_build = os.path.join(args.scratch, "user-build")
    # The README's configure line; the objects it lists are compared with the built tree's.
    subprocess.run([args.cmake, "-S", args.source, "-B", user_build, "-G", "Ninja", "-DTERN_BUILD_TESTS=OFF"],
                   check=True, stdout=subprocess.DEVNULL)
    objects, headers, missing = headers_used(user_build, args.built_tree)
    if missing:
        print("%d of the user build's objects have no dependency record in %s (build it first): %s" %
              (len(missing), args.built_tree, ", ".join(missing[:5])))
        return 1
    used = files_cmake_found(os.path.join(user_build, "CMakeCache.txt"), set(args.optional)) | headers
    allowed = closure(packages) | essential_packages()
    by_file = owners(used)
    unowned = sorted(p for p, o in by_file.items() if o is None)
    outside = {}
    for path, pkgs in by_file.items():
        if pkgs and not (pkgs & allowed):
            outside.setdefault(" or ".join(sorted(pkgs)), []).append(path)
    print("README installs: %s" % " ".join(sorted(packages)))
    print("user build: %d objects, %d system files used, from %d packages" %
          (len(objects), len(used), len({p for o in by_file.values() if o for p in o})))
    if unowned:
        print("files no package owns (built by hand?): %s" % ", ".join(unowned[:10]))
    for pkg, paths in sorted(outside.items()):
        print("not installed by the README's line: %s (for %s)" % (pkg, ", ".join(sorted(paths)[:3])))
    return 1 if outside or unowned else 0


if __name__ == "__main__":
    sys.exit(main())
