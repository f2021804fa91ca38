"""Shuffled reads of Parquet files whose row groups outgrow the cache: the columns a
TableGenerator reads copied once into a memory-mapped Arrow file (formats.table_copy),
the same batches as from the row groups, rows still named by the Parquet file."""

import json
import os

import cv2
import numpy as np
import pytest

import kerasgen as kg
from kerasgen._redact import KerasgenWarning
from kerasgen.formats import table_copy, table_rows

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

N = 60
CLASSES = ["ant", "bee", "cow"]


def hub_metadata():
    """The schema metadata `datasets` writes: Image and ClassLabel features."""
    features = {"image": {"_type": "Image"},
                "label": {"names": CLASSES, "_type": "ClassLabel"}}
    return {b"huggingface": json.dumps({"info": {"features": features}}).encode()}


def write_images(path, n=N, group=20, label_nulls=()):
    """A Parquet file as `datasets` writes one: an image struct column (PNG bytes whose
    pixels say their row), class ids, a numeric column, in groups of `group` rows."""
    images = [{"bytes": cv2.imencode(".png", np.full((6, 8, 3), k, np.uint8))[1].tobytes(),
               "path": None} for k in range(n)]
    labels = [None if k in label_nulls else k % 3 for k in range(n)]
    table = pa.table({"image": images, "label": pa.array(labels, pa.int64()),
                      "x": pa.array(np.arange(n, dtype="float32")),
                      "unread": pa.array([b"z" * 100] * n)})
    table = table.replace_schema_metadata(hub_metadata())
    pq.write_table(table, str(path), row_group_size=group)
    return str(path)


def batches(gen):
    return [gen[i] for i in range(len(gen))]


def make(path, **kwargs):
    return kg.TableGenerator(path, image_col="image", y_col="label", image_size=(6, 8),
                             batch_size=8, seed=5, verbose=0, **kwargs)


def test_shuffled_reads_of_groups_the_cache_cannot_hold_use_a_copy(tmp_path, monkeypatch):
    path = write_images(tmp_path / "t.parquet")
    reads = []
    real = pq.ParquetFile.read_row_group

    def read_row_group(self, i, columns=None, **kwargs):
        reads.append(i)
        return real(self, i, columns=columns, **kwargs)

    monkeypatch.setattr(pq.ParquetFile, "read_row_group", read_row_group)
    copied = make(path, max_cache_bytes=1)
    assert all(isinstance(f, table_copy.ArrowCopy) for f in copied.rows.files)
    assert sorted(reads) == [0, 1, 2]  # the copy read each group once
    reads.clear()
    got = batches(copied)
    assert reads == []  # the epoch read the copy alone
    grouped = make(path, max_cache_bytes=1, arrow_copy=False)
    assert all(isinstance(f, table_rows.ParquetFile) for f in grouped.rows.files)
    expected = batches(grouped)
    assert len(reads) > 3  # each batch read its groups again
    for (x, y), (x2, y2) in zip(got, expected):
        np.testing.assert_array_equal(x, x2)
        np.testing.assert_array_equal(y, y2)
    x, y = got[0]
    rows = x[:, 0, 0, 0].astype(int)  # the pixel value is the row
    np.testing.assert_array_equal(y, rows % 3)  # each image beside its own label
    assert copied.class_names == CLASSES  # datasets' ClassLabel names, from the copy
    assert copied.rows.where(59) == f"row 59 of {path}"
    assert copied.paths == [path]


def test_no_copy_where_it_is_not_needed(tmp_path):
    path = write_images(tmp_path / "t.parquet")
    for gen in (make(path), make(path, max_cache_bytes=1, shuffle=False)):
        # the cache holds every group; an ordered epoch reads each group once
        assert all(isinstance(f, table_rows.ParquetFile) for f in gen.rows.files)
    forced = make(path, arrow_copy=True)
    assert all(isinstance(f, table_copy.ArrowCopy) for f in forced.rows.files)
    columns = forced.rows.files[0].schema.names
    assert columns == ["image", "label"]  # the columns read, not "unread" or "x"


def test_the_copy_is_kept_in_remote_cache_and_found_again(tmp_path):
    path = write_images(tmp_path / "t.parquet")
    cache = tmp_path / "cache"
    first = make(path, arrow_copy=True, remote_cache=str(cache))
    copy = first.rows.files[0].path
    assert copy.startswith(str(cache)) and os.path.isfile(copy)
    made = os.stat(copy).st_mtime_ns
    again = make(path, arrow_copy=True, remote_cache=str(cache))
    assert again.rows.files[0].path == copy and os.stat(copy).st_mtime_ns == made
    table = pq.read_table(path)  # the file changes: a new copy, of the new rows
    pq.write_table(table.slice(0, 30).replace_schema_metadata(hub_metadata()), path,
                   row_group_size=10)
    changed = make(path, arrow_copy=True, remote_cache=str(cache))
    assert changed.rows.files[0].path != copy and changed.num_rows == 30


def test_a_null_in_a_copied_column_is_named_at_once(tmp_path):
    path = write_images(tmp_path / "t.parquet", label_nulls=(47,))
    with pytest.raises(ValueError, match=rf"label.*row 47 of {path}"):
        make(path, arrow_copy=True)


def test_arrow_copy_is_checked():
    with pytest.raises(TypeError, match="arrow_copy"):
        kg.TableGenerator(pa.table({"x": [1.0]}), x_col="x", arrow_copy="yes")


def test_a_model_trains_on_a_copy_with_x_columns_and_workers(tmp_path):
    import keras

    path = write_images(tmp_path / "t.parquet", group=30)
    gen = kg.TableGenerator(path, x_col="x", y_col="label", label_mode="categorical",
                            batch_size=10, seed=1, max_cache_bytes=1, workers=2)
    assert isinstance(gen.rows.files[0], table_copy.ArrowCopy)
    model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(3, "softmax")])
    model.compile("adam", "categorical_crossentropy")
    history = model.fit(gen, epochs=2, verbose=0)
    assert len(history.history["loss"]) == 2 and np.isfinite(history.history["loss"]).all()
    x, y = gen[0]
    assert x.shape == (10,) and y.shape == (10, 3)


def test_a_copy_held_needs_no_room_and_a_full_disk_reads_by_row_group(tmp_path,
                                                                      monkeypatch):
    path = write_images(tmp_path / "t.parquet")
    cache = str(tmp_path / "cache")
    first = make(path, arrow_copy=True, remote_cache=cache)
    usage = type("Usage", (), {"free": 1000})
    monkeypatch.setattr(table_copy.shutil, "disk_usage", lambda folder: usage)
    again = make(path, arrow_copy=True, remote_cache=cache)  # held: nothing to write
    assert again.rows.files[0].path == first.rows.files[0].path
    other = write_images(tmp_path / "other.parquet", n=30)
    with pytest.raises(OSError, match=r"needs .* MiB more, and .* free"):
        make(other, arrow_copy=True, remote_cache=cache)
    with pytest.warns(KerasgenWarning, match="Read by row group instead"):
        auto = make(other, max_cache_bytes=1, remote_cache=cache)
    assert isinstance(auto.rows.files[0], table_rows.ParquetFile)


def test_copies_larger_than_a_capped_remote_cache_are_not_made(tmp_path):
    path = write_images(tmp_path / "t.parquet")
    capped = kg.RemoteCache(str(tmp_path / "cache"), max_bytes=1000)
    with pytest.raises(OSError, match="more than the remote_cache's max_bytes"):
        make(path, arrow_copy=True, remote_cache=capped)
    with pytest.warns(KerasgenWarning, match="max_bytes"):
        gen = make(path, max_cache_bytes=1, remote_cache=capped)
    assert isinstance(gen.rows.files[0], table_rows.ParquetFile)


def test_dictionary_columns_and_comma_names_are_copied_apart(tmp_path):
    first = pa.table({"a,b": pa.array([1.0, 2.0]), "a": pa.array([3.0, 4.0]),
                      "b": pa.array([5.0, 6.0]),
                      "label": pa.array(["x", "y"]).dictionary_encode()})
    second = pa.table({"a,b": pa.array([7.0, 8.0]), "a": pa.array([9.0, 10.0]),
                       "b": pa.array([11.0, 12.0]),
                       "label": pa.array(["z", "x"]).dictionary_encode()})
    path = str(tmp_path / "dict.parquet")
    with pq.ParquetWriter(path, first.schema) as writer:  # a dictionary per row group
        writer.write_table(first)
        writer.write_table(second)
    joined = kg.TableGenerator(path, x_col="a,b", y_col="label", arrow_copy=True,
                               shuffle=False, batch_size=4, verbose=0)
    apart = kg.TableGenerator(path, x_col=["a", "b"], y_col="label", arrow_copy=True,
                              shuffle=False, batch_size=4, verbose=0)
    assert joined.rows.files[0].path != apart.rows.files[0].path
    x, y = joined[0]
    np.testing.assert_array_equal(x, [1.0, 2.0, 7.0, 8.0])
    assert joined.class_names == ["x", "y", "z"] and list(y) == [0, 1, 2, 0]
    np.testing.assert_array_equal(apart[0][0], [[3, 5], [4, 6], [9, 11], [10, 12]])


def test_an_automatic_copy_says_so(tmp_path, capsys):
    path = write_images(tmp_path / "t.parquet")
    kg.TableGenerator(path, image_col="image", y_col="label", image_size=(6, 8),
                      max_cache_bytes=1, seed=0)
    out = capsys.readouterr().out
    assert "to a memory-mapped Arrow file in a temporary folder" in out
    assert "arrow_copy=False" in out
