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
    named as the original's (`name`); a record batch's nulls are in its metadata."""

    kind = "Arrow copy"

    def __init__(self, path: str, name: str, original: str) -> None:
        self.original = original  # the original file's version: what caches key by
        super().__init__(path, name)

    def version(self) -> str:
        return self.original

    def null_count(self, group: int, name: str) -> int | None:
        return int(self.handle().get_batch(group).column(name).null_count)


def selected_bytes(rows: FileRows, columns: Sequence[str]) -> int:
    """The decoded bytes of `columns` over the Parquet files of `rows` (their column
    chunks' uncompressed sizes, from the metadata)."""
    total = 0
    for file in rows.files:
        if not isinstance(file, ParquetFile):
            continue
        meta = file.handle().metadata
        for g in range(meta.num_row_groups):
            group = meta.row_group(g)
            for j in range(group.num_columns):
                chunk = group.column(j)
                leaf = chunk.path_in_schema
                if any(leaf == c or leaf.startswith(c + ".") for c in columns):
                    total += int(chunk.total_uncompressed_size)
    return total


def needs_copies(rows: Any, columns: Sequence[str]) -> bool:
    """Whether `rows` has Parquet files whose `columns` hold more than its cache keeps
    (a shuffled epoch would read most groups again for most batches)."""
    return isinstance(rows, FileRows) and selected_bytes(rows, columns) > rows.cache.max_bytes


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
    need = selected_bytes(rows, columns) + sum(
        os.path.getsize(f.path) for f in rows.files if not isinstance(f, ParquetFile))
    free = shutil.disk_usage(cache.folder).free
    if need > free:
        message = (f"The Arrow copy of the columns {columns} of {rows.name} needs "
                   f"{need / 2**20:,.0f} MiB, and {cache.folder} has "
                   f"{free / 2**20:,.0f} MiB free: pass remote_cache= a folder with room")
        if arrow_copy:
            raise OSError(message + ".")
        _redact.warn(message + ", or max_cache_bytes= at least the size of the columns' "
                     "row groups. Read by row group instead: a shuffled batch reads each "
                     "of its row groups again (slow where they are large).")
        return rows
    return arrow_copies(rows, columns, store, verbose)


def write_copy(file: TableFile, columns: Sequence[str], out: IO[bytes]) -> None:
    """`columns` of `file` (group by group, the schema's metadata kept: Hugging Face's
    class names) written to `out` as an uncompressed Arrow IPC file."""
    pa = pyarrow_module()
    schema = pa.schema([file.schema.field(c) for c in columns],
                       metadata=file.schema.metadata)
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
        path = os.path.abspath(file.path)
        version = file.version()
        key = RemoteCache.key(f"{path}|arrow copy|{','.join(columns)}", version)
        local = cache.path(key, functools.partial(write_copy, file, columns), file.name)
        copies.append(ArrowCopy(local, file.name, version))
    return FileRows(copies, rows.cache.max_bytes)
