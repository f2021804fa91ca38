"""Worker processes in a real Jupyter kernel (nbclient + ipykernel): a dataset class and a
lambda defined in a notebook cell, trained with `workers=2, use_multiprocessing=True`,
as Keras's own pool allows. The class lives in the kernel's `__main__`, which has no file
a worker could import: it reaches the workers pickled by value (cloudpickle)."""

import os

import pytest

CELLS = [
    """
import os
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np
import keras
import kerasgen as kg


class Mine(kg.Generator):
    def __init__(self, x, **kwargs):
        self.x = x
        super().__init__(num_samples=len(x), labels=np.arange(len(x)) % 2, **kwargs)

    def load_sample(self, index):
        return self.x[index]
""",
    """
x = np.arange(64 * 4, dtype="float32").reshape(64, 4)
processes = Mine(x, batch_size=8, seed=1, workers=2, use_multiprocessing=True,
                 augment=lambda sample, rng: sample + 1)
threads = Mine(x, batch_size=8, seed=1, workers=2, augment=lambda sample, rng: sample + 1)
same = all(np.array_equal(processes[b][0], threads[b][0]) for b in range(len(threads)))
model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
model.compile("adam", "sparse_categorical_crossentropy")
history = model.fit(processes, epochs=2, verbose=0)
print("trained", len(history.history["loss"]), same)
""",
]


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_generator_class_from_a_notebook_cell_trains_with_worker_processes(tmp_path):
    nbformat = pytest.importorskip("nbformat", reason="in the test extra (nbclient)")
    from nbclient import NotebookClient

    notebook = nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_code_cell(source) for source in CELLS])
    client = NotebookClient(notebook, timeout=240, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}})
    env = {**os.environ, "KERAS_BACKEND": os.environ.get("KERAS_BACKEND", "tensorflow")}
    client.execute(env=env)  # raises CellExecutionError with the cell's traceback
    outputs = [out.get("text", "") for cell in notebook.cells for out in cell.outputs
               if out.get("output_type") == "stream" and out.get("name") == "stdout"]
    assert "trained 2 True" in "".join(outputs), outputs
