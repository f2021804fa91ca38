"""Rows of an SQLite query: `SQLImageGenerator` (a column of image paths) and
`SQLFeatureGenerator` (numeric feature columns), and `SQLGenerator`, the function that
returns the one `x_col` asks for."""

from __future__ import annotations

import numbers
import os
import reprlib
import sqlite3
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from typing import Any, overload

import numpy as np

from kerasgen import _checks
from kerasgen.storage import remote as _remote
from kerasgen.sources import _listing as listing
from kerasgen.arrays.batching import DTYPES, EXACT_INTEGERS
from kerasgen.sources._listing import check_unique
from kerasgen._typing import LabelMode, StrPath, Subset
from kerasgen.builders.common import Splits, one_subset
from kerasgen.builders.tables import csv_labels, rows, split_rows
from kerasgen.generators import ArrayGenerator, CSVGenerator


# What one read-only SELECT (joins, CTEs, subqueries, views, functions) asks SQLite's
# authorizer for; anything else (ATTACH, which VACUUM INTO also does, DETACH, PRAGMA,
# writes, DDL, transactions) is denied before it runs.
ALLOWED = ("SQLITE_SELECT", "SQLITE_READ", "SQLITE_FUNCTION", "SQLITE_RECURSIVE")
ACTIONS = (
    "SQLITE_CREATE_INDEX", "SQLITE_CREATE_TABLE", "SQLITE_CREATE_TEMP_INDEX",
    "SQLITE_CREATE_TEMP_TABLE", "SQLITE_CREATE_TEMP_TRIGGER", "SQLITE_CREATE_TEMP_VIEW",
    "SQLITE_CREATE_TRIGGER", "SQLITE_CREATE_VIEW", "SQLITE_DELETE", "SQLITE_DROP_INDEX",
    "SQLITE_DROP_TABLE", "SQLITE_DROP_TEMP_INDEX", "SQLITE_DROP_TEMP_TABLE",
    "SQLITE_DROP_TEMP_TRIGGER", "SQLITE_DROP_TEMP_VIEW", "SQLITE_DROP_TRIGGER",
    "SQLITE_DROP_VIEW", "SQLITE_INSERT", "SQLITE_PRAGMA", "SQLITE_READ", "SQLITE_SELECT",
    "SQLITE_TRANSACTION", "SQLITE_UPDATE", "SQLITE_ATTACH", "SQLITE_DETACH",
    "SQLITE_ALTER_TABLE", "SQLITE_REINDEX", "SQLITE_ANALYZE", "SQLITE_CREATE_VTABLE",
    "SQLITE_DROP_VTABLE", "SQLITE_FUNCTION", "SQLITE_SAVEPOINT", "SQLITE_RECURSIVE")
ACTION_NAMES = {getattr(sqlite3, name): name[len("SQLITE_"):] for name in ACTIONS
                if hasattr(sqlite3, name)}
ALLOWED_CODES = {getattr(sqlite3, name) for name in ALLOWED if hasattr(sqlite3, name)}
# Preparing a SELECT from a table-valued function (json_each, ...) asks to UPDATE the
# schema table while SQLite declares it; SQLITE_IGNORE leaves such a column unchanged.
SCHEMA_TABLES = ("sqlite_master", "sqlite_temp_master", "sqlite_schema",
                 "sqlite_temp_schema")


def _read_only(denied):
    """An authorizer for `Connection.set_authorizer` that allows what a SELECT reads and
    appends what it denies to `denied`."""
    def authorize(action, arg1, arg2, db_name, trigger):
        if action in ALLOWED_CODES:
            return sqlite3.SQLITE_OK
        if action == sqlite3.SQLITE_UPDATE and arg1 in SCHEMA_TABLES:
            return sqlite3.SQLITE_IGNORE  # never a change
        what = ACTION_NAMES.get(action, f"action {action}")
        if action == sqlite3.SQLITE_PRAGMA:
            what += f" {arg1}" + (f" = {arg2}" if arg2 is not None else "")
        else:
            what += "".join(f" {a!r}" for a in (arg1, arg2) if a is not None)
        denied.append(what)
        return sqlite3.SQLITE_DENY
    return authorize


SQLITE_HEADER = b"SQLite format 3\x00"


def read_query(db: StrPath, query: str,
               storage_options: Mapping[str, Any] | None = None,
               remote_cache: Any = None) -> listing.Table:
    """Runs `query` once on the SQLite file `db`; returns a Table.

    A URL `db` (s3://, https://...) is copied to local disk first (through
    `remote_cache`, or a temporary folder), read as a local file, and errors name the
    URL; the image paths of its rows are relative to the URL's folder.
    """
    if isinstance(db, str) and _remote.is_url(db):
        store = _remote.Store(storage_options, _remote.check_cache(remote_cache))
        local = store.local_copy(db, "SQLite database")
        try:
            table = read_query(local, query)
        except (ValueError, FileNotFoundError) as error:
            raise type(error)(str(error).replace(local, db)) from None
        table.dirs = [db.rsplit("/", 1)[0]] * table.num_rows
        return table
    return _read_local_query(db, query)


def _read_local_query(db: StrPath, query: str) -> listing.Table:
    """`read_query` of a local file.

    Nothing on disk can change: the file is opened read-only (URI mode=ro), with
    `PRAGMA query_only`, and an authorizer allows only what a SELECT needs, so ATTACH
    (and VACUUM INTO, which attaches its target), PRAGMA and every write or schema change
    are refused before they run, naming what was denied. A WAL-mode database is read
    without creating its -wal and -shm files (see `_open_uri`)."""
    if not isinstance(query, str) or not query.strip():
        _checks.fail("query", "a non-empty SQL string", query, TypeError)
    path = os.fspath(db)
    if not os.path.exists(path):
        raise FileNotFoundError(f"`db` must be an existing SQLite file. Received: "
                                f"db={path!r} (not found).")
    if not os.path.isfile(path):  # SQLite would block on a FIFO
        _checks.fail("db", "a regular SQLite file", path,
                     hint=f"It is {_checks.file_kind(os.stat(path).st_mode)}")
    for _ in range(3):
        uri, unchanged = _open_uri(path)
        names, rows = _run(uri, path, query)
        if unchanged():
            break
    else:
        raise ValueError(f"`db` changed on disk each time it was read (another process "
                         f"writes to it): its rows could be a mix of two versions. Read it "
                         f"when no one writes to it, or read a copy. Received: db={path!r}")
    check_unique(names, f"The SQL query {query!r}")
    if not rows:
        raise ValueError(f"The SQL query returned no rows from {path}. Received: "
                         f"query={query!r}")
    columns = {name: [row[k] for row in rows] for k, name in enumerate(names)}
    return listing.Table.from_columns(columns, "the query result",
                                      os.path.dirname(os.path.abspath(path)))


def _open_uri(path: str) -> tuple[str, Callable[[], bool]]:
    """(the read-only URI of the database `path`, a function saying whether what was
    read through it is the database as it is now).

    SQLite opening a WAL-mode database (even with mode=ro) creates its -wal and -shm
    files and, read-only, cannot remove them. When no -wal file exists (or an empty one),
    every committed page is in the database file, so it is opened `immutable=1`, which
    creates nothing; immutable also means no locks and no change detection, so the read
    counts only when afterwards the log is still empty and the database file has not
    changed (else `read_query` reads again). When a -wal file and its -shm index exist
    (a writer has them open), the log's pages are part of the data: mode=ro reads them;
    a log without its index is refused, as reading it would create the -shm file."""
    real = os.path.realpath(path)  # SQLite names the -wal file after the link's target
    uri = f"file:{urllib.parse.quote(os.path.abspath(path))}?mode=ro"
    with _checks.open_regular(path, "the SQLite database") as f:
        header = f.read(100)
    if not (header.startswith(SQLITE_HEADER) and len(header) >= 20
            and 2 in (header[18], header[19])):  # a rollback-journal database
        return uri, lambda: True
    wal, shm = real + "-wal", real + "-shm"

    def log_size() -> int:  # of the -wal file, 0 when there is none
        return os.stat(wal).st_size if os.path.exists(wal) else 0

    if os.path.exists(shm) and os.path.exists(wal):
        return uri, lambda: True
    if log_size():
        raise ValueError(
            f"`db` is a WAL-mode SQLite database with a write-ahead log ({wal}) but no "
            f"{shm} (left by a writer that stopped?): reading it would create that "
            f"file. Let SQLite fold the log into the database first (open it with "
            f"sqlite3 and run PRAGMA wal_checkpoint), or read a copy of both files. "
            f"Received: db={path!r}")

    def stamp() -> tuple[int, ...]:
        st = os.stat(real)
        return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns

    before = stamp()
    return uri + "&immutable=1", lambda: not log_size() and stamp() == before


def _run(uri: str, path: str, query: str) -> tuple[list[str], list[Any]]:
    """(column names, rows) of `query` on the database at `uri` (`path` for messages)."""
    # isolation_level=None: the sqlite3 module issues no BEGIN of its own
    connection = sqlite3.connect(uri, uri=True, isolation_level=None)
    denied: list[str] = []
    try:
        connection.execute("PRAGMA query_only = ON")
        connection.set_authorizer(_read_only(denied))
        cursor = connection.execute(query)
        if cursor.description is None:
            raise ValueError(f"The SQL query returns no rows (it is not a SELECT). "
                             f"Received: query={query!r}")
        names = [d[0] for d in cursor.description]
        rows = cursor.fetchall()
    except sqlite3.Error as error:
        if denied:
            raise ValueError(
                f"The SQL query was refused: it asks SQLite for "
                f"{', '.join(dict.fromkeys(denied))}, and "
                f"SQLGenerator runs one read-only SELECT on {path} (no ATTACH, VACUUM, "
                f"PRAGMA, writes or schema changes). Received: query={query!r}"
            ) from error
        raise ValueError(f"The SQL query failed on {path}: {str(error).rstrip('.')}. "
                         f"Received: query={query!r}") from error
    finally:
        connection.close()
    return names, rows


def _refuse_blob_labels(table: listing.Table, y_col: Any, label_mode: Any) -> None:
    """A ValueError naming the column and the row when a label column holds a BLOB
    (bytes), which would otherwise become the class "b'...'"."""
    if label_mode in (None, "mask"):
        return
    for name in (list(y_col) if isinstance(y_col, (list, tuple)) else [y_col]):
        for i, value in enumerate(table.columns.get(name, ())):
            if isinstance(value, (bytes, bytearray, memoryview)):
                raise ValueError(
                    f"Label column {name!r} must hold class names (TEXT) or numbers, not "
                    f"bytes. Received: the BLOB {reprlib.repr(bytes(value))} at "
                    f"{table.describe(i)}. Convert it in the query: "
                    f"CAST(<blob column> AS TEXT) AS {name}.")


def _features(table: listing.Table, x_col: Sequence[str], dtype: str | None) -> np.ndarray:
    """The feature columns `x_col` as one array: float32 (converted to `dtype` in
    batches), or for dtype=None the columns' own values, int64 when all are INTEGER,
    else float64. An integer that array (or the batch dtype) would round is refused,
    naming the column and the row."""
    rows = list(zip(*(table.columns[c] for c in x_col)))
    integers = True
    for i, row in enumerate(rows):
        for name, value in zip(x_col, row):
            if not isinstance(value, numbers.Real) or isinstance(value, bool):
                raise ValueError(f"Feature column {name!r} must hold numbers. Received: "
                                 f"{value!r} at {table.describe(i)}.")
            integers = integers and isinstance(value, numbers.Integral)
    if dtype is None and integers:
        return np.asarray(rows, dtype="int64")
    kind = "float64" if dtype is None else dtype
    limit = EXACT_INTEGERS.get(kind)
    if limit is not None:
        for i, row in enumerate(rows):
            for name, value in zip(x_col, row):
                if isinstance(value, numbers.Integral) and not -limit <= int(value) <= limit:
                    keep = ("Pass dtype=None to keep the feature columns' own values "
                            "(int64 when all of them are INTEGER, float64, exact up to "
                            "2**53, otherwise)" if dtype is not None else
                            "Make every feature column INTEGER (with dtype=None, int64)")
                    raise ValueError(
                        f"Feature column {name!r} holds {value} at {table.describe(i)}: "
                        f"feature columns are {kind} in batches (dtype={dtype!r}), which "
                        f"hold integers exactly only up to 2**{limit.bit_length() - 1}, "
                        f"so rows would be rounded to equal values. {keep}, leave the "
                        f"column out of `x_col`, or scale it in the query.")
    return np.asarray(rows, dtype="float32" if dtype is not None else "float64")


@overload
def SQLGenerator(db: StrPath, query: str, x_col: str = ...,
                 y_col: str | Sequence[str] = ..., **kwargs: Any) -> SQLImageGenerator: ...


@overload
def SQLGenerator(db: StrPath, query: str, x_col: list[str] | tuple[str, ...],
                 y_col: str | Sequence[str] = ..., **kwargs: Any) -> SQLFeatureGenerator: ...


def SQLGenerator(db: StrPath, query: str, x_col: str | list[str] | tuple[str, ...] = "filename",
                 y_col: str | Sequence[str] = "label",
                 **kwargs: Any) -> SQLImageGenerator | SQLFeatureGenerator:
    """Rows of an SQLite query (the standard library's sqlite3; run once, read-only): an
    `SQLImageGenerator` when `x_col` is one column name, an `SQLFeatureGenerator` when it
    is a list of columns.

    `x_col` a column name: the column holds image paths (relative to `directory`, by
    default the database's folder) and every CSVGenerator option applies (image_size,
    color_mode, mask_col, cache, on_missing...). `x_col` a list of columns: numeric
    features, one row per sample, as an ArrayGenerator. `y_col` as for CSVGenerator: a
    label column, or a list of 0/1 or numeric columns; `label_mode` is "int" by default
    for both kinds, as for the image generators. `validation_split` and `subset` (with
    `seed`) take a seeded, stratified part of the rows, as for CSVGenerator, with the
    classes of all rows. Bad SQL, missing columns, and a query that would write, ATTACH,
    VACUUM or PRAGMA are errors naming the query (and what SQLite was asked for, or the
    columns it returned); such a query is refused before it runs, so no file is created
    or changed (a WAL-mode database included: its -wal and -shm files are not created).
    A column named twice, a BLOB label and an integer feature the batch dtype would
    round (beyond 2**24 for float32; dtype=None keeps INTEGER columns as int64) are
    errors naming the column (and the row).
    """
    if isinstance(x_col, (list, tuple)):
        return SQLFeatureGenerator(db, query, x_col, y_col, **kwargs)
    return SQLImageGenerator(db, query, x_col, y_col, **kwargs)


class SQLImageGenerator(CSVGenerator):
    """Images whose paths are in column `x_col` of an SQLite query's rows: a CSVGenerator
    over the query result (every CSVGenerator option applies). See `SQLGenerator`."""

    def __init__(self, db: StrPath, query: str, x_col: str = "filename",
                 y_col: str | Sequence[str] = "label", **kwargs: Any) -> None:
        if not isinstance(x_col, str):
            _checks.fail("x_col", "one column name (of image paths)", x_col, TypeError,
                         hint="For numeric feature columns use SQLFeatureGenerator (or "
                              "SQLGenerator with a list of columns)")
        table = read_query(db, query, kwargs.get("storage_options"),
                           kwargs.get("remote_cache"))
        _refuse_blob_labels(table, y_col, kwargs.get("label_mode", "int"))
        super().__init__(table, x_col=x_col, y_col=y_col, **kwargs)


class SQLFeatureGenerator(Splits, ArrayGenerator):
    """Numeric feature columns `x_col` of an SQLite query's rows, one row per sample: an
    ArrayGenerator over the query result. See `SQLGenerator`."""

    def __init__(self, db: StrPath, query: str, x_col: Sequence[str],
                 y_col: str | Sequence[str] = "label", *,
                 label_mode: LabelMode | None = "int", validation_split: float | None = None,
                 subset: Subset | None = None, seed: int | None = None,
                 class_names: Sequence[str] | None = None, num_classes: int | None = None,
                 verbose: int = 1, **kwargs: Any) -> None:
        _checks.labels_come_from(self, kwargs, "the `y_col` column (y_col=...)")
        one_subset(self, subset)
        self.verbose = verbose  # as SQLImageGenerator takes it; the query shows no progress
        if not isinstance(x_col, (list, tuple)) or not x_col:
            _checks.fail("x_col", "a non-empty list of numeric column names", x_col,
                         TypeError, hint="For one column of image paths use "
                                         "SQLImageGenerator (or SQLGenerator with its name)")
        table = read_query(db, query, kwargs.pop("storage_options", None),
                           kwargs.pop("remote_cache", None))
        for name in x_col:
            table.column(name, "x_col")
        x = _features(table, x_col, _checks.one_of("dtype", kwargs.get("dtype", "float32"),
                                                   DTYPES))
        y = None
        if label_mode is not None:
            y_cols = list(y_col) if isinstance(y_col, (list, tuple)) else [y_col]
            for name in y_cols:
                table.column(name, "y_col")
            _refuse_blob_labels(table, y_cols, label_mode)
            y = csv_labels(table, y_cols, label_mode, kwargs.pop("label_delimiter", "|"),
                            class_names, num_classes)
        keep, class_names, num_classes = split_rows(y, len(x), label_mode, class_names,
                                                num_classes, validation_split, subset, seed,
                                                table.describe)
        if keep is not None:
            table.subset(keep)
            x, y = x[keep], rows(y, keep)
        self.table = table
        self.validation_split, self.subset = validation_split, subset
        super().__init__(x, y, label_mode=label_mode, seed=seed, class_names=class_names,
                         num_classes=num_classes, **kwargs)

    def _row_names(self) -> Callable[[int], str]:
        return self.table.describe  # the source names rows as the table does
