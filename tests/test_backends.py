"""kerasgen on every Keras backend: `model.fit` trains on exactly the generator's batches,
worker processes never fork a process that holds the backend's threads, and every
TensorFlow-only piece says so when TensorFlow is absent.

These run on whatever backend KERAS_BACKEND names: `make test` runs them on TensorFlow,
`make test-jax` on JAX (docs/backends.md has the table).
"""

import importlib.util
import json
import multiprocessing
import os
import sqlite3
import subprocess
import sys
import textwrap

import keras
import numpy as np
import pytest

import kerasgen as kg

from .test_contract import make as make_contract_generator

BACKEND = keras.backend.backend()
KINDS = ["array", "folder", "csv", "custom", "sql"]
# Keras's JAX and PyTorch fit draw one batch from Keras's thread pool (its OrderedEnqueuer)
# to build the model, and that pool's stream then stays one batch ahead: each epoch
# trains on batches 1..n-1 and the next epoch's batch 0, a plain PyDataset's too
# (test_keras_alone_keeps_each_epoch_whole_with_threads). kerasgen drops Keras's pool and
# runs its own threads or processes (kerasgen/_keras_compat.py), so its epochs stay whole.
KERAS_THREADS_SHIFT = BACKEND in ("jax", "torch")
THREADS_SHIFT = pytest.mark.xfail(KERAS_THREADS_SHIFT, strict=True, reason=(
    "Keras's JAX/PyTorch fit takes one batch from its thread pool to build the model, and "
    "the pool's stream stays one batch ahead: Keras's own, a plain PyDataset's too"))
WORKERS = [  # kerasgen's own threads and processes (Keras's pool is dropped): no shift
    pytest.param(dict(workers=1), id="1-worker"),
    pytest.param(dict(workers=2), id="2-threads"),
    pytest.param(dict(workers=2, use_multiprocessing=True), id="2-processes"),
]
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class Recorder(keras.Model):
    """A tiny model that keeps a copy of every batch `fit` trains on, on any backend:
    TensorFlow and PyTorch call `train_step(data)`, JAX `train_step(state, data)`, and with
    `run_eagerly=True` the batch holds concrete arrays on all three."""

    def __init__(self):
        super().__init__()
        self.flatten = keras.layers.Flatten()
        self.dense = keras.layers.Dense(3)
        self.seen = []

    def call(self, x):
        return self.dense(self.flatten(x))

    def train_step(self, *args):
        x, y = args[-1][:2]
        self.seen.append((np.array(x), np.array(y)))
        return super().train_step(*args)


def sql_generator(database, **kwargs):
    return kg.SQLGenerator(database, "SELECT a, b, label FROM samples ORDER BY rowid",
                           x_col=["a", "b"], y_col="label", **kwargs)


@pytest.fixture
def database(tmp_path):
    """13 rows whose features are 10 * row, labelled cat, dog, fox in turn."""
    path = tmp_path / "data.db"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE samples (a REAL, b REAL, label TEXT)")
        db.executemany("INSERT INTO samples VALUES (?, ?, ?)",
                       [(10.0 * k, 10.0 * k, ("cat", "dog", "fox")[k % 3]) for k in range(13)])
    return path


@pytest.fixture(params=KINDS)
def factory(request, image_folder, csv_file, database):
    if request.param == "sql":
        return lambda **kw: sql_generator(database, batch_size=5, label_mode="int", **kw)
    return lambda **kw: make_contract_generator(request.param, image_folder, csv_file, **kw)


# Keras's JAX and PyTorch trainers build the model by drawing one batch inside an epoch
# (`_symbolic_build(iterator=...)` calls the adapter's on_epoch_begin), then call
# `EpochIterator.reset()`, whose on_epoch_end kerasgen's Generator.on_epoch_end ignores as
# it does on TensorFlow (kerasgen/base.py): the first fit trains from epoch 0 everywhere.
FIRST_EPOCH = 0


def fit_recorder(gen, epochs):
    model = Recorder()
    model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  run_eagerly=True)
    history = model.fit(gen, epochs=epochs, verbose=0)
    assert np.isfinite(history.history["loss"]).all()
    return model.seen


def batches_of_epochs(gen, first, epochs):
    for _ in range(first):
        gen.on_epoch_end()
    batches = []
    for _ in range(epochs):
        batches += [gen[i] for i in range(len(gen))]
        gen.on_epoch_end()
    return batches


def test_first_fit_trains_on_epoch_zero(image_folder, csv_file):
    make = lambda: make_contract_generator("array", image_folder, csv_file, seed=11)  # noqa
    seen = fit_recorder(make(), epochs=1)
    expected = batches_of_epochs(make(), 0, 1)
    assert [x.tolist() for x, _ in seen] == [x.tolist() for x, _ in expected]


class Numbered(keras.utils.PyDataset):
    """A plain PyDataset: batch i is filled with i."""

    def __len__(self):
        return 5

    def __getitem__(self, index):
        return np.full((2, 3), float(index), "float32"), np.zeros(2, "int32")


@THREADS_SHIFT
def test_keras_alone_keeps_each_epoch_whole_with_threads():
    """Keras alone, no kerasgen: with 2 threads, fit trains on batches 0..4 each epoch."""
    model = Recorder()
    model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  run_eagerly=True)
    model.fit(Numbered(workers=2), epochs=2, shuffle=False, verbose=0)
    assert [int(x[0, 0]) for x, _ in model.seen] == [0, 1, 2, 3, 4] * 2


@pytest.mark.parametrize("workers", WORKERS)
def test_fit_trains_on_the_generators_batches(factory, workers):
    """Every generator kind, with one worker, two threads and two worker processes: fit
    on this backend trains on gen[i] of each epoch, byte for byte, in order."""
    epochs = 2
    seen = fit_recorder(factory(seed=11, **workers), epochs)
    expected = factory(seed=11)  # a fresh generator, asked directly
    batches = batches_of_epochs(expected, FIRST_EPOCH, epochs)
    per_epoch = len(expected)
    assert len(seen) == len(batches) == epochs * per_epoch
    for (x_seen, y_seen), (x, y) in zip(seen, batches):
        np.testing.assert_array_equal(x_seen, x)
        np.testing.assert_array_equal(y_seen, y)
    first, second = seen[:per_epoch], seen[per_epoch:]
    assert any(not np.array_equal(a[0], b[0]) for a, b in zip(first, second))  # reshuffled


def test_smote_stats_and_checkpoint_in_fit(tmp_path):
    """What a user tried on JAX (issue 16): a SMOTE sampler, PipelineStats and
    GeneratorCheckpoint, in one fit on this backend."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(30, 4)).astype("float32")
    y = np.array([0] * 22 + [1] * 8)
    make = lambda: kg.ArrayGenerator(x, y, batch_size=8, seed=3, stats=True,  # noqa: E731
                                     sampler=kg.samplers.SMOTE(k_neighbors=3))
    gen = make()
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
    model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    checkpoint = kg.callbacks.GeneratorCheckpoint(tmp_path / "state.json")
    history = model.fit(gen, epochs=2, verbose=0,
                        callbacks=[kg.callbacks.PipelineStats(), checkpoint])
    assert np.isfinite(history.history["loss"]).all()
    assert len(history.history["data/wait_s"]) == 2
    labels = np.concatenate([gen[i][1] for i in range(len(gen))])
    assert (labels == 0).sum() == (labels == 1).sum() == 22  # balanced by synthesis
    resumed = make()
    checkpoint.restore(resumed)
    assert resumed.epoch == gen.epoch
    np.testing.assert_array_equal(resumed[0][0], gen[0][0])


def run_python(code, backend, timeout=240, **env):
    """Runs `code` in a fresh interpreter on `backend`; returns (stdout, stderr). Its
    stderr is also that of every process it starts (fork server, workers)."""
    env = dict(os.environ, KERAS_BACKEND=backend, PYTHONPATH=ROOT,
               PYTHONWARNINGS="always::RuntimeWarning", **env)
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env, cwd=ROOT,
                         capture_output=True, text=True, timeout=timeout)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout, out.stderr


FORK_WARNING = "JAX is multithreaded, so this will likely lead to a deadlock"

FIT_WITH_WORKER_PROCESSES = """
    import json, os
    import keras
    import numpy as np
    import kerasgen as kg

    keras.ops.ones(1)  # the backend's threads are running before the workers start
    gen = kg.ArrayGenerator(np.arange(48.0).reshape(24, 2), np.arange(24) % 3,
                            batch_size=4, seed=5, workers=2, use_multiprocessing=True)
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(3)])
    model.compile("sgd", "sparse_categorical_crossentropy")
    model.fit(gen, epochs=2, verbose=0)
    print(json.dumps({"backend": keras.backend.backend(), "pid": os.getpid()}))
"""


def jax_installed():
    return importlib.util.find_spec("jax") is not None


@pytest.mark.skipif(not jax_installed(), reason="needs JAX: pip install 'jax[cpu]'")
def test_worker_processes_under_jax_never_trigger_the_fork_warning():
    stdout, stderr = run_python(FIT_WITH_WORKER_PROCESSES, "jax")
    assert json.loads(stdout.splitlines()[-1])["backend"] == "jax"
    assert FORK_WARNING not in stderr, stderr[-3000:]
    assert "os.fork()" not in stderr, stderr[-3000:]


@pytest.mark.skipif(not jax_installed(), reason="needs JAX: pip install 'jax[cpu]'")
def test_the_fork_warning_check_can_fail():
    """The check above would see the warning: a plain fork after JAX started prints it."""
    _, stderr = run_python("""
        import os
        import jax.numpy as jnp

        jnp.ones(1).block_until_ready()
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)
    """, "jax")
    assert FORK_WARNING in stderr, stderr[-3000:]


WORKER_PARENTS = """
    import json, os, sys
    import keras
    import numpy as np
    import kerasgen as kg
    from tests.test_backends import ParentRecorder

    gen = ParentRecorder(sys.argv[1], batch_size=2, seed=1, workers=2,
                         use_multiprocessing=True)
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(3)])
    model.compile("sgd", "sparse_categorical_crossentropy")
    model.fit(gen, epochs=1, verbose=0)
    print(json.dumps({"pid": os.getpid()}))
"""


class ParentRecorder(kg.Generator):
    """Writes, for each sample it loads, the loading process's id and its parent's."""

    def __init__(self, directory, **kwargs):
        self.directory = directory
        super().__init__(num_samples=8, labels=np.arange(8) % 3, label_mode="int", **kwargs)

    def load_sample(self, index):
        with open(os.path.join(self.directory, f"{index}.json"), "w") as f:
            json.dump({"pid": os.getpid(), "ppid": os.getppid()}, f)
        return np.full(2, index, dtype="float32")


BACKENDS = [pytest.param(name, marks=pytest.mark.skipif(
    not installed, reason=f"{name} is not installed here ({hint})"))
    for name, installed, hint in [
        ("tensorflow", importlib.util.find_spec("tensorflow") is not None,
         "pip install tensorflow-cpu"),
        ("jax", jax_installed(), "pip install 'jax[cpu]'"),
        ("torch", importlib.util.find_spec("torch") is not None,
         "pip install torch")]]


@pytest.mark.skipif("forkserver" not in multiprocessing.get_all_start_methods(),
                    reason="no fork server here: workers are spawned, children of the "
                           "training process but not forks of it")
@pytest.mark.slow  # a fit with worker processes in a child, per backend: 8 to 13 s
@pytest.mark.parametrize("backend", BACKENDS)
def test_worker_processes_are_not_forks_of_the_training_process(tmp_path, backend):
    """On every backend the workers are children of the fork server, never of the
    training process (whose TensorFlow, JAX or CUDA threads a fork would copy dead)."""
    script = WORKER_PARENTS.replace("sys.argv[1]", repr(str(tmp_path)))
    stdout, stderr = run_python(script, backend)
    training = json.loads(stdout.splitlines()[-1])["pid"]
    loads = [json.loads(p.read_text()) for p in tmp_path.glob("*.json")]
    assert len(loads) == 8
    workers = {d["pid"] for d in loads if d["pid"] != training}
    assert workers, "no batch was made in a worker process"
    assert all(d["ppid"] != training for d in loads if d["pid"] != training), loads
    assert "os.fork()" not in stderr, stderr[-3000:]


# The start of a script run as if TensorFlow were not installed (`run_python`); other test
# files' scripts begin with it too.
NO_TENSORFLOW = """
    import json, os, sys

    class NoTensorFlow:  # as if TensorFlow were not installed
        def find_spec(self, name, path=None, target=None):
            if name == "tensorflow" or name.startswith("tensorflow."):
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)

    sys.meta_path.insert(0, NoTensorFlow())
"""
WITHOUT_TENSORFLOW = NO_TENSORFLOW + """
    import keras
    import numpy as np
    import kerasgen as kg
    from kerasgen.arrays import malloc as _malloc

    errors = {}
    gen = kg.ArrayGenerator(np.zeros((8, 2), "float32"), np.arange(8) % 2, batch_size=4)
    try:
        gen.to_tf_dataset()
    except ImportError as error:
        errors["to_tf_dataset"] = str(error)
    open("empty.tfrecord", "wb").close()
    try:
        kg.TFRecordGenerator("empty.tfrecord", features={"x": "float"})
    except ImportError as error:
        errors["TFRecordGenerator"] = str(error)
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(2)])
    model.compile("sgd", "sparse_categorical_crossentropy")
    model.fit(gen, epochs=2, verbose=0)  # everything else trains without TensorFlow
    print(json.dumps({"errors": errors, "malloc_set": _malloc.times_applied(),
                      "tensorflow_loaded": "tensorflow" in sys.modules}))
"""


@pytest.mark.skipif(not jax_installed(), reason="needs JAX: pip install 'jax[cpu]'")
def test_tensorflow_only_pieces_say_so_when_tensorflow_is_absent(tmp_path):
    stdout, _ = run_python(WITHOUT_TENSORFLOW.replace('"empty.tfrecord"',
                                                      repr(str(tmp_path / "e.tfrecord"))),
                           "jax")
    result = json.loads(stdout.splitlines()[-1])
    errors = result["errors"]
    assert "needs TensorFlow" in errors["to_tf_dataset"], errors
    assert 'pip install "kerasgen3[tensorflow]"' in errors["to_tf_dataset"], errors
    assert "TFRecordGenerator needs TensorFlow" in errors["TFRecordGenerator"], errors
    assert 'pip install "kerasgen3[tfrecord]"' in errors["TFRecordGenerator"], errors
    assert result["malloc_set"] == 0 and not result["tensorflow_loaded"], result


MALLOC_UNDER_JAX = """
    import json
    import tensorflow  # loaded, as a user's script may, but not the backend
    import keras
    import numpy as np
    import kerasgen as kg
    from kerasgen.arrays import malloc as _malloc

    gen = kg.ArrayGenerator(np.zeros((8, 2), "float32"), np.arange(8) % 2, batch_size=4)
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(2)])
    model.compile("sgd", "sparse_categorical_crossentropy")
    model.fit(gen, epochs=2, verbose=0)
    print(json.dumps({"malloc_set": _malloc.times_applied()}))
"""


@pytest.mark.skipif(not jax_installed(), reason="needs JAX: pip install 'jax[cpu]'")
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc")
def test_malloc_is_left_alone_off_the_tensorflow_backend():
    """The malloc fix undoes the pin TensorFlow's generator dataset sets; JAX's and
    PyTorch's fit never build one, so kerasgen does not touch malloc there, even with
    TensorFlow imported (tests/test_malloc.py checks it does on TensorFlow)."""
    pytest.importorskip("tensorflow")
    stdout, _ = run_python(MALLOC_UNDER_JAX, "jax")
    assert json.loads(stdout.splitlines()[-1]) == {"malloc_set": 0}
