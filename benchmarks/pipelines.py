"""The image pipelines benchmarks/images.py times, each as a user would write it.

- kerasgen: `kg.ImageFolderGenerator(..., shuffle=False, label_mode="int")`, float32
  (`rescale=1/255`) or uint8, with any other keyword (`cache=`, `interpolation=`);
- a plain Sequence: a `keras.utils.PyDataset` as tutorials write it (cv2 per file);
- tf.data by hand: from_tensor_slices -> map(read, decode, resize, /255, AUTOTUNE) ->
  batch -> prefetch;
- Keras's own `image_dataset_from_directory`;
- the practical limit: a bare cv2.imread + cv2.resize loop on one core;
- the tiny model every pipeline feeds in `model.fit`.

All at IMAGE_SIZE, batch BATCH_SIZE. Keras, TensorFlow and kerasgen are imported inside
the functions, so importing this module is cheap and sets up no backend.
"""

import math
import os
import time

import cv2
import numpy as np

from benchmarks.data import NUM_CLASSES, list_files

IMAGE_SIZE = (224, 224)  # (height, width)
BATCH_SIZE = 32


class Unavailable(Exception):
    """The pipeline needs a keyword argument this kerasgen does not take yet."""


def _is_unknown_keyword(error):
    text = str(error)
    return "unexpected keyword argument" in text or "got an unexpected keyword" in text


def kerasgen_generator(folder, dtype, **extra):
    import kerasgen as kg

    kwargs = dict(image_size=IMAGE_SIZE, batch_size=BATCH_SIZE, shuffle=False,
                  label_mode="int", dtype=dtype)
    if dtype == "float32":
        kwargs["rescale"] = 1 / 255
    kwargs.update(extra)
    try:
        return kg.ImageFolderGenerator(folder, **kwargs)
    except TypeError as error:
        if _is_unknown_keyword(error):
            raise Unavailable(str(error)) from error
        raise


def make_plain_sequence_class():
    import keras

    class PlainSequence(keras.utils.PyDataset):
        """A Sequence as tutorials write it: cv2 per file inside __getitem__."""

        def __init__(self, paths, labels, batch_size=32, image_size=(224, 224), **kwargs):
            super().__init__(**kwargs)
            self.paths, self.labels = paths, labels
            self.batch_size, self.image_size = batch_size, image_size

        def __len__(self):
            return math.ceil(len(self.paths) / self.batch_size)

        def __getitem__(self, idx):
            lo, hi = idx * self.batch_size, (idx + 1) * self.batch_size
            images = []
            for path in self.paths[lo:hi]:
                image = cv2.imread(path)
                image = cv2.cvtColor(image, cv2.COLOR_BGR2RGB)
                image = cv2.resize(image, (self.image_size[1], self.image_size[0]))
                images.append(image)
            x = np.array(images, dtype=np.float32) / 255.0
            return x, np.asarray(self.labels[lo:hi])

    return PlainSequence


def make_tf_dataset(paths, labels):
    import tensorflow as tf

    def load(path, label):
        image = tf.io.decode_jpeg(tf.io.read_file(path), channels=3)
        image = tf.image.resize(image, IMAGE_SIZE) / 255.0
        return image, label

    return (tf.data.Dataset.from_tensor_slices((paths, labels))
            .map(load, num_parallel_calls=tf.data.AUTOTUNE)
            .batch(BATCH_SIZE)
            .prefetch(tf.data.AUTOTUNE))


def make_keras_dataset(folder):
    import keras

    return keras.utils.image_dataset_from_directory(
        folder, image_size=IMAGE_SIZE, batch_size=BATCH_SIZE, shuffle=False, verbose=False)


def iterate_sequence(seq, shapes=None):
    """One pass of seq[i] over all i; returns the number of images seen."""
    seen = 0
    for i in range(len(seq)):
        batch = seq[i]
        x = batch[0]
        seen += len(x)
        if shapes is not None and i == 0:
            shapes["x"] = [list(x.shape), str(x.dtype)]
    return seen


def iterate_tf(ds, shapes=None):
    seen = 0
    for i, (x, _) in enumerate(ds):
        x = x.numpy()
        seen += len(x)
        if shapes is not None and i == 0:
            shapes["x"] = [list(x.shape), str(x.dtype)]
    return seen


def practical_limit(paths, cores):
    """cv2.imread + cv2.resize (default: bilinear) in a bare loop pinned to one core, times
    `cores`: an equivalent time for `cores` cores doing nothing else."""
    saved_threads = cv2.getNumThreads()
    saved_affinity = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    cv2.setNumThreads(1)
    if saved_affinity:
        os.sched_setaffinity(0, {min(saved_affinity)})  # this thread only
    try:
        start = time.perf_counter()
        for path in paths:
            image = cv2.imread(path)
            cv2.resize(image, (IMAGE_SIZE[1], IMAGE_SIZE[0]))
        elapsed = time.perf_counter() - start
    finally:
        cv2.setNumThreads(saved_threads)
        if saved_affinity:
            os.sched_setaffinity(0, saved_affinity)
    return elapsed / cores, len(paths)


def timed(fn):
    """Runs fn() (-> images seen); returns (seconds, images seen)."""
    start = time.perf_counter()
    seen = fn()
    return time.perf_counter() - start, seen


def tiny_model(rescale, image_size=IMAGE_SIZE):
    """Rescaling (when `rescale`), global average pooling and Dense: a model that costs
    almost nothing, so fit's rate is the feed's (images.py, remote.py --model tiny)."""
    import keras
    from keras import layers

    inputs = keras.Input(shape=tuple(image_size) + (3,))
    x = layers.Rescaling(1 / 255)(inputs) if rescale else inputs
    x = layers.GlobalAveragePooling2D()(x)
    outputs = layers.Dense(NUM_CLASSES)(x)
    model = keras.Model(inputs, outputs)
    model.compile(optimizer="adam",
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def fit_pipeline(folder, pipeline):
    """A fresh input pipeline for one model.fit epoch: `pipeline` is "kerasgen float32",
    "kerasgen float32 cache=None", "kerasgen uint8", "plain", "tf.data" or "idfd"."""
    if pipeline == "kerasgen float32":
        return kerasgen_generator(folder, "float32")
    if pipeline == "kerasgen float32 cache=None":
        return kerasgen_generator(folder, "float32", cache=None)
    if pipeline == "kerasgen uint8":
        return kerasgen_generator(folder, "uint8")
    p, y = list_files(folder)
    if pipeline == "plain":
        return make_plain_sequence_class()(p, y, batch_size=BATCH_SIZE,
                                           image_size=IMAGE_SIZE)
    if pipeline == "tf.data":
        return make_tf_dataset(p, y)
    return make_keras_dataset(folder)
