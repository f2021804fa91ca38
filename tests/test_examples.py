"""The examples run as scripts and print what they promise.

examples/quickstart.py is exercised elsewhere (`make demo`), examples/multihost_jax.py by
tests/test_multihost.py, examples/ray_preprocessing.py by tests/test_ray.py.
"""

import os
import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent

EXPECTED_LINES = {
    "custom_dataset.py": [
        "class_names=['high', 'low']  batch x (16, 16) float32, y (16,) int32 (class ids)",
        "custom dataset: trained 2 epochs on 64 .npy files",
    ],
    "classic_sequence.py": [
        "hand-written DataGenerator test accuracy:",
        "kg.ArrayGenerator         test accuracy:",
        "__len__ uses floor: 29 of 1437 samples are dropped every epoch",
        "two identical generators give the same first batch? classic False, "
        "kerasgen (seed=0) True",
    ],
}


def run_example(name, cwd):
    env = dict(os.environ, KERAS_BACKEND="tensorflow", TF_CPP_MIN_LOG_LEVEL="3")
    return subprocess.run([sys.executable, str(ROOT / "examples" / name)], cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=240)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(EXPECTED_LINES))
def test_example_runs(name, tmp_path):
    result = run_example(name, tmp_path)
    assert result.returncode == 0, (
        f"{name} exited with {result.returncode}\n--- stdout\n{result.stdout}"
        f"\n--- stderr\n{result.stderr[-4000:]}")
    for expected in EXPECTED_LINES[name]:
        assert expected in result.stdout, f"{expected!r} not in the output:\n{result.stdout}"
    # Accuracies well above chance: the models really trained on the generators' batches.
    accuracies = [float(a) for a in re.findall(r"accuracy:? (\d\.\d+)", result.stdout)]
    assert accuracies and all(a > 0.5 for a in accuracies), result.stdout
    assert list(tmp_path.iterdir()) == [], f"{name} left files in its working directory"
