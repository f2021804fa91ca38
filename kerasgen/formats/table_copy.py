"""Shuffled reads of Parquet files whose row groups do not fit the cache: each file's
selected columns copied once into an uncompressed Arrow IPC file, memory-mapped.

A Parquet row group is read whole (pyarrow cannot read one row of it), so a shuffled
batch reads every group its rows lie in. While the groups of the columns a generator
reads fit its `GroupCache`, each is read once per process; when they do not (`datasets`
writes row groups of up to 100 MB, and a table of images soon holds more than 256 MiB),
nearly every batch reads its groups again: 32 rows cost 3 row groups of 95 MB each, 20x
slower than from the cache. Hugging Face `datasets` converts a Parquet file into an Arrow
file before its first read for the same reason. `arrow_copies` does so for those
columns only, into the store's cache (`remote_cache=` keeps it across runs, keyed by the
file's version and the columns; else this process's scratch folder): rows in a memory-
mapped uncompressed file are read where they lie, without reading their group.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
from collections.abc import Sequence
from typing import IO, Any

from kerasgen import _checks, _redact
from kerasgen._progress import progress
from kerasgen.formats.table_rows import (FileRows, IpcFile, ParquetFile, TableFile,
                                         pyarrow_module)
from kerasgen.storage import remote_cache as _remote_cache
from kerasgen.storage.remote_cache import RemoteCache

COPY_ROWS = 1024  # rows per record batch of a copy (a read maps a batch: no bytes copied)


class ArrowCopy(IpcFile):
    """A file's copy: an uncompressed, memory-mapped Arrow IPC file, whose rows are
    named as the original's (`name`) and keyed by its version (`original`: what a
    decoded-image file cache keys by); a record batch's nulls are in its metadata."""

    kind = "Arrow copy"

    def __init__(self, path: str, name: str, original: str) -> None:
        self.original = original
        super().__init__(path, name)

    def version(self) -> str:
        return self.original

    def null_count(self, group: int, name: str) -> int | None:
        return int(self.handle().get_batch(group).column(name).null_count)


def selected_bytes(file: TableFile, columns: Sequence[str]) -> int:
    """The decoded bytes of `columns` in a Parquet file (its column chunks' uncompressed
    sizes, from the metadata); an IPC file's size."""
    if not isinstance(file, ParquetFile):
        return os.path.getsize(file.path)
    total, meta = 0, file.handle().metadata
    for g in range(meta.num_row_groups):
        group = meta.row_group(g)
        for j in range(group.num_columns):
            chunk = group.column(j)
            leaf = chunk.path_in_schema
            if any(leaf == c or leaf.startswith(c + ".") for c in columns):
                total += int(chunk.total_uncompressed_size)
    return total


def needs_copies(rows: FileRows, columns: Sequence[str]) -> bool:
    """Whether the Parquet files of `rows` hold more of `columns` than its cache keeps
    (a shuffled epoch would read most groups again for most batches)."""
    parquet = [f for f in rows.files if isinstance(f, ParquetFile)]
    return sum(selected_bytes(f, columns) for f in parquet) > rows.cache.max_bytes


def copied_if_needed(rows: Any, columns: Sequence[str], arrow_copy: bool | None,
                     ordered: bool, store: Any = None, verbose: int = 1) -> Any:
    """`rows`, or `rows` read from Arrow copies of `columns` (see `arrow_copies`):
    `arrow_copy` True copies files always, False never, None (auto) where the order is
    shuffled or sampled (`ordered` False) and `needs_copies` says so. A column not in
    the table is left to the generator's checks (they name its argument)."""
    if arrow_copy is not None and not isinstance(arrow_copy, bool):
        _checks.fail("arrow_copy", "None (a copy where a shuffled epoch needs one), True "
                     "or False", arrow_copy, TypeError)
    columns = list(dict.fromkeys(columns))
    if (arrow_copy is False or not isinstance(rows, FileRows) or not columns
            or not all(c in rows.columns for c in columns)):
        return rows
    if arrow_copy is None and (ordered or not needs_copies(rows, columns)):
        return rows
    cache = getattr(store, "cache", None) or _remote_cache.scratch()
    keys = [copy_key(file, columns) for file in rows.files]
    sizes = [selected_bytes(file, columns) for file in rows.files]
    refusal = _room(cache, sum(sizes), sum(size for key, size in zip(keys, sizes)
                                           if not cache.holds(key)))
    if refusal:
        if arrow_copy:
            raise OSError(f"The Arrow copy of the columns {columns} of {rows.name} {refusal}.")
        _redact.warn(f"The Arrow copy of the columns {columns} of {rows.name} {refusal}, or "
                     "max_cache_bytes= at least the size of the columns' row groups. Read by "
                     "row group instead: a shuffled batch reads each of its row groups again "
                     "(slow where they are large).")
        return rows
    if arrow_copy is None and verbose:
        where = "remote_cache" if getattr(store, "cache", None) else "a temporary folder"
        print(f"Copying the columns {columns} of {len(rows.files)} table file(s) "
              f"({sum(sizes) / 2**20:,.0f} MiB) to a memory-mapped Arrow file in {where}: "
              "a shuffled batch would read row groups larger than max_cache_bytes again "
              "(arrow_copy=False reads by row group).")
    return arrow_copies(rows, columns, store, verbose)


def _room(cache: RemoteCache, total: int, missing: int) -> str:
    """Why `cache` cannot hold copies of `total` bytes, `missing` of them still to be
    written ("" when it can)."""
    if cache.max_bytes is not None and total > cache.max_bytes:
        return (f"needs {total / 2**20:,.0f} MiB, more than the remote_cache's max_bytes "
                f"({cache.max_bytes / 2**20:,.0f} MiB), which would remove copies in use: "
                "pass a larger remote_cache")
    free = shutil.disk_usage(cache.folder).free
    if missing > free:
        return (f"needs {missing / 2**20:,.0f} MiB more, and {cache.folder} has "
                f"{free / 2**20:,.0f} MiB free: pass remote_cache= a folder with room")
    return ""


def copy_key(file: TableFile, columns: Sequence[str]) -> str:
    """The cache entry of `file`'s copy of `columns`: its path, the columns and its
    version (a file changed since is copied again)."""
    path = os.path.abspath(file.path)
    return RemoteCache.key(f"{path}\narrow copy\n{json.dumps(list(columns))}", file.version())


def write_copy(file: TableFile, columns: Sequence[str], out: IO[bytes]) -> None:
    """`columns` of `file` (group by group, the schema's metadata kept: Hugging Face's
    class names) written to `out` as an uncompressed Arrow IPC file; a dictionary column
    is written as its values (a Parquet file's groups may each have their own
    dictionary, which one IPC file cannot hold)."""
    pa = pyarrow_module()
    fields = []
    for name in columns:
        field = file.schema.field(name)
        if pa.types.is_dictionary(field.type):
            field = field.with_type(field.type.value_type)
        fields.append(field)
    schema = pa.schema(fields, metadata=file.schema.metadata)
    with pa.ipc.new_file(out, schema) as writer:
        for group in range(len(file.group_rows)):
            table = file.read_group(group, columns)
            writer.write_table(table.cast(schema), max_chunksize=COPY_ROWS)


def arrow_copies(rows: FileRows, columns: Sequence[str], store: Any = None,
                 verbose: int = 1) -> FileRows:
    """`rows` read from copies of their files' `columns` (every file: the copies share
    one schema), each made once in the store's cache and named as its original."""
    columns = list(dict.fromkeys(columns))
    cache = getattr(store, "cache", None) or _remote_cache.scratch()
    copies: list[TableFile] = []
    for file in progress(rows.files, "Copying table files to Arrow", len(rows.files),
                         verbose):
        local = cache.path(copy_key(file, columns),
                           functools.partial(write_copy, file, columns), file.name)
        copies.append(ArrowCopy(local, file.name, file.version()))
    return FileRows(copies, rows.cache.max_bytes)
