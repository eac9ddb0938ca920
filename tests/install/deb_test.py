#!/usr/bin/env python3
"""The .debs of a build tree: made with cpack, then read as dpkg would.

  deb_test.py --cpack CPACK --build BUILD --work DIR --arch amd64|arm64 --version V --libdir L
              --bundle B --tern-run BUILD_TERN_RUN --readelf READELF --packaging DIR
              --python-source DIR --maintainer M [--host-tools] [--man-pages] [--jni] [--jar]
              [--emulator=qemu,args...] [--packages DIR] [--python PY] [--java JAVA]

Checks each package (libtern0, libtern-dev, tern-tools, tern-server, python3-tern and, with the
Java binding, libtern-jni and libtern-java): its files (exactly), its control fields and control
files, that the Depends of each package with ELF files name exactly the packages providing the
libraries they need (read from the ELF files, mapped to packages by dpkg's database natively or
by the target's unpacked packages when cross-built), the hardening of every ELF file, the
copyright file, changelog and man pages. Then unpacks all into one root (dpkg-deb -x), checks the
installed paths inside the files (the unit, a relocatable tern.pc), runs the packaged tern-run
(under the emulator when cross-built) against the build's own and, natively, the packaged Python
module over the packaged libtern.so.0 and the packaged jar over the packaged JNI library, and
apt's simulation of installing all the packages together.
"""
import argparse
import glob
import gzip
import os
import re
import shutil
import subprocess
import sys
import time

DEVICE_TOOLS = ["tern-bench", "tern-embed", "tern-info", "tern-plan", "tern-run"]
HOST_TOOLS = ["tern-convert", "tern-eval", "tern-inspect", "tern-tokenize"]
PROMPT = "It is a truth universally acknowledged"
JAVA_MAIN = """
import dev.tern.*;

public class PackagedJava {
  public static void main(String[] args) throws Exception {
    try (Model model = Model.load(args[0], new ModelParams().memoryBudget(Tern.parseMemoryBudget("64M")));
         Session session = model.newSession(new SamplerParams().temperature(0f))) {
      System.out.print(args[1] + session.generate(args[1], 32) + "\\n");
    }
  }
}
"""


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
    """The control fields; a multi-line field's continuation lines joined with newlines."""
    fields, key = {}, None
    for line in run(["dpkg-deb", "--field", deb]).splitlines():
        if line and line[0].isspace() and key:
            fields[key] += "\n" + line
        elif ":" in line:
            key, value = line.split(":", 1)
            fields[key] = value.strip()
    return fields


def control_files(deb):
    """The names of the files in the control archive (control, md5sums, shlibs, triggers...)."""
    out = run(["dpkg-deb", "--info", deb])
    return set(re.findall(r"^\s+\d+ bytes,\s+\d+ lines\s+\*?\s*(\S+)", out, re.M))


def depends_of(field):
    """{package: version constraint or None} from a Depends field."""
    depends = {}
    for item in field.split(","):
        m = re.match(r"\s*([a-z0-9.+-]+)(?::\w+)?\s*(\((.*)\))?", item)
        if m:
            depends[m.group(1)] = m.group(3)
    return depends


def needed(readelf, path):
    out = subprocess.run([readelf, "-d", path], capture_output=True, text=True).stdout
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out)


def is_elf(path):
    with open(path, "rb") as f:
        return f.read(4) == b"\x7fELF"


def hardening_problems(readelf, path):
    """What Debian's hardening flags would have given the file and it lacks (lintian's tags)."""
    headers = run([readelf, "-h", "-l", "-d", "--dyn-syms", "-W", path])
    problems = []
    if "GNU_RELRO" not in headers:
        problems.append("no relro")
    if not re.search(r"\(FLAGS\)\s+BIND_NOW|\(FLAGS_1\)\s+Flags:.*\bNOW\b", headers):
        problems.append("no bindnow")
    if re.search(r"Type:\s+EXEC", headers):
        problems.append("not PIE")
    # Fortified: calls a __*_chk function whenever it calls a function glibc fortifies.
    plain = set(re.findall(r"UND (memcpy|memmove|memset|strcpy|strcat|sprintf|snprintf|vsnprintf|fprintf|printf|"
                           r"vfprintf|read|fgets)(?:@\S+)?(?: \(\d+\))?$", headers, re.M))
    checked = re.findall(r"UND __\w+_chk(?:@\S+)?(?: \(\d+\))?$", headers, re.M)
    if plain and not checked:
        problems.append("calls %s unfortified" % ", ".join(sorted(plain)))
    return problems


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
    if not paths:
        return owners
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


def expected_contents(a, names):
    lib = "usr/" + a.libdir
    so = "libtern.so." + a.version
    tools = DEVICE_TOOLS + (HOST_TOOLS if a.host_tools else [])
    man = (lambda tool: {"usr/share/man/man1/%s.1.gz" % tool: ("-", None)}) if a.man_pages else (lambda tool: {})
    python_files = sorted(os.path.basename(p) for p in glob.glob(os.path.join(a.python_source, "tern", "*.py")))
    expected = {
        "libtern0": {lib + "/" + so: ("-", None), lib + "/libtern.so.0": ("l", so)},
        "libtern-dev": {"usr/include/tern/tern.h": ("-", None), "usr/include/tern/tern_error_codes.h": ("-", None),
                        "usr/include/tern/module.modulemap": ("-", None), lib + "/libtern.so": ("l", "libtern.so.0"),
                        lib + "/pkgconfig/tern.pc": ("-", None),
                        **{lib + "/cmake/Tern/" + f: ("-", None) for f in
                           ("TernConfig.cmake", "TernConfigVersion.cmake", "TernTargets.cmake",
                            "TernTargets-release.cmake")}},
        "tern-tools": {k: v for t in tools for k, v in {"usr/bin/" + t: ("-", None), **man(t)}.items()},
        "tern-server": {"usr/bin/tern-server": ("-", None), "usr/share/tern/systemd/tern-server.service": ("-", None),
                        **man("tern-server")},
        "python3-tern": {"usr/lib/python3/dist-packages/tern/" + f: ("-", None) for f in python_files},
        "libtern-jni": {lib + "/jni/libtern_jni.so": ("-", None)},
        "libtern-java": {"usr/share/java/tern-%s.jar" % a.version: ("-", None),
                         "usr/share/java/tern.jar": ("l", "tern-%s.jar" % a.version)},
    }
    for name in names:
        expected[name]["usr/share/doc/%s/copyright" % name] = ("-", None)
        expected[name]["usr/share/doc/%s/changelog.Debian.gz" % name] = ("-", None)
        if os.path.exists(os.path.join(a.packaging, name + ".lintian-overrides")):
            expected[name]["usr/share/lintian/overrides/" + name] = ("-", None)
    return {name: expected[name] for name in names}


def check_docs(a, root, names, version):
    """The DEP-5 copyright file (the project's MIT licence among its stanzas), the changelog."""
    licence = open(os.path.join(a.packaging, "..", "..", "LICENSE")).read()
    permission = " ".join(licence.split("Permission is hereby granted", 1)[1].split())
    for name in names:
        doc = os.path.join(root, "usr/share/doc", name)
        text = open(os.path.join(doc, "copyright")).read()
        expect(text.startswith("Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n"),
               "%s: the copyright file is not machine-readable (DEP-5)" % name)
        expect(re.search(r"^Files: \*\nCopyright: 2026 The Tern authors\nLicense: Expat$", text, re.M),
               "%s: the copyright file has no Files: * stanza for Tern (Expat)" % name)
        stanza = re.search(r"^License: Expat\n((?: .*\n)+)", text, re.M)
        expect(stanza, "%s: the copyright file has no Expat licence text" % name)
        expat = stanza.group(1)
        flat = " ".join(line.strip() for line in expat.splitlines() if line.strip() != ".")
        expect(permission in " ".join(flat.split()), "%s: the Expat text differs from LICENSE's" % name)
        with gzip.open(os.path.join(doc, "changelog.Debian.gz"), "rt") as f:
            first = f.readline()
        expect(first.startswith("tern (%s) " % version),
               "%s: changelog.Debian.gz starts %r, the package is %s" % (name, first, version))


def check_man_pages(a, root, tools, emulator):
    """Each page is the tool's: its NAME line, and every long option its --help lists."""
    for tool in tools:
        with gzip.open(os.path.join(root, "usr/share/man/man1/%s.1.gz" % tool), "rt") as f:
            page = f.read()
        expect(re.search(r'^\.TH "?%s"? "?1"? ' % re.escape(tool.upper()), page, re.M), "%s.1: no .TH line" % tool)
        expect(re.search(r"^%s \\- \S" % re.escape(tool), page, re.M),
               "%s.1: no NAME line" % tool)
        options = set(re.findall(r"(?<![\w-])--([a-z][a-z0-9-]+)",
                                 run(emulator + [os.path.join(root, "usr/bin", tool), "--help"])))
        documented = set(re.findall(r"(?:\\-\\-|--)([a-z][a-z0-9]*(?:(?:\\-|-)[a-z0-9]+)*)", page))
        documented = {o.replace("\\-", "-") for o in documented}
        missing = sorted(options - documented)
        expect(options and not missing, "%s.1 lacks --%s of its --help" % (tool, ", --".join(missing)))


def main():
    p = argparse.ArgumentParser()
    for option in ("cpack", "build", "work", "arch", "version", "libdir", "bundle", "tern-run", "readelf",
                   "packaging", "python-source", "maintainer"):
        p.add_argument("--" + option, required=True)
    for flag in ("host-tools", "man-pages", "jni", "jar"):
        p.add_argument("--" + flag, action="store_true")
    p.add_argument("--emulator", default="")
    p.add_argument("--packages")
    p.add_argument("--python")
    p.add_argument("--java")
    a = p.parse_args()
    for path in (a.bundle, a.tern_run):
        expect(os.path.exists(path), "%s is missing (ctest's runtime_make_bundles converts the bundle)" % path)

    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    start = time.monotonic()
    run([a.cpack, "--config", os.path.join(a.build, "CPackConfig.cmake"), "-B", a.work])
    print("cpack: %.1f s" % (time.monotonic() - start))
    version = a.version + "-1"
    arch_all = {"python3-tern", "libtern-java"}
    names = ["libtern0", "libtern-dev", "tern-tools", "tern-server", "python3-tern"]
    names += ["libtern-jni"] if a.jni else []
    names += ["libtern-java"] if a.jar else []
    debs = {name: os.path.join(a.work, "%s_%s_%s.deb" % (name, version, "all" if name in arch_all else a.arch))
            for name in names}
    made = sorted(os.path.basename(f) for f in glob.glob(os.path.join(a.work, "*.deb")))
    expect(made == sorted(os.path.basename(d) for d in debs.values()),
           "cpack made %s, expected %s" % (made, sorted(os.path.basename(d) for d in debs.values())))

    # Contents, exactly.
    expected = expected_contents(a, names)
    for name, deb in debs.items():
        files = deb_files(deb)
        if files != expected[name]:
            fail("%s holds\n  %s\nexpected\n  %s" % (name, "\n  ".join("%s %s" % kv for kv in sorted(files.items())),
                                                    "\n  ".join("%s %s" % kv for kv in sorted(expected[name].items()))))

    # Control fields and control files.
    fields = {name: control(deb) for name, deb in debs.items()}
    for name in debs:
        f = fields[name]
        arch = "all" if name in arch_all else a.arch
        expect(f.get("Package") == name and f.get("Version") == version and f.get("Architecture") == arch,
               "%s: Package %s, Version %s, Architecture %s" % (name, f.get("Package"), f.get("Version"),
                                                                 f.get("Architecture")))
        expect(f.get("Maintainer") == a.maintainer and re.match(r"[^<>]+ <[^@<>]+@[^@<>]+\.[a-z]+>$", a.maintainer)
               and not a.maintainer.endswith("invalid>"), "%s: Maintainer %s" % (name, f.get("Maintainer")))
        expect(f.get("Homepage", "").startswith("https://"), "%s: Homepage %s" % (name, f.get("Homepage")))
        expect(f.get("Section") and f.get("Priority") == "optional", "%s: Section, Priority" % name)
        description = f.get("Description", "").split("\n")
        expect(len(description) > 2 and all(len(line) <= 80 for line in description),
               "%s: Description (a synopsis, then lines of at most 80 columns):\n%s" % (name, "\n".join(description)))
        scripts = control_files(debs[name]) & {"preinst", "postinst", "prerm", "postrm"}
        expect(not scripts, "%s has maintainer scripts %s" % (name, sorted(scripts)))
    expect(control_files(debs["libtern0"]) >= {"shlibs", "triggers"}, "libtern0 lacks its shlibs or triggers file")
    shlibs = run(["dpkg-deb", "--info", debs["libtern0"], "shlibs"])
    expect(shlibs.strip() == "libtern 0 libtern0 (>= %s)" % a.version, "libtern0's shlibs file: %r" % shlibs)
    triggers = run(["dpkg-deb", "--info", debs["libtern0"], "triggers"])
    expect(triggers.split() == ["activate-noawait", "ldconfig"], "libtern0's triggers file: %r" % triggers)
    expect(fields["libtern-dev"].get("Depends") == "libtern0 (= %s)" % version,
           "libtern-dev Depends: %s" % fields["libtern-dev"].get("Depends"))
    expect(depends_of(fields["python3-tern"].get("Depends", "")) == {"python3": None, "libtern0": ">= " + a.version},
           "python3-tern Depends: %s" % fields["python3-tern"].get("Depends"))
    if a.jar:
        expect(fields["libtern-java"].get("Depends") == "libtern-jni (>= %s)" % a.version,
               "libtern-java Depends: %s" % fields["libtern-java"].get("Depends"))

    # Unpack all into one root; each package with ELF files depends on exactly the providers of
    # what they need, and every ELF file is hardened.
    root = os.path.join(a.work, "root")
    for deb in debs.values():
        run(["dpkg-deb", "--extract", deb, root])
    needs = {}
    for name in debs:
        for path, (kind, _) in expected[name].items():
            full = os.path.join(root, path)
            if kind == "-" and is_elf(full):
                needs.setdefault(name, set()).update(needed(a.readelf, full))
                problems = hardening_problems(a.readelf, full)
                expect(not problems, "%s: %s" % (path, "; ".join(problems)))
    expect(set(needs) == {"libtern0", "tern-tools", "tern-server"} | ({"libtern-jni"} if a.jni else set()),
           "packages with ELF files: %s" % sorted(needs))
    sonames = set().union(*needs.values()) - {"libtern.so.0"}
    providers = unpacked_providers(a.packages, a.libdir) if a.packages else native_providers(sonames)
    providers["libtern.so.0"] = "libtern0"
    unresolved = sorted(s for s in sonames if s not in providers)
    expect(not unresolved, "no package provides %s" % ", ".join(unresolved))
    for name, libs in needs.items():
        wanted = {providers[s] for s in libs}
        depends = depends_of(fields[name].get("Depends", ""))
        expect(set(depends) == wanted, "%s Depends %s; its binaries need %s" % (name, sorted(depends), sorted(wanted)))
        expect(all(v and v.startswith(">=") for v in depends.values()), "%s: unversioned Depends: %s" % (name, depends))

    check_docs(a, root, names, version)
    emulator = [x for x in a.emulator.split(",") if x]
    if a.man_pages:
        programs = [p[len("usr/bin/"):] for n in ("tern-tools", "tern-server") for p in expected[n] if p.startswith("usr/bin/")]
        check_man_pages(a, root, programs, emulator)

    # The files written at install time name /usr, where dpkg puts them; tern.pc finds its prefix
    # from its own folder, so it works in this unpacked tree.
    lib = os.path.join(root, "usr", a.libdir)
    unit = open(os.path.join(root, "usr/share/tern/systemd/tern-server.service")).read()
    expect("\nExecStart=/usr/bin/tern-server " in unit, "the unit does not start /usr/bin/tern-server")
    expect("build/" not in unit and "apt install ./tern-server_" in unit,
           "the unit's comments are not written for a package user")
    env = dict(os.environ, PKG_CONFIG_LIBDIR=os.path.join(lib, "pkgconfig"), PKG_CONFIG_SYSROOT_DIR="")
    env.pop("PKG_CONFIG_PATH", None)
    for variable, path in (("includedir", "usr/include/tern"), ("libdir", "usr/" + a.libdir)):
        value = run(["pkg-config", "--variable=" + variable, "tern"], env=env).strip()
        expect(os.path.realpath(value) == os.path.realpath(os.path.join(root, path)),
               "pkg-config tern in the unpacked tree: %s=%s" % (variable, value))

    # The packaged tern-run prints what the build's prints.
    args = [a.bundle, "-p", PROMPT, "-n", "32", "--temp", "0", "--memory-budget", "64M"]
    reference = run(emulator + [a.tern_run] + args)
    packaged = run(emulator + [os.path.join(root, "usr/bin/tern-run")] + args)
    expect(packaged == reference and len(reference) > len(PROMPT) + 1,
           "the packaged tern-run printed\n%s\nthe build's\n%s" % (packaged, reference))
    print("packaged tern-run (%s): %s" % (a.arch, packaged.strip()))

    if a.python:
        # python3-tern from its dist-packages folder loads libtern.so.0 by its SONAME, as it
        # would libtern0's; here the loader finds the unpacked one.
        code = ("import tern; m = tern.Model(%r, memory_budget='64M'); print(tern.__file__); "
                "print(tern.library_path()); print(%r + m.session(temperature=0).generate(%r, max_tokens=32).text())"
                % (a.bundle, PROMPT, PROMPT))
        penv = dict(os.environ, PYTHONPATH=os.path.join(root, "usr/lib/python3/dist-packages"),
                    LD_LIBRARY_PATH=lib, PYTHONDONTWRITEBYTECODE="1")
        penv.pop("TERN_LIBRARY", None)
        out = run([a.python, "-c", code], env=penv, cwd=a.work).splitlines()
        expect(out[0] == os.path.join(root, "usr/lib/python3/dist-packages/tern/__init__.py"),
               "Python imported %s" % out[0])
        expect(os.path.realpath(out[1]) == os.path.realpath(os.path.join(lib, "libtern.so.0")),
               "Python loaded %s" % out[1])
        expect("\n".join(out[2:]) + "\n" == reference, "python3-tern printed %s" % out[2:])
        print("python3-tern over libtern0: the same text")
    if a.java and a.jar:
        # libtern-java's jar, finding libtern-jni's library on java.library.path (Debian's
        # OpenJDK has /usr/lib/<multiarch>/jni there; here the unpacked folder).
        source = os.path.join(a.work, "PackagedJava.java")
        with open(source, "w") as f:
            f.write(JAVA_MAIN)
        out = run([a.java, "-Djava.library.path=" + os.path.join(lib, "jni"), "-cp",
                   os.path.join(root, "usr/share/java/tern.jar"), source, a.bundle, PROMPT])
        expect(out == reference, "libtern-java printed\n%s\ntern-run\n%s" % (out, reference))
        print("libtern-java over libtern-jni: the same text")
    if a.python:
        # apt would install all of them together on this system: every dependency exists in a
        # version that fits.
        sim = subprocess.run(["apt-get", "install", "--simulate", "-o", "Debug::NoLocking=1"] + list(debs.values()),
                             capture_output=True, text=True)
        installed = set(re.findall(r"^Inst (\S+) ", sim.stdout, re.M))
        expect(sim.returncode == 0 and installed >= set(names),
               "apt-get install --simulate:\n%s%s" % (sim.stdout, sim.stderr))

    print("checks after cpack: %.1f s" % (time.monotonic() - start))
    for name, deb in debs.items():
        print("%s: %d bytes, %d files; Depends: %s" % (os.path.basename(deb), os.path.getsize(deb),
                                                       len(expected[name]), fields[name].get("Depends")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
