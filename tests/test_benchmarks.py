"""The benchmark scripts start: each one's `--help`, run the documented way (as a module
from the repository root, `python -m benchmarks.<script>`), exits 0. Their measurements
never decide a test; this catches a broken import or argument parser in CI."""

import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
BENCHMARKS = ROOT / "benchmarks"
# The scripts: the modules of benchmarks/ that run something when started.
SCRIPTS = sorted(p.stem for p in BENCHMARKS.glob("*.py")
                 if 'if __name__ == "__main__":' in p.read_text(encoding="utf-8"))


def test_scripts_are_found():
    assert {"images", "fit_cnn", "augment", "imbalance", "stats", "gpu_check",
            "tfrecord_crc"} <= set(SCRIPTS)
    assert (BENCHMARKS / "__init__.py").is_file()


@pytest.mark.parametrize("script", SCRIPTS)
def test_script_help_runs(script):
    done = subprocess.run([sys.executable, "-m", f"benchmarks.{script}", "--help"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith(f"usage: {script}.py"), done.stdout[:300]


def test_no_sys_path_edits():
    """The scripts import each other as `benchmarks.<module>`: none edits sys.path."""
    edit = re.compile(r"sys\.path\.(insert|append|extend)\(|sys\.path\s*(\+?=|\[)")
    offenders = [f"{p.name}:{n}" for p in sorted(BENCHMARKS.glob("*.py"))
                 for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
                 if edit.search(line)]
    assert not offenders, offenders
