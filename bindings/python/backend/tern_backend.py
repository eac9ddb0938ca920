# SPDX-License-Identifier: MIT
"""The PEP 517 build backend of the `tern` package, in the standard library alone: pip builds
the package offline with any CPython >= 3.9 (pyproject.toml requires nothing) and writes
nothing into the source tree (no build/, no .egg-info, no bytecode).

The package is pure Python over libtern.so (ctypes); the wheel built here carries no library
and is tagged py3-none-any. build_wheel.py, next to pyproject.toml, builds the platform wheel
that carries libtern.so.0 and what it links, from the same function (wheel()).

The metadata lives here, not in pyproject.toml's [project] table: Python 3.9 and 3.10 have
no TOML reader, and a hand-written one would be a second parser to keep right.
"""

import base64
import gzip
import hashlib
import io
import os
import re
import stat
import sys
import tarfile
import time
import zipfile

# Importing this module cached its bytecode beside it (backend/__pycache__) before it ran;
# remove that, and write no more.
sys.dont_write_bytecode = True
_cached = getattr(globals().get("__spec__"), "cached", None)
if _cached and os.path.isfile(_cached):
    try:
        os.remove(_cached)
        os.rmdir(os.path.dirname(_cached))
    except OSError:
        pass

NAME = "tern"
SUMMARY = "BitNet b1.58 (ternary) language models on the CPU: Python over libtern's C API"
REQUIRES_PYTHON = ">=3.9"
LICENSE = "MIT"
CLASSIFIERS = [
    "License :: OSI Approved :: MIT License",
    "Operating System :: POSIX :: Linux",
    "Programming Language :: Python :: 3",
    "Topic :: Scientific/Engineering :: Artificial Intelligence",
]
EXTRAS = {"numpy": ["numpy"]}

# The package's source: bindings/python, the folder holding pyproject.toml.
SOURCE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def version():
    """tern/__init__.py's __version__ (read, not imported: importing it loads libtern)."""
    text = _read_text(os.path.join(SOURCE, NAME, "__init__.py"))
    m = re.search(r'^__version__ = "([^"]+)"$', text, re.M)
    if not m:
        raise RuntimeError("tern/__init__.py has no __version__ line")
    return m.group(1)


def licence_file():
    """The project's MIT licence text: LICENSE here (an sdist's), else the checkout's, two
    folders up. None when neither exists."""
    for path in (os.path.join(SOURCE, "LICENSE"), os.path.join(SOURCE, "..", "..", "LICENSE")):
        if os.path.isfile(path):
            return os.path.normpath(path)
    return None


def metadata():
    """METADATA (core metadata 2.1) as text."""
    lines = [
        "Metadata-Version: 2.1",
        "Name: " + NAME,
        "Version: " + version(),
        "Summary: " + SUMMARY,
        "License: " + LICENSE,
    ]
    lines += ["Classifier: " + c for c in CLASSIFIERS]
    lines.append("Requires-Python: " + REQUIRES_PYTHON)
    for extra, requirements in sorted(EXTRAS.items()):
        lines.append("Provides-Extra: " + extra)
        lines += ['Requires-Dist: %s; extra == "%s"' % (r, extra) for r in requirements]
    lines.append("Description-Content-Type: text/markdown; charset=UTF-8")
    return "\n".join(lines) + "\n\n" + _read_text(os.path.join(SOURCE, "README.md"))


def dist_info():
    return "%s-%s.dist-info" % (NAME, version())


def package_files():
    """(path in the wheel, path on disk) of the package's Python sources, sorted. A library
    left in tern/ is not taken: this wheel is the pure one."""
    root = os.path.join(SOURCE, NAME)
    return [("%s/%s" % (NAME, f), os.path.join(root, f)) for f in sorted(os.listdir(root)) if f.endswith(".py")]


def _read_text(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def _read(path):
    with open(path, "rb") as f:
        return f.read()


def _timestamp():
    """SOURCE_DATE_EPOCH when set (reproducible builds), else 1980-01-01, zip's earliest."""
    epoch = int(os.environ.get("SOURCE_DATE_EPOCH", "315532800"))
    return max(epoch, 315532800)


def _record_hash(data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "sha256=" + digest


def wheel(directory, tag, files, root_is_purelib):
    """Writes NAME-VERSION-TAG.whl into `directory` and returns its file name. `files` are
    (path in the wheel, bytes, executable) for the package; the dist-info (METADATA, WHEEL,
    the licences, RECORD) is added here. `tag` is python-abi-platform."""
    info = dist_info()
    entries = list(files)
    entries.append((info + "/METADATA", metadata().encode(), False))
    generator = "tern_backend %s" % version()
    wheel_text = "Wheel-Version: 1.0\nGenerator: %s\nRoot-Is-Purelib: %s\nTag: %s\n" % (
        generator, "true" if root_is_purelib else "false", tag)
    entries.append((info + "/WHEEL", wheel_text.encode(), False))
    licence = licence_file()
    if licence:
        entries.append((info + "/licenses/LICENSE", _read(licence), False))
    return _write_wheel(directory, "%s-%s-%s.whl" % (NAME, version(), tag), entries)


def extra_licences(entries):
    """(name, bytes) pairs as dist-info/licenses/NAME entries."""
    return [("%s/licenses/%s" % (dist_info(), name), data, False) for name, data in entries]


def _write_wheel(directory, filename, entries):
    names = [e[0] for e in entries]
    if len(set(names)) != len(names):
        raise RuntimeError("a file is in the wheel twice: %s" % names)
    record = dist_info() + "/RECORD"
    rows = ["%s,%s,%d" % (path, _record_hash(data), len(data)) for path, data, _ in entries]
    rows.append(record + ",,")
    entries = entries + [(record, ("\n".join(rows) + "\n").encode(), False)]
    date = time.gmtime(_timestamp())[:6]
    os.makedirs(directory, exist_ok=True)
    target = os.path.join(directory, filename)
    partial = target + ".part"
    with zipfile.ZipFile(partial, "w", compression=zipfile.ZIP_DEFLATED) as z:
        for path, data, executable in entries:
            zi = zipfile.ZipInfo(path, date_time=date)
            zi.external_attr = ((0o755 if executable else 0o644) | stat.S_IFREG) << 16
            zi.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(zi, data)
    os.replace(partial, target)
    return filename


def _pure_files():
    return [(name, _read(path), False) for name, path in package_files()]


# PEP 517 hooks.


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    info = os.path.join(metadata_directory, dist_info())
    os.makedirs(info, exist_ok=True)
    with open(os.path.join(info, "METADATA"), "w", encoding="utf-8") as f:
        f.write(metadata())
    return dist_info()


prepare_metadata_for_build_editable = prepare_metadata_for_build_wheel


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    return wheel(wheel_directory, "py3-none-any", _pure_files(), True)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    """A wheel whose .pth file puts this source folder on sys.path: `import tern` runs the
    checkout's files (and looks for libtern next to them, then as ever)."""
    pth = ("_tern_editable.pth", (SOURCE + "\n").encode(), False)
    return wheel(wheel_directory, "py3-none-any", [pth], True)


def build_sdist(sdist_directory, config_settings=None):
    """NAME-VERSION.tar.gz: pyproject.toml, README.md, PKG-INFO, LICENSE, the backend, the
    wheel script and the package; enough to build both wheels again."""
    base = "%s-%s" % (NAME, version())
    files = [("PKG-INFO", metadata().encode())]
    for name in ("pyproject.toml", "README.md", "build_wheel.py", "backend/tern_backend.py"):
        files.append((name, _read(os.path.join(SOURCE, name))))
    licence = licence_file()
    if licence:
        files.append(("LICENSE", _read(licence)))
    files += [(name, _read(path)) for name, path in package_files()]
    os.makedirs(sdist_directory, exist_ok=True)
    filename = base + ".tar.gz"
    target = os.path.join(sdist_directory, filename)
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in sorted(files):
            ti = tarfile.TarInfo(base + "/" + name)
            ti.size = len(data)
            ti.mtime = _timestamp()
            ti.mode = 0o755 if name == "build_wheel.py" else 0o644
            tar.addfile(ti, io.BytesIO(data))
    with open(target, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", filename="", mtime=_timestamp()) as gz:
        gz.write(buffer.getvalue())
    return filename
