"""TFRecord files beyond one local, uncompressed file: lists and glob patterns in order,
GZIP and ZLIB files (decompressed once into a local copy), remote files (memory://, read
from local copies in remote_cache) and worker processes reading those copies; batch b of
epoch e is the same from every one of them."""

import gzip
import os
import pickle
import re
import struct
import uuid
import zlib
from pathlib import Path

import cv2
import fsspec
import keras
import numpy as np
import pytest

import kerasgen as kg
from kerasgen import tfrecord
from kerasgen.formats import shards as shards_mod
from kerasgen.storage.remote_cache import RemoteCache

from .test_contract import ids

tf = pytest.importorskip("tensorflow")

SPEC = {"image": "image", "label": "label"}
COMMON = dict(image_size=(6, 6), batch_size=4, seed=3, verbose=0)


def example(k):
    """Record k: a 10x12 image whose every value is 10 * k, label k % 3, values [k, 2k]."""
    ok, png = cv2.imencode(".png", np.full((10, 12, 3), 10 * k, np.uint8))
    return tf.train.Example(features=tf.train.Features(feature={
        "image": tf.train.Feature(bytes_list=tf.train.BytesList(value=[png.tobytes()])),
        "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[k % 3])),
        "values": tf.train.Feature(float_list=tf.train.FloatList(value=[k, 2.0 * k])),
    })).SerializeToString()


def write_shards(folder, name="part", shards=3, per_shard=5, compression_type=""):
    """Shards `{name}-{i}.tfrecord` holding records 0.. in order; their paths."""
    os.makedirs(folder, exist_ok=True)
    paths, k = [], 0
    options = tf.io.TFRecordOptions(compression_type=compression_type)
    for i in range(shards):
        path = str(Path(folder) / f"{name}-{i}.tfrecord")
        with tf.io.TFRecordWriter(path, options=options) as writer:
            for _ in range(per_shard):
                writer.write(example(k))
                k += 1
        paths.append(path)
    return paths


@pytest.fixture
def shards(tmp_path):
    return write_shards(tmp_path / "plain")


def batches(gen, epochs=2):
    """Every batch of `epochs` epochs, epoch by epoch, as Keras asks for them."""
    found = []
    for epoch in range(epochs):
        found += [[np.array(part) for part in gen.at_epoch(epoch)[i]] for i in range(len(gen))]
    return found


def assert_same(a, b):
    assert len(a) == len(b)
    for one, other in zip(a, b):
        for x, y in zip(one, other):
            np.testing.assert_array_equal(x, y)


# ----- lists and glob patterns
def test_lists_and_glob_patterns_expand_in_order(shards, tmp_path):
    folder = os.path.dirname(shards[0])
    write_shards(folder, name="other", shards=1)
    gen = kg.TFRecordGenerator(os.path.join(folder, "part-*.tfrecord"), SPEC, **COMMON)
    assert gen.paths == shards and gen.num_samples == 15  # sorted, "other" left out
    assert_same(batches(gen), batches(kg.TFRecordGenerator(shards, SPEC, **COMMON)))
    mixed = kg.TFRecordGenerator([shards[2], Path(folder) / "part-[01].tfrecord",
                                  "file://" + shards[2]], SPEC, **COMMON)
    assert mixed.paths == [shards[2], shards[0], shards[1], shards[2]]  # the order given
    assert mixed.num_samples == 20
    numeric = kg.TFRecordGenerator(mixed.paths, {"values": "float"}, batch_size=20,
                                   shuffle=False, verbose=0)
    np.testing.assert_array_equal(numeric[0][:, 0], list(range(10, 15)) + list(range(10))
                                  + list(range(10, 15)))
    literal = Path(folder) / "odd[1].tfrecord"  # a file named like a pattern is that file
    literal.write_bytes(open(shards[1], "rb").read())
    assert kg.TFRecordGenerator(str(literal), SPEC, **COMMON).paths == [str(literal)]


def test_files_that_match_nothing_or_are_not_paths_are_refused(shards, tmp_path):
    pattern = str(tmp_path / "nothing-*.tfrecord")
    with pytest.raises(FileNotFoundError, match=rf"No TFRecord file matches the pattern "
                                                rf"{re.escape(pattern)}\."):
        kg.TFRecordGenerator([shards[0], pattern], SPEC, **COMMON)
    with pytest.raises(FileNotFoundError, match="TFRecord file not found: .*gone.tfrecord"):
        kg.TFRecordGenerator([shards[0], str(tmp_path / "gone.tfrecord")], SPEC, **COMMON)
    with pytest.raises(ValueError, match=r"`files` must be a TFRecord file path, a glob "
                                         r"pattern or a non-empty list of them. Received: "
                                         r"files=\[\]"):
        kg.TFRecordGenerator([], SPEC, **COMMON)
    with pytest.raises(TypeError, match=r"`files` must be .* Received: files=\[.*, 3\]\. "
                                        r"3 is not a path"):
        kg.TFRecordGenerator([shards[0], 3], SPEC, **COMMON)
    with pytest.raises(TypeError, match="batchsize"):  # before the files are looked for
        kg.TFRecordGenerator(str(tmp_path / "nothing-*"), SPEC, batchsize=4)


# ----- compressed files
@pytest.mark.parametrize("kind", ["GZIP", "ZLIB"])
def test_compressed_files_train_and_give_the_uncompressed_batches(shards, tmp_path, kind):
    packed = write_shards(tmp_path / kind, compression_type=kind)
    with open(packed[0], "rb") as f:
        head = f.read(2)
    assert compression_of(head) == kind  # TensorFlow wrote the compressed stream
    plain = kg.TFRecordGenerator(shards, SPEC, **COMMON)
    gen = kg.TFRecordGenerator(packed, SPEC, compression_type=kind, **COMMON)
    assert gen.paths == packed and gen.compression_type == kind
    assert all(p not in packed and os.path.isfile(p) for p in gen.local_paths)
    assert gen.index == plain.index  # the offsets of the decompressed copies
    assert_same(batches(gen), batches(plain))
    model = keras.Sequential([keras.Input((6, 6, 3)), keras.layers.Rescaling(1 / 255),
                              keras.layers.Flatten(), keras.layers.Dense(3)])
    model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    history = model.fit(gen, epochs=1, verbose=0)
    assert len(history.history["loss"]) == 1 and np.isfinite(history.history["loss"][0])
    assert gen.epoch == 1


def compression_of(head):
    return tfrecord.compression_of(head)


@pytest.mark.parametrize("kind", ["GZIP", "ZLIB"])
def test_a_compressed_file_without_compression_type_names_the_one_to_pass(tmp_path, kind):
    path = write_shards(tmp_path, compression_type=kind, shards=1)[0]
    with pytest.raises(ValueError, match=rf"{path} is compressed with {kind} "
                                         rf"\(compression_type='{kind}' when written\)\. "
                                         rf"Pass compression_type='{kind}'"):
        kg.TFRecordGenerator(path, SPEC, **COMMON)
    other = "ZLIB" if kind == "GZIP" else "GZIP"
    with pytest.raises(ValueError, match=rf"{path} is not a {other} stream "
                                         rf"\(compression_type='{other}'\): it is "
                                         rf"{kind}-compressed: pass compression_type='{kind}'"):
        kg.TFRecordGenerator(path, SPEC, compression_type=other, **COMMON)


def test_an_uncompressed_file_read_as_compressed_says_so(shards):
    with pytest.raises(ValueError, match=r"part-0\.tfrecord is not a GZIP stream .*: it "
                                         r"is an uncompressed TFRecord file: pass "
                                         r"compression_type=None"):
        kg.TFRecordGenerator(shards, SPEC, compression_type="GZIP", **COMMON)
    for none in (None, ""):
        assert kg.TFRecordGenerator(shards, SPEC, compression_type=none,
                                    **COMMON).compression_type == ""
    with pytest.raises(ValueError, match=r"`compression_type` must be None, '' "
                                         r"\(uncompressed\), 'GZIP' or 'ZLIB', as "
                                         r"tf.data.TFRecordDataset names them. Received: "
                                         r"compression_type='gzip'"):
        kg.TFRecordGenerator(shards, SPEC, compression_type="gzip", **COMMON)


@pytest.mark.parametrize("kind", ["GZIP", "ZLIB"])
def test_a_truncated_or_corrupt_compressed_file_is_an_error_naming_it(tmp_path, kind):
    path = write_shards(tmp_path, compression_type=kind, shards=1)[0]
    data = open(path, "rb").read()
    cut = tmp_path / f"cut.{kind}"
    cut.write_bytes(data[:len(data) // 2])
    with pytest.raises(ValueError, match=rf"{cut} is truncated: its {kind} stream ends "
                                         r"before its end marker"):
        kg.TFRecordGenerator(str(cut), SPEC, compression_type=kind, **COMMON)
    bad = tmp_path / f"bad.{kind}"
    flipped = bytearray(data)
    flipped[len(data) // 2] ^= 0xFF
    bad.write_bytes(bytes(flipped))
    with pytest.raises(ValueError, match=rf"{bad} is (corrupt|truncated): its {kind} "
                                         "stream"):
        kg.TFRecordGenerator(str(bad), SPEC, compression_type=kind, **COMMON)
    # the stream is intact, the records inside are not: named with the file users gave
    record_cut = tmp_path / "records-cut.tfrecord.gz"
    raw = gzip.decompress(data) if kind == "GZIP" else zlib.decompress(data)
    record_cut.write_bytes(gzip.compress(raw[:-7]))
    with pytest.raises(ValueError, match=rf"{record_cut} \(decompressed\) is truncated"):
        kg.TFRecordGenerator(str(record_cut), SPEC, compression_type="GZIP", **COMMON)


def test_concatenated_gzip_members_read_as_one_file(shards, tmp_path):
    data = b"".join(open(p, "rb").read() for p in shards)
    path = tmp_path / "members.tfrecord.gz"
    path.write_bytes(b"".join(gzip.compress(open(p, "rb").read()) for p in shards))
    assert gzip.decompress(path.read_bytes()) == data
    gen = kg.TFRecordGenerator(str(path), {"values": "float"}, compression_type="GZIP",
                               batch_size=15, shuffle=False, verbose=0)
    np.testing.assert_array_equal(gen[0][:, 0], np.arange(15))


def test_a_compressed_file_is_decompressed_once_per_cache(tmp_path, monkeypatch):
    packed = write_shards(tmp_path / "gz", compression_type="GZIP")
    calls = []
    original = shards_mod.decompress
    monkeypatch.setattr(shards_mod, "decompress",
                        lambda *args: calls.append(args[3]) or original(*args))
    cache = tmp_path / "cache"
    first = kg.TFRecordGenerator(packed, SPEC, compression_type="GZIP",
                                 remote_cache=str(cache), **COMMON)
    assert sorted(calls) == packed  # once each (on threads: in any order)
    assert all(p.startswith(str(cache)) for p in first.local_paths)
    second = kg.TFRecordGenerator(packed, SPEC, compression_type="GZIP",
                                  remote_cache=RemoteCache(cache), **COMMON)
    assert sorted(calls) == packed and second.local_paths == first.local_paths  # reused
    assert_same(batches(second), batches(first))
    os.utime(packed[1], ns=(1, 1))  # a changed file (its time) is decompressed again
    kg.TFRecordGenerator(packed, SPEC, compression_type="GZIP", remote_cache=str(cache),
                         **COMMON)
    assert sorted(calls) == sorted(packed + [packed[1]])


# ----- remote files (memory://)
@pytest.fixture
def memory_root():
    root = f"memory://kg-{uuid.uuid4().hex[:8]}"
    yield root
    fs = fsspec.filesystem("memory")
    base = "/" + root.split("://", 1)[1]
    if fs.exists(base):
        fs.rm(base, recursive=True)


def upload(paths, root):
    fs = fsspec.filesystem("memory")
    urls = []
    for path in paths:
        url = f"{root}/{os.path.basename(path)}"
        fs.pipe(url, open(path, "rb").read())
        urls.append(url)
    return urls


@pytest.fixture
def downloads(monkeypatch):
    """The memory:// paths opened for reading (a download each)."""
    from fsspec.implementations.memory import MemoryFileSystem

    opened = []
    original = MemoryFileSystem._open

    def counting(self, path, mode="rb", *args, **kwargs):
        if "r" in mode:
            opened.append(path)
        return original(self, path, mode, *args, **kwargs)

    monkeypatch.setattr(MemoryFileSystem, "_open", counting)
    return opened


def test_remote_shards_and_globs_give_the_local_batches(shards, memory_root, tmp_path):
    urls = upload(shards, memory_root + "/data")
    plain = kg.TFRecordGenerator(shards, SPEC, **COMMON)
    gen = kg.TFRecordGenerator(memory_root + "/data/part-*.tfrecord", SPEC, **COMMON)
    assert [p.rsplit("/", 1)[1] for p in gen.paths] == [os.path.basename(p) for p in shards]
    assert all(p.startswith("memory://") for p in gen.paths)  # the URLs, not the copies
    assert all(os.path.isfile(p) for p in gen.local_paths)
    assert_same(batches(gen), batches(plain))
    assert_same(batches(kg.TFRecordGenerator(urls, SPEC, **COMMON)), batches(plain))
    # compressed and remote: fetched, then decompressed
    packed = upload(write_shards(tmp_path / "gz", compression_type="GZIP"),
                    memory_root + "/gz")
    assert_same(batches(kg.TFRecordGenerator(packed, SPEC, compression_type="GZIP",
                                             **COMMON)), batches(plain))
    with pytest.raises(FileNotFoundError, match=rf"No TFRecord file matches the pattern "
                                                rf"{memory_root}/data/nothing-\*"):
        kg.TFRecordGenerator(memory_root + "/data/nothing-*", SPEC, **COMMON)
    for kind, present in (("", urls[0]), ("GZIP", packed[0])):
        with pytest.raises(FileNotFoundError, match=rf"TFRecord file not found: "
                                                    rf"{memory_root}/data/gone"):
            kg.TFRecordGenerator([present, memory_root + "/data/gone.tfrecord"], SPEC,
                                 compression_type=kind, **COMMON)


def test_errors_in_remote_shards_name_the_url(shards, memory_root):
    data = open(shards[1], "rb").read()
    fs = fsspec.filesystem("memory")
    url = memory_root + "/cut.tfrecord"
    fs.pipe(url, data[:-7])
    with pytest.raises(ValueError, match=rf"^{memory_root}/cut\.tfrecord is truncated"):
        kg.TFRecordGenerator(url, SPEC, **COMMON)
    fs.pipe(url, gzip.compress(data))
    with pytest.raises(ValueError, match=rf"^{memory_root}/cut\.tfrecord is compressed with "
                                         r"GZIP .* Pass compression_type='GZIP'"):
        kg.TFRecordGenerator(url, SPEC, **COMMON)


def test_the_remote_cache_is_reused_and_a_damaged_entry_fetched_again(
        shards, memory_root, tmp_path, downloads):
    urls = upload(shards, memory_root + "/data")
    cache = tmp_path / "cache"
    first = kg.TFRecordGenerator(urls, SPEC, remote_cache=str(cache), **COMMON)
    assert len(downloads) == 3 and all(p.startswith(str(cache)) for p in first.local_paths)
    expected = batches(first)
    second = kg.TFRecordGenerator(urls, SPEC, remote_cache=str(cache), **COMMON)
    assert len(downloads) == 3 and second.local_paths == first.local_paths  # no download
    assert_same(batches(second), expected)
    damaged = first.local_paths[1]
    data = bytearray(open(damaged, "rb").read())
    data[40] ^= 0xFF  # a bad disk: the entry's CRC32 no longer matches
    open(damaged, "wb").write(bytes(data))
    third = kg.TFRecordGenerator(urls, SPEC, remote_cache=str(cache), **COMMON)
    assert len(downloads) == 4 and downloads[-1].endswith("part-1.tfrecord")
    assert_same(batches(third), expected)


def test_a_copy_removed_by_another_process_is_fetched_again(shards, memory_root, tmp_path,
                                                             downloads):
    urls = upload(shards, memory_root + "/data")
    cache = RemoteCache(tmp_path / "cache")
    gen = kg.TFRecordGenerator(urls, SPEC, remote_cache=cache, **COMMON)
    expected = batches(gen)
    cache.clear()  # what another process's size bound does: each entry removed
    assert not any(os.path.exists(p) for p in gen.local_paths)
    again = pickle.loads(pickle.dumps(gen))  # as a worker process: no file open yet
    assert_same(batches(again), expected)
    assert len(downloads) == 6 and all(os.path.exists(p) for p in again.local_paths)
    assert again.paths == urls
    local = kg.TFRecordGenerator(shards, SPEC, **COMMON)
    os.unlink(shards[0])  # a file users gave is never fetched: it is gone
    with pytest.raises(FileNotFoundError, match="part-0.tfrecord"):
        pickle.loads(pickle.dumps(local))[0]


def test_worker_processes_read_the_local_copies(shards, memory_root):
    # the remote files are removed once the generator is made: the workers (and this
    # process) can only read the local copies
    urls = upload(shards, memory_root + "/data")
    plain = kg.TFRecordGenerator(shards, SPEC, **COMMON)
    gen = kg.TFRecordGenerator(urls, SPEC, workers=2, use_multiprocessing=True, **COMMON)
    fsspec.filesystem("memory").rm(urls)  # gone from every process: only copies remain
    got = [gen[i] for i in range(len(gen))]
    gen.on_epoch_end()  # the workers end
    assert_same(got, [plain[i] for i in range(len(plain))])
    assert sorted(np.concatenate([ids(x) for x, _ in got]).tolist()) == list(range(15))


@pytest.mark.parametrize("kind", ["GZIP", "ZLIB"])
def test_a_compressed_file_is_checked_record_by_record_as_it_is_decompressed(tmp_path,
                                                                             kind):
    raw = open(write_shards(tmp_path / "plain", shards=1)[0], "rb").read()
    pack = gzip.compress if kind == "GZIP" else zlib.compress
    cache = tmp_path / "cache"
    # five good records, then 32 MiB of zeros: refused at the first bad header, no copy kept
    spoilt = tmp_path / f"spoilt.{kind}"
    spoilt.write_bytes(pack(raw + bytes(32 << 20)))
    with pytest.raises(ValueError, match=rf"^{re.escape(str(spoilt))} \(decompressed\) is "
                                         rf"corrupt: the length of record 5 \(at byte "
                                         rf"{len(raw)}\) fails its CRC32C check\. Rewrite"):
        kg.TFRecordGenerator(str(spoilt), SPEC, compression_type=kind,
                             remote_cache=str(cache), **COMMON)
    assert not RemoteCache(cache).entries()
    length = struct.unpack("<Q", raw[:8])[0]
    good = tmp_path / f"good.{kind}"
    good.write_bytes(pack(raw))
    with pytest.raises(ValueError, match=rf"^Record 0 \(byte 0\) of .*good\.{kind} "
                                         rf"\(decompressed\) declares a length of {length} "
                                         rf"bytes, more than max_record_bytes={length - 1} "):
        kg.TFRecordGenerator(str(good), SPEC, compression_type=kind, remote_cache=str(cache),
                             max_record_bytes=length - 1, **COMMON)
    assert len(kg.TFRecordGenerator(str(good), SPEC, compression_type=kind,
                                    max_record_bytes=None, **COMMON).index) == 5
