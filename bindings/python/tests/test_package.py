"""The package as a user installs it: `pip install --no-index ./bindings/python` (the in-tree
build backend, with build isolation) into a fresh virtual environment of every CPython >= 3.9
on PATH, leaving the source as it was; the wheel build_wheel.py makes (tag, RECORD, the
libraries it carries) installed into another fresh environment and run without
$TERN_LIBRARY; the sdist and an editable install; and the three places the package looks for
libtern (TERN_LIBRARY, next to itself, the loader's path) with what it says when all fail."""
import base64
import csv
import hashlib
import glob
import io
import os
import re
import shutil
import subprocess
import sys
import zipfile

import pytest

import tern
from conftest import PACKAGE_SOURCE, readme_example, required, required_file

BUILD_WHEEL = os.path.join(PACKAGE_SOURCE, "build_wheel.py")
VERSION = tern.__version__
# The machine pip's platform tag names, from the kernel (not from the library's ELF header).
MACHINE = os.uname().machine
# Prints where libtern was loaded from, where the package is, and every mapped file whose path
# matches argv[1].
CHECK = ("import re, sys, tern; print(tern.library_path()); print(tern.__file__); "
         "print(*sorted({l.split()[-1] for l in open('/proc/self/maps') if re.search(sys.argv[1], l)}), sep='\\n')")
DEPENDENCIES = ("libpthreadpool.so.0", "libcpuinfo.so.0")


def interpreters():
    """(label, path) of each CPython 3.9 or newer on PATH as python3.X, or installed by pyenv
    (selected or not), one per interpreter. A name that does not run (a pyenv shim for a
    version not selected) is passed over."""
    found, seen = [], set()
    pyenv = os.environ.get("PYENV_ROOT") or os.path.expanduser("~/.pyenv")
    directories = os.environ.get("PATH", "").split(os.pathsep) + sorted(glob.glob(os.path.join(pyenv, "versions", "*", "bin")))
    for directory in directories:
        try:
            names = sorted(os.listdir(directory))
        except OSError:
            continue
        for name in names:
            m = re.fullmatch(r"python3\.(\d+)", name)
            if not m or int(m.group(1)) < 9:
                continue
            r = subprocess.run([os.path.join(directory, name), "-c",
                                "import platform, sys; print(platform.python_implementation(), sys.executable)"],
                               capture_output=True, text=True)
            if r.returncode != 0 or not r.stdout.startswith("CPython "):
                continue
            executable = r.stdout.split(" ", 1)[1].strip()
            if os.path.realpath(executable) in seen:
                continue
            seen.add(os.path.realpath(executable))
            found.append(("%s(%s)" % (name, executable), executable))
    return found


INTERPRETERS = interpreters()


def test_this_interpreter_is_among_those_tested():
    assert os.path.realpath(sys.executable) in {os.path.realpath(p) for _, p in INTERPRETERS}, INTERPRETERS


def scratch(name):
    path = os.path.join(required("TERN_SCRATCH"), name)
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)
    return path


def clean_env(**extra):
    """This environment as a user's: without the test's pointers to the library, and with
    bytecode written (as pip and Python do by default: the source tree must not get any)."""
    drop = ("TERN_LIBRARY", "PYTHONPATH", "LD_LIBRARY_PATH", "PYTHONDONTWRITEBYTECODE")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env.update(extra)
    return env


def copy_source(to):
    shutil.copytree(PACKAGE_SOURCE, to, ignore=shutil.ignore_patterns("tests", "__pycache__", "CMakeLists.txt"))
    return to


def run(args, env, cwd=None):
    return subprocess.run(args, capture_output=True, text=True, env=env, cwd=cwd)


def files_of(root):
    """Every file and folder under root with its size and modification time (a folder's own
    time is left out: a build that makes and removes a file there leaves nothing)."""
    out = {}
    for directory, folders, files in os.walk(root):
        for name in folders:
            out[os.path.relpath(os.path.join(directory, name), root)] = "folder"
        for name in files:
            st = os.lstat(os.path.join(directory, name))
            out[os.path.relpath(os.path.join(directory, name), root)] = (st.st_size, st.st_mtime_ns)
    return out


class Unchanged:
    """Asserts that the package's source folder is as it was when the block began."""

    def __enter__(self):
        self.before = files_of(PACKAGE_SOURCE)

    def __exit__(self, kind, *_):
        if kind is None:
            after = files_of(PACKAGE_SOURCE)
            assert after == self.before, "written into %s: %s" % (PACKAGE_SOURCE, sorted(set(after) ^ set(self.before)))


def venv(python, path):
    r = run([python, "-m", "venv", path], clean_env())
    assert r.returncode == 0, r.stdout + r.stderr
    return os.path.join(path, "bin", "python")


def pip_install(python, *args):
    r = run([python, "-m", "pip", "install", "--no-index", "--disable-pip-version-check"] + list(args), clean_env())
    assert r.returncode == 0, r.stdout + r.stderr
    return r


def site_packages(python):
    r = run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], clean_env())
    return r.stdout.strip()


def run_example(python, bundle, folder, env):
    """The README's example.py, run the way the README runs it, in `folder`."""
    with open(os.path.join(folder, "example.py"), "w") as f:
        f.write(readme_example())
    link = os.path.join(folder, "tiny-austen.tern")
    if not os.path.exists(link):
        os.symlink(bundle, link)
    r = run([python, "example.py"], env, cwd=folder)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) >= 2 and lines[0].strip() and lines[-1] == "OK", r.stdout
    return r.stdout


def record_hash(data):
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def check_record(z, info):
    """RECORD lists every file of the wheel once, with its sha256 (urlsafe base64, no padding)
    and size; RECORD itself without either."""
    rows = list(csv.reader(io.StringIO(z.read(info + "/RECORD").decode())))
    assert sorted(r[0] for r in rows) == sorted(z.namelist())
    for path, digest, size in rows:
        if path == info + "/RECORD":
            assert (digest, size) == ("", "")
        else:
            data = z.read(path)
            assert (digest, int(size)) == (record_hash(data), len(data)), path


def check_metadata(text):
    fields = dict(line.split(": ", 1) for line in text.split("\n\n", 1)[0].splitlines())
    assert float(fields["Metadata-Version"]) >= 2.1
    assert fields["Name"] == "tern" and fields["Version"] == VERSION
    assert fields["License"] == "MIT" and fields["Requires-Python"] == ">=3.9"


def read(path):
    with open(path, "rb") as f:
        return f.read()


@pytest.mark.parametrize("python", [p for _, p in INTERPRETERS], ids=[label for label, _ in INTERPRETERS])
def test_pip_installs_the_source_offline_into_a_fresh_venv(python, bundle):
    work = scratch("pip" + re.sub(r"\W", "_", python))
    env_python = venv(python, os.path.join(work, "venv"))
    with Unchanged():
        # The real folder, as the README has it, with pip's build isolation.
        pip_install(env_python, PACKAGE_SOURCE)
    site = site_packages(env_python)
    installed = sorted(os.listdir(os.path.join(site, "tern")))
    modules = sorted(f for f in os.listdir(os.path.join(PACKAGE_SOURCE, "tern")) if f.endswith(".py"))
    assert "llama.py" in modules
    assert [f for f in installed if f != "__pycache__"] == modules  # no library: the pure wheel
    info = os.path.join(site, "tern-%s.dist-info" % VERSION)
    assert "Tag: py3-none-any" in read(os.path.join(info, "WHEEL")).decode().splitlines()
    check_metadata(read(os.path.join(info, "METADATA")).decode())
    library = required_file("TERN_LIBRARY")
    env = clean_env(TERN_LIBRARY=library)
    run_example(env_python, bundle, work, env)
    r = run([env_python, "-c", CHECK, "libtern"], env, cwd=work)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == os.path.realpath(library)
    assert lines[1] == os.path.join(site, "tern", "__init__.py")


@pytest.mark.parametrize("python", [p for _, p in INTERPRETERS], ids=[label for label, _ in INTERPRETERS])
def test_the_wheel_carries_libtern_and_runs_without_tern_library(python, bundle):
    work = scratch("wheel" + re.sub(r"\W", "_", python))
    library = os.path.realpath(required_file("TERN_LIBRARY"))
    with Unchanged():
        r = run([python, BUILD_WHEEL, "--library", required_file("TERN_LIBRARY"), "--out",
                 os.path.join(work, "dist")], clean_env())
    assert r.returncode == 0, r.stderr
    name = "tern-%s-py3-none-linux_%s.whl" % (VERSION, MACHINE)
    wheel = os.path.join(work, "dist", name)
    assert r.stdout.strip() == wheel and os.listdir(os.path.join(work, "dist")) == [name]
    info = "tern-%s.dist-info" % VERSION
    with zipfile.ZipFile(wheel) as z:
        check_record(z, info)
        assert z.read(info + "/WHEEL").decode().splitlines()[2:] == [
            "Root-Is-Purelib: false", "Tag: py3-none-linux_%s" % MACHINE]
        check_metadata(z.read(info + "/METADATA").decode())
        assert z.read("tern/libtern.so.0") == read(library)
        assert sorted(z.read("tern/bundled-libraries.txt").decode().split()) == sorted(DEPENDENCIES)
        ldd = run(["ldd", library], clean_env()).stdout
        for dependency in DEPENDENCIES:
            system = re.search(r"^\s*%s => (\S+)" % re.escape(dependency), ldd, re.M).group(1)
            assert z.read("tern/" + dependency) == read(system), dependency
        for package in ("libpthreadpool0", "libcpuinfo0"):
            text = z.read("%s/licenses/%s.copyright" % (info, package)).decode()
            assert "bsd-2-clause" in text.lower() and "Redistribution and use in source and binary forms" in text
        licence = os.path.join(PACKAGE_SOURCE, "..", "..", "LICENSE")
        if os.path.exists(licence):
            assert z.read(info + "/licenses/LICENSE") == read(licence)

    env_python = venv(python, os.path.join(work, "venv"))
    pip_install(env_python, wheel)
    site = site_packages(env_python)
    env = clean_env()
    run_example(env_python, bundle, work, env)
    r = run([env_python, "-c", CHECK, "libtern|libpthreadpool|libcpuinfo"], env, cwd=work)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    here = os.path.join(site, "tern")
    assert lines[0] == os.path.join(here, "libtern.so.0")
    assert lines[1] == os.path.join(here, "__init__.py")
    # All three from the wheel: none from the system, although the system has the two.
    assert sorted(lines[2:]) == sorted(os.path.join(here, n) for n in ("libtern.so.0",) + DEPENDENCIES)


def test_the_sdist_and_an_editable_install(bundle):
    work = scratch("sdist")
    source = copy_source(os.path.join(work, "source"))
    backend = ("import sys; sys.path.insert(0, 'backend'); import tern_backend as b; "
               "print(b.build_sdist(sys.argv[1]))")
    r = run([sys.executable, "-c", backend, os.path.join(work, "dist")], clean_env(), cwd=source)
    assert r.returncode == 0, r.stderr
    sdist = os.path.join(work, "dist", r.stdout.strip())
    assert os.path.basename(sdist) == "tern-%s.tar.gz" % VERSION
    env_python = venv(sys.executable, os.path.join(work, "venv"))
    pip_install(env_python, sdist)
    env = clean_env(TERN_LIBRARY=required_file("TERN_LIBRARY"))
    run_example(env_python, bundle, work, env)

    editable_python = venv(sys.executable, os.path.join(work, "editable"))
    pip_install(editable_python, "--editable", source)
    r = run([editable_python, "-c", CHECK, "libtern"], env, cwd=work)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[1] == os.path.join(source, "tern", "__init__.py")


def test_the_loader_path_is_searched_when_nothing_is_next_to_the_package(bundle):
    """The python3-tern package's case: the package alone, the library the system's."""
    source = copy_source(os.path.join(scratch("loader"), "source"))
    library_dir = os.path.dirname(required_file("TERN_LIBRARY"))  # the build's runtime/, with libtern.so.0
    r = run([sys.executable, "-c", CHECK, "libtern"], clean_env(PYTHONPATH=source, LD_LIBRARY_PATH=library_dir))
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0] == os.path.realpath(os.path.join(library_dir, tern._capi.SONAME))


def test_tern_library_is_the_only_place_tried_when_set_and_failures_say_where_it_looked(tmp_path):
    source = copy_source(os.path.join(scratch("missing"), "source"))
    shutil.copy(required_file("TERN_LIBRARY"), os.path.join(source, "tern", tern._capi.SONAME))
    wrong = str(tmp_path / "nowhere" / "libtern.so.0")
    r = run([sys.executable, "-c", "import tern"], clean_env(PYTHONPATH=source, TERN_LIBRARY=wrong))
    assert r.returncode != 0
    assert "ImportError" in r.stderr and wrong in r.stderr and "$TERN_LIBRARY" in r.stderr
    assert "next to the package" not in r.stderr  # an explicit choice does not fall back
    os.remove(os.path.join(source, "tern", tern._capi.SONAME))
    r = run([sys.executable, "-c", "import tern"], clean_env(PYTHONPATH=source, LD_LIBRARY_PATH=str(tmp_path)))
    assert r.returncode != 0
    next_to = os.path.join(source, "tern", tern._capi.SONAME)
    assert next_to + " (next to the package): no such file" in r.stderr
    assert "libtern.so.0 (the loader's search path)" in r.stderr
    assert "TERN_LIBRARY" in r.stderr
