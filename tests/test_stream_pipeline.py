"""kg.StreamGenerator on the shared pipeline (kerasgen/pipeline/stream_order.py's
StreamOrder, kerasgen/sources/_stream_records.py): batches made by the shared batch maker,
byte-identical with 1 worker, worker threads and kerasgen's own worker processes; exact
resume with processes; `fit` on kerasgen's pool; every image option (rescale, on_error,
cache, decoder, decode_threads, aspect ratio, batch_augment, prefetch, stats);
`to_tf_dataset`."""

import cv2
import keras
import numpy as np
import pytest
from webdataset import TarWriter

from kerasgen._redact import KerasgenWarning
from kerasgen.stream import StreamGenerator


def png(i, size=(6, 8)):
    """An image whose pixels hold the id i (red: i // 256, green: i % 256), the blue
    channel a gradient (so that resizing and cropping show)."""
    image = np.zeros(size + (3,), np.uint8)
    image[..., 2], image[..., 1] = i // 256, i % 256  # OpenCV writes BGR
    image[..., 0] = np.arange(size[1], dtype=np.uint8)[None, :] * 20
    return cv2.imencode(".png", image)[1].tobytes()


def write_tar(path, ids, bad=()):
    with TarWriter(str(path)) as writer:
        for i in ids:
            writer.write({"__key__": f"k{i:05d}", "png": b"not a png" if i in bad else png(i),
                          "cls": str(i % 3).encode()})
    return str(path)


@pytest.fixture
def tars(tmp_path):
    """5 WebDataset shards of 6 to 10 records, ids shard * 100 + k."""
    return [write_tar(tmp_path / f"s{s}.tar", range(s * 100, s * 100 + 6 + s))
            for s in range(5)]


def args(**kwargs):
    return {**dict(image_size=(4, 4), dtype="uint8", batch_size=4, seed=5, shuffle_buffer=5,
                   num_streams=3, prefetch=0), **kwargs}


def jitter(image, rng):
    return np.clip(image.astype(int) + rng.integers(-3, 4, image.shape), 0, 255).astype(
        np.uint8)


def same(a, b):
    a, b = (a if isinstance(a, tuple) else (a,)), (b if isinstance(b, tuple) else (b,))
    return len(a) == len(b) and all(u.dtype == v.dtype and np.array_equal(u, v)
                                    for u, v in zip(a, b))


def test_the_shared_maker_makes_the_batches_and_threads_and_prefetch_change_nothing(tars):
    reference = StreamGenerator(tars, augment=jitter, **args())
    expected = [reference[b] for b in range(12)]
    assert reference._maker.source is reference.source  # one maker, one source
    for options in ({"workers": 3}, {"prefetch": 4}, {"decode_threads": 3},
                    {"workers": 0}):
        gen = StreamGenerator(tars, augment=jitter, **args(**options))
        assert all(same(gen[b], e) for b, e in enumerate(expected)), options
        assert same(gen.make_batch(5), expected[5])


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_worker_processes_are_kerasgens_own_identical_and_resume_exactly(tars):
    reference = StreamGenerator(tars, augment=jitter, **args())
    expected = [reference[b] for b in range(16)]
    gen = StreamGenerator(tars, augment=jitter, **args(workers=2, use_multiprocessing=True))
    assert gen.workers == 2 and gen.use_multiprocessing  # Keras's adapter is told; its
    served = [gen[b] for b in range(9)]  # enqueuer dropped (see test_fit_...)
    assert all(same(s, e) for s, e in zip(served, expected))
    pool = gen._feeding.pool
    assert pool is not None and pool.crew is not None
    assert len(pool.crew.processes) == 2 and all(
        p.name.startswith("kerasgen-worker-") for p in pool.crew.processes)
    state = gen.get_state(batches_done=6)
    resumed = StreamGenerator(tars, augment=jitter, **args(workers=2,
                                                           use_multiprocessing=True))
    resumed[0]  # its workers started before the state arrives: they start anew
    resumed.set_state(state)
    assert all(same(resumed[i], expected[6 + i]) for i in range(10))
    gen.set_state(state)  # processes that already read ahead, moved back
    assert same(gen[0], expected[6]) and same(gen[3], expected[9])


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_fit_trains_on_kerasgens_worker_processes(tars):
    gen = StreamGenerator(tars, label_mode="categorical", num_classes=3, rescale=1 / 255,
                          **args(dtype="float32", workers=2, use_multiprocessing=True))
    model = keras.Sequential([keras.Input((4, 4, 3)), keras.layers.Flatten(),
                              keras.layers.Dense(3, activation="softmax")])
    model.compile("adam", "categorical_crossentropy")
    history = model.fit(gen, steps_per_epoch=3, epochs=2, verbose=0, shuffle=False)
    assert np.isfinite(history.history["loss"]).all()
    assert gen._feeding.pool is not None  # kerasgen's pool made the batches, not Keras's


def test_rescale_aspect_ratio_decoder_and_batch_augment(tars):
    plain = StreamGenerator(tars, **args())
    scaled = StreamGenerator(tars, rescale=1 / 255, **args(dtype="float32"))
    np.testing.assert_array_equal(scaled[2][0],
                                  plain[2][0].astype(np.float32) * np.float32(1 / 255))
    assert scaled.rescale == pytest.approx(1 / 255)
    cropped = StreamGenerator(tars, crop_to_aspect_ratio=True, decoder="opencv", **args())
    padded = StreamGenerator(tars, pad_to_aspect_ratio=True, **args())
    assert not same(cropped[0], plain[0]) and not same(padded[0], plain[0])
    assert same(cropped[0][1], plain[0][1])  # the same records, labels
    rows = padded[0][0].reshape(4, 4, -1).max(axis=2)  # 6x8 padded to 4x4: black rows
    assert (rows[:, 0] == 0).all() or (rows[:, -1] == 0).all()

    def flip(x, y, rng):
        return x[:, :, ::-1], y

    flipped = StreamGenerator(tars, batch_augment=flip, **args())
    np.testing.assert_array_equal(flipped[1][0], plain[1][0][:, :, ::-1])
    with pytest.raises(ValueError, match="`rescale` applies to float batches only"):
        StreamGenerator(tars, rescale=1 / 255, **args())
    with pytest.raises(ValueError, match="`crop_to_aspect_ratio` and `pad_to_aspect_ratio`"
                                         "|one of"):
        StreamGenerator(tars, crop_to_aspect_ratio=True, pad_to_aspect_ratio=True)
    with pytest.raises(ValueError, match="`decoder` must be one of"):
        StreamGenerator(tars, decoder="pillow")


def test_on_error_skip_replaces_a_bad_record_by_one_of_its_class_and_reports_it(tmp_path):
    shard = write_tar(tmp_path / "bad.tar", range(12), bad={4})  # 4 % 3 == 1
    with pytest.raises(ValueError, match=r"Cannot decode sample 'k00004' \(record 4 of "
                                         r"shard .*bad.tar\)"):
        StreamGenerator([shard], shuffle=False, **args(batch_size=6))[0]
    for size in ((4, 4), None):  # the image loader, and one record at a time
        gen = StreamGenerator([shard], shuffle=False, on_error="skip",
                              **args(batch_size=6, image_size=size))
        with pytest.warns(KerasgenWarning, match="Skipping an undecodable image"):
            x, y = gen[0]
        assert gen.skipped == [f"{shard}#k00004"]  # as WebDatasetGenerator names it
        assert y.tolist() == [0, 1, 2, 0, 1, 2]
        assert x[4, 0, 0, 1] == 1  # record 1 (class 1) stands in for record 4
        assert same(gen[1], StreamGenerator([shard], shuffle=False,
                                            **args(batch_size=6, image_size=size))[1])


def test_a_bad_tfrecord_image_skipped_is_named_by_its_record(tmp_path):
    import tensorflow as tf

    path = str(tmp_path / "r.tfrecord")
    with tf.io.TFRecordWriter(path) as writer:
        for i in range(6):
            feature = {"image": tf.train.Feature(bytes_list=tf.train.BytesList(
                value=[b"garbage" if i == 2 else png(i)])),
                "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[i % 2]))}
            writer.write(tf.train.Example(features=tf.train.Features(
                feature=feature)).SerializeToString())
    gen = StreamGenerator([path], "tfrecord", on_error="skip", shuffle=False,
                          **args(batch_size=6))
    with pytest.warns(KerasgenWarning, match="Skipping an undecodable image"):
        x, y = gen[0]
    assert gen.skipped == [f"record 2 of {path}"] and y.tolist() == [0, 1, 0, 1, 0, 1]
    assert x[2, 0, 0, 1] in (0, 4)  # another record of class 0 stands in


def test_cache_keeps_decoded_images_by_shard_and_record(tars, tmp_path):
    reference = StreamGenerator(tars, augment=jitter, **args())
    expected = [reference[b] for b in range(24)]  # past the first pass
    for cache in ("memory", "auto"):
        gen = StreamGenerator(tars, cache=cache, augment=jitter, **args())
        assert all(same(gen[b], e) for b, e in enumerate(expected)), cache
        assert len(gen.source.cache.found) == sum(6 + s for s in range(5))
    with pytest.raises(ValueError, match="`cache` must be None, 'auto' or 'memory' for a "
                                         "stream"):
        StreamGenerator(tars, cache=str(tmp_path / "cache.bin"))
    with pytest.raises(ValueError, match="`cache` must be left out with image_size=None"):
        StreamGenerator(tars, cache="memory", image_size=None)
    with pytest.raises(ValueError, match="`crop_to_aspect_ratio` must be left out with "
                                         "image_size=None"):
        StreamGenerator(tars, crop_to_aspect_ratio=True, image_size=None)


def test_stats_and_an_unknown_keyword(tars):
    gen = StreamGenerator(tars, stats=True, **args())
    for b in range(3):
        gen[b]
    report = gen.stats()
    assert report["batches"] == 3 and report["samples"] == 12 and report["made"] == 3
    with pytest.raises(TypeError, match="image_sise"):
        StreamGenerator(tars, image_sise=(4, 4))


def test_to_tf_dataset_gives_the_generators_batches(tars):
    gen = StreamGenerator(tars, **args())
    expected = [gen.make_batch(b) for b in range(5)]
    for calls in (None, 2):
        dataset = StreamGenerator(tars, **args()).to_tf_dataset(num_parallel_calls=calls)
        got = [tuple(np.asarray(t) for t in batch) for batch in dataset.take(5)]
        assert all(same(g, e) for g, e in zip(got, expected)), calls
