"""Everything that depends on Keras's internals, in one place.

Keras 3 (`keras/src/trainers/epoch_iterator.py`, `.../data_adapters/py_dataset_adapter.py`,
read in 3.15.1; with other versions a habit not recognised is simply left alone) feeds a
PyDataset through a `PyDatasetAdapter`; these habits need answering, and all are
recognised by the calling frame's function and file name:

- `EpochIterator.reset()` calls `on_epoch_end()` once before the first batch of `fit` and
  `evaluate`. That call ends no epoch, so a generator must not advance on it.
- `fit(shuffle=True)` (its default) makes the adapter (or its `OrderedEnqueuer`) ask for the
  batches of each epoch in an order drawn from Python's global `random`, unseeded. A
  kerasgen generator that orders its own epochs (shuffle=True or a sampler) already draws a
  uniformly random order from (seed, epoch); a random reordering of its batches on top adds
  no randomness, but makes the order irreproducible, breaks mid-epoch resume and hides
  from the generator which batch comes next. So when such a generator is asked its length
  by the adapter or enqueuer that is about to shuffle, that shuffle is turned off for the
  adapter's life. A generator with shuffle=False still gets its batches reordered, as
  Keras wants, but by kerasgen: the adapter's shuffle is turned off the same way and the
  generator serves whole batches in an order drawn from (seed, epoch) (EpochOrder's
  `batch_shuffle`, for that adapter's epochs only), so its work-ahead, worker threads and
  processes still know which batch comes next, and the order is reproducible.
- On the TensorFlow backend the adapter wraps the generator in
  `tf.data.Dataset.from_generator(...).prefetch(AUTOTUNE)`, and `fit` without
  `steps_per_epoch` makes a new iterator of it at the start of every epoch, dropping the
  one made at the end of the last. Destroying a tf.data iterator waits for its autotuning
  thread, which notices only when its own timed wait ends: measured here, stalls of 15 to
  20 s with no thread busy, in 7 of 17 epochs of Keras's tutorial CNN (TensorFlow 2.21). A kerasgen
  generator works ahead itself (see pipeline/ahead.py), so the adapter's dataset gets tf.data's
  autotuning turned off, as Keras itself does when it runs worker threads.

- With `workers > 1` the adapter makes an `OrderedEnqueuer`: with `use_multiprocessing`
  its pool forks the training process and pickles every batch back through a queue, and
  on the JAX and torch backends the batch `fit` draws to build the model leaves its
  thread pool's stream one batch ahead (each epoch then trains on batches 1..n-1 and the
  next epoch's batch 0, a plain PyDataset's too). A kerasgen generator runs worker
  threads or processes of its own (see pipeline/ahead.py, pipeline/workers.py), so the adapter's
  enqueuer, made but not started yet, is dropped: the adapter then asks the generator
  for its batches in order, from one thread, as with workers=1. Keras's pool is never
  kept: inside its daemonic workers kerasgen could start no process of its own, and its
  `stop()` waits forever on a pool whose batch raised.

- On the TensorFlow backend a batch that fails inside `fit`, `evaluate` or `predict` (a
  corrupt image, a dead worker process) raises in the generator that
  `Dataset.from_generator` runs in a `PyFunc` op; TensorFlow turns the exception into an
  `InvalidArgumentError` or `UnknownError` ("Graph execution error: Detected at node
  PyFunc ...") with kerasgen's message buried in a copy of the traceback. So the adapter's
  generator keeps the exception it raised, and the epoch iterator's
  `catch_stop_iteration` (the context `fit`, `evaluate` and `predict` run each epoch's
  steps in) raises that original exception, with its notes naming the batch, in place of
  TensorFlow's error (kept as its `__cause__`, or as `__context__` where the exception
  has a cause of its own). It propagates out of `fit` exactly as TensorFlow's did: the
  epoch is not ended, no callback's `on_epoch_end` and no validation runs. Under JAX and
  torch the adapter's generator runs in the training loop's thread, and the original
  exception reaches the caller as it is.

- A batch holding scipy.sparse matrices (`ArrayGenerator(sparse=True)`) gets a
  `tf.SparseTensorSpec` from the adapter, which then hands the matrices to
  `Dataset.from_generator` as they are, and tf.data refuses them ("neither a SparseTensor
  nor SparseTensorValue"); on JAX the adapter turns each into a BCOO holding exactly its
  nonzeros, a new shape every batch, so the jitted train step is compiled again for each
  (measured: 75 s against 2 s for two epochs of 63 batches). So the adapter's iterators
  give them as tf.SparseTensor on TensorFlow (`tf_sparse`) and as BCOO padded to a power
  of two on JAX (`jax_sparse`).

The last five are done when Keras's adapter first asks a generator for `num_batches`
(`adopt_adapter`).

- The tf.data datasets kerasgen makes (`to_tf_dataset`, `image_dataset_from_directory`)
  make their batches in `tf.numpy_function` ops, where a failing batch becomes the same
  TensorFlow error. Keras's adapter of a tf.data dataset never asks the generator
  anything, and users map and prefetch the dataset before `fit`, so no calling frame
  names the epoch iterator: once kerasgen has made such a dataset, Keras's
  `EpochIterator.catch_stop_iteration` (the class's, which the TensorFlow, JAX and torch
  epoch iterators enter) raises the exception a batch of one of those datasets raised in
  place of the TensorFlow error that carries it (`BatchErrors`, `raise_tf_data_errors`),
  as above; any other error passes through unchanged.
"""

from __future__ import annotations

import collections
import contextlib
import sys
import threading
import weakref
from types import FrameType

import numpy as np

from kerasgen import _redact
from kerasgen.arrays import batching

_ADAPTER_FILE = "py_dataset_adapter.py"
_EPOCH_ITERATOR_FILE = "epoch_iterator.py"
# the Keras functions that read `num_batches` right before shuffling the batch indices
_SHUFFLING_READERS = ("_finite_generator", "_run")

_last_begun = None  # weak reference to the generator whose epoch Keras began last


def note_epoch_begun(gen):
    """Remembers `gen` as the generator whose epoch Keras began last."""
    global _last_begun
    _last_begun = weakref.ref(gen)


def last_begun():
    """The kerasgen generator whose epoch Keras began most recently (or None)."""
    return _last_begun() if _last_begun is not None else None


def called_from_keras_reset():
    """True when the caller of the caller is reached from Keras's `EpochIterator.reset`."""
    frame: FrameType | None = sys._getframe(2)
    for _ in range(6):
        if frame is None:
            return False
        code = frame.f_code
        if code.co_name == "reset" and code.co_filename.endswith("epoch_iterator.py"):
            return True
        frame = frame.f_back
    return False


def adopt_adapter(own_order, own_workers=False):
    """Called from a generator's `num_batches` (frame 1): when its reader (frame 2) is
    Keras's adapter or enqueuer, turns off the adapter's tf.data autotuning, drops its
    unstarted enqueuer when `own_workers` (the generator runs its own worker threads or
    processes), and turns off the batch shuffle it is about to do: a generator that
    orders its epochs (`own_order`) needs none, any other is told to shuffle its batches
    itself ("batch shuffle"; "in order" from a reader that does not shuffle). Its
    iterators keep the exception a batch raised, and when the reader is Keras's epoch
    iterator, that iterator raises it in place of TensorFlow's error. Returns what it
    changed: "autotune", "shuffle", "batch shuffle", "in order", "enqueuer" or None."""
    frame = sys._getframe(2)  # 0: here, 1: num_batches, 2: its reader
    code = frame.f_code
    if not code.co_filename.endswith(_ADAPTER_FILE):
        return None
    owner = frame.f_locals.get("self")
    if owner is None:
        return None
    if code.co_name in _SHUFFLING_READERS:
        if code.co_name == "_run" and not own_order:
            return None  # Keras's own pool (driven by hand) shuffles for itself
        # the adapter wants its batches shuffled (or did, before this turned it off)
        wants = bool(getattr(owner, "shuffle", False) or getattr(owner, _SHUFFLED, False))
        if wants:
            owner.shuffle = False
            setattr(owner, _SHUFFLED, True)
        if own_order:
            return "shuffle" if wants else None
        return "batch shuffle" if wants else "in order"
    if code.co_name != "num_batches" or not hasattr(owner, "get_tf_dataset"):
        return None
    changed = None
    enqueuer = getattr(owner, "enqueuer", None)
    if own_workers and enqueuer is not None and not enqueuer.is_running():
        owner.enqueuer = None  # the generator's own workers serve the batches, in order
        changed = "enqueuer"
    if "get_tf_dataset" not in vars(owner):
        owner.get_tf_dataset = _without_autotune(owner.get_tf_dataset)
        owner._get_iterator = _keeping_errors(owner._get_iterator, owner)
        changed = changed or "autotune"
    _raise_batch_errors(frame.f_back, owner)
    return changed


def _without_autotune(get_tf_dataset):
    def get_tf_dataset_without_autotune():
        import tensorflow as tf

        options = tf.data.Options()
        options.autotune.enabled = False
        return get_tf_dataset().with_options(options)

    return get_tf_dataset_without_autotune


_BATCH_ERROR = "_kerasgen_batch_error"  # the adapter attribute holding what it raised
_SHUFFLED = "_kerasgen_shuffles_batches"  # an adapter whose batch shuffle kerasgen does


def _keeping_errors(get_iterator, adapter):
    """The adapter's `_get_iterator`, whose iterators keep on the adapter the exception
    they raise (and forget it when a new iterator starts)."""

    def get_iterator_keeping_errors():
        iterator = get_iterator()
        setattr(adapter, _BATCH_ERROR, None)

        convert = None
        if getattr(getattr(adapter, "py_dataset", None), "sparse", False) is True:
            import keras

            convert = {"tensorflow": tf_sparse,  # tf.data takes no scipy
                       "jax": jax_sparse}.get(keras.backend.backend())

        def batches():
            try:
                if convert is None:
                    yield from iterator
                else:
                    yield from (convert(batch) for batch in iterator)
            except Exception as error:
                setattr(adapter, _BATCH_ERROR, error)
                raise

        return batches()

    return get_iterator_keeping_errors


def tf_sparse(batch):
    """`batch` with its scipy.sparse matrices (sparse=True batches) as tf.SparseTensor.
    Keras's adapter gives them a tf.SparseTensorSpec (as Keras's own `get_tensor_spec`
    does) but hands them to `Dataset.from_generator` as they are, which refuses them;
    the JAX iterator converts them itself (to BCOO)."""
    if not batching.is_sparse(batch):
        return _each_leaf(batch, tf_sparse)
    import tensorflow as tf

    coo = _canonical(batch).tocoo()  # tf.SparseTensor wants its indices in row order
    indices = np.stack([coo.row, coo.col], axis=1).astype(np.int64)
    return tf.SparseTensor(indices, coo.data, coo.shape)


def jax_sparse(batch):
    """`batch` with its scipy.sparse matrices as BCOO arrays whose stored entries are
    padded (with JAX's out-of-bounds padding index, which its sparse ops ignore) to a
    power of two: Keras's own conversion stores exactly each batch's nonzeros, so every
    batch has another shape and the jitted train step is compiled again for each."""
    if not batching.is_sparse(batch):
        return _each_leaf(batch, jax_sparse)
    import jax
    import jax.experimental.sparse as jax_sparse_mod

    coo = _canonical(batch).tocoo()
    size = max(64, 1 << max(0, coo.nnz - 1).bit_length())
    data = np.zeros(size, coo.dtype)
    data[:coo.nnz] = coo.data
    indices = np.empty((size, 2), np.int32)
    indices[:coo.nnz, 0], indices[:coo.nnz, 1] = coo.row, coo.col
    indices[coo.nnz:] = coo.shape  # padding
    with jax.default_device(jax.local_devices(backend="cpu")[0]):  # as Keras places it
        return jax_sparse_mod.BCOO((jax.numpy.asarray(data), jax.numpy.asarray(indices)),
                                   shape=coo.shape, indices_sorted=True,
                                   unique_indices=True)


def _each_leaf(batch, convert):
    """`batch` with `convert` applied to each value of its dicts, tuples and lists (a
    leaf that is none of them, not sparse, as it is)."""
    if isinstance(batch, dict):
        return {k: convert(v) for k, v in batch.items()}
    if isinstance(batch, (tuple, list)):
        return type(batch)(convert(v) for v in batch)
    return batch


def _canonical(matrix):
    """`matrix` as CSR with sorted, unique indices (a copy where it had not)."""
    csr = matrix.tocsr()
    if not csr.has_canonical_format:
        csr = csr.copy()
        csr.sum_duplicates()
    return csr


def _raise_batch_errors(frame, adapter):
    """When `frame` (the reader of the adapter's `num_batches`) is Keras's epoch iterator
    of `adapter`, makes its `catch_stop_iteration` raise the exception a batch raised in
    place of the TensorFlow error that carries it."""
    if frame is None or not frame.f_code.co_filename.endswith(_EPOCH_ITERATOR_FILE):
        return
    epoch_iterator = frame.f_locals.get("self")
    if (getattr(epoch_iterator, "data_adapter", None) is not adapter
            or "catch_stop_iteration" in vars(epoch_iterator)
            or not hasattr(epoch_iterator, "catch_stop_iteration")):
        return
    epoch_iterator.catch_stop_iteration = _raising_errors_behind(
        epoch_iterator.catch_stop_iteration, lambda error: _batch_error_behind(error, adapter))


def _raising_errors_behind(catch_stop_iteration, behind):
    """`catch_stop_iteration` (a context manager's function, called with the same
    arguments) raising, in place of an error it lets through, the exception
    `behind(error)` finds (or the error itself, where it finds None)."""

    @contextlib.contextmanager
    def catch_stop_iteration_raising_batch_errors(*args):
        try:
            with catch_stop_iteration(*args):
                yield
        except Exception as error:
            original = behind(error)
            if original is None:
                raise
            raise_in_place_of(error, original)

    return catch_stop_iteration_raising_batch_errors


def raise_in_place_of(error, original):
    """Raises `original` (a batch's own exception) in place of TensorFlow's `error`, which
    stays reachable: the cause, or the context where `original` has a cause of its own."""
    if original.__cause__ is None:
        raise original from error
    raise original  # its own cause stays; TensorFlow's error is its __context__


def carries(error, original):
    """Whether `error` is TensorFlow's error made of `original`, an exception raised in a
    Python op (its message holds the exception's first line)."""
    tf = sys.modules.get("tensorflow")
    if tf is None or not isinstance(error, tf.errors.OpError):
        return False
    first_line = str(original).partition("\n")[0] or type(original).__name__
    return first_line in str(error)


def _batch_error_behind(error, adapter):
    """The exception a batch of `adapter` raised that TensorFlow's `error` carries, or
    None."""
    original = getattr(adapter, _BATCH_ERROR, None)
    if original is None or not carries(error, original):
        return None
    setattr(adapter, _BATCH_ERROR, None)
    return original


class BatchErrors:
    """The exceptions raised in the Python ops of one kerasgen tf.data dataset (the last
    few: parallel calls can fail together), each given back once, in place of the
    TensorFlow error that carries it (`behind`). Making one has Keras's epoch iterators
    raise them (`raise_tf_data_errors`)."""

    def __init__(self, kept=4):
        self._kept: collections.deque[BaseException] = collections.deque(maxlen=kept)
        self._lock = threading.Lock()
        _KEEPERS.add(self)
        raise_tf_data_errors()

    def keep(self, error):
        with self._lock:
            self._kept.append(error)

    def behind(self, error):
        """The kept exception TensorFlow's `error` carries (forgotten then), or None."""
        with self._lock:
            for original in reversed(self._kept):
                if carries(error, original):
                    self._kept.remove(original)
                    return original
        return None


_KEEPERS: weakref.WeakSet[BatchErrors] = weakref.WeakSet()  # of the tf.data datasets alive
_RAISES = "_kerasgen_raises_tf_data_errors"  # marks Keras's patched catch_stop_iteration


def _tf_data_error_behind(error):
    """The exception a batch of a kerasgen tf.data dataset raised that `error` carries."""
    for keeper in list(_KEEPERS):
        original = keeper.behind(error)
        if original is not None:
            return original
    return None


def raise_tf_data_errors():
    """Has every Keras epoch iterator raise, in place of a TensorFlow error, the exception
    behind it kept by a kerasgen tf.data dataset (`BatchErrors`); once. A Keras without
    `EpochIterator.catch_stop_iteration` is left alone."""
    try:
        from keras.src.trainers.epoch_iterator import EpochIterator
    except ImportError:
        return
    catch_stop_iteration = getattr(EpochIterator, "catch_stop_iteration", None)
    if catch_stop_iteration is None or getattr(catch_stop_iteration, _RAISES, False):
        return
    raising = _raising_errors_behind(catch_stop_iteration, _tf_data_error_behind)
    setattr(raising, _RAISES, True)
    EpochIterator.catch_stop_iteration = raising


def warn_predict_order(gen, epoch):
    """`predict` reads the batches of `gen` in the order of `epoch`, which is not the
    source order when the generator shuffles or samples: says so, and how to fix it."""
    _redact.warn(
        f"model.predict() reads {type(gen).__name__} in the order of epoch {epoch} "
        f"(shuffle={gen.shuffle}, sampler={gen.sampler!r}), so prediction row i is "
        f"sample gen.epoch_plan({epoch})[i], not sample i (Keras then ends the epoch: "
        "the next predict reads the next one). Pass shuffle=False (and no sampler) "
        "for predictions in source order, or reorder them: "
        f"preds[np.argsort(gen.epoch_plan({epoch}))].", UserWarning, stacklevel=3)


def warn_evaluate_measures(gen, changes):
    """`evaluate` outside `fit` reads the epoch `gen` makes with `changes` (its options,
    as `name=value`): resampled or augmented samples, not the data as it is: says so,
    and how to measure the data itself."""
    _redact.warn(
        f"model.evaluate() measures the epoch {type(gen).__name__} makes with "
        f"{', '.join(changes)}: its metrics count resampled or augmented samples (rare "
        "classes repeated, transformed images), not the data as it is. Evaluate a "
        "generator built without them (ImageFolderGenerator.split() and CSVGenerator.split() "
        "build the validation one so).", UserWarning, stacklevel=3)


def in_evaluate():
    """Whether the caller runs inside a Keras `evaluate` call outside `fit` (fit's
    validation pass runs `evaluate` too)."""
    return _keras_frame("evaluate") is not None and _keras_frame("fit") is None


def in_predict():
    """Whether the caller runs inside a Keras `predict` call (a function `predict` in one
    of Keras's `trainer.py` files up the stack)."""
    return _keras_frame("predict") is not None


def in_probe():
    """Whether the caller runs inside one of Keras's looks at a batch that is not a
    training step: the PyDataset adapter's peek at the first batches for the tf.data
    signature (`get_tf_dataset`), or the JAX and torch trainers' draw that builds the
    model (`_symbolic_build`), a few frames above `gen[i]` (5 in Keras 3.15)."""
    frame: FrameType | None = sys._getframe(2)
    for _ in range(12):
        if frame is None:
            return False
        code = frame.f_code
        if code.co_name in _PROBES and "keras" in code.co_filename:
            return True
        frame = frame.f_back
    return False


_PROBES = ("get_tf_dataset", "_symbolic_build")


def _strings_in(batch):
    """(name, dtype) of the first array of `batch` (x, y, sample_weight; dicts and tuples
    of arrays within, named as `batching.names_of` names them) holding strings, or None.
    Only NumPy arrays are looked at: a tensor a `batch_augment` returned is the
    backend's to carry."""
    from kerasgen.arrays import batching

    for k, leaf in enumerate(batching.leaves_of(batch)):
        dtype = getattr(leaf, "dtype", None)
        if not isinstance(dtype, np.dtype) or dtype.kind not in "USO":
            continue
        if dtype.kind == "O" and not any(isinstance(v, (str, bytes))
                                         for v in leaf.flat[:64]):
            continue
        return batching.names_of(batch)[k], dtype  # named only when found: every
    return None  # batch of every generator passes here


def refuse_strings(batch, gen):
    """Raises a TypeError saying what works when Keras is about to read a batch holding
    strings (its PyDataset adapter carries numbers only, and fails with "Invalid dtype:
    str..." on every backend): at its first look at a batch, or inside `fit`, `evaluate`
    or `predict` (the JAX and torch trainers look only while the model is unbuilt).
    Outside Keras the batch is served as it is."""
    found = _strings_in(batch)
    if found is None or not (in_probe() or any(_keras_frame(name) is not None for name in (
            "fit", "evaluate", "predict"))):
        return
    where, dtype = found
    raise TypeError(
        f"`model.fit` cannot take the batches of {type(gen).__name__} directly: {where} "
        f"holds strings (dtype {dtype}), and Keras's PyDataset adapter carries only "
        "numbers (it fails with 'Invalid dtype: str...'). Either feed the tf.data form, "
        "`model.fit(gen.to_tf_dataset())` (TensorFlow installed; a TextVectorization "
        "layer in the model then takes the strings), or turn the strings into numbers in "
        "the generator, on any backend: `batch_augment=kg.augment.map_batch(lambda x, y: "
        "(keras.ops.convert_to_numpy(vectorizer(x)), y))` with an adapted "
        "`keras.layers.TextVectorization` (see docs/migrating.md).")


def _keras_frame(name):
    """The frame of Keras's trainer method `name` the caller runs inside, or None."""
    frame: FrameType | None = sys._getframe(2)
    for _ in range(40):
        if frame is None:
            return None
        code = frame.f_code
        if code.co_name == name and code.co_filename.endswith("trainer.py") and (
                "keras" in code.co_filename):
            return frame
        frame = frame.f_back
    return None


def fit_data():
    """(x, validation_data) of the Keras `fit` call that the caller runs inside (its frame
    is found up the stack: a function `fit` in one of Keras's `trainer.py` files, which
    name these arguments so in every backend), or None outside `fit`. Used to compare the
    classes of the generators given to one `fit`."""
    frame = _keras_frame("fit")
    if frame is None:
        return None
    arguments = frame.f_locals
    return arguments.get("x"), arguments.get("validation_data")
