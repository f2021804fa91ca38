"""The wheel as `python -m build` makes it holds the package, py.typed and the license,
and nothing else; the sdist holds every file git tracks (.ci/package.py's checks, run
here on a quick build); CI's `make package` also runs twine and the README's example
from a fresh venv."""

import importlib.util
import pathlib
import re
import subprocess
import sys
import zipfile

import pytest

import kerasgen as kg

ROOT = pathlib.Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("package", ROOT / ".ci" / "package.py")
package = importlib.util.module_from_spec(spec)
spec.loader.exec_module(package)


@pytest.fixture(scope="module")
def dist(tmp_path_factory):
    out = tmp_path_factory.mktemp("dist")
    # --no-isolation: this venv's setuptools, no download (CI's `make package` isolates);
    # no --sdist/--wheel: the wheel is built from the sdist, as pip builds it from PyPI's,
    # so a stale build/ folder of the working tree cannot slip a moved module into it
    result = subprocess.run([sys.executable, "-m", "build", "--no-isolation",
                             "--outdir", str(out), str(ROOT)],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return out


@pytest.fixture(scope="module")
def wheel(dist):
    (path,) = dist.glob("*.whl")
    return path


def test_the_sdist_holds_every_tracked_file_and_no_compiled_one(dist, tmp_path):
    (sdist,) = dist.glob("*.tar.gz")
    tracked = package.tracked_files()
    assert "tests/conftest.py" in tracked and "setup.py" in tracked
    package.check_sdist(sdist, tracked)
    with pytest.raises(AssertionError, match="lacks files git tracks: .'tests/new.py'"):
        package.check_sdist(sdist, [*tracked, "tests/new.py"])


def test_the_wheel_holds_the_package_and_nothing_else(wheel):
    metadata = package.check_wheel(wheel)
    assert metadata["Version"] == kg.__version__
    with zipfile.ZipFile(wheel) as archive:
        modules = {n for n in archive.namelist() if n.endswith(".py")}
    here = {str(p.relative_to(ROOT)) for p in (ROOT / "kerasgen").rglob("*.py")}
    assert modules == here  # every module of the package, subpackages included


def test_the_checks_refuse_a_wheel_with_tests_or_without_py_typed(wheel, tmp_path):
    with zipfile.ZipFile(wheel) as archive:
        entries = {n: archive.read(n) for n in archive.namelist()}
    with_tests = tmp_path / "with_tests.whl"
    with zipfile.ZipFile(with_tests, "w") as archive:
        for name, data in {**entries, "tests/test_x.py": b""}.items():
            archive.writestr(name, data)
    with pytest.raises(AssertionError, match="tests/test_x.py"):
        package.check_wheel(with_tests)
    untyped = tmp_path / "untyped.whl"
    with zipfile.ZipFile(untyped, "w") as archive:
        for name, data in entries.items():
            if name != "kerasgen/py.typed":
                archive.writestr(name, data)
    with pytest.raises(AssertionError, match="py.typed"):
        package.check_wheel(untyped)


def test_the_readme_example_is_found_with_its_expected_output():
    code = package.readme_example()
    assert "kg.ArrayGenerator" in code and "model.fit" in code
    (expected,) = package.expected_prints(code)
    assert package.matches(expected, "{'epoch': 2, 'batch': 0, 'seed': 1, "
                                     "'num_samples': 512, 'batch_size': 64}")
    assert not package.matches(expected, "{'epoch': 1, 'batch': 0}")


def test_the_supported_pythons_are_declared_alike_everywhere():
    """setup.py's python_requires and classifiers, the README and CI name one range:
    CI's `make test` runs on the oldest, its last step on the newest."""
    setup = (ROOT / "setup.py").read_text(encoding="utf-8")
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    oldest = re.search(r'python_requires=">=3\.(\d+)"', setup).group(1)
    listed = sorted(int(v) for v in re.findall(r'"Programming Language :: Python :: 3\.(\d+)"',
                                               setup))
    assert listed == list(range(int(oldest), listed[-1] + 1)), listed
    newest = str(listed[-1])
    assert f"Python 3.{oldest}" in readme and f"3.{newest} installed" in readme
    assert f"sys.version_info[:2] == (3, {oldest})" in ci
    assert f"sys.version_info[:2] == (3, {newest})" in ci and f"python3.{newest}" in ci
    assert f'target-version = "py3{oldest}"' in (ROOT / "pyproject.toml").read_text()
