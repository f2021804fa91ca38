"""The rows of a `ray.data.Dataset`, read by number without collecting it into the driver.

The dataset is materialized once (`Dataset.materialize`, in order: `preserve_order` set
for that execution): its blocks stay in Ray's object store, on the cluster's nodes. The
reader holds their references (`to_arrow_refs`, public API: no conversion where the
blocks are Arrow already) and each block's row count, counted by a Ray task per block
beside the block (with its schema and where its nulls are), never by fetching a block
into the driver: row k is (block, offset), as a Parquet file's row is (row group,
offset) in `FileRows`. `take` fetches the blocks its rows lie in (`ray.get`, zero-copy
from the node's object store), the selected columns only kept, in a bytes-bounded
`GroupCache`; a whole column (the labels) and one cell are read by tasks beside the
blocks, only that column or that cell coming back.

The reader pickles with its block references (through Ray's cloudpickle, which records
their owner, whatever pickler is used) and without its cache: a copy unpickled in a Ray
actor or task of the same cluster (`engine=kg.RayEngine()`) reads the blocks there.
Worker processes of kerasgen's own are not Ray workers and cannot read them.

Ray is imported when a dataset is read (`ray_module`), never at import time.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import Any

import numpy as np

from kerasgen import _checks
from kerasgen.formats.table_rows import (MAX_CACHE_BYTES, GroupCache, TableRows,
                                         pyarrow_module)

PIP_RAY = 'pip install "kerasgen3[ray]"'
NAME = "the Ray dataset"


def ray_module() -> Any:
    """ray, or the ImportError that names the pip command."""
    try:
        return importlib.import_module("ray")  # a dataset's module: Any
    except ImportError as error:
        raise ImportError(f"A ray.data.Dataset as a table needs Ray: {PIP_RAY}.") from error


def is_ray_dataset(table: Any) -> bool:
    """Whether `table` is a `ray.data.Dataset` (a `MaterializedDataset` too), by its
    type's module (Ray is not imported to ask)."""
    kind = type(table)
    return kind.__module__.startswith("ray.data") and any(
        k.__name__ == "Dataset" for k in kind.__mro__)


def is_ray_stream(table: Any) -> bool:
    """Whether `table` is a Ray Data iterator (`streaming_split`, `iter_batches`...)."""
    return type(table).__module__.startswith("ray.data") and "Iterator" in (
        type(table).__name__)


def _tasks() -> dict[str, Any]:
    """The functions Ray runs beside the blocks (`remote`). Made here, nested, so that
    Ray pickles them by value: a Ray worker runs them without importing kerasgen (and
    Keras with it), with pyarrow alone."""

    def facts(block: Any) -> tuple[int, Any, dict[str, int]]:
        """A block's rows, its schema, and the first null of each column holding one
        (its row in the block)."""
        nulls = {}
        for name in block.column_names:
            column = block.column(name)
            if column.null_count:
                flags = column.is_null().to_numpy(zero_copy_only=False)
                nulls[name] = int(flags.argmax())
        return block.num_rows, block.schema, nulls

    def column(block: Any, name: str) -> Any:
        """One column of a block, as a one-column table."""
        return block.select([name])

    def cell(block: Any, offset: int, name: str) -> Any:
        """One cell of a block, as a Python object."""
        return block.column(name)[offset].as_py()

    return {"facts": facts, "column": column, "cell": cell}


_REMOTE: dict[str, Any] = {}  # this process's Ray remote functions, made once each


def remote(name: str) -> Any:
    """Ray's remote function `name` of `_tasks` (no CPU reserved: it reads a block)."""
    if name not in _REMOTE:
        _REMOTE[name] = ray_module().remote(_tasks()[name]).options(num_cpus=0)
    return _REMOTE[name]


class RayRows(TableRows):
    """The rows of a materialized `ray.data.Dataset` (see the module's docstring).

    Args:
        blocks: the blocks' object references (pyarrow Tables), in the dataset's order.
        sizes: each block's rows.
        schema: the table's schema (the blocks' schemas unified).
        nulls: {column: first row holding a null}.
        max_cache_bytes: the selected columns of fetched blocks kept (least recently
            used dropped; at least the one just fetched kept).
        dataset: the MaterializedDataset the blocks belong to (kept alive with this
            reader in the driver; not pickled).
    """

    name = NAME

    def __init__(self, blocks: Sequence[Any], sizes: Sequence[int], schema: Any,
                 nulls: dict[str, int] | None = None,
                 max_cache_bytes: int = MAX_CACHE_BYTES, dataset: Any = None) -> None:
        self.blocks = list(blocks)
        self.block_start = np.concatenate([[0], np.cumsum(np.asarray(sizes, np.int64))]
                                          ).astype(np.int64)
        self._schema = schema
        self.nulls = dict(nulls or {})
        self.cache = GroupCache(max_cache_bytes)
        self.dataset = dataset

    @classmethod
    def of(cls, dataset: Any, max_cache_bytes: int = MAX_CACHE_BYTES) -> RayRows:
        """The rows of `dataset`, materialized in order (a MaterializedDataset as it is:
        in the order it was materialized in)."""
        ray = ray_module()
        pa = pyarrow_module()
        materialized = dataset if type(dataset).__name__ == "MaterializedDataset" else (
            _materialize_in_order(dataset))
        blocks = materialized.to_arrow_refs()
        facts = ray.get([remote("facts").remote(block)
                         for block in blocks]) if blocks else []
        if not facts or not sum(n for n, _, _ in facts):
            raise ValueError(f"`table` must hold rows. Received: a ray.data.Dataset of "
                             f"{sum(n for n, _, _ in facts)} rows.")
        schemas = [schema for n, schema, _ in facts if n]
        schema = schemas[0]
        if any(not s.equals(schema) for s in schemas[1:]):
            try:
                schema = pa.unify_schemas(schemas, promote_options="permissive")
            except (pa.ArrowInvalid, pa.ArrowTypeError) as error:
                raise ValueError(f"The blocks of {NAME} must hold the same columns in "
                                 f"types that unify. Received: {error}") from error
        starts = np.concatenate([[0], np.cumsum([n for n, _, _ in facts])])
        nulls: dict[str, int] = {}
        for start, (_, _, found) in zip(starts.tolist(), facts):
            for name, offset in found.items():
                nulls.setdefault(name, int(start) + offset)
        return cls(blocks, [n for n, _, _ in facts], schema, nulls, max_cache_bytes,
                   materialized)

    @property
    def schema(self) -> Any:
        return self._schema

    @property
    def num_rows(self) -> int:
        return int(self.block_start[-1])

    @property
    def num_blocks(self) -> int:
        return len(self.blocks)

    def locate(self, indices: Any) -> tuple[np.ndarray, np.ndarray]:
        """(block, offset in it) of each row."""
        indices = np.asarray(indices, np.int64)
        blocks = np.searchsorted(self.block_start, indices, side="right") - 1
        return blocks, indices - self.block_start[blocks]

    def block(self, block: int, columns: Sequence[str]) -> Any:
        """Block `block`'s columns (fetched once, then from the cache), in the table's
        schema."""
        target = pyarrow_module().schema([self._schema.field(c) for c in columns])

        def fetch() -> Any:
            table = ray_module().get(self.blocks[block]).select(list(columns))
            return table if table.schema.equals(target) else table.cast(target)

        return self.cache.get((int(block), tuple(columns)), fetch)

    def take(self, indices: Sequence[int] | np.ndarray, columns: Sequence[str]) -> Any:
        pa = pyarrow_module()
        blocks, offsets = self.locate(indices)
        if len(blocks) and (blocks == blocks[0]).all():
            return self.block(int(blocks[0]), columns).take(offsets)
        if not len(blocks):
            return self.block(0, columns).slice(0, 0)
        order = np.argsort(blocks, kind="stable")
        pieces, placed = [], []
        for block in np.unique(blocks):
            rows = order[blocks[order] == block]
            pieces.append(self.block(int(block), columns).take(offsets[rows]))
            placed.append(rows)
        back = np.empty(len(blocks), np.int64)
        back[np.concatenate(placed)] = np.arange(len(blocks))
        return pa.concat_tables(pieces).take(back)

    def column(self, name: str) -> Any:
        """Column `name` whole, each block's read by a task beside it (only that column
        comes to the driver)."""
        ray, pa = ray_module(), pyarrow_module()
        select = remote("column")
        kind = self._schema.field(name).type
        parts = ray.get([select.remote(block, name) for block in self.blocks])
        chunks = [chunk if chunk.type == kind else chunk.cast(kind)
                  for part in parts for chunk in part.column(0).chunks]
        return pa.chunked_array(chunks, type=kind)

    def value(self, k: int, column: str) -> Any:
        """One cell, read by a task beside its block."""
        ray = ray_module()
        blocks, offsets = self.locate([k])
        return ray.get(remote("cell").remote(self.blocks[int(blocks[0])], int(offsets[0]), column))

    def null_rows(self, name: str) -> int | None:
        return self.nulls.get(name)

    def __getstate__(self) -> dict[str, Any]:
        """The blocks' references pickled by Ray's own cloudpickle, whatever pickles
        this reader: it records each block's owner (the driver), and a copy unpickled
        in a Ray actor or task fetches the blocks from it. (A reference pickled by plain
        pickle or cloudpickle carries no owner: `ray.get` of it waits forever.) The
        dataset object stays behind."""
        state = self.__dict__.copy()
        state["dataset"] = None
        state["blocks"] = ray_module().cloudpickle.dumps(self.blocks)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.blocks = ray_module().cloudpickle.loads(state["blocks"])


def _materialize_in_order(dataset: Any) -> Any:
    """`dataset.materialize()` with `preserve_order` set for that execution (Ray Data
    hands blocks on as they finish otherwise: two runs of one pipeline would number
    the rows differently, and a resumed epoch would not be the same); the dataset's own
    option is restored after."""
    options = dataset.context.execution_options
    before = options.preserve_order
    options.preserve_order = True
    try:
        return dataset.materialize()
    finally:
        options.preserve_order = before


def ray_rows(table: Any, max_cache_bytes: int = MAX_CACHE_BYTES) -> RayRows:
    """The rows of a `ray.data.Dataset` (see `RayRows.of`); a Ray Data iterator is a
    TypeError that says to pass the dataset."""
    max_cache_bytes = _checks.positive_int("max_cache_bytes", max_cache_bytes)
    if is_ray_stream(table):
        raise TypeError(
            "`table` must be a ray.data.Dataset (read by row number), not an iterator, "
            "whose rows come in no fixed order. Received: table of type "
            f"{type(table).__name__}. Pass the Dataset itself; for one part per "
            "training host, use gen.shard(num_hosts, host_index).")
    return RayRows.of(table, max_cache_bytes)
