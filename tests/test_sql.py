"""SQLGenerator: rows of an SQLite query; one read-only SELECT that cannot touch the disk."""

import os
import sqlite3

import numpy as np
import pytest

import kerasgen as kg


@pytest.fixture
def database(tmp_path, image_folder):
    path = tmp_path / "data.db"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE samples (path TEXT, label TEXT, a REAL, b REAL)")
        rows = []
        for name in ("cat", "dog", "fox"):
            for p in sorted((image_folder / name).rglob("*.png")):
                rows.append((str(p), name, len(rows) * 1.0, -len(rows) * 1.0))
        db.executemany("INSERT INTO samples VALUES (?, ?, ?, ?)", rows)
    return path


def test_sql_generator_images_and_features(database):
    images = kg.SQLGenerator(database, "SELECT path, label FROM samples ORDER BY rowid",
                             x_col="path", y_col="label", image_size=(8, 8), shuffle=False,
                             batch_size=16, label_mode="int")
    assert type(images) is kg.SQLImageGenerator and isinstance(images, kg.CSVGenerator)
    x, y = images[0]
    assert x.shape == (7, 8, 8, 3) and images.class_names == ["cat", "dog", "fox"]
    assert y.tolist() == images.labels.tolist()
    features = kg.SQLGenerator(database, "SELECT a, b, label FROM samples WHERE a < 5",
                               x_col=["a", "b"], y_col="label", batch_size=8, shuffle=False)
    assert type(features) is kg.SQLFeatureGenerator
    assert isinstance(features, kg.ArrayGenerator)
    xf, yf = features[0]
    np.testing.assert_array_equal(xf, [[k, -k] for k in range(5)])
    assert yf.shape == (5,) and yf.dtype == np.int32  # label_mode "int" by default


def test_the_two_sql_generators_called_directly(database):
    import pickle

    images = kg.SQLImageGenerator(database, "SELECT path, label FROM samples", "path",
                                  image_size=(8, 8), shuffle=False)
    by_factory = kg.SQLGenerator(database, "SELECT path, label FROM samples", x_col="path",
                                 image_size=(8, 8), shuffle=False)
    np.testing.assert_array_equal(images[0][0], by_factory[0][0])
    features = kg.SQLFeatureGenerator(database, "SELECT a, b, label FROM samples",
                                      ["a", "b"], shuffle=False, batch_size=7)
    copy = pickle.loads(pickle.dumps(features))
    assert type(copy) is kg.SQLFeatureGenerator
    np.testing.assert_array_equal(copy[0][0], features[0][0])
    assert copy.describe_sample(0).startswith("row")
    assert features.source.describe(0) == copy.describe_sample(0)  # the source names rows
    assert features._maker.source is features.source  # no hook: loaded from the source
    with pytest.raises(TypeError, match=r"`x_col` must be one column name.*"
                                        r"x_col=\['a'\]\. For numeric.*SQLFeatureGenerator"):
        kg.SQLImageGenerator(database, "SELECT a, label FROM samples", ["a"])
    with pytest.raises(TypeError, match=r"`x_col` must be a non-empty list.*x_col='path'\. "
                                        r"For one column of image paths use SQLImageGen"):
        kg.SQLFeatureGenerator(database, "SELECT path, label FROM samples", "path")


@pytest.mark.parametrize("query,kwargs,match", [
    ("SELEC path FROM samples", {}, "The SQL query failed.*syntax error"),
    ("SELECT path FROM nowhere", {}, "no such table: nowhere"),
    ("DELETE FROM samples", {}, "refused: it asks SQLite for DELETE 'samples'"),
    ("/* a comment, no statement */", {}, r"returns no rows \(it is not a SELECT\)"),
    ("SELECT 1; DROP TABLE samples", {}, "one statement at a time"),
    ("UPDATE sqlite_master SET sql = ''", {}, "sqlite_master may not be modified"),
    ("SELECT path, label FROM samples WHERE 0", {}, "returned no rows"),
    ("SELECT path, label FROM samples", {"x_col": "file"},
     r"`x_col` must name a column of the query result.*\['path', 'label'\]"),
    ("SELECT a, label FROM samples", {"x_col": ["a", "c"]}, "`x_col` must name a column"),
])
def test_sql_errors(database, query, kwargs, match):
    kwargs = {"x_col": "path", **kwargs}
    with pytest.raises(ValueError, match=match):
        kg.SQLGenerator(database, query, **kwargs)
    with sqlite3.connect(database) as db:  # nothing was written
        assert db.execute("SELECT COUNT(*) FROM samples").fetchone()[0] == 7




def disk(root):
    """Every file under `root` with its size and modification time."""
    return {os.path.join(d, f): (os.stat(os.path.join(d, f)).st_size,
                                 os.stat(os.path.join(d, f)).st_mtime_ns)
            for d, _, files in os.walk(root) for f in files}


@pytest.mark.parametrize("query,denied", [
    ("VACUUM INTO '{out}/copy.db'", r"ATTACH '.*copy\.db'"),
    ("VACUUM", "ATTACH"),
    ("ATTACH DATABASE '{out}/x.db' AS x", r"ATTACH '.*x\.db'"),
    ("ATTACH 'file:{out}/y.db?mode=rwc' AS y", r"ATTACH 'file:.*y\.db\?mode=rwc'"),
    ("INSERT INTO samples VALUES ('p.png', 'cat', 1, 2)", "INSERT 'samples'"),
    ("UPDATE samples SET label = 'dog'", "UPDATE 'samples' 'label'"),
    ("DELETE FROM samples", "DELETE 'samples'"),
    ("CREATE TABLE more (x)", "INSERT 'sqlite_master'"),
    ("CREATE TEMP TABLE more (x)", "INSERT 'sqlite_temp_master'"),
    ("DROP TABLE samples", "DELETE 'sqlite_master'"),
    ("ALTER TABLE samples ADD COLUMN c", "ALTER_TABLE 'main' 'samples'"),
    ("PRAGMA user_version = 7", "PRAGMA user_version = 7"),
    ("PRAGMA journal_mode = WAL", "PRAGMA journal_mode = WAL"),
    ("PRAGMA query_only = OFF", "PRAGMA query_only = OFF"),
    ("BEGIN IMMEDIATE", "TRANSACTION 'BEGIN'"),
])
def test_sql_refuses_what_would_write_attach_or_vacuum(database, tmp_path, query, denied):
    out = tmp_path / "out"
    out.mkdir()
    query = query.format(out=out)
    before = disk(tmp_path)
    with pytest.raises(ValueError, match=f"refused: it asks SQLite for {denied}.*"
                                         r"one read-only SELECT.*Received: query="):
        kg.SQLGenerator(database, query, x_col="path")
    assert disk(tmp_path) == before  # no file created, none changed
    with sqlite3.connect(database) as db:
        assert db.execute("SELECT COUNT(*) FROM samples").fetchone()[0] == 7
        assert db.execute("PRAGMA user_version").fetchone()[0] == 0
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "delete"


def test_read_only_mode_alone_lets_vacuum_into_write_a_copy(database, tmp_path):
    # why the authorizer is needed: SQLite's own read-only mode writes this copy
    copy = tmp_path / "copy.db"
    db = sqlite3.connect(f"file:{database}?mode=ro", uri=True)
    db.execute(f"VACUUM INTO '{copy}'")
    db.close()
    assert copy.stat().st_size > 0


def test_sql_selects_with_joins_ctes_subqueries_views_and_functions(database):
    with sqlite3.connect(database) as db:
        db.execute("CREATE TABLE weights (path TEXT, w REAL)")
        db.execute("INSERT INTO weights SELECT path, a * 10 FROM samples")
        db.execute("CREATE VIEW heavy AS SELECT path, label FROM samples WHERE a >= 4")

    def features(query, **kwargs):
        gen = kg.SQLGenerator(database, query, x_col=["a", "b"], y_col="label",
                              batch_size=16, shuffle=False, **kwargs)
        return gen[0][0].tolist(), [gen.class_names[k] for k in gen.labels]

    x, labels = features("SELECT s.a, w.w AS b, s.label FROM samples s "
                         "JOIN weights w ON w.path = s.path WHERE s.a < 3 ORDER BY s.a")
    assert x == [[0, 0], [1, 10], [2, 20]] and labels == ["cat", "cat", "dog"]
    x, _ = features("WITH RECURSIVE n(k) AS (SELECT 1 UNION ALL SELECT k + 2 FROM n "
                    "WHERE k < 5) SELECT s.a, s.b, s.label FROM samples s JOIN n "
                    "ON s.a = n.k ORDER BY s.a")
    assert x == [[1, -1], [3, -3], [5, -5]]
    x, labels = features("SELECT a, b, label FROM samples WHERE label IN (SELECT label "
                         "FROM samples GROUP BY label HAVING COUNT(*) > 2) ORDER BY a")
    assert labels == ["fox"] * 3 and x[0] == [4, -4]
    x, labels = features("SELECT abs(b) AS a, max(a, 2) * 1.5 AS b, upper(label) AS label "
                         "FROM samples ORDER BY a LIMIT 2")
    assert x == [[0, 3], [1, 3]] and labels == ["CAT", "CAT"]
    x, labels = features("SELECT s.a, j.value AS b, s.label FROM samples s, "
                         "json_each('[10, 20]') j WHERE s.a = 6")  # a table-valued function
    assert x == [[6, 10], [6, 20]] and labels == ["fox", "fox"]
    images = kg.SQLGenerator(database, "SELECT path, label FROM heavy ORDER BY path",
                             x_col="path", image_size=(8, 8), shuffle=False)
    assert images.class_names == ["fox"] and len(images.file_paths) == 3


def test_both_sql_generators_take_verbose(tmp_path):
    import sqlite3

    db = tmp_path / "v.db"
    with sqlite3.connect(db) as connection:
        connection.execute("CREATE TABLE t (a REAL, b REAL, label TEXT)")
        connection.executemany("INSERT INTO t VALUES (?, ?, ?)",
                               [(i, i * 2, "x" if i % 2 else "y") for i in range(6)])
    gen = kg.SQLGenerator(db, "SELECT * FROM t", ["a", "b"], verbose=0, batch_size=3)
    assert gen.verbose == 0 and gen.num_samples == 6
