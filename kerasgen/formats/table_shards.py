"""Parquet and Arrow IPC (Feather v2) files as the shards of a stream (records="parquet"
or "arrow": the same reader, each file's kind read from its first bytes, PAR1 or
ARROW1): `TableShardRecords` reads a Parquet file row group by row group
(`ParquetFile.iter_batches`) and an IPC file record batch by record batch, the image
and label columns only, and yields one record per row, in the file's order, so record n
of a shard is its row n.

A record's x is the image column's cell: encoded bytes, a Hugging Face `Image` struct
{"bytes", "path"} (its bytes; a local file at its path when it holds none), a path (str)
to a local image file, or a list of numbers (an array); its label a class id (an
integer, a bool, or a float holding one) or a class name (a string, a dictionary of
strings, bytes), as the other readers' labels are. A shard's schema is checked before
its first row is read: a missing column, or one of a type no image or label is, is a
ValueError naming the shard and the column (the first shard is checked when the
generator is made). A null image or label is a ValueError naming the column, the row
and the shard when its batch is made.

A URL is read in ranges (Parquet's footer and the column chunks of the columns read;
an IPC file's footer and record batches), each range under the store's retry budget.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Iterator, Sequence
from typing import Any

from kerasgen import _budget, _checks
from kerasgen.formats.base import KEYS, Item, ShardReader, TooLarge, alternatives
from kerasgen.formats.table_cells import image_bytes, is_image_cell, null_error
from kerasgen.formats.table_rows import IPC_MAGIC, PARQUET_MAGIC, pyarrow_module
from kerasgen.storage import remote as _remote

KINDS = ("parquet", "arrow")  # records= names of this reader (either reads both kinds)
ROWS_AT_ONCE = 256  # rows of a Parquet row group decoded at a time
RANGE_BUFFER = 1 << 20  # bytes a remote shard's small reads are buffered by
Raw = tuple[Any, Any, int, str, tuple[str, ...]]  # (x, label, row, shard, its columns)


class SchemaError(ValueError):
    """A shard whose columns do not hold what the reader was asked for: raised as it
    is, naming the shard and the column (not as a record's read error)."""


class TableShard:
    """One open shard: its kind ("Parquet file" or "Arrow IPC file"), its schema, and
    its rows' columns read group by group (`batches`)."""

    def __init__(self, name: str, store: _remote.Store) -> None:
        self.name = name
        self.source: Any = None
        if _remote.is_url(name):
            self.source = store.open_ranges(name, "shard", RANGE_BUFFER)
            head = self.source.read(8)
            self.source.seek(0)
        else:
            try:
                with _checks.open_regular(_remote.local(name), "shard") as f:
                    head = f.read(8)
            except FileNotFoundError:
                raise FileNotFoundError(f"Shard not found: {name}") from None
        try:
            self._open(head)
        except BaseException:
            self.close()
            raise

    def _open(self, head: bytes) -> None:
        pa, name = pyarrow_module(), self.name
        if head.startswith(PARQUET_MAGIC):
            self.kind = "Parquet file"
            parquet = importlib.import_module("pyarrow.parquet")
            self.file = parquet.ParquetFile(self.source if self.source is not None
                                            else _remote.local(name))
            self.schema = self.file.schema_arrow
        elif head.startswith(IPC_MAGIC):
            self.kind = "Arrow IPC file"
            if self.source is None:  # memory-mapped (the records copy their cells out)
                self.source = pa.memory_map(_remote.local(name), "r")
            self.file = pa.ipc.open_file(self.source)
            self.schema = self.file.schema
        else:
            raise SchemaError(
                f"Shard {name} is neither a Parquet file nor an Arrow IPC (Feather v2) "
                f"file: it starts with {head!r}. records='parquet' and 'arrow' read "
                "either kind; write Arrow streams and Feather v1 files again as one.")

    def column(self, keys: Sequence[str], argument: str) -> str:
        """The first of `keys` the shard has, its type checked; else a SchemaError."""
        found = next((k for k in keys if k in self.schema.names), None)
        if found is None:
            held = ", ".join(repr(n) for n in self.schema.names)
            raise SchemaError(
                f"Shard {self.name} has no column {';'.join(keys)!r} ({argument}): its "
                f"columns are {held}. Pass {argument}= naming one of them"
                + (", or label_mode=None to read no labels" if argument == "label_key"
                   else "") + ".")
        kind = self.schema.field(found).type
        if not (is_image_cell(kind, arrays=True) if argument == "image_key"
                else label_type(kind)):
            what = ("encoded images (bytes), {'bytes', 'path'} structs (Hugging Face's "
                    "Image), image paths (str) or lists of numbers" if argument ==
                    "image_key" else "class ids (integers) or class names (strings)")
            raise SchemaError(f"`{argument}` must name a column of {what}. Received: "
                              f"column {found!r} of type {kind} in shard {self.name}.")
        return found

    def batches(self, columns: Sequence[str]) -> Iterator[Any]:
        """The rows' `columns`, a pyarrow RecordBatch (or Table) at a time, in order."""
        if self.kind == "Parquet file":
            yield from self.file.iter_batches(batch_size=ROWS_AT_ONCE, columns=list(columns),
                                              use_threads=False)
            return
        pa = pyarrow_module()
        fields = sorted(self.schema.get_field_index(c) for c in columns)
        reader = pa.ipc.open_file(self.source, options=pa.ipc.IpcReadOptions(
            included_fields=fields))  # the other columns never decompressed
        for group in range(reader.num_record_batches):
            yield reader.get_batch(group).select(list(columns))

    def close(self) -> None:
        close = getattr(getattr(self, "file", None), "close", None)
        if close is not None:  # a ParquetFile (pyarrow >= 13)
            close()
        if self.source is not None:
            self.source.close()


def label_type(kind: Any) -> bool:
    types = pyarrow_module().types
    if types.is_dictionary(kind):
        return label_type(kind.value_type)
    return bool(types.is_integer(kind) or types.is_boolean(kind) or types.is_floating(kind)
                or types.is_string(kind) or types.is_large_string(kind)
                or types.is_binary(kind) or types.is_large_binary(kind))


class TableShardRecords(ShardReader):
    """records="parquet" or "arrow": the rows of Parquet and Arrow IPC (Feather v2)
    files, streamed (see the module's docstring); x is column `image_key` ("image" by
    default; alternatives separated by ";"), the label column `label_key` ("label")."""

    kind = "parquet"

    def __init__(self, names: Sequence[str], image_key: str | None, label_key: str | None,
                 labeled: bool = True, store: _remote.Store | None = None,
                 max_record_bytes: int | None = _budget.MAX_RECORD_BYTES,
                 kind: str = "parquet") -> None:
        super().__init__(names, KEYS["parquet"][0] if image_key is None else image_key,
                         KEYS["parquet"][1] if label_key is None else label_key, labeled, store,
                         max_record_bytes)
        self.kind = _checks.one_of("records", kind, KINDS)
        pyarrow_module()
        if self.names:  # the first shard's schema, before training starts
            shard = TableShard(self.names[0], self.store)
            try:
                self._columns(shard)
            finally:
                shard.close()

    def _keys(self, key: Any, argument: str) -> list[str]:
        return alternatives(key, argument)

    def _columns(self, shard: TableShard) -> list[str]:
        """[image column] or [image column, label column] of `shard`, checked."""
        found = [shard.column(self.image_keys, "image_key")]
        if self.labeled:
            found.append(shard.column(self.label_keys, "label_key"))
        return found

    def __call__(self, shard: int) -> Iterator[Item]:
        try:
            yield from super().__call__(shard)
        except ValueError as error:  # a shard's columns: named as they are
            if isinstance(error.__cause__, SchemaError):
                raise error.__cause__.with_traceback(None) from None
            raise

    def records(self, name: str) -> Iterator[Raw]:
        shard = TableShard(name, self.store)
        try:
            columns = self._columns(shard)
            named = tuple(columns)
            limit, row = self.max_record_bytes, 0
            for batch in shard.batches(columns):
                xs = batch.column(0).to_pylist()
                ys = batch.column(1).to_pylist() if self.labeled else [None] * len(xs)
                for x, y in zip(xs, ys):
                    if limit is not None and isinstance(x, (bytes, dict)):
                        data = x.get("bytes") if isinstance(x, dict) else x
                        if data is not None and len(data) > limit:
                            raise _budget.too_large(
                                f"Row {row}'s image (column {columns[0]!r})", len(data),
                                limit, "holds", error=TooLarge)
                    yield x, y, row, name, named
                    row += 1
        finally:
            shard.close()

    def describe(self, raw: Any, where: str) -> str:
        return f"row {raw[2]} of {raw[3]}"

    def parse(self, raw: Any, where: str) -> tuple[Any, Any]:
        x, label, columns = raw[0], raw[1], raw[4]
        x = image_bytes(x, columns[0], where)  # a struct's bytes, a path's file
        if not self.labeled:
            return x, None
        return x, _label(label, columns[1], where)


def _label(label: Any, column: str, where: str) -> Any:
    """A label cell as the stream's labels are: a class id (int) or a class name."""
    if label is None:
        raise null_error(column, where)
    if isinstance(label, bool):  # False, True: class ids 0 and 1, as TableGenerator
        return int(label)
    if isinstance(label, float):
        if not math.isfinite(label) or label != round(label):
            raise ValueError(f"Column {column!r} must hold class ids or class names. "
                             f"Received: {label!r} at {where}.")
        return int(label)
    return label

