"""The notebooks of examples/ run top to bottom in a real Jupyter kernel (nbclient), on
data they generate, through examples/run_notebooks.py as `make notebooks` runs them; what
they print holds, and the files keep the outputs of such a run (their plots included),
so a reader (on GitHub, in Colab) sees them without running anything."""

import importlib.util
import pathlib

import nbformat
import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("run_notebooks",
                                              ROOT / "examples" / "run_notebooks.py")
run_notebooks = importlib.util.module_from_spec(spec)
spec.loader.exec_module(run_notebooks)

# notebook -> what its run must print (in any cell's stdout)
PRINTS = {
    "image_folder_augment_sampler.ipynb": [
        "{'circle': 400, 'square': 150, 'triangle': 50}",
        "['circle', 'square', 'triangle'] | 480 training files, 120 validation files",
        "same batch: True",
    ],
    "csv_multi_label.ipynb": [
        "['circle', 'square', 'triangle'] | x (32, 64, 64, 3) float32 | y (32, 3) float32",
        "does not exist: <root>/images/9999.png (line 1202 of <root>/labels.csv)",
    ],
    "migrating_from_keras.ipynb": [
        "legacy   {'circle': 0, 'square': 1, 'triangle': 2} 480",
        "kerasgen {'circle': 0, 'square': 1, 'triangle': 2} 480",
        "kerasgen {'circle': 160, 'square': 160, 'triangle': 160}",
        "batch 5 equal with 2 worker threads: True",
    ],
}


def stdout(notebook):
    return "".join(out.get("text", "") for cell in notebook.cells
                   for out in cell.get("outputs", [])
                   if out.get("output_type") == "stream" and out.get("name") == "stdout")


def pictures(notebook):
    """How many PNG outputs each code cell holds, in order."""
    return [sum("image/png" in out.get("data", {}) for out in cell.outputs)
            for cell in notebook.cells if cell.cell_type == "code"]


def test_every_notebook_is_checked():
    assert sorted(p.name for p in run_notebooks.NOTEBOOKS) == sorted(PRINTS)


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.parametrize("name", sorted(PRINTS))
def test_notebook_runs_and_keeps_its_outputs(name, tmp_path):
    path = ROOT / "examples" / name
    fresh = run_notebooks.execute(path, tmp_path)  # raises with the failing cell
    printed = stdout(fresh)
    for line in PRINTS[name]:
        assert line in printed, f"{name} did not print {line!r}:\n{printed[-3000:]}"
    assert sum(pictures(fresh)) >= 1, f"{name} drew no plot"
    kept = nbformat.read(path, as_version=4)
    assert pictures(kept) == pictures(fresh), (
        f"{name}'s file does not hold the plots a run draws: run `make notebooks`")
    for line in PRINTS[name]:
        assert line in stdout(kept), (
            f"{name}'s file lacks the output {line!r}: run `make notebooks`")
