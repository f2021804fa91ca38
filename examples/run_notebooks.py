"""Runs the notebooks of examples/ top to bottom in a Jupyter kernel (nbclient).

    python examples/run_notebooks.py            # run them, write nothing
    python examples/run_notebooks.py --write    # run them and keep the new outputs (make notebooks)
    python examples/run_notebooks.py NAME.ipynb # only these

Each runs in a temporary working folder, on the Keras backend of KERAS_BACKEND
(TensorFlow when unset), with the kernel of this Python. A failing cell stops the run with
its notebook, cell and traceback. The tests (tests/test_notebooks.py) run them the same way.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import sys
import tempfile

import nbformat
from nbclient import NotebookClient

HERE = pathlib.Path(__file__).resolve().parent
NOTEBOOKS = sorted(HERE.glob("*.ipynb"))


def execute(path: pathlib.Path, workdir: pathlib.Path, timeout: int = 600):
    """The notebook at `path`, run in `workdir`: an nbformat notebook with new outputs.
    Raises nbclient's CellExecutionError (the cell and its traceback) when a cell fails."""
    notebook = nbformat.read(path, as_version=4)
    client = NotebookClient(notebook, timeout=timeout, kernel_name="python3",
                            record_timing=False,
                            resources={"metadata": {"path": str(workdir)}})
    env = {**os.environ}
    env.pop("MPLBACKEND", None)  # the kernel's inline backend, as in Jupyter (tests set Agg)
    env.setdefault("KERAS_BACKEND", "tensorflow")
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    client.execute(env=env)
    return notebook


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", help="names in examples/ (default: all)")
    parser.add_argument("--write", action="store_true",
                        help="keep the new outputs in the notebook files")
    args = parser.parse_args(argv)
    paths = [HERE / name for name in args.notebooks] or NOTEBOOKS
    for path in paths:
        with tempfile.TemporaryDirectory() as workdir:
            notebook = execute(path, pathlib.Path(workdir))
        if args.write:
            nbformat.write(notebook, path)
        print(f"{path.name}: ran {len(notebook.cells)} cells"
              + (", outputs written" if args.write else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
