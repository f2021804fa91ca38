"""examples/imbalanced_images.py runs and prints per-class recall for both of its runs."""

import ast
import os
import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "examples" / "imbalanced_images.py"


@pytest.mark.slow
def test_imbalanced_images_example(tmp_path):
    env = dict(os.environ, KERAS_BACKEND="tensorflow", TF_CPP_MIN_LOG_LEVEL="3")
    data = tmp_path / "digits"
    result = subprocess.run([sys.executable, str(SCRIPT), "--epochs", "2", "--data", str(data)],
                            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, (
        f"exit code {result.returncode}\n--- stdout\n{result.stdout}"
        f"\n--- stderr\n{result.stderr[-4000:]}")
    out = result.stdout
    assert sorted(p.name for p in data.iterdir()) == [str(d) for d in range(10)]
    for title in ("no sampler", "BalancedBatchSampler"):
        line = re.search(rf"^\[{title}\] recall per class: (.*)$", out, re.MULTILINE)
        assert line, f"no recall line for {title!r}:\n{out}"
        cells = dict(cell.split(":") for cell in line.group(1).split())
        assert sorted(cells) == [str(d) for d in range(10)], line.group(0)
        assert all(0.0 <= float(r) <= 1.0 for r in cells.values()), line.group(0)
        assert re.search(rf"^\[{title}\] mean recall of rare digits \[1, 5, 8\]: \d\.\d{{3}}$",
                         out, re.MULTILINE), out
    # The sampled run saw every digit about equally often.
    after = re.search(r"^\[BalancedBatchSampler\] training images per epoch: (\{.*\})", out,
                      re.MULTILINE)
    counts = list(ast.literal_eval(after.group(1)).values())
    assert max(counts) - min(counts) <= 1, after.group(0)
    assert "rare-digit recall:" in out
