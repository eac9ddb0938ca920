"""What the tests need, from the environment ctest sets (bindings/python/CMakeLists.txt). A
missing input fails the test: nothing here is skipped."""
import os
import re

import pytest


def required(name):
    value = os.environ.get(name)
    if not value:
        pytest.fail("$%s is not set (ctest -R python_ sets it; see bindings/python/CMakeLists.txt)" % name)
    return value


def required_file(name):
    path = required(name)
    if not os.path.exists(path):
        pytest.fail("$%s: %s does not exist" % (name, path))
    return path


@pytest.fixture(scope="session")
def bundle_dir():
    return required_file("TERN_TEST_BUNDLE_DIR")


def converted(bundle_dir, name):
    path = os.path.join(bundle_dir, name)
    if not os.path.exists(path):
        pytest.fail("%s is missing (ctest's runtime_make_bundles converts it)" % path)
    return path


@pytest.fixture(scope="session")
def bundle(bundle_dir):
    return converted(bundle_dir, "tiny-austen-packed.tern")


@pytest.fixture(scope="session")
def chat_bundle(bundle_dir):
    return converted(bundle_dir, "tiny-austen-2b4t-chat.tern")


@pytest.fixture(scope="session")
def tern_run():
    return required_file("TERN_RUN")


@pytest.fixture(scope="session")
def tern_plan():
    return required_file("TERN_PLAN")


PACKAGE_SOURCE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def readme_example():
    """The example.py block of the package's README.md (the block the docs test writes to
    example.py and runs)."""
    with open(os.path.join(PACKAGE_SOURCE, "README.md"), encoding="utf-8") as f:
        text = f.read()
    m = re.search(r"^<!-- test: file example\.py -->\n```python\n(.*?)^```$", text, re.M | re.S)
    assert m, "bindings/python/README.md has no example.py block"
    return m.group(1)
