"""SQLGenerator: rows of an SQLite query, as image paths or as numeric feature columns."""

import numbers
import os
import sqlite3
import urllib.parse

import numpy as np

from kerasgen import _checks, sources
from kerasgen.generators import ArrayGenerator, CSVGenerator, _csv_labels, _rows, _split


def read_query(db, query):
    """Runs `query` once on the SQLite file `db`, opened read-only; returns a Table."""
    if not isinstance(query, str) or not query.strip():
        _checks.fail("query", "a non-empty SQL string", query, TypeError)
    path = os.fspath(db)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"`db` must be an existing SQLite file. Received: "
                                f"db={path!r} (not found).")
    uri = f"file:{urllib.parse.quote(os.path.abspath(path))}?mode=ro"
    connection = sqlite3.connect(uri, uri=True)
    try:
        cursor = connection.execute(query)
        if cursor.description is None:
            raise ValueError(f"The SQL query returns no rows (it is not a SELECT). "
                             f"Received: query={query!r}")
        names = [d[0] for d in cursor.description]
        rows = cursor.fetchall()
    except sqlite3.Error as error:
        raise ValueError(f"The SQL query failed on {path}: {error}. Received: "
                         f"query={query!r}") from error
    finally:
        connection.close()
    if not rows:
        raise ValueError(f"The SQL query returned no rows from {path}. Received: "
                         f"query={query!r}")
    columns = {name: [row[k] for row in rows] for k, name in enumerate(names)}
    return sources.Table.from_columns(columns, "the query result",
                                      os.path.dirname(os.path.abspath(path)))


class SQLGenerator:
    """Rows of an SQLite query (the standard library's sqlite3; run once, read-only).

    `x_col` a column name: the column holds image paths (relative to `directory`, by
    default the database's folder) and every CSVGenerator option applies (image_size,
    color_mode, mask_col, cache, on_missing...). `x_col` a list of columns: numeric
    features, one row per sample, as an ArrayGenerator. `y_col` as for CSVGenerator: a
    label column, or a list of 0/1 or numeric columns; `label_mode` is "int" by default
    for both kinds, as for the image generators. `validation_split` and `subset` (with
    `seed`) take a seeded, stratified part of the rows, as for CSVGenerator, with the
    classes of all rows. Bad SQL, a query that writes, and missing columns are errors
    naming the query and the columns it returned.
    """

    def __new__(cls, db, query, x_col="filename", y_col="label", **kwargs):
        table = read_query(db, query)
        if isinstance(x_col, (list, tuple)):
            return _SQLFeatures(table, x_col, y_col, **kwargs)
        return _SQLImages(table, x_col, y_col, **kwargs)


class _SQLImages(SQLGenerator, CSVGenerator):
    def __new__(cls, *args, **kwargs):
        return object.__new__(cls)

    def __init__(self, *args, **kwargs):
        if getattr(self, "_sql_ready", False):  # SQLGenerator(...) calls __init__ again
            return
        table, x_col, y_col = args
        CSVGenerator.__init__(self, table, x_col=x_col, y_col=y_col, **kwargs)
        self._sql_ready = True


class _SQLFeatures(SQLGenerator, ArrayGenerator):
    def __new__(cls, *args, **kwargs):
        return object.__new__(cls)

    def __init__(self, *args, label_mode="int", validation_split=None, subset=None,
                 seed=None, class_names=None, num_classes=None, **kwargs):
        if getattr(self, "_sql_ready", False):  # SQLGenerator(...) calls __init__ again
            return
        table, x_col, y_col = args
        for name in x_col:
            table.column(name, "x_col")
        rows = list(zip(*(table.columns[c] for c in x_col)))
        for i, row in enumerate(rows):
            for name, value in zip(x_col, row):
                if not isinstance(value, numbers.Real) or isinstance(value, bool):
                    raise ValueError(f"Feature column {name!r} must hold numbers. Received: "
                                     f"{value!r} at {table.describe(i)}.")
        x = np.asarray(rows, dtype="float32")
        y = None
        if label_mode is not None:
            y_cols = list(y_col) if isinstance(y_col, (list, tuple)) else [y_col]
            for name in y_cols:
                table.column(name, "y_col")
            y = _csv_labels(table, y_cols, label_mode, kwargs.pop("label_delimiter", "|"),
                            class_names, num_classes)
        keep, class_names, num_classes = _split(y, len(x), label_mode, class_names,
                                                num_classes, validation_split, subset, seed,
                                                table.describe)
        if keep is not None:
            table.subset(keep)
            x, y = x[keep], _rows(y, keep)
        self.table = table
        self.validation_split, self.subset = validation_split, subset
        ArrayGenerator.__init__(self, x, y, label_mode=label_mode, seed=seed,
                                class_names=class_names, num_classes=num_classes, **kwargs)
        self._sql_ready = True

    def describe_sample(self, index):
        return self.table.describe(index)
