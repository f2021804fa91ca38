"""TableGenerator: Arrow tables, DataFrames, Arrow IPC and Parquet files as batches; a
Parquet file read by row group; labels, images, nulls, workers and fit."""

import pickle
import sys

import cv2
import numpy as np
import pytest

import kerasgen as kg
from kerasgen.formats import table_rows
from kerasgen.table import TableGenerator
from tests import servers

s3 = servers.s3  # a fresh bucket of the module's S3 server (moto's server mode)

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
feather = pytest.importorskip("pyarrow.feather")

N = 24
CLASSES = ["cat", "dog", "eel"]


def make_table(n=N):
    ids = np.arange(n)
    return pa.table({
        "id": pa.array(ids, pa.int64()),
        "a": pa.array(ids * 0.5, pa.float64()),
        "b": pa.array(ids % 7, pa.int32()),
        "vec": pa.array([[float(i), 2.0 * i, -1.0] for i in ids], pa.list_(pa.float32(), 3)),
        "seq": pa.array([[i, i + 1] for i in ids], pa.list_(pa.int64())),
        "label": pa.array([CLASSES[i % 3] for i in ids]),
        "target": pa.array(ids / 10.0, pa.float32()),
    })


@pytest.fixture
def table():
    return make_table()


@pytest.fixture
def inputs(tmp_path, table):
    """The same rows as every kind of input this slice reads."""
    one = str(tmp_path / "all.parquet")
    pq.write_table(table, one, row_group_size=5)
    parts = tmp_path / "parts"
    parts.mkdir()
    pq.write_table(table.slice(0, 10), str(parts / "p-0.parquet"), row_group_size=4)
    pq.write_table(table.slice(10), str(parts / "p-1.parquet"), row_group_size=6)
    ipc = str(tmp_path / "all.arrow")
    feather.write_feather(table, ipc, compression="uncompressed", chunksize=7)
    lz4 = str(tmp_path / "lz4.feather")
    feather.write_feather(table, lz4, chunksize=9)  # compressed (lz4) by default
    return {"table": table, "dataframe": table.to_pandas(), "ipc": ipc, "feather": lz4,
            "parquet": one, "parquet-list": [str(parts / "p-0.parquet"),
                                             str(parts / "p-1.parquet")],
            "parquet-glob": str(parts / "p-*.parquet")}


def batches(gen, epochs=2):
    out = []
    for _ in range(epochs):
        gen.on_epoch_end()
        out.append([gen[i] for i in range(len(gen))])
    return out


def assert_same(a, b):
    assert len(a) == len(b)
    for epoch_a, epoch_b in zip(a, b):
        assert len(epoch_a) == len(epoch_b)
        for batch_a, batch_b in zip(epoch_a, epoch_b):
            assert len(batch_a) == len(batch_b)
            for part_a, part_b in zip(batch_a, batch_b):
                if isinstance(part_a, dict):
                    assert part_a.keys() == part_b.keys()
                    for key in part_a:
                        np.testing.assert_array_equal(part_a[key], part_b[key])
                else:
                    np.testing.assert_array_equal(part_a, part_b)


FEATURES = dict(x_col=["a", "b", "vec"], y_col="label", batch_size=5, seed=3)


def test_every_input_gives_the_same_batches(inputs, table):
    reference = TableGenerator(inputs["table"], **FEATURES)
    expected = batches(reference)
    assert reference.class_names == CLASSES and len(reference) == 5
    x, y = reference[0]
    assert x.shape == (5, 5) and x.dtype == np.float32
    rows = np.rint(x[:, 0] * 2).astype(int)  # column a is id / 2
    np.testing.assert_array_equal(x[:, 1], rows % 7)
    np.testing.assert_array_equal(x[:, 2:], np.stack([rows, 2 * rows, -np.ones(5)], 1))
    np.testing.assert_array_equal(y, rows % 3)
    for name, given in inputs.items():
        gen = TableGenerator(given, **FEATURES)
        assert gen.num_rows == N, name
        assert_same(batches(gen), expected)
    described = TableGenerator(inputs["parquet-list"], **FEATURES).source.describe
    assert described(3).endswith("row 3 of " + inputs["parquet-list"][0])
    assert described(12).endswith("row 2 of " + inputs["parquet-list"][1])


def test_an_ipc_file_reads_only_the_record_batches_of_a_batch(inputs, monkeypatch):
    reads = []
    real = table_rows.IpcFile.read_group
    monkeypatch.setattr(table_rows.IpcFile, "read_group", lambda self, g, columns: (
        reads.append(g) or real(self, g, columns)))
    for name in ("ipc", "feather"):  # record batches of 7 rows; of 9, lz4-compressed
        gen = TableGenerator(inputs[name], x_col="a", shuffle=False, batch_size=4,
                             prefetch=0)
        reads.clear()
        gen[2]  # rows 8..11
        assert reads == ([1] if name == "ipc" else [0, 1])


def test_x_col_forms(table):
    one = TableGenerator(table, x_col="a", shuffle=False, batch_size=4)
    np.testing.assert_array_equal(one[1], np.arange(4, 8) * 0.5)  # no labels: x alone
    lists = TableGenerator(table, x_col="seq", shuffle=False, batch_size=4, dtype=None)
    np.testing.assert_array_equal(lists[0], [[0, 1], [1, 2], [2, 3], [3, 4]])
    multi = TableGenerator(table, x_col={"left": "a", "right": ["b", "vec"]}, y_col="label",
                           shuffle=False, batch_size=4, label_mode="categorical")
    x, y = multi[0]
    assert set(x) == {"left", "right"} and x["left"].shape == (4, 1)
    assert x["right"].shape == (4, 4) and y.shape == (4, 3)
    with pytest.raises(TypeError, match=r"`x_col` must name numeric columns.*'label'"):
        TableGenerator(table, x_col=["a", "label"])
    with pytest.raises(ValueError, match=r"`x_col` must name a column of the table\. "
                                         r"Received: x_col='nope'"):
        TableGenerator(table, x_col=["nope"])
    with pytest.raises(ValueError, match=r"`image_col` must name a column of the table\. "
                                         r"Received: image_col='image'"):
        TableGenerator(table, x_col="a", image_col="image")  # both: see test_an_image_*
    ragged = pa.table({"s": pa.array([[1.0], [1.0, 2.0]])})
    with pytest.raises(ValueError, match=r"one length \(1.*list of 2 at row 1 of the table"):
        TableGenerator(ragged, x_col="s", shuffle=False, batch_size=2)[0]


def test_parquet_reads_only_the_row_groups_of_a_batch(tmp_path, table, monkeypatch):
    path = str(tmp_path / "t.parquet")
    pq.write_table(table, path, row_group_size=5)  # groups of rows 0-4, 5-9, ...
    reads, whole = [], []
    real_group, real_read = pq.ParquetFile.read_row_group, pq.ParquetFile.read

    def read_row_group(self, i, columns=None, **kwargs):
        reads.append((i, tuple(columns)))
        return real_group(self, i, columns=columns, **kwargs)

    def read(self, columns=None, **kwargs):
        whole.append(tuple(columns or ()))
        return real_read(self, columns=columns, **kwargs)

    monkeypatch.setattr(pq.ParquetFile, "read_row_group", read_row_group)
    monkeypatch.setattr(pq.ParquetFile, "read", read)
    gen = TableGenerator(path, x_col=["a", "b"], y_col="label", shuffle=False,
                         batch_size=4, max_cache_bytes=1, prefetch=0)
    assert whole == [("label",)] and reads == []  # the labels' column, nothing else
    gen[1]  # rows 4..7: groups 0 and 1
    assert reads == [(0, ("a", "b")), (1, ("a", "b"))]
    reads.clear()
    gen[2]  # rows 8..11: groups 1 (kept: the cache holds the last group) and 2
    assert reads == [(2, ("a", "b"))]
    reads.clear()
    gen[1]  # group 0 was dropped, then group 1
    assert reads == [(0, ("a", "b")), (1, ("a", "b"))]
    cached = TableGenerator(path, x_col=["a", "b"], y_col="label", shuffle=False,
                            batch_size=4)
    reads.clear()
    for i in range(len(cached)):
        cached[i]
    assert sorted(reads) == [(g, ("a", "b")) for g in range(5)]  # each group once
    assert whole[-1] == ("label",)


def test_row_groups_read_concurrently_stay_right(tmp_path, table):
    import concurrent.futures

    path = str(tmp_path / "t.parquet")
    pq.write_table(table, path, row_group_size=3)
    rows = table_rows.open_rows(path, max_cache_bytes=2000)
    order = np.random.default_rng(0).permutation(N)
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        taken = list(pool.map(lambda k: rows.take(order[k:k + 5], ["id"]),
                              range(0, N, 2)))
    for k, part in zip(range(0, N, 2), taken):
        assert part.column("id").to_pylist() == order[k:k + 5].tolist()


def test_shuffled_epochs_are_seeded(table):
    def order(seed):
        gen = TableGenerator(table, x_col="id", seed=seed, batch_size=N, dtype=None)
        return [gen.at_epoch(e)[0].tolist() for e in range(2)]

    first, again = order(7), order(7)
    assert first == again and first[0] != first[1]
    assert sorted(first[0]) == list(range(N)) and first[0] != list(range(N))
    assert order(8) != first


def test_labels_through_the_label_modes(table):
    def y(**kwargs):
        gen = TableGenerator(table, x_col="a", shuffle=False, batch_size=N, **kwargs)
        return gen, gen[0][1]

    gen, ids = y(y_col="label")  # "auto": "int" for a string column
    assert gen.label_mode == "int" and gen.class_names == CLASSES
    np.testing.assert_array_equal(ids, np.arange(N) % 3)
    assert gen.labels.tolist() == (np.arange(N) % 3).tolist()
    _, onehot = y(y_col="label", label_mode="categorical")
    np.testing.assert_array_equal(onehot, np.eye(3)[np.arange(N) % 3])
    gen, named = y(y_col="label", class_names=["eel", "dog", "cat"])
    np.testing.assert_array_equal(named, 2 - np.arange(N) % 3)
    gen, raw = y(y_col="target")  # "auto": "raw" for floats
    assert gen.label_mode == "raw"
    np.testing.assert_allclose(raw, np.arange(N) / 10.0, rtol=1e-6)
    _, vectors = y(y_col="vec", label_mode="raw")
    assert vectors.shape == (N, 3)
    binary = table.append_column("flag", pa.array(np.arange(N) % 2 == 1))
    gen = TableGenerator(binary, x_col="a", y_col="flag", label_mode="binary",
                         shuffle=False, batch_size=N)
    np.testing.assert_array_equal(gen[0][1].ravel(), np.arange(N) % 2)
    _, ints = y(y_col="b", label_mode="int")
    np.testing.assert_array_equal(ints, np.arange(N) % 7)
    with pytest.raises(ValueError, match=r"Column 'target' must hold class ids.*'raw'"):
        y(y_col="target", label_mode="int")
    with pytest.raises(ValueError, match=r"needs the label column"):
        y(label_mode="int")
    with pytest.raises(ValueError, match=r"`label_mode` must be one of"):
        y(y_col="label", label_mode="mask")
    with pytest.raises(TypeError, match=r"takes its labels from the `y_col` column"):
        TableGenerator(table, x_col="a", labels=[0] * N)


def png_and_jpeg_images(rng, n):
    encoded = []
    for k in range(n):
        image = rng.integers(0, 256, (10 + k % 3, 12, 3), dtype=np.uint8)
        ext = ".png" if k % 2 else ".jpg"
        encoded.append((ext, cv2.imencode(ext, image)[1].tobytes()))
    return encoded


@pytest.fixture
def image_rows(tmp_path):
    """Images in class folders, and the same bytes in a table in the folder's order."""
    rng = np.random.default_rng(0)
    folder = tmp_path / "images"
    rows = []
    for c, name in enumerate(["ant", "bee"]):
        (folder / name).mkdir(parents=True)
        for k, (ext, data) in enumerate(png_and_jpeg_images(rng, 5)):
            path = folder / name / f"{k:02d}{ext}"
            path.write_bytes(data)
            rows.append({"image": data, "label": name, "path": str(path)})
    return folder, rows


def test_image_bytes_decode_as_the_image_folder_does(image_rows, tmp_path):
    import kerasgen as kg

    folder, rows = image_rows
    common = dict(image_size=(8, 9), batch_size=4, shuffle=False, verbose=0)
    expected = kg.ImageFolderGenerator(str(folder), **common, cache=None)
    images = pa.table({"image": pa.array([r["image"] for r in rows], pa.binary()),
                       "label": [r["label"] for r in rows]})
    hf = pa.table({"image": pa.array([{"bytes": r["image"] if k % 2 else None,
                                       "path": r["path"]} for k, r in enumerate(rows)],
                                     pa.struct([("bytes", pa.binary()),
                                                ("path", pa.string())])),
                   "label": [r["label"] for r in rows]})
    path = str(tmp_path / "images.parquet")
    pq.write_table(images, path, row_group_size=3)
    for given in (images, hf, path):
        gen = TableGenerator(given, image_col="image", y_col="label", **common)
        assert gen.class_names == ["ant", "bee"] and len(gen) == len(expected)
        for i in range(len(gen)):
            (x, y), (x0, y0) = gen[i], expected[i]
            np.testing.assert_array_equal(x, x0)
            np.testing.assert_array_equal(y, y0)
    gray = TableGenerator(path, image_col="image", y_col="label", color_mode="grayscale",
                          image_size=(5, 5), dtype="uint8", shuffle=False, verbose=0)
    assert gray[0][0].shape == (10, 5, 5, 1) and gray[0][0].dtype == np.uint8
    assert gray.image_options.color_mode == "grayscale"
    with pytest.raises(TypeError, match=r"`image_col` must name a column of encoded "
                                        r"images.*'n'"):
        TableGenerator(pa.table({"n": [1, 2]}), image_col="n")


def test_a_bad_image_row_is_named(tmp_path):
    good = cv2.imencode(".png", np.zeros((4, 4, 3), np.uint8))[1].tobytes()
    table = pa.table({"image": [good, b"not an image", good], "label": [0, 1, 1]})
    path = str(tmp_path / "bad.parquet")
    pq.write_table(table, path)
    gen = TableGenerator(path, image_col="image", y_col="label", image_size=(4, 4),
                         shuffle=False, batch_size=3, verbose=0)
    with pytest.raises(Exception, match=r"row 1 of .*bad\.parquet"):
        gen[0]


def test_nulls_are_refused_naming_column_and_row(tmp_path, table):
    holes = pa.table({"a": [1.0, 2.0, None, 4.0], "label": ["x", "y", "x", "y"],
                      "image": [b"1", b"2", b"3", None], "y": ["x", None, "x", "y"]})
    with pytest.raises(ValueError, match=r"Column 'a' holds a null .* at row 2 of the "
                                         r"table"):
        TableGenerator(holes, x_col="a", y_col="label")
    with pytest.raises(ValueError, match=r"Column 'y' holds a null .* at row 1 of the "
                                         r"DataFrame"):
        TableGenerator(holes.to_pandas(), x_col="a", y_col="y")
    path = str(tmp_path / "holes.parquet")
    pq.write_table(holes, path, row_group_size=2)
    with pytest.raises(ValueError, match=r"Column 'image' holds a null .* at row 3 of "
                                         r".*holes\.parquet"):
        TableGenerator(path, image_col="image", y_col="label")
    ipc = str(tmp_path / "holes.arrow")  # no statistics: found when the batch is read
    feather.write_feather(holes, ipc, compression="uncompressed")
    gen = TableGenerator(ipc, x_col="a", shuffle=False, batch_size=2)
    gen[0]
    with pytest.raises(ValueError, match=r"Column 'a' holds a null .* at row 2 of "
                                         r".*holes\.arrow"):
        gen[1]
    inner = pa.table({"v": pa.array([[1.0, 2.0], [3.0, None]])})
    with pytest.raises(ValueError, match=r"Column 'v' holds a null .* at row 1"):
        TableGenerator(inner, x_col="v", shuffle=False, batch_size=2)[0]


def test_files_and_inputs_refused(tmp_path, table):
    with pytest.raises(FileNotFoundError, match=r"No file matches the pattern"):
        TableGenerator(str(tmp_path / "none-*.parquet"), x_col="a")
    with pytest.raises(FileNotFoundError, match=r"No such table file"):
        TableGenerator(str(tmp_path / "none.parquet"), x_col="a")
    text = tmp_path / "t.csv"
    text.write_text("a\n1\n")
    with pytest.raises(ValueError, match=r"neither a Parquet file nor an Arrow IPC"):
        TableGenerator(str(text), x_col="a")
    with pytest.raises(TypeError, match=r"`table` must be"):
        TableGenerator([1, 2], x_col="a")
    other = tmp_path / "other.parquet"
    pq.write_table(table.select(["a"]), str(other))
    first = tmp_path / "first.parquet"
    pq.write_table(table, str(first))
    with pytest.raises(ValueError, match=r"same columns and types"):
        TableGenerator([str(first), str(other)], x_col="a")
    with pytest.raises(ValueError, match=r"`cache` must be 'auto', 'memory' or None"):
        TableGenerator(pa.table({"i": [b"x"]}), image_col="i", cache=str(tmp_path / "c"))


def test_missing_pyarrow_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    with pytest.raises(ImportError, match=r'pip install "kerasgen3\[tables\]"'):
        table_rows.pyarrow_module()


def test_readers_pickle_without_open_files(inputs):
    for name in ("parquet", "ipc"):
        rows = table_rows.open_rows(inputs[name])
        rows.take([3, 20], ["id"])  # opened, a group cached
        copy = pickle.loads(pickle.dumps(rows))
        assert all(file._handle is None for file in copy.files)
        assert not copy.cache._groups
        assert copy.take([20, 3], ["id"]).column("id").to_pylist() == [20, 3]


@pytest.mark.parametrize("given", ["parquet", "ipc"])
def test_worker_threads_and_processes_give_the_same_batches(inputs, image_rows, tmp_path,
                                                            given, monkeypatch):
    sent = []  # readers pickled for the worker processes (without files and cache)
    state = table_rows.TableFile.__getstate__
    monkeypatch.setattr(table_rows.TableFile, "__getstate__",
                        lambda self: sent.append(self.path) or state(self))
    _, rows = image_rows
    images = pa.table({"image": pa.array([r["image"] for r in rows], pa.binary()),
                       "label": [r["label"] for r in rows]})
    path = str(tmp_path / "images.parquet")
    pq.write_table(images, path, row_group_size=3)
    both = pa.table({"image": pa.array([r["image"] for r in rows], pa.binary()),
                     "id": np.arange(len(rows)), "label": [r["label"] for r in rows]})
    both_path = str(tmp_path / "both.parquet")  # an image column beside an x column
    pq.write_table(both, both_path, row_group_size=4)
    for table, kwargs in ((inputs[given], FEATURES),
                          (path, dict(image_col="image", y_col="label", image_size=(6, 6),
                                      batch_size=3, seed=1, verbose=0)),
                          (both_path, dict(image_col="image", x_col={"meta": "id"},
                                           y_col="label", image_size=(6, 6), batch_size=3,
                                           seed=1, verbose=0))):
        one = batches(TableGenerator(table, **kwargs), epochs=1)
        for workers in (dict(workers=2), dict(workers=2, use_multiprocessing=True)):
            assert_same(batches(TableGenerator(table, **kwargs, **workers), epochs=1), one)
    assert path in sent and any(name != path for name in sent)


def test_a_model_trains_on_a_parquet_table_of_images(image_rows, tmp_path):
    import keras

    _, rows = image_rows
    images = pa.table({"image": pa.array([r["image"] for r in rows], pa.binary()),
                       "label": [r["label"] for r in rows]})
    path = str(tmp_path / "images.parquet")
    pq.write_table(images, path, row_group_size=4)
    gen = TableGenerator(path, image_col="image", y_col="label", image_size=(8, 8),
                         batch_size=4, seed=0, rescale=1 / 255, verbose=0)
    model = keras.Sequential([keras.Input((8, 8, 3)), keras.layers.Flatten(),
                              keras.layers.Dense(2)])
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    history = model.fit(gen, epochs=2, verbose=0)
    assert len(history.history["loss"]) == 2
    assert np.isfinite(history.history["loss"]).all()


def test_samplers_and_resume_work_on_tables(inputs):
    import kerasgen as kg

    gen = TableGenerator(inputs["parquet"], x_col="id", y_col="b", label_mode="int",
                         batch_size=4, seed=5, dtype=None,
                         sampler=kg.samplers.RandomUnderSampler(seed=5))
    gen.on_epoch_end()
    seen = np.concatenate([gen[i][0] for i in range(len(gen))])
    assert np.bincount(seen % 7).tolist() == [3] * 7  # 3 rows of each of 7 classes
    gen.on_epoch_end()
    first = gen[0]
    state = gen.get_state()
    rest = [gen[i] for i in range(1, len(gen))]
    again = TableGenerator(inputs["parquet"], x_col="id", y_col="b", label_mode="int",
                           batch_size=4, seed=5, dtype=None,
                           sampler=kg.samplers.RandomUnderSampler(seed=5))
    again.set_state(state)
    assert len(first[0]) == 4
    assert_same([[again[i] for i in range(1, len(again))]], [rest])


def test_review_mends(inputs, table, tmp_path):
    """SMOTE searches the x columns (read when asked) of a Parquet table; a cell holding
    the label delimiter under a single-label mode is refused; lists of class names are
    multi-label by default; a file named twice, a negative cache size and a table that is
    neither a table nor paths are refused; an image path that cannot be read is named
    with its row."""
    gen = TableGenerator(inputs["parquet-list"], x_col=["a", "b"], y_col="label",
                         seed=1, sampler=kg.samplers.SMOTE(k_neighbors=2, seed=1))
    xs, ys = zip(*(gen[i] for i in range(len(gen))))
    counts = np.bincount(np.concatenate(ys))
    assert len(set(counts.tolist())) == 1 and np.concatenate(xs).shape[1] == 2
    assert len(pickle.dumps(gen)) < 200_000  # the reader, never every row's features
    piped = pa.table({"x": pa.array([1.0, 2.0, 3.0]), "y": pa.array(["a", "a|b", "b"])})
    with pytest.raises(ValueError, match=r"\|"):
        TableGenerator(piped, x_col="x", y_col="y", label_mode="int")
    tags = pa.table({"x": pa.array([1.0, 2.0]), "y": pa.array([["a", "b"], ["b"]])})
    assert TableGenerator(tags, x_col="x", y_col="y").label_mode == "multi_label"
    with pytest.raises(ValueError, match=r"names the file .* twice"):
        TableGenerator([inputs["parquet"], inputs["parquet"]], x_col="a")
    with pytest.raises(ValueError, match=r"`max_cache_bytes` must be"):
        TableGenerator(table, x_col="a", max_cache_bytes=-5)
    with pytest.raises(TypeError, match=r"`table` must be a pyarrow Table"):
        TableGenerator(iter([inputs["parquet"]]), x_col="a")
    paths = pa.table({"image": pa.array(["nowhere/0.png"]), "y": pa.array([0])})
    missing = TableGenerator(paths, image_col="image", y_col="y", image_size=(8, 8),
                             verbose=0)
    with pytest.raises(FileNotFoundError, match=r"nowhere/0.png.*column 'image' at row 0"):
        missing[0]


def test_an_image_column_reads_each_row_group_once_per_batch(image_rows, tmp_path,
                                                              monkeypatch):
    """A batch's image cells are read in one take: with a cache of one group (and no
    Arrow copy: tests/test_table_copy.py), a shuffled epoch reads each batch's row
    groups once per batch, not once per row, and the pixels are those of the rows asked
    for."""
    _, rows = image_rows
    path = str(tmp_path / "images.parquet")
    pq.write_table(pa.table({"image": [r["image"] for r in rows],
                             "label": [r["label"] for r in rows]}), path, row_group_size=3)
    reads = []
    real_group = pq.ParquetFile.read_row_group

    def read_row_group(self, i, columns=None, **kwargs):
        reads.append(i)
        return real_group(self, i, columns=columns, **kwargs)

    monkeypatch.setattr(pq.ParquetFile, "read_row_group", read_row_group)
    make = lambda **kw: TableGenerator(path, image_col="image", y_col="label",  # noqa: E731
                                       image_size=(8, 8), batch_size=4, seed=2,
                                       verbose=0, **kw)
    gen = make(max_cache_bytes=1, prefetch=0, arrow_copy=False)  # by row group
    expected = sum(len({int(k) // 3 for k in gen.epoch_plan()[b * 4:b * 4 + 4]})
                   for b in range(len(gen)))
    reads.clear()
    batches = [gen[b] for b in range(len(gen))]
    assert len(reads) == expected  # per batch, each of its groups once
    plain = make()
    for (x, y), (px, py) in zip(batches, (plain[b] for b in range(len(plain)))):
        np.testing.assert_array_equal(x, px)
        np.testing.assert_array_equal(y, py)


def test_a_parquet_table_of_images_on_the_s3_server_trains(s3, image_rows, tmp_path):
    """Parquet files of image bytes + labels on the S3 test server (moto's server mode):
    a glob of s3:// objects gives the local files' batches, named by their URLs, and
    trains through fit."""
    import keras

    _, rows = image_rows
    table = pa.table({"image": [r["image"] for r in rows],
                      "label": [r["label"] for r in rows]})
    for part, (start, stop) in enumerate([(0, 6), (6, 10)]):
        local = tmp_path / f"part-{part}.parquet"
        pq.write_table(table.slice(start, stop - start), str(local), row_group_size=3)
        s3.put(f"tables/part-{part}.parquet", local.read_bytes())
    common = dict(image_col="image", y_col="label", image_size=(8, 8), batch_size=4,
                  seed=3, verbose=0)
    remote = TableGenerator(f"{s3.url}/tables/part-*.parquet",
                            storage_options=s3.storage_options, **common)
    local = TableGenerator(str(tmp_path / "part-*.parquet"), **common)
    assert_same(batches(remote), batches(local))
    assert remote.paths == [f"{s3.url}/tables/part-0.parquet",
                            f"{s3.url}/tables/part-1.parquet"]
    assert remote.source.describe(7) == f"row 1 of {s3.url}/tables/part-1.parquet"
    model = keras.Sequential([keras.Input((8, 8, 3)), keras.layers.Flatten(),
                              keras.layers.Dense(2)])
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    assert np.isfinite(model.fit(remote, epochs=1, verbose=0).history["loss"]).all()


def test_a_hugging_face_dataset_with_an_image_column_trains(image_rows, tmp_path):
    """A Hugging Face `datasets.Dataset` saved to disk and loaded back (memory-mapped
    Arrow), shuffled by `datasets` (a row mapping), with an `Image` column and a
    `ClassLabel`: its rows in the dataset's order, its class names, pickled by path, and
    trained through fit."""
    datasets = pytest.importorskip("datasets")
    import keras

    _, rows = image_rows
    features = datasets.Features({"image": datasets.Image(),
                                  "label": datasets.ClassLabel(names=["ant", "bee"])})
    saved = datasets.Dataset.from_dict(
        {"image": [{"bytes": r["image"], "path": None} for r in rows],
         "label": [["ant", "bee"].index(r["label"]) for r in rows]}, features=features)
    saved.save_to_disk(str(tmp_path / "ds"))
    ds = datasets.load_from_disk(str(tmp_path / "ds")).shuffle(seed=4)
    order = [int(i) for i in ds._indices.column(0).to_pylist()]
    gen = TableGenerator(ds, image_col="image", y_col="label", image_size=(8, 8),
                         batch_size=4, shuffle=False, verbose=0)
    assert gen.class_names == ["ant", "bee"]
    plain = TableGenerator(pa.table({"image": [rows[i]["image"] for i in order],
                                     "label": [rows[i]["label"] for i in order]}),
                           image_col="image", y_col="label", image_size=(8, 8),
                           batch_size=4, shuffle=False, verbose=0)
    assert_same(batches(gen, 1), batches(plain, 1))
    assert len(pickle.dumps(gen.rows)) < 10_000  # the files' paths, not the images
    model = keras.Sequential([keras.Input((8, 8, 3)), keras.layers.Flatten(),
                              keras.layers.Dense(2)])
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    assert np.isfinite(model.fit(gen, epochs=1, verbose=0).history["loss"]).all()


# ---------------------------------------------------------- an image column beside x columns
def id_rows(n=18, bad=(), labels=None):
    """Rows whose image is one grey level, its row id (PNG: lossless), beside columns of
    the id; `bad` rows hold bytes that are no image."""
    encoded = [b"not an image" if i in bad else
               cv2.imencode(".png", np.full((5, 7, 3), i, np.uint8))[1].tobytes()
               for i in range(n)]
    labels = [CLASSES[i % 3] for i in range(n)] if labels is None else labels
    return pa.table({"image": pa.array(encoded, pa.binary()),
                     "id": pa.array(np.arange(n), pa.int64()),
                     "half": pa.array(np.arange(n) * 0.5, pa.float64()),
                     "vec": pa.array([[float(i), -1.0] for i in range(n)],
                                     pa.list_(pa.float32(), 2)),
                     "label": labels})


def assert_aligned(x, y=None, class_of=None):
    """The image of each row is its id's grey level, as the features say."""
    ids = x["id"].reshape(len(x["id"]), -1)[:, 0]
    np.testing.assert_array_equal(x["image"][:, 0, 0, 0], ids)
    assert (x["image"] == x["image"][:, :1, :1, :1]).all()
    if y is not None and class_of is not None:
        np.testing.assert_array_equal(y, class_of(ids.astype(int)))


@pytest.mark.parametrize("shuffle", [dict(shuffle=False), dict(seed=3)])
def test_an_image_column_beside_x_columns_gives_both_parts_of_each_row(tmp_path, shuffle):
    table = id_rows()
    path = str(tmp_path / "rows.parquet")
    pq.write_table(table, path, row_group_size=5)
    common = dict(y_col="label", batch_size=4, **shuffle)
    image = dict(image_col="image", image_size=(4, 6), verbose=0)
    images = batches(TableGenerator(path, **image, **common))
    for x_col in ({"id": "id", "meta": ["half", "vec"]}, "id"):
        both = TableGenerator(path, x_col=x_col, **image, **common)
        features = batches(TableGenerator(path, x_col=x_col, **common))
        assert both.class_names == CLASSES and len(both) == 5
        for e, epoch in enumerate(batches(both)):
            for b, (x, y) in enumerate(epoch):
                names = ["image"] + (list(x_col) if isinstance(x_col, dict) else [x_col])
                assert list(x) == names and x["image"].shape[1:] == (4, 6, 3)
                np.testing.assert_array_equal(x["image"], images[e][b][0])
                np.testing.assert_array_equal(y, images[e][b][1])
                np.testing.assert_array_equal(y, features[e][b][1])
                rest = features[e][b][0]
                for name in names[1:]:
                    np.testing.assert_array_equal(
                        x[name], rest[name] if isinstance(rest, dict) else rest)
                assert_aligned(x, y, lambda ids: ids % 3)
    x, _ = TableGenerator(table, x_col="id", image_col="image", image_size=(4, 6),
                          y_col="label", shuffle=False, verbose=0)[0]
    assert x["id"].shape == (18,) and x["image"].dtype == np.float32


def test_samplers_keep_image_and_features_of_one_row(tmp_path):
    labels = ["cat"] * 14 + ["dog"] * 4  # dog rows are repeated, or synthesised
    table = id_rows(labels=labels)
    common = dict(image_col="image", x_col={"id": "id", "meta": ["half", "vec"]},
                  y_col="label", image_size=(3, 3), batch_size=7, seed=2, verbose=0)
    over = TableGenerator(table, **common, sampler=kg.samplers.RandomOverSampler(seed=2))
    seen = []
    for x, y in batches(over, epochs=2)[1]:
        assert_aligned(x, y, lambda ids: (ids >= 14).astype(int))
        np.testing.assert_array_equal(x["meta"][:, 1], x["id"][:, 0])  # vec's first: id
        seen.extend(x["id"][:, 0].tolist())
    assert len(seen) == 28 and sum(i >= 14 for i in seen) == 14  # 4 dogs made 14
    smote = TableGenerator(table, **common, sampler=kg.samplers.SMOTE(k_neighbors=2,
                                                                      seed=2))
    blended = 0
    for x, y in batches(smote, epochs=1)[0]:
        ids = x["id"][:, 0]
        # both parts blended with one partner and weight (the image in whole grey levels)
        assert np.abs(x["image"][:, 0, 0, 0] - ids).max() <= 0.5 + 1e-4
        np.testing.assert_allclose(x["meta"][:, 0], ids / 2, atol=1e-5)
        blended += int(np.sum(ids != np.round(ids)))
        np.testing.assert_array_equal(y[ids > 13], 1)
    assert blended > 0


def test_a_skipped_bad_image_takes_its_stand_ins_features_too(tmp_path):
    table = id_rows(bad=(4, 11))
    path = str(tmp_path / "rows.parquet")
    pq.write_table(table, path, row_group_size=6)
    gen = TableGenerator(path, image_col="image", x_col={"id": "id", "meta": "vec"},
                         y_col="label", image_size=(3, 3), batch_size=6, seed=0,
                         on_error="skip", verbose=0)
    with pytest.warns(UserWarning, match=r"row (4|11) of .*rows\.parquet"):
        epoch = batches(gen, epochs=1)[0]
    ids = []
    for x, y in epoch:
        assert_aligned(x, y, lambda ids: ids % 3)  # a stand-in of the bad row's class
        np.testing.assert_array_equal(x["meta"][:, 0], x["id"][:, 0])
        ids.extend(x["id"][:, 0].tolist())
    assert 4 not in ids and 11 not in ids and len(ids) == 18
    assert sorted(gen.skipped) == sorted(f"row {k} of {path}" for k in (4, 11))
    raw = id_rows(bad=(4,)).set_column(4, "label", pa.array(np.arange(18) / 10.0))
    with pytest.raises(ValueError, match=r"on_error='skip' replaces a bad image"):
        TableGenerator(raw, image_col="image", x_col="id", y_col="label",
                       on_error="skip", verbose=0)


def test_image_and_x_columns_through_threads_state_cache_and_augment(tmp_path):
    path = str(tmp_path / "rows.parquet")
    pq.write_table(id_rows(), path, row_group_size=4)
    common = dict(image_col="image", x_col={"id": "id", "meta": ["half", "vec"]},
                  y_col="label", image_size=(3, 3), batch_size=5, seed=4, verbose=0)
    one = batches(TableGenerator(path, **common), epochs=1)  # processes: the test above
    for options in (dict(workers=2), dict(cache="memory")):
        assert_same(batches(TableGenerator(path, **common, **options), epochs=1), one)
    gen = TableGenerator(path, **common)
    gen.on_epoch_end()
    gen[0]
    state, rest = gen.get_state(), [gen[i] for i in range(1, len(gen))]
    again = TableGenerator(path, **common)
    again.set_state(state)
    assert_same([[again[i] for i in range(1, len(again))]], [rest])

    def invert(image, rng):  # the image alone is augmented
        return 255 - image

    x, _ = TableGenerator(path, **common, augment=invert, rescale=1 / 255,
                          shuffle=False)[0]
    np.testing.assert_allclose(x["image"][:, 0, 0, 0], (255 - x["id"][:, 0]) / 255, atol=1e-6)
    np.testing.assert_array_equal(x["meta"][:, 0], x["id"][:, 0] / 2)  # not rescaled


def test_image_and_x_columns_refused_naming_both():
    table = id_rows(n=4)
    with pytest.raises(ValueError, match=r"`x_col` must be one column .* or a dict.*"
                                         r"x_col=\['id', 'half'\], image_col='image'.*"
                                         r"x_col=\{'meta': \['id', 'half'\]\}"):
        TableGenerator(table, image_col="image", x_col=["id", "half"])
    for x_col in ("image", {"image": "id", "meta": "half"}):
        with pytest.raises(ValueError, match=r"image input is named after `image_col` "
                                             r"\('image'\), so `x_col` cannot name"):
            TableGenerator(table, image_col="image", x_col=x_col)
    with pytest.raises(ValueError, match=r"pass one of them or both. Received: "
                                         r"x_col=None, image_col=None"):
        TableGenerator(table, y_col="label")
    with pytest.raises(TypeError, match=r"`x_col` must name numeric columns.*'label'"):
        TableGenerator(table, image_col="image", x_col={"meta": "label"})


def test_a_two_input_model_trains_on_images_and_features(tmp_path):
    import keras

    path = str(tmp_path / "rows.parquet")
    pq.write_table(id_rows(), path, row_group_size=5)
    gen = TableGenerator(path, image_col="image", x_col={"meta": ["half", "vec"]},
                         y_col="label", image_size=(8, 8), batch_size=6, seed=0,
                         rescale=1 / 255, verbose=0)
    image, meta = keras.Input((8, 8, 3), name="image"), keras.Input((3,), name="meta")
    joined = keras.layers.Concatenate()([keras.layers.Flatten()(image), meta])
    model = keras.Model({"image": image, "meta": meta}, keras.layers.Dense(3)(joined))
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    history = model.fit(gen, epochs=2, verbose=0)
    assert len(history.history["loss"]) == 2
    assert np.isfinite(history.history["loss"]).all()
    in_order = TableGenerator(path, image_col="image", x_col={"meta": ["half", "vec"]},
                              image_size=(8, 8), batch_size=6, shuffle=False,
                              rescale=1 / 255, verbose=0)  # unlabeled: x alone
    assert set(in_order[0]) == {"image", "meta"}
    assert model.predict(in_order, verbose=0).shape == (18, 3)
