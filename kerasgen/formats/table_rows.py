"""The rows of a table, read by number: an in-memory Arrow table (or a pandas DataFrame,
converted once), Arrow IPC / Feather v2 files (memory-mapped, one record batch at a
time) and Parquet files (one row group at a time).

Every reader answers `num_rows`, `columns`, `schema`, `where(k)` (how errors name row
k), `column(name)` (a whole column: the labels) and `take(indices, columns)` (a
`pyarrow.Table` of those rows, in that order). A file's rows lie in groups (Parquet row
groups, IPC record batches): from the files' metadata each global row is (file, group,
offset), and `take` reads only the groups its rows lie in, the selected columns only,
keeping a few decoded groups in a bytes-bounded LRU (`GroupCache`), thread-safe. A
reader pickles without its open files and cache; they are opened again, lazily, in the
process that reads. A Hugging Face `datasets.Dataset` is an Arrow table underneath
(`dataset.data`, with `dataset._indices` mapping its rows): it comes in as an
`ArrowRows` of that table and that mapping.

pyarrow is imported when a table is read (`pyarrow_module`), never at import time.
"""

from __future__ import annotations

import collections
import glob
import importlib
import json
import os
import threading
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from kerasgen import _checks
from kerasgen.storage import urls as _urls

PIP = 'pip install "kerasgen3[tables]" (or pip install pyarrow)'
MAX_CACHE_BYTES = 256 * 2**20  # decoded row groups kept (at least the one just read)
PARQUET_MAGIC, IPC_MAGIC = b"PAR1", b"ARROW1"


def pyarrow_module() -> Any:
    """pyarrow, or the ImportError that names the pip command."""
    try:
        return importlib.import_module("pyarrow")  # pyarrow has no type hints: Any
    except ImportError as error:
        raise ImportError(f"Tables (Arrow, Parquet, Feather, pandas) need pyarrow: {PIP}."
                          ) from error


class TableRows:
    """What every reader shares: the rows of one table, by number."""

    name = "the table"

    @property
    def schema(self) -> Any:
        raise NotImplementedError

    @property
    def num_rows(self) -> int:
        raise NotImplementedError

    def __len__(self) -> int:
        return self.num_rows

    @property
    def columns(self) -> list[str]:
        return list(self.schema.names)

    def where(self, k: int) -> str:
        return f"row {int(k)} of {self.name}"

    def describe(self, k: int) -> str:  # as formats.base.SampleVersions names rows
        return self.where(k)

    def column(self, name: str) -> Any:
        """Column `name` whole (a pyarrow.ChunkedArray)."""
        raise NotImplementedError

    def take(self, indices: Sequence[int] | np.ndarray, columns: Sequence[str]) -> Any:
        """Rows `indices` (in that order) of `columns`, as a pyarrow.Table."""
        raise NotImplementedError

    def value(self, k: int, column: str) -> Any:
        """The value of one cell, as a Python object."""
        return self.take([int(k)], [column]).column(0)[0].as_py()

    def null_rows(self, name: str) -> int | None:
        """The first row of column `name` holding a null, where it is known without
        reading the column's values; None: none (or not known yet)."""
        return None

    def class_names(self, name: str) -> list[str] | None:
        """The class names the table itself gives column `name` (a Hugging Face
        `ClassLabel`, as `datasets` writes it into the schema of its Parquet and Arrow
        files), or None."""
        return hub_class_names(self.schema, name)

    def check_columns(self, names: Iterable[str], argument: str) -> None:
        for name in names:
            if name not in self.columns:  # as CSVGenerator says it
                raise ValueError(f"`{argument}` must name a column of {self.name}. "
                                 f"Received: {argument}={name!r}. Columns: "
                                 f"{self.columns}.")


def hub_class_names(schema: Any, name: str) -> list[str] | None:
    """The `ClassLabel` names of column `name` in the `huggingface` metadata of a
    schema (what `datasets` writes), or None."""
    try:
        feature = json.loads(schema.metadata[b"huggingface"])["info"]["features"][name]
        names = feature["names"] if feature.get("_type") == "ClassLabel" else None
    except (TypeError, KeyError, ValueError, AttributeError):
        return None
    return [str(n) for n in names] if isinstance(names, list) else None


def first_null(array: Any) -> int | None:
    """The first position of a (chunked) array holding a null, or None."""
    if array.null_count == 0:
        return None
    nulls = np.asarray(array.is_null().to_numpy(zero_copy_only=False))
    return int(np.flatnonzero(nulls)[0])


class ArrowRows(TableRows):
    """An in-memory pyarrow.Table (a DataFrame converted once), or a Hugging Face
    dataset's table: its memory-mapped Arrow table (pickled by its files' paths, as
    `datasets` pickles it) seen through the dataset's row mapping (`index`: row i is
    row index[i] of the table, after a `shuffle`, `select` or `train_test_split`)."""

    def __init__(self, table: Any, name: str = "the table", index: Any = None,
                 class_names: dict[str, list[str]] | None = None) -> None:
        self.data = table  # a pyarrow.Table, or a datasets.table.Table around one
        self.name = name
        self.index = None if index is None else np.asarray(index, np.int64)
        self.labels_named = dict(class_names or {})

    @property
    def table(self) -> Any:
        """The pyarrow.Table."""
        return getattr(self.data, "table", self.data)

    @property
    def schema(self) -> Any:
        return self.table.schema

    @property
    def num_rows(self) -> int:
        return int(self.table.num_rows) if self.index is None else len(self.index)

    def column(self, name: str) -> Any:
        column = self.table.column(name)
        return column if self.index is None else column.take(self.index)

    def take(self, indices: Sequence[int] | np.ndarray, columns: Sequence[str]) -> Any:
        rows = np.asarray(indices, np.int64)
        if self.index is not None:
            rows = self.index[rows]
        return self.table.select(list(columns)).take(rows)

    def null_rows(self, name: str) -> int | None:
        return first_null(self.column(name))

    def class_names(self, name: str) -> list[str] | None:
        return self.labels_named.get(name) or super().class_names(name)


def in_memory(table: Any) -> ArrowRows | None:
    """The rows of a pyarrow Table, RecordBatch, pandas DataFrame or Hugging Face
    `datasets.Dataset`, or None for anything else (a path, say)."""
    module = type(table).__module__.split(".")[0]
    if module == "datasets" and hasattr(table, "data") and hasattr(table, "features"):
        indices = getattr(table, "_indices", None)  # the rows a shuffle or select kept
        named = {name: list(feature.names) for name, feature in table.features.items()
                 if isinstance(getattr(feature, "names", None), list)}  # ClassLabel
        return ArrowRows(table.data, "the dataset",
                         None if indices is None else indices.column(0).to_numpy(), named)
    if module == "pandas" and type(table).__name__ == "DataFrame":
        pa = pyarrow_module()
        return ArrowRows(pa.Table.from_pandas(table, preserve_index=False), "the DataFrame")
    if module != "pyarrow":
        return None
    pa = pyarrow_module()
    if isinstance(table, pa.RecordBatch):
        table = pa.Table.from_batches([table])
    if not isinstance(table, pa.Table):
        _checks.fail("table", "a pyarrow.Table, a pandas DataFrame, or Parquet / Arrow "
                     "IPC file paths", type(table).__name__, TypeError)
    return ArrowRows(table)


class GroupCache:
    """Decoded groups of rows by key, the least recently used dropped while they hold
    more than `max_bytes` (the one just read is always kept). Thread-safe: a group being
    read by one thread is waited for by the others, not read twice."""

    def __init__(self, max_bytes: int = MAX_CACHE_BYTES) -> None:
        self.max_bytes = int(max_bytes)
        self._groups: collections.OrderedDict[Any, Any] = collections.OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self._reading: dict[Any, threading.Lock] = {}

    def get(self, key: Any, read: Any) -> Any:
        with self._lock:
            if key in self._groups:
                self._groups.move_to_end(key)
                return self._groups[key]
            reading = self._reading.setdefault(key, threading.Lock())
        with reading:
            with self._lock:
                if key in self._groups:
                    return self._groups[key]
            group = read()
            with self._lock:
                self._reading.pop(key, None)
                self._groups[key] = group
                self._bytes += group.nbytes
                while self._bytes > self.max_bytes and len(self._groups) > 1:
                    _, old = self._groups.popitem(last=False)
                    self._bytes -= old.nbytes
        return group

    def __getstate__(self) -> dict[str, Any]:
        return {"max_bytes": self.max_bytes}  # a worker process starts empty

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["max_bytes"])  # type: ignore[misc]


class TableFile:
    """One file's groups of rows: their sizes (from the metadata), one group's columns
    read, one column whole. Opened lazily in each process (the handle never pickles)."""

    kind = "file"

    def __init__(self, path: str, name: str | None = None) -> None:
        self.path = path  # what is opened: the file, or a remote object's local copy
        self.name = path if name is None else name  # how rows are named: the URL
        self._lock = threading.Lock()
        self._handle: Any = None
        handle = self.handle()
        self.schema = self._schema(handle)
        self.group_rows = self._group_rows(handle)

    def handle(self) -> Any:
        if self._handle is None:
            with self._lock:
                if self._handle is None:
                    self._handle = self._open()
        return self._handle

    def _open(self) -> Any:
        raise NotImplementedError

    def _schema(self, handle: Any) -> Any:
        raise NotImplementedError

    def _group_rows(self, handle: Any) -> list[int]:
        raise NotImplementedError

    def read_group(self, group: int, columns: Sequence[str]) -> Any:
        raise NotImplementedError

    def column(self, name: str) -> Any:
        raise NotImplementedError

    def null_count(self, group: int, name: str) -> int | None:
        """Nulls of column `name` in `group` as the metadata says (None: not said)."""
        return None

    def version(self) -> str:
        stat = os.stat(self.path)
        return f"{stat.st_size}-{stat.st_mtime_ns}"

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_handle"] = None
        state.pop("_lock")
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()


class ParquetFile(TableFile):
    """A Parquet file: its row groups, read by `ParquetFile.read_row_group`."""

    kind = "Parquet file"

    def _open(self) -> Any:
        pyarrow_module()
        return importlib.import_module("pyarrow.parquet").ParquetFile(self.path)

    def _schema(self, handle: Any) -> Any:
        return handle.schema_arrow

    def _group_rows(self, handle: Any) -> list[int]:
        meta = handle.metadata
        return [meta.row_group(g).num_rows for g in range(meta.num_row_groups)]

    def read_group(self, group: int, columns: Sequence[str]) -> Any:
        handle = self.handle()
        with self._lock:  # one read of a file at a time
            return handle.read_row_group(group, columns=list(columns))

    def column(self, name: str) -> Any:
        handle = self.handle()
        with self._lock:
            return handle.read(columns=[name]).column(name)

    def null_count(self, group: int, name: str) -> int | None:
        meta = self.handle().metadata.row_group(group)
        for j in range(meta.num_columns):
            chunk = meta.column(j)
            if chunk.path_in_schema == name or chunk.path_in_schema.startswith(name + "."):
                # a list's or struct's leaf counts its own nulls, not its parent's: a
                # nested column is checked when its batch is read
                if chunk.path_in_schema != name:
                    return None
                stats = chunk.statistics
                if stats is None or not stats.has_null_count:
                    return None
                return int(stats.null_count)
        return None


class IpcFile(TableFile):
    """An Arrow IPC (Feather v2) file, memory-mapped: its record batches, each read
    (and decompressed, when the file is compressed) when a row in it is asked for."""

    kind = "Arrow IPC file"

    def _open(self) -> Any:
        pa = pyarrow_module()
        return pa.ipc.open_file(pa.memory_map(self.path, "r"))

    def _schema(self, handle: Any) -> Any:
        return handle.schema

    def _group_rows(self, handle: Any) -> list[int]:
        """Each record batch's rows, read through a reader of the first column only (a
        compressed file's batches are decompressed that much, once)."""
        pa = pyarrow_module()
        if not len(handle.schema):
            return [handle.get_batch(g).num_rows for g in range(handle.num_record_batches)]
        first = pa.ipc.open_file(pa.memory_map(self.path, "r"),
                                 options=pa.ipc.IpcReadOptions(included_fields=[0]))
        return [first.get_batch(g).num_rows for g in range(first.num_record_batches)]

    def read_group(self, group: int, columns: Sequence[str]) -> Any:
        pa = pyarrow_module()
        handle = self.handle()
        with self._lock:
            batch = handle.get_batch(group)
        return pa.Table.from_batches([batch]).select(list(columns))

    def column(self, name: str) -> Any:
        pa = pyarrow_module()
        handle = self.handle()
        with self._lock:
            batches = [handle.get_batch(g).select([name]) for g in
                       range(handle.num_record_batches)]
        return pa.Table.from_batches(batches, schema=pa.schema([self.schema.field(name)])
                                     ).column(name)


class FileRows(TableRows):
    """The rows of one or more Parquet or Arrow IPC files, one table in the order given
    (glob patterns' matches sorted). Row k lies in group `groups[k]` of its file;
    `take` reads the groups its rows lie in, through a `GroupCache` of `max_cache_bytes`.
    """

    def __init__(self, files: Sequence[TableFile],
                 max_cache_bytes: int = MAX_CACHE_BYTES) -> None:
        self.files = list(files)
        first = self.files[0]
        for other in self.files[1:]:
            if not other.schema.equals(first.schema):
                raise ValueError(
                    f"Every file of a table must have the same columns and types. "
                    f"{first.name} has {_fields(first.schema)}; {other.name} has "
                    f"{_fields(other.schema)}.")
        self.cache = GroupCache(max_cache_bytes)
        # one entry per group of every file: its file, its number there, its first row
        self.group_file = np.array([f for f, file in enumerate(self.files)
                                    for _ in file.group_rows], np.int64)
        self.group_number = np.array([g for file in self.files
                                      for g in range(len(file.group_rows))], np.int64)
        sizes = np.array([n for file in self.files for n in file.group_rows], np.int64)
        self.group_start = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        self.file_start = np.array([self.group_start[np.searchsorted(
            self.group_file, f)] for f in range(len(self.files))], np.int64)

    @property
    def name(self) -> str:  # type: ignore[override]
        return ", ".join(file.name for file in self.files)

    @property
    def paths(self) -> list[str]:
        return [file.name for file in self.files]

    @property
    def schema(self) -> Any:
        return self.files[0].schema

    @property
    def num_rows(self) -> int:
        return int(self.group_start[-1])

    def locate(self, indices: Any) -> tuple[np.ndarray, np.ndarray]:
        """(global group, offset in it) of each row."""
        indices = np.asarray(indices, np.int64)
        groups = np.searchsorted(self.group_start, indices, side="right") - 1
        return groups, indices - self.group_start[groups]

    def where(self, k: int) -> str:
        group = int(self.locate([k])[0][0])
        f = int(self.group_file[group])
        row = int(k) - int(self.file_start[f])
        return f"row {row} of {self.files[f].name}"

    def version_at(self, k: int) -> tuple[int, int]:
        """(file number, row in the file): what a decoded-image file cache keys by."""
        group = int(self.locate([k])[0][0])
        f = int(self.group_file[group])
        return f, int(k) - int(self.file_start[f])

    @property
    def shards(self) -> FileRows:  # formats.base.SampleVersions asks shards.version(n)
        return self

    def version(self, number: int) -> str:
        return self.files[number].version()

    def group(self, group: int, columns: Sequence[str]) -> Any:
        """Group `group`'s columns, decoded (from the cache when there)."""
        file = self.files[int(self.group_file[group])]
        number = int(self.group_number[group])
        return self.cache.get((int(group), tuple(columns)),
                              lambda: file.read_group(number, columns))

    def take(self, indices: Sequence[int] | np.ndarray, columns: Sequence[str]) -> Any:
        pa = pyarrow_module()
        groups, offsets = self.locate(indices)
        if len(groups) and (groups == groups[0]).all():  # one group (one row, say)
            return self.group(int(groups[0]), columns).take(offsets)
        order = np.argsort(groups, kind="stable")
        pieces, placed = [], []
        for group in np.unique(groups):
            rows = order[groups[order] == group]
            pieces.append(self.group(int(group), columns).take(offsets[rows]))
            placed.append(rows)
        table = pa.concat_tables(pieces) if pieces else self.group(0, columns).slice(0, 0)
        if not placed:
            return table
        back = np.empty(len(groups), np.int64)
        back[np.concatenate(placed)] = np.arange(len(groups))
        return table.take(back)

    def column(self, name: str) -> Any:
        pa = pyarrow_module()
        return pa.chunked_array([chunk for file in self.files
                                 for chunk in file.column(name).chunks],
                                type=self.schema.field(name).type)

    def null_rows(self, name: str) -> int | None:
        """The first null of `name` in a group whose metadata counts nulls (Parquet's
        statistics), found by reading that group's column."""
        for group in range(len(self.group_file)):
            file = self.files[int(self.group_file[group])]
            count = file.null_count(int(self.group_number[group]), name)
            if count:
                found = first_null(file.read_group(int(self.group_number[group]),
                                                   [name]).column(name))
                if found is not None:
                    return int(self.group_start[group]) + found
        return None


def _fields(schema: Any) -> str:
    return ", ".join(f"{field.name} ({field.type})" for field in schema)


def file_names(table: Any, store: Any = None) -> list[str]:
    """The local paths `table` names (a path, a glob pattern, or a list of them), each
    pattern's matches sorted; a pattern matching nothing, or a missing file, is a
    FileNotFoundError naming it."""
    if not isinstance(table, (str, os.PathLike, list, tuple)):
        _checks.fail("table", "a pyarrow Table, a pandas DataFrame, or Parquet / Arrow IPC "
                     "file paths (a path, a glob pattern, or a list of them)", table,
                     TypeError)
    given = [table] if isinstance(table, (str, os.PathLike)) else list(table)
    if not given:
        _checks.fail("table", "a table, or one or more Parquet / Arrow IPC file paths",
                     table)
    names: list[str] = []
    for item in given:
        if not isinstance(item, (str, os.PathLike)):
            _checks.fail("table", "a table, or Parquet / Arrow IPC file paths (str or "
                         "os.PathLike)", item, TypeError)
        name = os.fspath(item)
        if _urls.is_url(name):
            if store is None:
                raise ValueError(f"`table` names a URL, which needs a store. Received: "
                                 f"table={name!r}.")
            found = sorted(store.expand(name)) if glob.has_magic(name) else [name]
            if not found:
                raise FileNotFoundError(f"No object matches the pattern {name!r}.")
            names.extend(found)
        elif glob.has_magic(name):
            found = sorted(glob.glob(name))
            if not found:
                raise FileNotFoundError(f"No file matches the pattern {name!r}.")
            names.extend(found)
        elif not os.path.isfile(name):
            raise FileNotFoundError(f"No such table file: {name!r}.")
        else:
            names.append(name)
    seen: dict[str, str] = {}
    for name in names:
        real = name if _urls.is_url(name) else os.path.realpath(name)
        if real in seen:
            raise ValueError(
                f"`table` names the file {name!r} twice (also as {seen[real]!r}): its rows "
                "would count twice. Name each file once (a pattern and a list that "
                "overlap name a file twice).")
        seen[real] = name
    return names


def open_file(path: str, name: str | None = None) -> TableFile:
    """A Parquet or Arrow IPC file by its first bytes (an old Feather v1 file, or
    anything else, is a ValueError naming it)."""
    with _checks.open_regular(path, "table file") as handle:
        head = handle.read(8)
    if head.startswith(PARQUET_MAGIC):
        return ParquetFile(path, name)
    if head.startswith(IPC_MAGIC):
        return IpcFile(path, name)
    raise ValueError(f"{name or path} is neither a Parquet file nor an Arrow IPC (Feather v2) "
                     f"file (it starts with {head!r}). Arrow streams and Feather v1 "
                     "files: read them with pyarrow and pass the table.")


def open_rows(table: Any, max_cache_bytes: int = MAX_CACHE_BYTES,
              store: Any = None) -> TableRows:
    """The rows of `table`: a pyarrow.Table or RecordBatch, a pandas DataFrame, or
    Parquet / Arrow IPC file paths (a path, a glob pattern, or a list of them)."""
    max_cache_bytes = _checks.positive_int("max_cache_bytes", max_cache_bytes)
    if isinstance(table, TableRows):
        return table
    rows = in_memory(table)
    if rows is not None:
        return rows
    names = file_names(table, store)
    pyarrow_module()
    # a remote object is read through its local copy (the store's: retried, checked, kept
    # in `remote_cache` when given), by row group as a local file, named by its URL
    return FileRows([open_file(store.local_copy(name, "table file"), name)
                     if _urls.is_url(name) else open_file(name) for name in names],
                    max_cache_bytes)
