"""Parquet and Arrow IPC (Feather v2) files as the shards of kg.StreamGenerator
(records="parquet" / "arrow", kerasgen/formats/table_shards.py): the same batches as the
same records in WebDataset tar shards, seeded order, exact resume, hosts, on_error="skip",
remote shards, the schema and null errors, and training through fit. No TensorFlow: the
file runs on every backend."""

import io
import tarfile
import uuid

import cv2
import fsspec
import keras
import numpy as np
import pytest

import kerasgen as kg

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
feather = pytest.importorskip("pyarrow.feather")

CLASSES = ["cat", "dog", "fox"]
SIZES = [9, 5, 11, 7]  # rows of each shard (ids shard * 100 + k)


def png(i):
    """A 4x4 PNG whose pixels hold the id i (red: i // 256, green: i % 256)."""
    image = np.zeros((4, 4, 3), np.uint8)
    image[..., 2], image[..., 1] = i // 256, i % 256  # OpenCV writes BGR
    return cv2.imencode(".png", image)[1].tobytes()


def ids_of(x):
    return (x[:, 0, 0, 0].astype(int) * 256 + x[:, 0, 0, 1].astype(int)).tolist()


def shard_ids(s):
    return list(range(s * 100, s * 100 + SIZES[s]))


def table_of(ids, names=False):
    labels = [CLASSES[i % 3] for i in ids] if names else [i % 3 for i in ids]
    return pa.table({"id": ids, "image": [png(i) for i in ids], "label": labels})


def write_parquet(path, ids, names=False, **table):
    pq.write_table(table_of(ids, names), str(path), row_group_size=3, **table)
    return str(path)


def write_tar(path, ids):
    with tarfile.open(str(path), "w") as tar:
        for i in ids:
            for field, data in (("png", png(i)), ("cls", str(i % 3).encode())):
                info = tarfile.TarInfo(f"k{i:05d}.{field}")
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return str(path)


@pytest.fixture
def parquets(tmp_path):
    """4 Parquet shards of row groups of 3 rows, int labels."""
    return [write_parquet(tmp_path / f"train-{s}.parquet", shard_ids(s))
            for s in range(len(SIZES))]


def stream(shards, records="parquet", **kwargs):
    args = dict(image_size=(4, 4), batch_size=4, seed=3, shuffle_buffer=5, num_streams=2,
                dtype="uint8")
    args.update(kwargs)
    return kg.StreamGenerator(shards, records=records, **args)


def batches(gen, count, start=0):
    return [gen[b] for b in range(start, start + count)]


def assert_same(first, second):
    assert len(first) == len(second)
    for (x1, y1), (x2, y2) in zip(first, second):
        np.testing.assert_array_equal(x1, x2)
        np.testing.assert_array_equal(y1, y2)


# ------------------------------------------------------------------ the same records
def test_parquet_and_feather_shards_give_the_webdataset_shards_batches(parquets, tmp_path):
    tars = [write_tar(tmp_path / f"train-{s}.tar", shard_ids(s)) for s in range(len(SIZES))]
    arrows = []
    for s in range(len(SIZES)):
        arrows.append(str(tmp_path / f"train-{s}.arrow"))
        feather.write_feather(table_of(shard_ids(s)), arrows[-1], chunksize=4)
    expected = batches(stream(tars, "webdataset"), 12)  # more than a pass: 32 rows
    assert_same(batches(stream(parquets), 12), expected)
    assert_same(batches(stream(arrows, "arrow"), 12), expected)
    assert_same(batches(stream(arrows), 12), expected)  # kinds from the first bytes
    x, y = expected[0]
    assert x.shape == (4, 4, 4, 3) and x.dtype == np.uint8
    assert [i % 3 for i in ids_of(x)] == y.tolist()
    seen = [i for x, _ in expected[:8] for i in ids_of(x)]  # the first pass: every row
    assert sorted(seen) == sorted(i for s in range(len(SIZES)) for i in shard_ids(s))


def test_class_names_hugging_face_images_and_record_order(tmp_path):
    ids = shard_ids(0) + shard_ids(1)
    named = tmp_path / "named.parquet"
    table = table_of(ids, names=True)
    structs = pa.array([{"bytes": png(i), "path": f"{i}.png"} for i in ids],
                       pa.struct([("bytes", pa.binary()), ("path", pa.string())]))
    pq.write_table(table.set_column(1, "image", structs), str(named), row_group_size=4)
    gen = stream(str(named), class_names=CLASSES, shuffle=False, label_mode="categorical",
                 num_streams=1, batch_size=7)
    x, y = gen[1]
    assert ids_of(x) == ids[7:14]  # rows in the file's order without shuffle
    np.testing.assert_array_equal(y.argmax(1), [i % 3 for i in ids[7:14]])
    assert y.shape == (7, 3)
    with pytest.raises(ValueError, match=r"`class_names` must name every class .*'cat'.*"
                                         r"row 0 of .*named\.parquet"):
        stream(str(named), shuffle=False)[0]


# ------------------------------------------------------------------ order and state
def test_seeded_order_resume_and_hosts(parquets):
    first = batches(stream(parquets), 10)
    assert_same(batches(stream(parquets), 10), first)
    other = batches(stream(parquets, seed=4), 10)
    assert any(ids_of(a[0]) != ids_of(b[0]) for a, b in zip(first, other))

    gen = stream(parquets)
    state = gen.get_state(batches_done=6)
    resumed = stream(parquets, workers=2)
    resumed.set_state(state)
    assert_same(batches(resumed, 4), first[6:10])  # as the uninterrupted run

    hosts = [stream(parquets, shuffle=False, num_streams=1).shard(2, h) for h in (0, 1)]
    for h, gen in enumerate(hosts):
        count = sum(SIZES[h::2])  # one pass of this host's shards
        seen = [i for x, _ in batches(gen, count // 4) for i in ids_of(x)]
        assert count % 4 == 0 and seen == shard_ids(h) + shard_ids(h + 2)


def test_on_error_skip_names_the_row(tmp_path):
    ids = shard_ids(0)
    table = table_of(ids)
    images = [png(i) for i in ids]
    images[4] = b"not an image"
    path = tmp_path / "bad.parquet"
    pq.write_table(table.set_column(1, "image", pa.array(images, pa.binary())), str(path),
                   row_group_size=3)
    gen = stream(str(path), shuffle=False, num_streams=1, batch_size=9, on_error="skip")
    with pytest.warns(UserWarning, match="Skipping an undecodable image"):
        x, y = gen[0]
    assert len(x) == 9 and 4 not in ids_of(x)
    assert [i % 3 for i in ids_of(x)] == y.tolist()  # its stand-in is of its class
    assert gen.skipped == [f"record 4 of {path}"]
    with pytest.raises(ValueError, match=r"row 4 of .*bad\.parquet"):
        stream(str(path), shuffle=False, num_streams=1, batch_size=9)[0]


# ------------------------------------------------------------------ errors
def test_missing_columns_are_named_with_the_shard(parquets, tmp_path):
    with pytest.raises(ValueError, match=r"Shard .*train-0\.parquet has no column 'cls' "
                                         r"\(label_key\): its columns are 'id', 'image', "
                                         r"'label'"):
        stream(parquets, label_key="cls")
    with pytest.raises(ValueError, match=r"has no column 'jpg;png' \(image_key\)"):
        stream(parquets, image_key="jpg;png")
    assert ids_of(stream(parquets, image_key="jpg;image", label_mode=None,
                         shuffle=False, num_streams=1)[0])[:4] == shard_ids(0)[:4]
    with pytest.raises(ValueError,
                       match=r"`image_key` must name a column of encoded images .* "
                             r"column 'id' of type int64 in shard .*train-0\.parquet"):
        stream(parquets, image_key="id")
    later = tmp_path / "later.parquet"  # a later shard without the label column
    pq.write_table(table_of(shard_ids(1)).drop_columns(["label"]), str(later))
    gen = stream([parquets[0], str(later)], shuffle=False, num_streams=1, batch_size=9)
    gen[0]
    with pytest.raises(ValueError, match=r"^Shard .*later\.parquet has no column 'label'"):
        gen[1]
    text = tmp_path / "notes.parquet"
    text.write_bytes(b"hello, not a table")
    with pytest.raises(ValueError, match=r"notes\.parquet is neither a Parquet file nor an "
                                         r"Arrow IPC"):
        stream(str(text))
    with pytest.raises(ValueError, match=r"`compression_type` must be None with "
                                         r"records='parquet'"):
        stream(parquets, compression_type="GZIP")
    with pytest.raises(ValueError, match=r"`records` must be .*'parquet', 'arrow'"):
        stream(parquets, "feather")


def test_null_labels_and_images_name_the_row(tmp_path):
    ids = shard_ids(0)
    labels = [i % 3 for i in ids]
    labels[5] = None
    path = tmp_path / "holes.parquet"
    pq.write_table(table_of(ids).set_column(2, "label", pa.array(labels, pa.int64())),
                   str(path), row_group_size=3)
    gen = stream(str(path), shuffle=False, num_streams=1, batch_size=3)
    gen[0]
    with pytest.raises(ValueError, match=r"Column 'label' holds a null \(a missing value\) "
                                         r"at row 5 of .*holes\.parquet"):
        gen[1]
    assert len(stream(str(path), shuffle=False, num_streams=1, batch_size=9,
                      label_mode=None)[0]) == 9  # unlabeled: the label column is not read
    images = [png(i) for i in ids]
    images[2] = None
    pq.write_table(table_of(ids).set_column(1, "image", pa.array(images, pa.binary())),
                   str(path))
    with pytest.raises(ValueError, match=r"Column 'image' holds a null .* row 2 of "):
        stream(str(path), shuffle=False, num_streams=1, batch_size=3)[0]
    floats = pa.array([1.0, 2.5] + [0.0] * (len(ids) - 2))
    pq.write_table(table_of(ids).set_column(2, "label", floats), str(path))
    with pytest.raises(ValueError, match=r"'label' must hold class ids .* 2\.5 at row 1"):
        stream(str(path), shuffle=False, num_streams=1, batch_size=3)[0]


def test_max_record_bytes_names_the_row(parquets):
    with pytest.raises(ValueError, match=r"Cannot read record 0 of shard .*train-0\.parquet"
                                         r": Row 0's image \(column 'image'\) holds"):
        stream(parquets, max_record_bytes=10, shuffle=False)[0]


# ------------------------------------------------------------------ remote and fit
def test_remote_shards_equal_the_local_ones(parquets):
    root = f"memory://kg-{uuid.uuid4().hex[:8]}"
    fs = fsspec.filesystem("memory")
    try:
        for path in parquets:
            with open(path, "rb") as f:
                fs.pipe(f"{root[9:]}/{path.rsplit('/', 1)[1]}", f.read())
        remote = stream(f"{root}/train-*.parquet")
        assert len(remote.shards) == len(SIZES)
        assert_same(batches(remote, 9), batches(stream(parquets), 9))
    finally:
        if fs.exists(root[9:]):
            fs.rm(root[9:], recursive=True)


def test_fit_on_parquet_shards(parquets):
    gen = stream(parquets, dtype="float32", rescale=1 / 255, num_classes=3, workers=2)
    model = keras.Sequential([keras.Input((4, 4, 3)), keras.layers.Flatten(),
                              keras.layers.Dense(3)])
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    history = model.fit(gen, steps_per_epoch=5, epochs=2, verbose=0, shuffle=False)
    assert len(history.history["loss"]) == 2
    assert np.isfinite(history.history["loss"]).all()


def test_paths_and_arrays_as_x(tmp_path):
    ids = shard_ids(1)
    paths = []
    for i in ids:
        paths.append(str(tmp_path / f"{i}.png"))
        (tmp_path / f"{i}.png").write_bytes(png(i))
    pq.write_table(pa.table({"file": paths, "label": [i % 3 for i in ids]}),
                   str(tmp_path / "paths.parquet"), row_group_size=2)
    x, y = stream(str(tmp_path / "paths.parquet"), image_key="file", shuffle=False,
                  num_streams=1, batch_size=5)[0]
    assert ids_of(x) == ids and y.tolist() == [i % 3 for i in ids]
    vectors = pa.table({"image": [[float(i), 1.0, 2.0] for i in ids], "label": ids})
    feather.write_feather(vectors, str(tmp_path / "vectors.arrow"), chunksize=2)
    x, y = stream(str(tmp_path / "vectors.arrow"), "arrow", shuffle=False, num_streams=1,
                  batch_size=5, dtype="float32", image_size=None)[0]
    assert x.shape == (5, 3) and x[:, 0].tolist() == ids and y.tolist() == ids
