"""tf.data interop (TensorFlow only): a generator's batches as a tf.data.Dataset."""

import threading

import numpy as np


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


def to_tf_dataset(gen, epochs=None, num_parallel_calls=None, prefetch=None):
    """See `Generator.to_tf_dataset`."""
    tf = _import_tensorflow()
    autotune = tf.data.AUTOTUNE
    first = gen.epoch
    structure = gen[0]  # one batch, for the complete output signature
    flat = tf.nest.flatten(structure)
    signature = tf.nest.map_structure(lambda v: _spec(tf, v), structure)
    dtypes = [tf.as_dtype(np.asarray(v).dtype) for v in flat]
    views, lock = {}, threading.Lock()

    def view_for(epoch):
        """The generator serving `epoch` (a few recent epochs are kept: tf.data threads
        may still be finishing the previous one)."""
        epoch = int(epoch)
        with lock:
            view = views.get(epoch)
            if view is None:
                view = views[epoch] = gen.at_epoch(epoch)
                for old in [e for e in views if e < epoch - 2]:
                    del views[old]
        return view

    def load(epoch, index):
        return [np.asarray(v) for v in tf.nest.flatten(view_for(epoch)[int(index)])]

    def one_epoch(epoch):
        count = tf.numpy_function(lambda e: np.int64(len(view_for(e))), [epoch], tf.int64)
        indices = tf.data.Dataset.range(count)

        def fetch(index):
            tensors = tf.numpy_function(load, [epoch, index], dtypes, stateful=False)
            for tensor, spec in zip(tensors, tf.nest.flatten(signature)):
                tensor.set_shape(spec.shape)
            return tf.nest.pack_sequence_as(signature, tensors)

        return indices.map(fetch, num_parallel_calls=num_parallel_calls or autotune,
                           deterministic=True)

    epoch_numbers = (tf.data.Dataset.range(first, first + epochs) if epochs is not None
                     else tf.data.Dataset.counter(first))
    dataset = epoch_numbers.flat_map(one_epoch)
    return dataset.prefetch(prefetch or autotune)

