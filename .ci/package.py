"""The package as users get it (`make package`, in CI): the sdist and wheel built with
`python -m build`, `twine check --strict`, what the wheel holds (the package, py.typed,
the license; no tests, benchmarks, examples or docs) and what the sdist holds (every
file git tracks, so its tests run: conftest.py included), then the wheel installed (not
editable) into a fresh venv, where the README's 30-second example runs and prints what
its `# ->` comment says, importing kerasgen from that venv.

tests/test_package.py runs the same content checks on a quick build.
"""

from __future__ import annotations

import os
import pathlib
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from email.parser import Parser

ROOT = pathlib.Path(__file__).resolve().parent.parent
NOT_SHIPPED = ("tests/", "benchmarks/", "examples/", "docs/")


def version() -> str:
    """The one version, kerasgen/__init__.py's (read as setup.py reads it)."""
    text = (ROOT / "kerasgen" / "__init__.py").read_text(encoding="utf-8")
    return re.search(r'^__version__ = "([^"]+)"', text, re.M).group(1)


def check_wheel(wheel: pathlib.Path) -> dict[str, str]:
    """Raises AssertionError naming what is wrong with `wheel`; returns its metadata."""
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        info = next(n for n in names if n.endswith(".dist-info/METADATA"))
        metadata = Parser().parsestr(archive.read(info).decode("utf-8"))
    assert "kerasgen/__init__.py" in names, f"{wheel.name} lacks the package"
    assert "kerasgen/py.typed" in names, f"{wheel.name} lacks kerasgen/py.typed (PEP 561)"
    assert any(n.split("/")[0].endswith(".dist-info") and n.endswith("/LICENSE")
               for n in names), (
        f"{wheel.name} lacks the LICENSE file")
    shipped = [n for n in names if n.startswith(NOT_SHIPPED)]
    assert not shipped, f"{wheel.name} holds what is not the package: {shipped[:5]}"
    outside = {n.split("/")[0] for n in names} - {"kerasgen", info.split("/")[0]}
    assert not outside, f"{wheel.name} installs top-level names besides kerasgen: {outside}"
    assert metadata["Name"] == "kerasgen3", metadata["Name"]
    assert metadata["Version"] == version(), (metadata["Version"], version())
    return dict(metadata.items())


def tracked_files() -> list[str]:
    """The files git tracks in the repository (what a clone holds)."""
    result = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, check=True,
                            capture_output=True)
    return [name for name in result.stdout.decode("utf-8").split("\0") if name]


def check_sdist(sdist: pathlib.Path, tracked: list[str]) -> None:
    """Raises AssertionError naming what `sdist` lacks of `tracked`, or holds wrongly."""
    with tarfile.open(sdist) as archive:
        names = archive.getnames()
    top = f"kerasgen3-{version()}/"
    inside = {name[len(top):] for name in names if name.startswith(top)}
    missing = sorted(set(tracked) - inside)
    assert not missing, f"{sdist.name} lacks files git tracks: {missing[:10]}"
    assert "tests/conftest.py" in inside, f"{sdist.name} lacks tests/conftest.py"
    compiled = [n for n in inside if n.endswith(".pyc") or "__pycache__" in n]
    assert not compiled, f"{sdist.name} holds compiled files: {compiled[:5]}"


def readme_example() -> str:
    """The README's 30-second example: the first ```python block after its heading."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text[text.index("## 30-second example"):]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def expected_prints(code: str) -> list[str]:
    """The `# -> ...` comments of the example's prints, in order (`...`: anything)."""
    return re.findall(r"^print\(.*\)\s+# -> (.*?)\s*$", code, re.M)


def matches(expected: str, printed: str) -> bool:
    pattern = ".*".join(re.escape(part) for part in expected.split("..."))
    return re.fullmatch(pattern, printed, re.S) is not None


def run(*command: str | os.PathLike, **kwargs) -> subprocess.CompletedProcess:
    print("+", " ".join(str(c) for c in command), flush=True)
    return subprocess.run([str(c) for c in command], check=True, **kwargs)


def main() -> int:
    dist = ROOT / "dist"
    shutil.rmtree(dist, ignore_errors=True)
    run(sys.executable, "-m", "build", "--outdir", dist, ROOT)
    wheels, sdists = sorted(dist.glob("*.whl")), sorted(dist.glob("*.tar.gz"))
    assert len(wheels) == 1 and len(sdists) == 1, sorted(dist.iterdir())
    run(sys.executable, "-m", "twine", "check", "--strict", wheels[0], sdists[0])
    check_wheel(wheels[0])
    check_sdist(sdists[0], tracked_files())
    with tempfile.TemporaryDirectory() as tmp:
        venv = pathlib.Path(tmp) / "venv"
        run(sys.executable, "-m", "venv", venv)
        python = venv / "bin" / "python"
        run(python, "-m", "pip", "install", "--quiet", "--upgrade", "pip")
        run(python, "-m", "pip", "install", "--quiet", f"{wheels[0]}[tensorflow]")
        run(venv / "bin" / "kerasgen", "--version")
        code = readme_example()
        code += "\nimport kerasgen\nprint('kerasgen from', kerasgen.__file__)\n"
        workdir = pathlib.Path(tmp) / "work"
        workdir.mkdir()
        env = {**os.environ, "KERAS_BACKEND": "tensorflow", "TF_CPP_MIN_LOG_LEVEL": "3"}
        env.pop("PYTHONPATH", None)
        result = run(python, "-c", code, cwd=workdir, env=env, capture_output=True,
                     text=True)
        lines = result.stdout.splitlines()
        print("\n".join(lines))
        assert lines[-1].startswith(f"kerasgen from {venv}"), (
            f"kerasgen was imported from outside the fresh venv: {lines[-1]}")
        expected = expected_prints(code)
        assert expected and len(lines) == len(expected) + 1, (expected, lines)
        for want, got in zip(expected, lines):
            assert matches(want, got), f"the README example printed {got!r}, not {want!r}"
    print(f"package ok: {wheels[0].name}, {sdists[0].name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
