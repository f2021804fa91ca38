"""Peer feeds of benchmarks/remote.py that issue 50 added: Keras's own loader on the local
photo folder, and grain over ArrayRecord shards (local, or s3fs copies of the s3://
ones). Each returns what `model.fit` gets, fit's keyword arguments and a function that
does one bare pass, as remote.py's `make_feed` does.
"""

import math


def drain(batches):
    """Takes every batch of `batches`, keeping none."""
    for _ in batches:
        pass


def keras_idd(folder, size, batch_size):
    """`keras.utils.image_dataset_from_directory` on `folder` as its documentation shows it
    (labels inferred as int, shuffle with a seed; it decodes and resizes in a tf.data map
    with AUTOTUNE and prefetches): Keras's own loader, the one kerasgen replaces."""
    import keras

    ds = keras.utils.image_dataset_from_directory(folder, image_size=tuple(size),
                                                  batch_size=batch_size, shuffle=True,
                                                  seed=0, verbose=False)
    return ds, {}, lambda: drain(ds)


# grain's read threads: its ReadOptions default (16 threads, 500 elements ahead)
GRAIN_THREADS, GRAIN_PREFETCH = 16, 500


def grain_ar(files, size, batch_size, num_files):
    """grain over ArrayRecord `files` (records: serialized tf.train.Example, "image" bytes
    and "label" int64): `grain.python.ArrayRecordDataSource`, grain's dataset API
    `MapDataset.source(...).shuffle(seed=0).map(parse and decode)`, then
    `.to_iter_dataset(ReadOptions(num_threads=16, prefetch_buffer_size=500))` and
    `.batch(batch_size)`; the map parses the Example (`tf.train.Example.FromString`),
    decodes with cv2 (BGR to RGB) and resizes to `size` (bilinear). It goes to fit as a
    Python generator with `steps_per_epoch`, as the webdataset feed does.

    Why threads, in this process: the read threads of `to_iter_dataset` (ReadOptions:
    "threads reading from the DataSource in parallel"; 16 and 500 are grain's defaults)
    each produce a whole MapDataset element, the record's read and the map, and cv2
    releases the GIL while it decodes and resizes, so decoding uses every core with no
    worker process. grain's `DataLoader(worker_count=0)` reads records on those threads
    but applies its operations on the consuming thread, one image at a time; with
    `worker_count > 0` worker processes compete with the training step for the same 2
    cores and copy every batch through shared memory.
    """
    import cv2
    import grain.python as grain
    import numpy as np
    import tensorflow as tf

    size = tuple(size)

    def decode(record):
        feature = tf.train.Example.FromString(record).features.feature
        image = cv2.imdecode(np.frombuffer(feature["image"].bytes_list.value[0], np.uint8),
                             cv2.IMREAD_COLOR)
        image = cv2.resize(image, size[::-1], interpolation=cv2.INTER_LINEAR)
        return (cv2.cvtColor(image, cv2.COLOR_BGR2RGB),
                np.int32(feature["label"].int64_list.value[0]))

    def stack(samples):
        xs, ys = zip(*samples)
        return np.stack(xs), np.asarray(ys, "int32")

    source = grain.ArrayRecordDataSource(list(files))
    dataset = (grain.MapDataset.source(source).shuffle(seed=0).map(decode)
               .to_iter_dataset(grain.ReadOptions(num_threads=GRAIN_THREADS,
                                                  prefetch_buffer_size=GRAIN_PREFETCH))
               .batch(batch_size, batch_fn=stack))

    def forever():
        while True:
            yield from dataset

    steps = math.ceil(num_files / batch_size)
    return forever(), {"steps_per_epoch": steps}, lambda: drain(dataset)
