"""Records and rows that are not what they claim to be: TFRecord records that are not
tf.train.Example, WAL-mode SQLite files, integers float32 would round, BLOB labels and
query columns named twice. Each is an error naming the record, row or column, or read
right without a file created."""

import os
import shutil
import sqlite3

import numpy as np
import pytest

import kerasgen as kg


# ----- TFRecord records that are not tf.train.Example


@pytest.fixture
def tf():
    return pytest.importorskip("tensorflow")


def _label_example(tf, label):
    feature = {"label": tf.train.Feature(int64_list=tf.train.Int64List(value=[label])),
               "v": tf.train.Feature(float_list=tf.train.FloatList(value=[label]))}
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


@pytest.mark.parametrize("payload, why", [
    (b"hello", "does not parse as one"),
    (b"\x10\x01", "holds no `features`"),  # a valid message, of fields Example lacks
])
def test_a_record_that_is_not_an_example_is_named(tf, tmp_path, payload, why):
    path = str(tmp_path / "mixed.tfrecord")
    with tf.io.TFRecordWriter(path) as writer:
        writer.write(_label_example(tf, 0))
        writer.write(payload)
    offset = 12 + len(_label_example(tf, 0)) + 4
    with pytest.raises(ValueError, match=rf"^Record 1 \(byte {offset}\) of "
                                         rf".*mixed\.tfrecord is not a tf\.train\.Example "
                                         rf"\(it .*{why}.*; {len(payload)} bytes\)"):
        kg.TFRecordGenerator(path, {"v": "float", "label": "label"}, verbose=0)


def test_an_image_record_that_is_not_an_example_is_named(tf, tmp_path):
    path = str(tmp_path / "images.tfrecord")
    with tf.io.TFRecordWriter(path) as writer:
        writer.write(b"hello")
    with pytest.raises(ValueError, match=r"Record 0 \(byte 0\) of .*images\.tfrecord is "
                                         r"not a tf\.train\.Example"):
        kg.TFRecordGenerator(path, {"image": "image"}, verbose=0)


def test_a_later_image_record_that_is_not_an_example_is_named_when_read(tf, tmp_path):
    """Images only: record 0 is checked at construction, the others when read."""
    import cv2

    _, png = cv2.imencode(".png", np.zeros((4, 4, 3), np.uint8))
    image = tf.train.Feature(bytes_list=tf.train.BytesList(value=[png.tobytes()]))
    example = tf.train.Example(features=tf.train.Features(feature={"image": image}))
    path = str(tmp_path / "images.tfrecord")
    with tf.io.TFRecordWriter(path) as writer:
        writer.write(example.SerializeToString())
        writer.write(b"hello")
    gen = kg.TFRecordGenerator(path, {"image": "image"}, image_size=(4, 4), batch_size=2,
                               shuffle=False, verbose=0)
    with pytest.raises(ValueError, match=r"Record 1 \(byte \d+\) of .*images\.tfrecord "
                                         r"is not a tf\.train\.Example"):
        gen[0]


# ----- SQLite


def _listing(folder):
    return sorted(os.listdir(folder))


@pytest.fixture
def wal_db(tmp_path):
    folder = tmp_path / "db"
    folder.mkdir()
    path = folder / "data.db"
    db = sqlite3.connect(path)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("CREATE TABLE t (a INTEGER, b REAL, label TEXT)")
    db.executemany("INSERT INTO t VALUES (?, ?, ?)",
                   [(k, -k / 2, "cat" if k % 2 else "dog") for k in range(6)])
    db.commit()
    db.close()
    assert _listing(folder) == ["data.db"]
    return path


def test_a_wal_database_is_read_without_creating_files(wal_db):
    folder = wal_db.parent
    gen = kg.SQLFeatureGenerator(wal_db, "SELECT a, b, label FROM t ORDER BY a",
                                 x_col=["a", "b"], batch_size=6, shuffle=False)
    x, y = gen[0]
    assert _listing(folder) == ["data.db"]
    np.testing.assert_array_equal(x, [[k, -k / 2] for k in range(6)])
    assert gen.class_names == ["cat", "dog"] and y.tolist() == [1, 0, 1, 0, 1, 0]
    again = kg.SQLGenerator(wal_db, "SELECT a, b, label FROM t", x_col=["a", "b"])
    assert len(again.labels) == 6 and _listing(folder) == ["data.db"]
    (folder / "data.db-wal").touch()  # an empty log (kept by a writer) holds no pages
    empty_log = kg.SQLFeatureGenerator(wal_db, "SELECT a, label FROM t", x_col=["a"])
    assert len(empty_log) == 1 and _listing(folder) == ["data.db", "data.db-wal"]


def test_a_wal_database_with_a_live_writer_reads_its_log(wal_db):
    """Rows still in the -wal file (a writer holds it open) are read, not ignored."""
    writer = sqlite3.connect(wal_db)
    try:
        writer.execute("PRAGMA wal_autocheckpoint=0")
        writer.execute("INSERT INTO t VALUES (6, -3.0, 'cat')")
        writer.commit()
        before = _listing(wal_db.parent)
        assert before == ["data.db", "data.db-shm", "data.db-wal"]
        gen = kg.SQLFeatureGenerator(wal_db, "SELECT a, b, label FROM t ORDER BY a",
                                     x_col=["a", "b"], batch_size=7, shuffle=False)
        x, _ = gen[0]
        np.testing.assert_array_equal(x[:, 0], range(7))
        assert _listing(wal_db.parent) == before
    finally:
        writer.close()


def test_a_wal_log_without_its_index_is_refused(wal_db, tmp_path):
    writer = sqlite3.connect(wal_db)
    try:
        writer.execute("PRAGMA wal_autocheckpoint=0")
        writer.execute("INSERT INTO t VALUES (6, -3.0, 'cat')")
        writer.commit()
        crashed = tmp_path / "crashed"
        crashed.mkdir()
        shutil.copy(wal_db, crashed / "data.db")
        shutil.copy(f"{wal_db}-wal", crashed / "data.db-wal")
    finally:
        writer.close()
    with pytest.raises(ValueError, match=r"`db` is a WAL-mode SQLite database with a "
                                         r"write-ahead log .*data\.db-wal\) but no .*"
                                         r"data\.db-shm.*Received: db="):
        kg.SQLFeatureGenerator(crashed / "data.db", "SELECT a FROM t", x_col=["a"])
    assert _listing(crashed) == ["data.db", "data.db-wal"]


@pytest.fixture
def db(tmp_path):
    path = tmp_path / "data.db"
    with sqlite3.connect(path) as connection:
        connection.execute("CREATE TABLE t (filename TEXT, big INTEGER, small INTEGER, "
                           "label TEXT, blob BLOB)")
        connection.executemany("INSERT INTO t VALUES (?, ?, ?, ?, ?)", [
            ("a.png", 2 ** 40 + 1, 1, "cat", b"bl"),
            ("b.png", 2 ** 40 + 2, 2, "dog", b"ob"),
            ("c.png", -(2 ** 24), 3, "cat", b"bl"),
        ])
    connection.close()
    return path


def test_integers_float32_would_round_are_refused(db):
    with pytest.raises(ValueError, match=r"Feature column 'big' holds 1099511627777 at "
                                         r"row 1 of the query result: feature columns are "
                                         r"float32 .*2\*\*24.*dtype=None"):
        kg.SQLFeatureGenerator(db, "SELECT big, small, label FROM t", x_col=["small", "big"])
    with pytest.raises(ValueError, match=r"'small' holds 3001 at row 3 .*float16 .*2\*\*11"):
        kg.SQLFeatureGenerator(db, "SELECT small * 1000 + 1 AS small, label FROM t",
                               x_col=["small"], dtype="float16")
    edge = kg.SQLFeatureGenerator(db, "SELECT big, label FROM t WHERE big < 0",
                                  x_col=["big"], shuffle=False)  # -2**24 is exact
    assert edge[0][0].tolist() == [[-(2 ** 24)]]


def test_dtype_none_keeps_the_integers(db):
    gen = kg.SQLFeatureGenerator(db, "SELECT big, small, label FROM t ORDER BY rowid",
                                 x_col=["big", "small"], dtype=None, shuffle=False)
    x, _ = gen[0]
    assert x.dtype == np.int64
    assert x[:, 0].tolist() == [2 ** 40 + 1, 2 ** 40 + 2, -(2 ** 24)]
    mixed = kg.SQLFeatureGenerator(db, "SELECT big, small * 0.5 AS half, label FROM t "
                                   "ORDER BY rowid", x_col=["big", "half"], dtype=None,
                                   shuffle=False)
    x, _ = mixed[0]
    assert x.dtype == np.float64 and x[:, 0].tolist() == [2 ** 40 + 1, 2 ** 40 + 2, -(2 ** 24)]
    with pytest.raises(ValueError, match=r"'big' holds 9007199254740993 at row 1 .*"
                                         r"float64 .*2\*\*53"):
        kg.SQLFeatureGenerator(db, "SELECT 9007199254740993 AS big, 0.5 AS half, label "
                               "FROM t", x_col=["big", "half"], dtype=None)


def test_blob_labels_are_refused(db, tmp_path):
    with pytest.raises(ValueError, match=r"Label column 'label' must hold class names "
                                         r"\(TEXT\) or numbers, not bytes\. Received: the "
                                         r"BLOB b'bl' at row 1 of the query result"):
        kg.SQLFeatureGenerator(db, "SELECT small, blob AS label FROM t", x_col=["small"])
    with pytest.raises(ValueError, match=r"Label column 'label' .* BLOB b'bl' at row 1"):
        kg.SQLGenerator(db, "SELECT filename, blob AS label FROM t")
    text = kg.SQLFeatureGenerator(db, "SELECT small, CAST(blob AS TEXT) AS label FROM t",
                                  x_col=["small"])
    assert text.class_names == ["bl", "ob"]


@pytest.mark.parametrize("query, x_col", [
    ("SELECT filename, label, label FROM t", "filename"),
    ("SELECT small, label, small FROM t", ["small"]),
])
def test_a_query_naming_a_column_twice_is_refused(db, query, x_col):
    with pytest.raises(ValueError, match=r"The SQL query .* names column '(label|small)' "
                                         r"twice \(columns (2 and 3|1 and 3)\)"):
        kg.SQLGenerator(db, query, x_col=x_col)
