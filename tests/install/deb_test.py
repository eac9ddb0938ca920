#!/usr/bin/env python3
"""The .debs of a build tree: made with cpack, then read as dpkg would.

  deb_test.py --cpack CPACK --build BUILD --work DIR --arch amd64|arm64 --version V --libdir L
              --bundle B --tern-run BUILD_TERN_RUN --readelf READELF [--host-tools]
              [--emulator=qemu,args...] [--packages DIR] [--python PY --python-source DIR]

Checks: each package's files (exactly), its control fields, that its Depends name exactly the
packages providing the libraries its binaries need (read from the ELF files, mapped to packages
by dpkg's database natively or by the target's unpacked packages when cross-built), the shlibs
file and ldconfig calls; then unpacks both, checks the installed paths inside the files, and
runs the packaged tern-run (under the emulator when cross-built) against the build's own, and
natively the packaged libtern.so.0 from Python, and apt's simulation of installing both.
"""
import argparse
import glob
import time
import os
import re
import shutil
import subprocess
import sys

DEVICE_TOOLS = ["tern-bench", "tern-info", "tern-plan", "tern-run", "tern-server"]
HOST_TOOLS = ["tern-convert", "tern-eval", "tern-inspect", "tern-tokenize"]
PROMPT = "It is a truth universally acknowledged"


def run(cmd, **kw):
    result = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if result.returncode != 0:
        sys.exit("%s: exit %d\n%s\n%s" % (" ".join(cmd), result.returncode, result.stdout, result.stderr))
    return result.stdout


def fail(message):
    sys.exit("FAIL: " + message)


def expect(condition, message):
    if not condition:
        fail(message)


def deb_files(deb):
    """{path: (type, link target)} from dpkg-deb --contents, directories left out."""
    files = {}
    for line in run(["dpkg-deb", "--contents", deb]).splitlines():
        mode, path = line.split()[0], line.split(None, 5)[5]
        target = None
        if " -> " in path:
            path, target = path.split(" -> ")
        path = path[2:] if path.startswith("./") else path
        if mode[0] != "d":
            files[path] = (mode[0], target)
    return files


def control(deb):
    fields = {}
    for line in run(["dpkg-deb", "--field", deb]).splitlines():
        if line and not line[0].isspace() and ":" in line:
            key, value = line.split(":", 1)
            fields[key] = value.strip()
    return fields


def needed(readelf, path):
    out = subprocess.run([readelf, "-d", path], capture_output=True, text=True).stdout
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out)


def is_elf(path):
    with open(path, "rb") as f:
        return f.read(4) == b"\x7fELF"


def native_providers(sonames):
    """{soname: package} from the loader's cache and dpkg's database."""
    cache = {}
    for line in run(["/sbin/ldconfig", "-p"]).splitlines():
        m = re.match(r"\s+(\S+) \(([^)]*)\) => (\S+)", line)
        if m and m.group(1) in sonames and ("x86-64" in m.group(2) or "AArch64" in m.group(2)):  # 64-bit
            cache.setdefault(m.group(1), m.group(3))
    paths = {}
    for soname, path in cache.items():
        for candidate in (path, os.path.realpath(path), "/usr" + path if path.startswith("/lib/") else path):
            paths.setdefault(candidate, soname)
    owners = {}
    # One dpkg-query for all: each call reads dpkg's whole file database.
    out = subprocess.run(["dpkg-query", "-S"] + sorted(paths), capture_output=True, text=True).stdout
    for line in out.splitlines():
        package, path = line.split(": ", 1)
        owners.setdefault(paths.get(path), package.split(":")[0])
    return owners


def unpacked_providers(root, libdir):
    """{soname: package} from the target's runtime packages unpacked with dpkg-deb -R."""
    table = {}
    for package_dir in glob.glob(os.path.join(root, "*")):
        name = control_file_package(os.path.join(package_dir, "DEBIAN", "control"))
        for d in ("usr/" + libdir, libdir):
            for path in glob.glob(os.path.join(package_dir, d, "*.so.*")):
                table.setdefault(os.path.basename(path), name)
    return table


def control_file_package(path):
    for line in open(path):
        if line.startswith("Package:"):
            return line.split(":", 1)[1].strip()
    fail("%s has no Package field" % path)


def main():
    p = argparse.ArgumentParser()
    for option in ("cpack", "build", "work", "arch", "version", "libdir", "bundle", "tern-run", "readelf"):
        p.add_argument("--" + option, required=True)
    p.add_argument("--host-tools", action="store_true")
    p.add_argument("--emulator", default="")
    p.add_argument("--packages")
    p.add_argument("--python")
    p.add_argument("--python-source")
    a = p.parse_args()
    for path in (a.bundle, a.tern_run):
        expect(os.path.exists(path), "%s is missing (ctest's runtime_make_bundles converts the bundle)" % path)

    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    start = time.monotonic()
    run([a.cpack, "--config", os.path.join(a.build, "CPackConfig.cmake"), "-B", a.work])
    print("cpack: %.1f s" % (time.monotonic() - start))
    version = a.version + "-1"
    debs = {name: os.path.join(a.work, "%s_%s_%s.deb" % (name, version, a.arch)) for name in ("tern", "libtern-dev")}
    for name, deb in debs.items():
        expect(os.path.exists(deb), "cpack made no %s (made: %s)" % (deb, os.listdir(a.work)))

    # Contents, exactly.
    lib = "usr/" + a.libdir
    tools = DEVICE_TOOLS + (HOST_TOOLS if a.host_tools else [])
    so = "libtern.so." + a.version
    expected = {
        "tern": {**{"usr/bin/" + t: ("-", None) for t in tools},
                 lib + "/" + so: ("-", None), lib + "/libtern.so.0": ("l", so),
                 "usr/share/tern/systemd/tern-server.service": ("-", None)},
        "libtern-dev": {"usr/include/tern/tern.h": ("-", None), "usr/include/tern/tern_error_codes.h": ("-", None),
                        "usr/include/tern/module.modulemap": ("-", None), lib + "/libtern.so": ("l", "libtern.so.0"),
                        lib + "/pkgconfig/tern.pc": ("-", None),
                        **{lib + "/cmake/Tern/" + f: ("-", None) for f in
                           ("TernConfig.cmake", "TernConfigVersion.cmake", "TernTargets.cmake",
                            "TernTargets-release.cmake")}},
    }
    for name, deb in debs.items():
        files = deb_files(deb)
        if files != expected[name]:
            fail("%s holds\n  %s\nexpected\n  %s" % (name, "\n  ".join("%s %s" % kv for kv in sorted(files.items())),
                                                    "\n  ".join("%s %s" % kv for kv in sorted(expected[name].items()))))

    # Control fields.
    fields = {name: control(deb) for name, deb in debs.items()}
    for name in debs:
        f = fields[name]
        expect(f.get("Package") == name and f.get("Version") == version and f.get("Architecture") == a.arch,
               "%s: Package %s, Version %s, Architecture %s" % (name, f.get("Package"), f.get("Version"),
                                                                 f.get("Architecture")))
        expect(f.get("Maintainer") and f.get("Description"), "%s has no Maintainer or Description" % name)
    expect(fields["libtern-dev"].get("Depends") == "tern (= %s)" % version,
           "libtern-dev Depends: %s" % fields["libtern-dev"].get("Depends"))

    # Unpack; tern's Depends must be exactly the providers of what its ELF files need.
    root = os.path.join(a.work, "root")
    for deb in debs.values():
        run(["dpkg-deb", "--extract", deb, root])
    sonames = set()
    for path, (kind, _) in expected["tern"].items():
        full = os.path.join(root, path)
        if kind == "-" and is_elf(full):
            sonames.update(s for s in needed(a.readelf, full) if not s.startswith("libtern.so."))
    providers = unpacked_providers(a.packages, a.libdir) if a.packages else native_providers(sonames)
    unresolved = sorted(s for s in sonames if s not in providers)
    expect(not unresolved, "no package provides %s" % ", ".join(unresolved))
    wanted = {providers[s] for s in sonames}
    depends = {}
    for item in fields["tern"].get("Depends", "").split(","):
        m = re.match(r"\s*([a-z0-9.+-]+)(?::\w+)?\s*(\((.*)\))?", item)
        if m:
            depends[m.group(1)] = m.group(3)
    expect(set(depends) == wanted, "tern Depends %s; its binaries need %s" % (sorted(depends), sorted(wanted)))
    expect(all(v and v.startswith(">=") for v in depends.values()), "unversioned Depends: %s" % depends)
    info = run(["dpkg-deb", "--info", debs["tern"], "shlibs"])
    expect(info.strip() == "libtern 0 tern (>= %s)" % version, "tern's shlibs file: %r" % info)
    for script in ("postinst", "postrm"):  # CPack's way of refreshing ld.so's cache for libtern.so.0
        text = run(["dpkg-deb", "--info", debs["tern"], script])
        expect(re.search(r"^\s*ldconfig$", text, re.M), "tern's %s does not run ldconfig:\n%s" % (script, text))

    # The files written at install time name /usr, where dpkg puts them.
    pc = open(os.path.join(root, lib, "pkgconfig/tern.pc")).read()
    expect("prefix=/usr\n" in pc and "includedir=${prefix}/include/tern\n" in pc, "tern.pc:\n" + pc)
    unit = open(os.path.join(root, "usr/share/tern/systemd/tern-server.service")).read()
    expect("\nExecStart=/usr/bin/tern-server " in unit, "the unit does not start /usr/bin/tern-server")

    # The packaged tern-run prints what the build's prints.
    emulator = [x for x in a.emulator.split(",") if x]
    args = [a.bundle, "-p", PROMPT, "-n", "32", "--temp", "0", "--memory-budget", "64M"]
    reference = run(emulator + [a.tern_run] + args)
    packaged = run(emulator + [os.path.join(root, "usr/bin/tern-run")] + args)
    expect(packaged == reference and len(reference) > len(PROMPT) + 1,
           "the packaged tern-run printed\n%s\nthe build's\n%s" % (packaged, reference))
    print("packaged tern-run (%s): %s" % (a.arch, packaged.strip()))

    if a.python:
        # The packaged library under the Python binding: the same greedy text.
        code = ("import tern; m = tern.Model(%r, memory_budget='64M'); "
                "print(tern.library_path()); print(%r + m.session(temperature=0).generate(%r, max_tokens=32).text())"
                % (a.bundle, PROMPT, PROMPT))
        env = dict(os.environ, TERN_LIBRARY=os.path.join(root, lib, "libtern.so.0"), PYTHONPATH=a.python_source,
                   PYTHONDONTWRITEBYTECODE="1")
        out = run([a.python, "-c", code], env=env).splitlines()
        expect(out[0] == os.path.realpath(os.path.join(root, lib, so)), "Python loaded %s" % out[0])
        expect("\n".join(out[1:]) + "\n" == reference, "Python over the packaged library printed %s" % out[1:])
        # apt would install both on this system: every dependency exists in a version that fits.
        sim = subprocess.run(["apt-get", "install", "--simulate", "-o", "Debug::NoLocking=1", debs["tern"],
                              debs["libtern-dev"]], capture_output=True, text=True)
        expect(sim.returncode == 0 and re.search(r"^Inst tern ", sim.stdout, re.M),
               "apt-get install --simulate:\n%s%s" % (sim.stdout, sim.stderr))

    print("checks after cpack: %.1f s" % (time.monotonic() - start))
    for name, deb in debs.items():
        print("%s: %d bytes, %d files; Depends: %s" % (os.path.basename(deb), os.path.getsize(deb),
                                                       len(expected[name]), fields[name].get("Depends")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
