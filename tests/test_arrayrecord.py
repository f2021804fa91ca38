"""ArrayRecordGenerator: tf.train.Example records in ArrayRecord files (grain's format),
read by ArrayRecord's random access: the same batches as TFRecordGenerator's for the same
records, globs and remote files, and errors naming the file and the record."""

import os
import re
import sys
import uuid

import fsspec
import numpy as np
import pytest

import kerasgen as kg
from kerasgen.arrayrecord import ArrayRecordGenerator

from .test_contract import ids
from .test_tfrecord_shards import COMMON, SPEC, assert_same, batches, example, write_shards

tf = pytest.importorskip("tensorflow")
array_record = pytest.importorskip("array_record.python.array_record_module")


def write_arrays(folder, shards=3, per_shard=5, options="group_size:1", records=None):
    """ArrayRecord files `part-{i}.array_record` holding records 0.. in order."""
    os.makedirs(folder, exist_ok=True)
    paths, k = [], 0
    for i in range(shards):
        path = os.path.join(folder, f"part-{i}.array_record")
        writer = array_record.ArrayRecordWriter(path, options)
        for _ in range(per_shard):
            writer.write(example(k) if records is None else records[k])
            k += 1
        writer.close()
        paths.append(path)
    return paths


@pytest.fixture
def arrays(tmp_path):
    return write_arrays(tmp_path / "arrays")


def test_array_records_give_the_batches_of_the_same_tfrecords(arrays, tmp_path):
    records = kg.TFRecordGenerator(write_shards(tmp_path / "tfrecord"), SPEC, **COMMON)
    gen = ArrayRecordGenerator(arrays, SPEC, **COMMON)
    assert gen.num_samples == 15 and gen.class_names == records.class_names
    assert gen.paths == arrays and gen.local_paths == arrays
    assert gen.index[:6] == [(0, 0), (0, 1), (0, 2), (0, 3), (0, 4), (1, 0)]
    np.testing.assert_array_equal(gen.labels, records.labels)
    assert_same(batches(gen), batches(records))
    glob = ArrayRecordGenerator(str(tmp_path / "arrays" / "part-*.array_record"), SPEC,
                                **COMMON)
    assert glob.paths == arrays
    assert_same(batches(glob), batches(records))
    numeric = ArrayRecordGenerator(arrays, {"values": "float", "label": "label"},
                                   batch_size=15, shuffle=False, verbose=0)
    x, y = numeric[0]
    np.testing.assert_array_equal(x, [[k, 2 * k] for k in range(15)])
    np.testing.assert_array_equal(y, np.arange(15) % 3)
    threads = ArrayRecordGenerator(arrays, SPEC, workers=3, **COMMON)  # a reader each
    assert_same(batches(threads), batches(records))


def test_remote_array_records_are_read_from_local_copies(arrays, tmp_path):
    root = f"memory://kg-{uuid.uuid4().hex[:8]}"
    fs = fsspec.filesystem("memory")
    try:
        for path in arrays:
            fs.pipe(f"{root}/{os.path.basename(path)}", open(path, "rb").read())
        gen = ArrayRecordGenerator(root + "/part-*.array_record", SPEC,
                                   remote_cache=str(tmp_path / "cache"), **COMMON)
        assert all(p.startswith("memory://") for p in gen.paths)
        assert all(p.startswith(str(tmp_path / "cache")) for p in gen.local_paths)
        assert_same(batches(gen), batches(ArrayRecordGenerator(arrays, SPEC, **COMMON)))
    finally:
        fs.rm("/" + root.split("://", 1)[1], recursive=True)


def test_array_record_errors_name_the_file_and_the_record(arrays, tmp_path):
    data = bytearray(open(arrays[1], "rb").read())
    bad = tmp_path / "bad.array_record"
    data[200] ^= 0xFF  # in the first record's chunk (the file is padded to 64 KiB blocks)
    bad.write_bytes(bytes(data))
    with pytest.raises(ValueError, match=r"bad\.array_record is corrupt: record \d cannot "
                                         r"be read \(.*Corrupted Riegeli"):
        ArrayRecordGenerator(str(bad), {"values": "float"}, verbose=0)
    tfrecord = write_shards(tmp_path)[0]
    with pytest.raises(ValueError, match=rf"{tfrecord} is not an ArrayRecord file: it is a "
                                         r"TFRecord file \(read it with kg.TFRecordGenerator"):
        ArrayRecordGenerator([arrays[0], tfrecord], SPEC, verbose=0)
    (tmp_path / "cut.array_record").write_bytes(open(arrays[0], "rb").read()[:100])
    with pytest.raises(ValueError, match=r"cut\.array_record is not an ArrayRecord file, or "
                                         r"it is truncated"):
        ArrayRecordGenerator(str(tmp_path / "cut.array_record"), SPEC, verbose=0)
    with pytest.raises(FileNotFoundError, match=r"No ArrayRecord file matches the pattern "
                                                r".*nothing-\*"):
        ArrayRecordGenerator(str(tmp_path / "nothing-*"), SPEC, verbose=0)
    raw = write_arrays(tmp_path / "raw", shards=1, records=[b"\xff\xff\xff"] * 5)
    with pytest.raises(ValueError, match=r"Record 0 of .*part-0\.array_record is not a "
                                         r"tf\.train\.Example .*ArrayRecordGenerator reads"):
        ArrayRecordGenerator(raw, SPEC, verbose=0)
    with pytest.raises(ValueError, match=r"feature 'image' of record 0 of .*part-0\."
                                         r"array_record is a bytes_list"):
        ArrayRecordGenerator(arrays, {"image": "int"}, verbose=0)
    with pytest.raises(TypeError, match=r"^ArrayRecordGenerator\(\) takes its labels"):
        ArrayRecordGenerator(arrays, SPEC, labels=[0] * 15, verbose=0)


def test_array_records_in_groups_get_a_warning(tmp_path):
    grouped = write_arrays(tmp_path, shards=1, options="group_size:4")
    with pytest.warns(UserWarning, match=r"part-0\.array_record was written with "
                                         r"group_size:4: every record read decodes"):
        gen = ArrayRecordGenerator(grouped, {"values": "float"}, batch_size=5,
                                   shuffle=False, verbose=0)
    np.testing.assert_array_equal(ids(gen[0][:, :1] * 10), np.arange(5))


def test_array_record_without_its_package_says_how_to_install(arrays, monkeypatch):
    monkeypatch.setitem(sys.modules, "array_record.python.array_record_module", None)
    with pytest.raises(ImportError, match=r'ArrayRecordGenerator needs the array_record '
                                          r'package: pip install "kerasgen3\[arrayrecord\]"'):
        ArrayRecordGenerator(arrays, SPEC, verbose=0)


def test_a_chunk_above_max_record_bytes_is_refused_before_it_is_decoded(tmp_path):
    sizes = [len(example(k)) for k in range(6)]
    single = write_arrays(tmp_path / "one", shards=1, per_shard=6)[0]
    limit = max(sizes) - 1
    first = next(k for k, size in enumerate(sizes) if size > limit)
    with pytest.raises(ValueError, match=rf"^Record {first} of {re.escape(single)} \(a chunk "
                                         rf"at byte \d+\) decodes to {max(sizes)} bytes, more "
                                         rf"than max_record_bytes={limit} bytes \(a guard "
                                         r"against decompression bombs.*Pass a larger "
                                         r"`max_record_bytes`, or max_record_bytes=None"):
        ArrayRecordGenerator(single, SPEC, max_record_bytes=limit, verbose=0)
    assert ArrayRecordGenerator(single, SPEC, max_record_bytes=max(sizes),
                                verbose=0).num_samples == 6
    grouped = write_arrays(tmp_path / "three", shards=1, per_shard=6,
                           options="group_size:3")[0]
    with pytest.raises(ValueError, match=rf"^Records 0 to 2 of {re.escape(grouped)}, one "
                                         r"chunk at byte 64 that a read of any of them "
                                         rf"decodes whole, decode to {sum(sizes[:3])} bytes, "
                                         r"more than .*\. Write the file with group_size:1 "
                                         r"\(ArrayRecordWriter\(path, 'group_size:1'\)\), or "
                                         r"pass a larger `max_record_bytes`"):
        ArrayRecordGenerator(grouped, SPEC, max_record_bytes=max(sizes), verbose=0)
    with pytest.warns(UserWarning, match="group_size:3"):
        gen = ArrayRecordGenerator(grouped, SPEC, max_record_bytes=None, verbose=0)
    assert gen.num_samples == 6
