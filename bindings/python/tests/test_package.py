"""The package as a user gets it: `pip install` offline with Debian's setuptools, the library
placed next to it by `cmake --install --component python`, and the three places it looks for
libtern (TERN_LIBRARY, next to itself, the loader's path) with what it says when all fail."""
import os
import shutil
import subprocess
import sys

import tern
from conftest import required, required_file

PACKAGE_SOURCE = os.path.dirname(os.path.dirname(os.path.abspath(tern.__file__)))
CHECK = ("import tern, sys; print(tern.library_path()); m = tern.Model(sys.argv[1], memory_budget='64M'); "
         "print(m.session(temperature=0).generate('It is a truth', max_tokens=8).text())")


def scratch(name):
    path = os.path.join(required("TERN_SCRATCH"), name)
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)
    return path


def clean_env(**extra):
    """This environment without the test's pointers to the library."""
    env = {k: v for k, v in os.environ.items() if k not in ("TERN_LIBRARY", "PYTHONPATH", "LD_LIBRARY_PATH")}
    env.update(extra)
    return env


def copy_source(to):
    shutil.copytree(PACKAGE_SOURCE, to, ignore=shutil.ignore_patterns("tests", "build", "*.egg-info", "__pycache__",
                                                                       "libtern.so*", "CMakeLists.txt"))
    return to


def python(args, env, cwd=None):
    return subprocess.run([sys.executable] + args, capture_output=True, text=True, env=env, cwd=cwd)


def test_pip_install_carries_the_library_cmake_put_next_to_the_package(bundle):
    work = scratch("pip")
    source = copy_source(os.path.join(work, "source"))
    r = subprocess.run([required_file("TERN_CMAKE"), "--install", required_file("TERN_BUILD_DIR"), "--component",
                        "python", "--prefix", source], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    library = os.path.join(source, "tern", tern._capi.SONAME)
    assert os.path.isfile(library) and not os.path.islink(library)
    site = os.path.join(work, "site")
    r = python(["-m", "pip", "install", "--no-build-isolation", "--no-index", "--no-deps", "--disable-pip-version-check",
                "--target", site, source], clean_env())
    assert r.returncode == 0, r.stdout + r.stderr
    installed = os.path.join(site, "tern", tern._capi.SONAME)
    assert os.path.isfile(installed), os.listdir(os.path.join(site, "tern"))
    r = python(["-c", CHECK, bundle], clean_env(PYTHONPATH=site), cwd=work)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0] == os.path.realpath(installed)
    assert r.stdout.splitlines()[1]


def test_the_loader_path_is_searched_when_nothing_is_next_to_the_package(bundle):
    source = copy_source(os.path.join(scratch("loader"), "source"))
    library_dir = os.path.dirname(required_file("TERN_LIBRARY"))  # the build's runtime/, with libtern.so.0
    r = python(["-c", CHECK, bundle], clean_env(PYTHONPATH=source, LD_LIBRARY_PATH=library_dir))
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0] == os.path.realpath(os.path.join(library_dir, tern._capi.SONAME))


def test_tern_library_is_the_only_place_tried_when_set_and_failures_say_where_it_looked(tmp_path):
    source = copy_source(os.path.join(scratch("missing"), "source"))
    shutil.copy(required_file("TERN_LIBRARY"), os.path.join(source, "tern", tern._capi.SONAME))
    wrong = str(tmp_path / "nowhere" / "libtern.so.0")
    r = python(["-c", "import tern"], clean_env(PYTHONPATH=source, TERN_LIBRARY=wrong))
    assert r.returncode != 0
    assert "ImportError" in r.stderr and wrong in r.stderr and "$TERN_LIBRARY" in r.stderr
    assert "next to the package" not in r.stderr  # an explicit choice does not fall back
    os.remove(os.path.join(source, "tern", tern._capi.SONAME))
    r = python(["-c", "import tern"], clean_env(PYTHONPATH=source, LD_LIBRARY_PATH=str(tmp_path)))
    assert r.returncode != 0
    next_to = os.path.join(source, "tern", tern._capi.SONAME)
    assert next_to + " (next to the package): no such file" in r.stderr
    assert "libtern.so.0 (the loader's search path)" in r.stderr
    assert "TERN_LIBRARY" in r.stderr
