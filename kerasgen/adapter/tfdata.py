"""tf.data interop (TensorFlow only): a generator's batches as a tf.data.Dataset.

Two datasets, one way of making their batches (`_EpochBatches`): batch b of epoch e is
made in a `tf.numpy_function` that tf.data calls, in order (deterministic), so each batch
is byte-identical to `gen[b]` at epoch e.

- `to_tf_dataset`: epoch after epoch from the generator's current one, as one stream;
  tf.data's threads make several batches at once, each on a view of the generator fixed
  at its epoch (`Generator.at_epoch`).
- `pass_dataset`: what `image_dataset_from_directory` returns: one epoch per pass, as
  tf.data's own datasets are (finite; `fit` needs no steps_per_epoch), each pass
  serving a new epoch of the generator (`Generator.begin_pass`), reshuffled from
  (seed, epoch); the pass that serves its last batch ends that epoch (`on_epoch_end`),
  so after `fit(ds, epochs=n)` the generator stands at epoch n, as after `fit(gen)`, and
  its state resumes there. The generator itself makes the batches of its current epoch,
  in order, so its own work-ahead, worker threads or processes and statistics are those
  of `fit(gen)`. Its iterators are made anew every pass, so tf.data's autotuning, whose
  thread a dying iterator waits for (see _keras_compat), is off; and the pass starts
  without `Dataset.from_generator`, whose op pins glibc's malloc (see _malloc).
  A pass must begin at an epoch's start: a generator restored mid-epoch is refused, as
  kerasgen's ValueError, and left as it was.

What fails in those ops (a file deleted or corrupt, a refused pass) reaches the user as
kerasgen's own exception, not TensorFlow's "Graph execution error ... PyFunc" carrying its
text: each dataset keeps what its ops raised (`_keras_compat.BatchErrors`), its own
iterators (a `for` loop over it, `as_numpy_iterator`) raise that in place of TensorFlow's
error, and so do Keras's `fit`, `evaluate` and `predict`, also over the dataset mapped or
prefetched (see _keras_compat). The dataset returned is a real `tf.data.Dataset` (the
same graph, `_Dataset`); datasets made from it (`map`, `take`...) iterated by hand give
TensorFlow's error, as any tf.data dataset does.
"""

import functools
import threading

import numpy as np

from kerasgen import _keras_compat


def _import_tensorflow():
    try:
        import tensorflow as tf
    except ImportError as error:
        raise ImportError('to_tf_dataset() needs TensorFlow: pip install "kerasgen3[tensorflow]"'
                          " (or pip install tensorflow-cpu). On the JAX and PyTorch backends "
                          "`model.fit(gen)` takes the generator itself, without TensorFlow."
                          ) from error
    return tf


def _spec(tf, value):
    value = np.asarray(value)
    return tf.TensorSpec((None,) + value.shape[1:], tf.as_dtype(value.dtype))


class _EpochBatches:
    """The batches of any epoch of `gen` as a tf.data.Dataset (`dataset(epoch)`), made by
    views fixed at their epoch (a few recent ones kept: tf.data threads may still be
    finishing the last epoch when the next begins)."""

    def __init__(self, tf, gen, num_parallel_calls, own=False):
        # own: the generator makes the batches of its current epoch itself
        self.tf, self.gen, self.num_parallel_calls, self.own = (tf, gen, num_parallel_calls,
                                                                own)
        structure = gen.at_epoch(gen.epoch)[0]  # one batch, for the output signature
        self.signature = tf.nest.map_structure(lambda v: _spec(tf, v), structure)
        self.dtypes = [spec.dtype for spec in tf.nest.flatten(self.signature)]
        self.views, self.lock = {}, threading.Lock()
        self.errors = _keras_compat.BatchErrors()  # what the ops raised, for the user

    def kept(self, function):
        """`function`, keeping in `errors` what it raises (it runs in a tf.data op)."""

        def keeping(*args):
            try:
                return function(*args)
            except Exception as error:
                if _runtime_logs_warnings() and hasattr(error, "add_note"):
                    error.add_note(RUNTIME_LOG_NOTE)
                self.errors.keep(error)
                raise

        return keeping

    def view(self, epoch):
        epoch = int(epoch)
        if self.own and epoch == self.gen.epoch:
            return self.gen
        with self.lock:
            view = self.views.get(epoch)
            if view is None:
                view = self.views[epoch] = self.gen.at_epoch(epoch)
                for old in [e for e in self.views if e < epoch - 2]:
                    del self.views[old]
        return view

    def _load(self, epoch, index):
        source, index = self.view(epoch), int(index)
        batch = source[index]
        if source is self.gen and index == len(source) - 1:
            self.gen.on_epoch_end()  # a pass served whole ends its epoch, as fit(gen) does
        return [np.asarray(v) for v in self.tf.nest.flatten(batch)]

    def dataset(self, epoch):
        tf, signature = self.tf, self.signature
        count = tf.numpy_function(self.kept(lambda e: np.int64(len(self.view(e)))),
                                  [epoch], tf.int64)

        def fetch(index):
            tensors = tf.numpy_function(self.kept(self._load), [epoch, index], self.dtypes,
                                        stateful=False)
            for tensor, spec in zip(tensors, tf.nest.flatten(signature)):
                tensor.set_shape(spec.shape)
            return tf.nest.pack_sequence_as(signature, tensors)

        indices = tf.data.Dataset.range(count)
        if self.num_parallel_calls is None:  # in order, one at a time
            return indices.map(fetch)
        return indices.map(fetch, num_parallel_calls=self.num_parallel_calls,
                           deterministic=True)


RUNTIME_LOG_NOTE = (
    "kerasgen: TensorFlow's runtime logs this error as it leaves its tf.data op "
    "(lines 'W... op_kernel.cc' and 'local_rendezvous.cc' before this one): "
    "TF_CPP_MIN_LOG_LEVEL=2, set before TensorFlow is imported, hides them; this is the "
    "error itself.")


def _runtime_logs_warnings():
    """Whether TensorFlow's C++ runtime prints its warnings (TF_CPP_MIN_LOG_LEVEL < 2)."""
    import os

    level = os.environ.get("TF_CPP_MIN_LOG_LEVEL", "0")
    return not (level.isdigit() and int(level) >= 2)


def to_tf_dataset(gen, epochs=None, num_parallel_calls=None, prefetch=None):
    """See `Generator.to_tf_dataset`."""
    tf = _import_tensorflow()
    autotune = tf.data.AUTOTUNE
    first = gen.epoch
    batches = _EpochBatches(tf, gen, num_parallel_calls or autotune)
    epoch_numbers = (tf.data.Dataset.range(first, first + epochs) if epochs is not None
                     else tf.data.Dataset.counter(first))
    dataset = epoch_numbers.flat_map(batches.dataset).prefetch(prefetch or autotune)
    return _dataset_class(tf)(dataset, batches.errors)


def pass_dataset(gen, unbatch=False):
    """A finite tf.data.Dataset of `gen`'s batches (its samples with `unbatch`): each pass
    (each iterator made of it) serves the epoch `gen.begin_pass()` gives."""
    tf = _import_tensorflow()
    batches = _EpochBatches(tf, gen, None, own=True)  # None: one batch asked at a time

    begin = batches.kept(lambda: np.int64(_begin_whole_epoch(gen)))

    def begin_pass(_):  # run by each iterator made of the dataset, once
        return tf.numpy_function(begin, [], tf.int64, stateful=True)

    epochs = tf.data.Dataset.from_tensors(np.int64(0)).map(begin_pass)
    dataset = epochs.flat_map(batches.dataset)
    if unbatch:
        dataset = dataset.unbatch()
    if gen.sampler is None:  # every epoch the same length: say so, as Keras's datasets do
        length = len(gen)
        if unbatch:
            length = min(len(gen.epoch_plan()), length * gen.batch_size)
        dataset = dataset.apply(tf.data.experimental.assert_cardinality(length))
    options = tf.data.Options()
    options.autotune.enabled = False
    dataset = dataset.prefetch(max(2, gen.prefetch)).with_options(options)
    return _dataset_class(tf)(dataset, batches.errors)


def _begin_whole_epoch(gen):
    """Begins a pass over `gen` (`gen.begin_pass()`) and returns the epoch it serves,
    which must be served whole: a pass that would begin mid-epoch (a generator restored
    from a state taken mid-epoch) is a ValueError, and leaves `gen` as it was."""
    before = gen.get_state()
    epoch = gen.begin_pass()
    batch = gen.get_state()["batch"]
    if batch:
        gen.set_state(before)  # the refused pass changes nothing: the next one is refused too
        raise ValueError(
            f"The generator behind this tf.data dataset was restored mid-epoch (at batch "
            f"{batch} of epoch {epoch}, {len(gen)} batches left in it), but a "
            "pass over the dataset must begin at an epoch's start. Finish the interrupted "
            "epoch with model.fit(ds.generator, epochs=1), then fit the dataset for the "
            "next epochs; or restore a state taken at an epoch's end (as "
            "kg.callbacks.GeneratorCheckpoint writes). Received: "
            f"ds.generator.get_state()['batch']={batch}.")
    return epoch


@functools.cache
def _dataset_class(tf):
    """The type of the datasets returned (made once TensorFlow is imported)."""
    from tensorflow.python.data.ops.iterator_ops import OwnedIterator

    class _Iterator(OwnedIterator):
        """tf.data's iterator, raising the exception an op of its dataset raised in place
        of TensorFlow's error that carries it."""

        def __init__(self, dataset, errors):
            super().__init__(dataset)
            self._kerasgen_errors = errors

        def _next_internal(self):
            try:
                return super()._next_internal()
            except tf.errors.OutOfRangeError:
                raise  # the end of the pass
            except tf.errors.OpError as error:
                original = self._kerasgen_errors.behind(error)
                if original is None:
                    raise
                _keras_compat.raise_in_place_of(error, original)

    # the base comes from the TensorFlow module passed in, which mypy cannot resolve
    class _Dataset(tf.data.Dataset):  # type: ignore[name-defined]
        """`dataset` itself, the same tf.data graph, whose iterators are `_Iterator`s."""

        def __init__(self, dataset, errors):
            self._input_dataset, self._kerasgen_errors = dataset, errors
            super().__init__(tf.data.experimental.to_variant(dataset))

        def _inputs(self):
            return [self._input_dataset]

        @property
        def element_spec(self):
            return self._input_dataset.element_spec

        def __iter__(self):
            if not tf.executing_eagerly():  # in a tf.function: errors reach its caller
                return super().__iter__()
            with tf.device(self._variant_tensor.device):  # as tf.data's, by the dataset
                return _Iterator(self, self._kerasgen_errors)

    return _Dataset


def stream_dataset(gen, num_parallel_calls=None, prefetch=None):
    """An endless tf.data.Dataset of a `StreamGenerator`'s batches, gen[0], gen[1], ...:
    made by the generator in order (`gen[i]`: its work-ahead and workers) when
    `num_parallel_calls` is None, else on tf.data's threads (`gen.make_batch(i)`,
    several at once, in order). See `StreamGenerator.to_tf_dataset`."""
    tf = _import_tensorflow()
    signature = tf.nest.map_structure(lambda v: _spec(tf, v), gen.make_batch(0))
    dtypes = [spec.dtype for spec in tf.nest.flatten(signature)]
    errors = _keras_compat.BatchErrors()
    make = gen.__getitem__ if num_parallel_calls is None else gen.make_batch

    def load(index):
        try:
            return [np.asarray(v) for v in tf.nest.flatten(make(int(index)))]
        except Exception as error:
            if _runtime_logs_warnings() and hasattr(error, "add_note"):
                error.add_note(RUNTIME_LOG_NOTE)
            errors.keep(error)
            raise

    def fetch(index):
        tensors = tf.numpy_function(load, [index], dtypes, stateful=False)
        for tensor, spec in zip(tensors, tf.nest.flatten(signature)):
            tensor.set_shape(spec.shape)
        return tf.nest.pack_sequence_as(signature, tensors)

    indices = tf.data.Dataset.counter()
    dataset = (indices.map(fetch) if num_parallel_calls is None else indices.map(
        fetch, num_parallel_calls=num_parallel_calls, deterministic=True))
    dataset = dataset.prefetch(prefetch or tf.data.AUTOTUNE)
    return _dataset_class(tf)(dataset, errors)
