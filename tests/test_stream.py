"""kg.StreamGenerator (kerasgen/stream.py): shards of unknown length streamed as an
infinite PyDataset. Order (passes, hosts, virtual streams, shuffle buffer), batches equal
with any workers, exact resume, the built-in readers and their errors."""

import gzip
import json
import os
import pickle
import re
import struct
import tarfile

import cv2
import fsspec
import keras
import numpy as np
import pytest
import tensorflow as tf
from keras.src.trainers.data_adapters import get_data_adapter
from webdataset import TarWriter

from kerasgen import _budget
from kerasgen.stream import StreamGenerator

CLASSES = ["cat", "dog", "fox"]
SIZES = [5, 0, 7, 3, 6, 4, 8]  # records of each shard of the callable reader ("s0"...)


# ------------------------------------------------------------------ data
def numbered(shard):
    """The records of shard "sN": x = [id], label = id % 3, ids N*100 + k."""
    n = int(shard[1:])
    return [(np.array([n * 100 + k]), (n * 100 + k) % 3) for k in range(SIZES[n])]


def stream_of(**kwargs):
    args = dict(records=numbered, batch_size=3, seed=7, shuffle_buffer=4, num_streams=3,
                dtype=None)
    args.update(kwargs)
    return StreamGenerator(args.pop("shards", [f"s{n}" for n in range(len(SIZES))]), **args)


def png(i):
    """A 4x4 PNG whose pixels hold the id i (red: i // 256, green: i % 256)."""
    image = np.zeros((4, 4, 3), np.uint8)
    image[..., 2], image[..., 1] = i // 256, i % 256  # OpenCV writes BGR
    return cv2.imencode(".png", image)[1].tobytes()


def ids_of(x):
    return (x[:, 0, 0, 0].astype(int) * 256 + x[:, 0, 0, 1].astype(int)).tolist()


def write_tar(path, ids, label=lambda i: str(i % 3).encode()):
    with TarWriter(str(path)) as writer:
        for i in ids:
            writer.write({"__key__": f"k{i:05d}", "png": png(i), "cls": label(i)})
    return str(path)


@pytest.fixture
def tars(tmp_path):
    """6 WebDataset shards of 5 to 10 records, ids shard * 100 + k."""
    return [write_tar(tmp_path / f"train-{s:02d}.tar", range(s * 100, s * 100 + 5 + s))
            for s in range(6)]


def write_tfrecord(path, ids, compression=None, label=lambda i: i % 3):
    options = tf.io.TFRecordOptions(compression_type=compression) if compression else None
    with tf.io.TFRecordWriter(str(path), options) as writer:
        for i in ids:
            value = label(i)
            feature = tf.train.Feature(bytes_list=tf.train.BytesList(value=[value])) if (
                isinstance(value, bytes)) else tf.train.Feature(
                    int64_list=tf.train.Int64List(value=[value]))
            writer.write(tf.train.Example(features=tf.train.Features(feature={
                "image": tf.train.Feature(bytes_list=tf.train.BytesList(value=[png(i)])),
                "label": feature})).SerializeToString())
    return str(path)


def images(**kwargs):
    return {**dict(image_size=(4, 4), dtype="uint8", batch_size=4, seed=3, shuffle_buffer=6,
                   num_streams=2), **kwargs}


def same(a, b):
    return all(np.array_equal(u, v) for u, v in zip(a, b))


def drive(gen, n):
    """n batches as Keras's adapter serves them (its worker threads or processes)."""
    adapter = get_data_adapter(gen, shuffle=False)
    adapter.on_epoch_begin()
    try:
        iterator = iter(adapter.get_numpy_iterator())
        return [next(iterator) for _ in range(n)]
    finally:
        adapter.on_epoch_end()


# ------------------------------------------------------------------ order
def _stream_sequence(gen, stream, batches):
    return [int(v) for b in range(stream, batches, gen.num_streams)
            for v in gen[b][0][:, 0]]


def test_every_record_comes_once_per_pass_and_stream_and_the_hosts_partition_the_shards():
    records = {f"s{n}": {n * 100 + k for k in range(size)} for n, size in enumerate(SIZES)}
    gens = [stream_of()] + [stream_of().shard(2, h) for h in range(2)]
    for gen in gens:
        order = gen._order.shard_order
        for j in range(gen.num_streams):
            sequence = _stream_sequence(gen, j, 60 * gen.num_streams)
            start, shuffled = 0, False
            for p in range(4):  # the stream's pass p: its shards' records, each once
                ids = [i for s in order.stream_shards(j, p) for i in records[f"s{s}"]]
                chunk = sequence[start:start + len(ids)]
                assert sorted(chunk) == sorted(ids), (gen, j, p)
                shuffled |= chunk != ids
                start += len(ids)
            assert shuffled
        for p in range(4):  # the streams split the host's shards of the pass
            dealt = [s for j in range(gen.num_streams) for s in order.stream_shards(j, p)]
            assert sorted(dealt) == sorted(order.host_shards(p).tolist())
    for p in range(4):  # the hosts' shares partition the shards, anew each pass
        shares = [set(g._order.shard_order.host_shards(p).tolist()) for g in gens[1:]]
        assert not shares[0] & shares[1] and shares[0] | shares[1] == set(range(len(SIZES)))
    assert [gens[1]._order.shard_order.host_shards(p).tolist() for p in range(3)] != [
        gens[1]._order.shard_order.host_shards(0).tolist()] * 3


def test_shuffle_false_reads_the_shards_in_order_without_a_buffer():
    gen = stream_of(shuffle=False, num_streams=1, batch_size=4)
    ids = [int(v) for b in range(8) for v in gen[b][0][:, 0]]
    expected = [n * 100 + k for n, size in enumerate(SIZES) for k in range(size)]
    assert ids == (expected * 2)[:32]


def test_golden_first_batches_for_a_fixed_seed():
    gen = stream_of()
    assert [gen[b][0][:, 0].tolist() for b in range(4)] == GOLDEN


GOLDEN = [[601, 604, 602], [300, 200, 302], [2, 0, 1], [603, 607, 600]]


def test_batch_b_depends_on_b_alone_in_any_order_and_after_pickling():
    gen = stream_of()
    reference = [gen[b] for b in range(30)]
    other = stream_of()
    for b in [29, 3, 17, 0, 28, 3, 12, 1]:  # backwards, repeated: restarts and keeps
        assert same(other[b], reference[b])
    copy = pickle.loads(pickle.dumps(gen))
    assert all(same(copy[b], reference[b]) for b in (5, 0, 29))


def test_an_unseeded_stream_draws_one_seed_and_shows_it():
    gen = stream_of(seed=None)
    assert f"seed={gen.seed}" in repr(gen)
    assert same(gen[4], stream_of(seed=gen.seed)[4])


def jitter(image, rng):
    return np.clip(image.astype(int) + rng.integers(-3, 4, image.shape), 0, 255).astype(
        np.uint8)


@pytest.mark.timeout(240)
def test_batches_are_identical_with_worker_threads_and_processes(tars):
    gen = StreamGenerator(tars, augment=jitter, **images())
    reference = [gen[b] for b in range(14)]
    assert not same(reference[0], gen[1])
    for workers in ({"workers": 3}, {"workers": 2, "use_multiprocessing": True}):
        served = drive(StreamGenerator(tars, augment=jitter, **images(**workers)), 14)
        assert all(same(s, r) for s, r in zip(served, reference)), workers


# ------------------------------------------------------------------ state
@pytest.mark.parametrize("position", [0, 1, 4, 9, 16, 23, 40])
def test_set_state_resumes_with_the_batches_that_follow(position):
    reference = stream_of()
    expected = [reference[b] for b in range(position, position + 12)]
    gen = stream_of()
    for b in range(position):
        gen[b]
    state = json.loads(json.dumps(gen.get_state()))
    assert state["batch"] == position
    resumed = stream_of(seed=99)  # the state's seed is taken
    resumed.set_state(state)
    assert all(same(resumed[i], e) for i, e in enumerate(expected))
    # a state naming a pass past the first (a pass boundary crossed)
    if position >= 16:
        assert any(p > 0 for p, _ in state["streams"])


def test_state_with_batches_done_of_a_generator_that_read_ahead():
    reference = stream_of()
    gen = stream_of()
    for b in range(25):
        gen[b]
    state = gen.get_state(batches_done=11)
    resumed = stream_of()
    resumed.set_state(state)
    assert all(same(resumed[i], reference[11 + i]) for i in range(10))
    resumed_again = stream_of()
    resumed_again.set_state(resumed.get_state(batches_done=4))
    assert same(resumed_again[0], reference[15])


@pytest.mark.timeout(240)
def test_a_state_resumes_with_other_workers(tars):
    reference = StreamGenerator(tars, **images())
    expected = [reference[b] for b in range(13, 21)]
    gen = StreamGenerator(tars, **images())
    for b in range(13):
        gen[b]
    state = gen.get_state()
    for workers in ({"workers": 3}, {"workers": 2, "use_multiprocessing": True}):
        resumed = StreamGenerator(tars, **images(**workers))
        resumed.set_state(state)
        assert all(same(s, e) for s, e in zip(drive(resumed, 8), expected)), workers


def test_a_state_of_another_stream_is_refused_naming_what_changed():
    state = stream_of().get_state()
    with pytest.raises(ValueError, match="num_streams=3 .this generator: 2"):
        stream_of(num_streams=2).set_state(state)
    with pytest.raises(ValueError, match="shards='7:"):
        stream_of(shards=[f"s{n}" for n in range(6)]).set_state(state)
    with pytest.raises(ValueError, match="num_hosts=1 .this generator: 2"):
        stream_of().shard(2, 0).set_state(state)
    with pytest.raises(ValueError, match="batch_size=3"):
        stream_of(batch_size=4).set_state(state)
    with pytest.raises(ValueError, match="lacks 'streams'"):
        stream_of().set_state({k: v for k, v in state.items() if k != "streams"})
    with pytest.raises(ValueError, match=r"state\['streams'\] must hold"):
        stream_of().set_state({**state, "streams": [[0, 0]]})
    with pytest.raises(ValueError, match=r"state\['streams'\]\[1\] starts its pass at "
                                         "record 9, after"):
        stream_of().set_state({**state, "streams": [[0, 0], [1, 9], [0, 0]]})
    with pytest.raises(TypeError, match="`state` must be a dict"):
        stream_of().set_state([1, 2])


# ------------------------------------------------------------------ Keras
def test_fit_trains_with_steps_per_epoch_and_len_is_a_type_error(tars):
    gen = StreamGenerator(tars, class_names=CLASSES, label_mode="categorical",
                          **{**images(), "dtype": "float32"})
    with pytest.raises(TypeError, match="no length.*steps_per_epoch"):
        len(gen)
    assert gen.num_batches is None
    model = keras.Sequential([keras.Input((4, 4, 3)), keras.layers.Rescaling(1 / 255),
                              keras.layers.Flatten(), keras.layers.Dense(3, "softmax")])
    model.compile("adam", "categorical_crossentropy")
    history = model.fit(gen, steps_per_epoch=3, epochs=2, verbose=0, shuffle=False)
    assert len(history.history["loss"]) == 2
    assert np.isfinite(history.history["loss"]).all()


# ------------------------------------------------------------------ readers
def test_webdataset_shards_give_their_images_and_labels(tars):
    gen = StreamGenerator(tars, shuffle=False, label_mode="int", **images(num_streams=1))
    x, y = gen[0]
    assert ids_of(x) == [0, 1, 2, 3] and y.tolist() == [0, 1, 2, 0]
    assert x.shape == (4, 4, 4, 3) and x.dtype == np.uint8
    x, y = StreamGenerator(tars, label_mode="categorical", num_classes=3,
                           **images(batch_size=2))[0]
    assert y.shape == (2, 3) and y.sum() == 2 and y.dtype == np.float32


def test_webdataset_class_names_and_a_gzip_tar_and_a_memory_url(tmp_path):
    names = lambda i: CLASSES[i % 3].encode()  # noqa: E731
    plain = tmp_path / "named.tar"
    with TarWriter(str(plain)) as writer:
        for i in range(6):
            writer.write({"__key__": f"k{i}", "jpg": png(i), "txt": names(i)})
    packed = tmp_path / "named.tar.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    with fsspec.open("memory://bucket/named.tar", "wb") as f:
        f.write(plain.read_bytes())
    for shard in (plain, packed, "memory://bucket/named.tar"):
        gen = StreamGenerator([str(shard)], label_key="txt", class_names=CLASSES,
                              shuffle=False, **{**images(), "batch_size": 6})
        x, y = gen[0]
        assert ids_of(x) == list(range(6)) and y.tolist() == [0, 1, 2, 0, 1, 2], shard


@pytest.mark.parametrize("compression", [None, "GZIP", "ZLIB"])
def test_tfrecord_shards_plain_and_compressed(tmp_path, compression):
    files = [write_tfrecord(tmp_path / f"r{s}.tfrecord", range(s * 10, s * 10 + 4),
                            compression) for s in range(3)]
    gen = StreamGenerator(files, "tfrecord", compression_type=compression, shuffle=False,
                          **images(num_streams=1))
    x, y = gen[1]
    assert ids_of(x) == [10, 11, 12, 13] and y.tolist() == [1, 2, 0, 1]
    shuffled = StreamGenerator(files, "tfrecord", compression_type=compression, **images())
    ids = [i for b in range(6) for i in ids_of(shuffled[b][0])]
    assert sorted(ids[:12]) == sorted(i for s in range(3) for i in range(s * 10, s * 10 + 4))


def test_tfrecord_class_name_labels(tmp_path):
    path = write_tfrecord(tmp_path / "named.tfrecord", range(5),
                          label=lambda i: CLASSES[i % 3].encode())
    gen = StreamGenerator([path], "tfrecord", class_names=CLASSES, shuffle=False,
                          **images(batch_size=5))
    assert gen[0][1].tolist() == [0, 1, 2, 0, 1]


def test_label_mode_none_gives_x_alone_and_brace_patterns_expand(tars):
    pattern = tars[0].replace("train-00", "train-{00..05}")
    gen = StreamGenerator(pattern, label_mode=None, **images())
    assert gen.shards == tars
    assert isinstance(gen[0], np.ndarray) and gen[0].shape == (4, 4, 4, 3)


# ------------------------------------------------------------------ errors
def _cut(path, size):
    data = open(path, "rb").read()
    open(path, "wb").write(data[:size])


def _read_all(gen, batches=20):
    for b in range(batches):
        gen[b]


def test_arguments_are_checked_up_front(tars, tmp_path):
    with pytest.raises(ValueError, match="`shards` must be"):
        StreamGenerator([])
    with pytest.raises(FileNotFoundError, match="Shard not found: .*missing.tar"):
        StreamGenerator([str(tmp_path / "missing.tar")])
    with pytest.raises(FileNotFoundError, match="Shard not found: memory://nowhere/x.tar"):
        StreamGenerator(["memory://nowhere/x.tar"])
    with pytest.raises(ValueError, match="`num_hosts` must be at most the number of "
                                         r"shards \(6\).*num_hosts=7"):
        StreamGenerator(tars, num_hosts=7, seed=1)
    with pytest.raises(ValueError, match="`host_index` must be less than num_hosts=2"):
        StreamGenerator(tars, num_hosts=2, host_index=2, seed=1)
    with pytest.raises(ValueError, match="`seed` must be an integer with num_hosts > 1"):
        StreamGenerator(tars, num_hosts=2)
    with pytest.raises(ValueError, match="`records` must be 'webdataset', 'tfrecord'"):
        StreamGenerator(tars, records="feather")
    with pytest.raises(ValueError, match="categorical' needs `num_classes` or "
                                         "`class_names`"):
        StreamGenerator(tars, label_mode="categorical")
    with pytest.raises(ValueError, match="`num_classes` must be len.class_names. = 3"):
        StreamGenerator(tars, class_names=CLASSES, num_classes=4)
    with pytest.raises(ValueError, match="`batch_size` must be a positive integer"):
        StreamGenerator(tars, batch_size=0)
    with pytest.raises(TypeError, match="unexpected keyword argument 'class_mode'"):
        StreamGenerator(tars, class_mode="sparse")
    with pytest.raises(ValueError, match="already host 0 of 2"):
        StreamGenerator(tars, num_hosts=2, seed=1).shard(2, 1)
    with pytest.raises(IndexError, match="non-negative"):
        StreamGenerator(tars)[-1]


def test_a_truncated_or_corrupt_tar_names_the_shard_and_the_record(tars):
    with tarfile.open(tars[2]) as tar:
        members = tar.getmembers()
        end = tar.offset  # the end-of-archive marker
    for cut, message in [  # inside a member's data, at a header, before the end marker
            (members[3].offset_data + 10, r"record 1 of shard .*train-02.tar: it is "
                                          "truncated: it ends inside a member's data"),
            (members[4].offset, "record 1 of shard .*train-02.tar: it is truncated: it "
                                f"ends at byte {members[4].offset}"),
            (end, f"record 6 of shard .*train-02.tar: it is truncated: it ends at byte {end}")]:
        write_tar(tars[2], range(200, 207))
        _cut(tars[2], cut)
        with pytest.raises(ValueError, match=message):
            _read_all(StreamGenerator(tars, **images()))
    write_tar(tars[2], range(200, 207))
    data = bytearray(open(tars[2], "rb").read())
    header = data.index(b"k00203.cls") - 0  # a member's header: its name, then its fields
    data[header + 148] ^= 0x11  # its checksum
    open(tars[2], "wb").write(bytes(data))
    with pytest.raises(ValueError, match=r"record [23] of shard .*train-02.tar: it is "
                                         "(not a tar archive, or it is )?corrupt"):
        _read_all(StreamGenerator(tars, **images()))


def test_a_gzip_tar_cut_short_is_truncated(tmp_path):
    plain = write_tar(tmp_path / "a.tar", range(8))
    packed = tmp_path / "a.tar.gz"
    data = gzip.compress(open(plain, "rb").read())
    packed.write_bytes(data[:len(data) - 30])
    with pytest.raises(ValueError, match=r"a.tar.gz: it is truncated: its GZIP stream ends"):
        _read_all(StreamGenerator([str(packed)], **images()))


def test_truncated_and_corrupt_tfrecords_name_the_shard_and_the_record(tmp_path):
    path = write_tfrecord(tmp_path / "r.tfrecord.gz", range(6), "GZIP")
    _cut(path, len(open(path, "rb").read()) - 40)
    with pytest.raises(ValueError, match=r"Cannot read record \d of shard .*r.tfrecord.gz: "
                                         "it is truncated"):
        _read_all(StreamGenerator([path], "tfrecord", compression_type="GZIP", **images()))
    path = write_tfrecord(tmp_path / "c.tfrecord", range(6))
    data = bytearray(open(path, "rb").read())
    data[200] ^= 0xFF
    open(path, "wb").write(bytes(data))
    with pytest.raises(ValueError, match=r"record \d of shard .*c.tfrecord: it is corrupt: "
                                         "the record's data fails its CRC32C"):
        _read_all(StreamGenerator([path], "tfrecord", **images()))
    _cut(path, 100)
    with pytest.raises(ValueError, match="c.tfrecord: it is truncated"):
        _read_all(StreamGenerator([path], "tfrecord", **images()))
    packed = write_tfrecord(tmp_path / "z.tfrecord", range(3), "ZLIB")
    with pytest.raises(ValueError, match=r"record 0 of shard .*z.tfrecord: .*ZLIB-"
                                         r"compressed: pass compression_type='ZLIB'"):
        StreamGenerator([packed], "tfrecord", **images())[0]
    plain = write_tfrecord(tmp_path / "p.tfrecord", range(3))
    with pytest.raises(ValueError, match="p.tfrecord: it is not a GZIP stream.*uncompressed"):
        StreamGenerator([plain], "tfrecord", compression_type="GZIP", **images())[0]


def test_every_shard_empty_is_an_error_not_an_endless_loop(tmp_path):
    for shuffle, message in [(True, r"Every shard is empty \(3 shards: .*e0.tar, .*e1.tar"),
                             (False, r"Every shard of virtual stream 0 .*e0.tar, .*e2.tar")]:
        empty = [write_tar(tmp_path / f"e{s}.tar", []) for s in range(3)]
        with pytest.raises(ValueError, match=message):
            StreamGenerator(empty, shuffle=shuffle, **images())[0]
        records = [write_tfrecord(tmp_path / f"e{s}.tfrecord", []) for s in range(2)]
        with pytest.raises(ValueError, match="Every shard is empty"):
            StreamGenerator(records, "tfrecord", shuffle=shuffle, **images(num_streams=1))[0]


def test_a_stream_of_empty_shards_only_is_an_error_and_empty_shards_are_passed_over(tmp_path):
    shards = [write_tar(tmp_path / "a.tar", range(5)), write_tar(tmp_path / "b.tar", [])]
    with pytest.raises(ValueError, match=r"Every shard of virtual stream 1 .*b.tar"):
        StreamGenerator(shards, shuffle=False, **images())[1]
    gen = StreamGenerator(shards, **images(num_streams=1))  # shuffled: one stream
    assert sorted(i for b in range(5) for i in ids_of(gen[b][0])) == sorted(
        list(range(5)) * 4)


def test_labels_that_do_not_fit_the_classes_name_the_shard_and_the_record(tmp_path):
    shard = write_tar(tmp_path / "z.tar", range(6),
                      label=lambda i: b"zebra" if i == 4 else CLASSES[i % 3].encode())
    gen = StreamGenerator([shard], label_key="txt", class_names=CLASSES, shuffle=False,
                          **images(batch_size=6))
    with pytest.raises(ValueError, match="no 'txt' .label_key.: it holds '(png|cls)', '(png|cls)'"):
        gen[0]
    with TarWriter(shard) as writer:
        for i in range(6):
            writer.write({"__key__": f"k{i}", "png": png(i),
                          "txt": b"zebra" if i == 4 else CLASSES[i % 3].encode()})
    gen = StreamGenerator([shard], label_key="txt", class_names=CLASSES, shuffle=False,
                          **images(batch_size=6))
    with pytest.raises(ValueError, match=r"Label 'zebra' at sample 'k4' \(record 4 of shard "
                                         r".*z.tar\) is not one of `class_names`="):
        gen[0]
    big = write_tar(tmp_path / "big.tar", range(6), label=lambda i: str(i).encode())
    with pytest.raises(ValueError, match=r"Label ids must lie in \[0, num_classes\) = "
                                         r"\[0, 3\). Received: label 3 at sample 'k00003' "
                                         r"\(record 3 of shard .*big.tar\)"):
        StreamGenerator([big], num_classes=3, shuffle=False, **images(batch_size=6))[0]
    with pytest.raises(ValueError, match=r"`class_names` must name every class of the "
                                         r"stream. Received: label 'cat' in sample 'k0' .*a "
                                         r"stream cannot infer them"):
        StreamGenerator([shard], label_key="txt", shuffle=False, **images(batch_size=6))[0]


def test_an_undecodable_image_names_the_record_and_the_shard(tmp_path):
    shard = tmp_path / "bad.tar"
    with TarWriter(str(shard)) as writer:
        for i in range(4):
            writer.write({"__key__": f"k{i}", "png": b"not a png" if i == 2 else png(i),
                          "cls": b"0"})
    with pytest.raises(ValueError, match=r"Cannot decode sample 'k2' \(record 2 of shard "
                                         r".*bad.tar\): it is corrupt"):
        StreamGenerator([str(shard)], shuffle=False, **images())[0]


def test_a_callable_readers_errors_name_the_shard_and_the_record():
    def failing(shard):
        yield np.zeros(2), 0
        raise OSError("connection reset")

    with pytest.raises(ValueError, match="Cannot read record 1 of shard a: OSError: "
                                         "connection reset"):
        StreamGenerator(["a"], failing, batch_size=2)[0]


def test_a_shard_missing_when_read_is_named(tmp_path, tars):
    gen = StreamGenerator(tars, **images())
    os.remove(tars[3])
    with pytest.raises(FileNotFoundError, match="Shard not found: .*train-03.tar"):
        _read_all(gen)



# ------------------------------------------------------------------ max_record_bytes
def test_a_member_above_max_record_bytes_is_refused_naming_it_and_none_lifts_it(tmp_path):
    path = write_tar(tmp_path / "a.tar", range(3))
    size = len(png(0))
    with tarfile.open(path) as tar:  # its header's offset (after webdataset's pax header)
        at = tar.getmember("k00000.png").offset
    gen = StreamGenerator([path], max_record_bytes=size - 1, **images(batch_size=1))
    with pytest.raises(ValueError, match=rf"^Cannot read record 0 of shard {re.escape(path)}"
                                         r": member k00000\.png of sample 'k00000' \(at "
                                         rf"byte {at}\) declares {size} bytes, more than "
                                         rf"max_record_bytes={size - 1} bytes \(a guard "
                                         r"against decompression bombs.*\)\. Pass a larger "
                                         r"`max_record_bytes`, or max_record_bytes=None"):
        gen[0]
    for limit in (max(len(png(i)) for i in range(3)) + 1, None):  # a png and its label
        x, y = StreamGenerator([path], max_record_bytes=limit, shuffle=False,
                               **images(batch_size=3))[0]
        assert ids_of(x) == [0, 1, 2]
    with pytest.raises(ValueError, match=r"`max_record_bytes` must be None or a positive "
                                         r"integer .*Received: max_record_bytes=0$"):
        StreamGenerator([path], max_record_bytes=0)


def test_members_not_asked_for_are_passed_over_but_a_flood_of_them_is_bounded(tmp_path):
    path = tmp_path / "extra.tar"
    with TarWriter(str(path)) as writer:
        writer.write({"__key__": "a", "png": png(5), "cls": b"1", "mp4": bytes(50_000)})
    x, y = StreamGenerator([str(path)], max_record_bytes=1000, shuffle=False,
                           **images(batch_size=1))[0]
    assert ids_of(x) == [5] and y.tolist() == [1]  # 50 KB in a field not read: no matter
    flood = tmp_path / "flood.tar"
    with TarWriter(str(flood)) as writer:  # one sample of 100 members
        writer.write({"__key__": "b", "png": png(1), "cls": b"1",
                      **{f"f{i}.txt": b"x" for i in range(100)}})
    with pytest.raises(ValueError, match=r"record 0 of shard .*flood\.tar: sample 'b', its "
                                         r"members up to b\.f\d+\.txt \(at byte \d+; one not "
                                         r"read counts as its 512-byte header\), take [\d,]+ "
                                         r"bytes, more than max_record_bytes=20,000 bytes"):
        StreamGenerator([str(flood)], max_record_bytes=20_000, **images(batch_size=1))[0]


def test_the_keys_a_shard_remembers_are_bounded(tmp_path, monkeypatch):
    path = write_tar(tmp_path / "many.tar", range(300))
    assert StreamGenerator([path], max_record_bytes=1000, shuffle=False,  # 256 MiB of keys
                           **images(batch_size=300))[0][0].shape == (300, 4, 4, 3)
    monkeypatch.setattr(_budget, "MAX_RECORD_BYTES", 10_000)  # the keys' least budget
    gen = StreamGenerator([path], max_record_bytes=1000, shuffle=False,
                          **images(batch_size=300))
    with pytest.raises(ValueError, match=r"^Cannot read record (\d+) of shard .*many\.tar: "
                                         r"the keys of its \d+ samples up to 'k\d+' "
                                         r"\(remembered to find a sample split across the "
                                         r"shard\) take [\d,]+ bytes, more than "
                                         r"max_record_bytes=10,000 bytes .*Split the shard "
                                         r"into smaller ones, or pass a larger"):
        gen[0]
    assert StreamGenerator([path], max_record_bytes=None, shuffle=False,
                           **images(batch_size=300))[0][0].shape == (300, 4, 4, 3)


def test_a_tfrecord_length_above_max_record_bytes_names_the_record_and_its_offset(tmp_path):
    path = write_tfrecord(tmp_path / "r.tfrecord", range(3))
    length = struct.unpack("<Q", open(path, "rb").read(8))[0]
    gen = StreamGenerator([path], "tfrecord", max_record_bytes=length - 1,
                          **images(batch_size=1))
    with pytest.raises(ValueError, match=rf"^Cannot read record 0 of shard .*r\.tfrecord: "
                                         rf"its header \(at byte 0\) declares a length of "
                                         rf"{length} bytes, more than "
                                         rf"max_record_bytes={length - 1} bytes"):
        gen[0]
    packed = write_tfrecord(tmp_path / "r.tfrecord.gz", [0, 1000, 2], "GZIP",
                            label=lambda i: b"x" * i)  # record 1 the longest
    second = 16 + struct.unpack("<Q", gzip.decompress(open(packed, "rb").read())[:8])[0]
    with pytest.raises(ValueError, match=rf"record 1 of shard .*r\.tfrecord\.gz: its header "
                                         rf"\(at byte {second}\) declares a length of"):
        StreamGenerator([packed], "tfrecord", compression_type="GZIP", label_mode=None,
                        max_record_bytes=length + 10, shuffle=False,
                        **images(batch_size=3))[0]


def test_a_json_label_nested_too_deep_is_a_value_error_naming_the_record(tmp_path):
    path = tmp_path / "deep.tar"
    with TarWriter(str(path)) as writer:
        writer.write({"__key__": "a", "png": png(0), "json": b"[" * 100_000 + b"]" * 100_000})
    with pytest.raises(ValueError, match=r"The 'json' label of sample 'a' \(record 0 of shard "
                                         r".*deep\.tar\) must be a JSON class id"):
        StreamGenerator([str(path)], label_key="json", **images(batch_size=1))[0]


def test_records_of_several_types_are_stacked_in_the_type_that_holds_them_all():
    """dtype=None: a batch takes the type of every record, not the first one's (a float
    after an int kept its fraction cut off, as in a kg.Generator subclass)."""
    def mixed(shard):
        return [(np.array([3]), 0), (np.array([2.5]), 1), (np.array([0.75]), 0)]

    gen = StreamGenerator(["s0"], records=mixed, batch_size=3, shuffle=False, dtype=None,
                          label_mode=None)
    x = gen[0]
    assert x.dtype == np.float64 and x[:, 0].tolist() == [3.0, 2.5, 0.75]

    def texts(shard):
        return [(np.array(1), 0), (np.array("one"), 1), (np.array(2), 0)]

    with pytest.raises(TypeError, match=r"record 1 of shard s0"):
        StreamGenerator(["s0"], records=texts, batch_size=3, shuffle=False, dtype=None,
                        label_mode=None)[0]


def test_batches_of_another_dtype_than_the_first_are_refused():
    """dtype=None: a batch of float records after one of ints would be cast to int by
    Keras in silence; refused naming the batch and record. With `dtype`, a value it
    would change (300.5 into uint8) is refused naming its record."""
    def shifting(shard):
        return [(np.array([3]), 0), (np.array([2]), 1), (np.array([0.7]), 0),
                (np.array([300.5]), 1)]

    gen = StreamGenerator(["s0"], records=shifting, batch_size=2, shuffle=False,
                          dtype=None, label_mode=None)
    assert gen[0].dtype == np.int64
    with pytest.raises(TypeError, match=r"Every batch must hold x in one dtype.*float64 in "
                                        r"batch 1 of epoch 0 \(its first sample: record 2 of shard "
                                        r"s0\), but int64 in batch 0"):
        gen[1]
    small = StreamGenerator(["s0"], records=shifting, batch_size=2, shuffle=False,
                            dtype="uint8", label_mode=None)
    assert small[0].ravel().tolist() == [3, 2]
    with pytest.raises(ValueError, match=r"dtype='uint8' must hold every value.*0\.7 "
                                         r"\(float64\) in record 2 of shard s0"):
        small[1]
