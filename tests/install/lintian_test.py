#!/usr/bin/env python3
"""lintian on every .deb a build makes (the ones install_deb_test made with cpack).

  lintian_test.py --debs DIR --packaging DIR [--lintian LINTIAN]

Fails on any error (E:), on any warning (W:) not overridden, on an override lintian no longer
needs (unused-override, mismatched-override) and on an override without a comment saying why.
Prints, per package, how many errors, warnings, info tags and overridden tags lintian reports.
"""
import argparse
import collections
import glob
import os
import re
import subprocess
import sys


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--debs", required=True)
    p.add_argument("--packaging", required=True)
    p.add_argument("--lintian", default="lintian")
    a = p.parse_args()
    debs = sorted(glob.glob(os.path.join(a.debs, "*.deb")))
    if not debs:
        sys.exit("FAIL: no .deb in %s (install_deb_test makes them)" % a.debs)

    # Every override says why: a comment right above it.
    problems = []
    for path in sorted(glob.glob(os.path.join(a.packaging, "*.lintian-overrides"))):
        previous = ""
        for number, line in enumerate(open(path), 1):
            line = line.rstrip("\n")
            if line and not line.startswith("#") and not previous.startswith("#"):
                problems.append("%s:%d: an override without a comment above it: %s" % (path, number, line))
            previous = line

    # --no-cfg: the system's or user's lintianrc does not change the verdict.
    result = subprocess.run([a.lintian, "--no-cfg", "--display-info", "--show-overrides", "--tag-display-limit", "0"] + debs,
                            capture_output=True, text=True)
    stderr = [line for line in result.stderr.splitlines() if line != "running with root privileges is not recommended!"]
    if result.returncode not in (0, 1, 2) or stderr:
        sys.exit("FAIL: lintian exit %d\n%s\n%s" % (result.returncode, result.stdout, result.stderr))
    counts = collections.defaultdict(collections.Counter)
    for line in result.stdout.splitlines():
        m = re.match(r"^([EWIPXON]): ([^ :]+)(?: [^:]+)?: (\S+)", line)
        if not m:
            if line.strip() and not line.startswith("N:"):
                problems.append("unparsed lintian output: " + line)
            continue
        kind, package, tag = m.groups()
        counts[package][kind] += 1
        if kind == "E" or kind == "W":
            problems.append(line)
        elif tag in ("unused-override", "mismatched-override"):
            problems.append(line)
    print("lintian %s on %d packages" % (subprocess.run([a.lintian, "--version"], capture_output=True,
                                                          text=True).stdout.strip(), len(debs)))
    print("%-14s %3s %3s %3s %3s" % ("package", "E", "W", "I", "O"))
    for deb in debs:
        package = os.path.basename(deb).split("_")[0]
        c = counts[package]
        print("%-14s %3d %3d %3d %3d" % (package, c["E"], c["W"], c["I"], c["O"]))
    print(result.stdout)
    if problems:
        sys.exit("FAIL:\n  " + "\n  ".join(problems))
    return 0


if __name__ == "__main__":
    sys.exit(main())
