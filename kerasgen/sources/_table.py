"""Samples that are rows of a table (`formats.table_rows`: an Arrow table, a DataFrame,
Arrow IPC or Parquet files): `TableFeatures` (numeric and fixed-length list columns as
x, an array or a dict of arrays for multi-input models), `TableImages` (a column of
encoded images, decoded by an `ImageLoader` whose read hook is `ImageCells`) and
`TableImagesAndFeatures` (both, one row's image and features as one two-input sample),
with the labels of one column (`table_labels`). Each batch reads only its rows (`take`); a null
in a used column is a ValueError naming the column and the row."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from kerasgen import _checks
from kerasgen.arrays import batching
from kerasgen.formats.table_cells import (IMAGE_CELLS, image_bytes, is_image_cell, is_list,
                                          is_number, null_error)
from kerasgen.formats.table_rows import TableRows, first_null, pyarrow_module
from kerasgen.labels import cells as label_cells
from kerasgen.sources._batch_request import BatchRequest, default_assemble, load_each
from kerasgen.sources._image import ImageSource

__all__ = ["ImageCells", "TableFeatures", "TableImages", "TableImagesAndFeatures",
           "table_labels"]

# x_col as given: a column, a list of columns, or {input name: column or columns}
XCol = str | Sequence[str] | Mapping[str, str | Sequence[str]]


def refuse_nulls(array: Any, name: str, where: Callable[[int], str]) -> None:
    """A null in `array` (a column's values, or a list column's items) is an error
    naming `where(position)`."""
    position = first_null(array)
    if position is not None:
        raise null_error(name, where(position))
    pa = pyarrow_module()
    if is_list(array.type):
        lists = array.combine_chunks() if isinstance(array, pa.ChunkedArray) else array
        if lists.flatten().null_count:
            item_nulls = np.asarray(lists.flatten().is_null().to_numpy(
                zero_copy_only=False))
            starts = np.asarray(lists.offsets)[:-1]
            item = int(np.flatnonzero(item_nulls)[0])
            raise null_error(name, where(int(np.searchsorted(starts, item,
                                                             side="right") - 1)))


def column_width(rows: TableRows, name: str, argument: str) -> int | None:
    """None for a numeric scalar column, the length of a list column of numbers (a
    fixed-size list's, or the first row's: every row must have it); anything else is a
    TypeError naming the column and its type."""
    kind = rows.schema.field(name).type
    if is_number(kind):
        return None
    if is_list(kind) and is_number(kind.value_type):
        if pyarrow_module().types.is_fixed_size_list(kind):
            return int(kind.list_size)
        first = rows.value(0, name)
        return 0 if first is None else len(first)
    raise TypeError(f"`{argument}` must name numeric columns, or list columns of numbers. "
                    f"Received: column {name!r} of type {kind}. An image column goes in "
                    "`image_col`.")


def column_array(array: Any, name: str, width: int | None,
                 where: Callable[[int], str]) -> np.ndarray:
    """A (chunked) column of `len` rows as an ndarray: (n,) for numbers, (n, width) for
    lists of numbers (each row's length checked); nulls refused."""
    pa = pyarrow_module()
    refuse_nulls(array, name, where)
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks() if array.num_chunks != 1 else array.chunk(0)
    if width is None:
        return np.asarray(array.to_numpy(zero_copy_only=False))
    if not pa.types.is_fixed_size_list(array.type):
        lengths = np.asarray(array.value_lengths().to_numpy(zero_copy_only=False))
        wrong = np.flatnonzero(lengths != width)
        if len(wrong):
            raise ValueError(f"Column {name!r} must hold lists of one length ({width}, as "
                             f"its first row). Received: a list of {lengths[wrong[0]]} at "
                             f"{where(int(wrong[0]))}.")
    values = array.flatten().to_numpy(zero_copy_only=False)
    return np.asarray(values).reshape(len(array), width)


def x_columns(x_col: Any) -> list[str] | dict[str, list[str]] | str:
    """x_col checked: a name, a list of names, or {input name: name or names}."""
    if isinstance(x_col, str):
        return x_col
    if isinstance(x_col, Mapping):
        if not x_col:
            _checks.fail("x_col", "a column, a list of columns, or a non-empty dict",
                         x_col)
        out: dict[str, list[str]] = {}
        for key, value in x_col.items():
            if not isinstance(key, str):
                _checks.fail("x_col", "a dict keyed by the model's input names (str)",
                             x_col, TypeError)
            named = x_columns(value)
            if isinstance(named, dict):
                _checks.fail("x_col", "a dict of columns or lists of columns (not of "
                             "dicts)", x_col, TypeError)
            out[key] = [named] if isinstance(named, str) else named
        return out
    if isinstance(x_col, (list, tuple)) and x_col and all(isinstance(c, str) for c in x_col):
        return list(x_col)
    _checks.fail("x_col", "a column name, a non-empty list of column names, or a dict "
                 "{input name: column or columns}", x_col, TypeError)


class TableFeatures:
    """Rows of a table whose numeric and list columns are x: one column as it is ((n,)
    or (n, length)), a list of columns side by side ((n, k)), a dict of either (a
    multi-input model's inputs).

    Args:
        rows: the table's rows.
        x_col: see `x_columns`.
        labels: one label per row (see `table_labels`), or None.
        class_names: the classes in class-id order, or None.
    """

    def __init__(self, rows: TableRows, x_col: XCol, labels: Any = None,
                 class_names: Sequence[str] | None = None) -> None:
        self.rows = rows
        self.x_col = x_columns(x_col)
        names = self.names
        rows.check_columns(names, "x_col")
        self.widths = {name: column_width(rows, name, "x_col") for name in names}
        for name in names:
            null = rows.null_rows(name)
            if null is not None:
                raise null_error(name, rows.where(null))
        self.labels = labels
        self.class_names = None if class_names is None else list(class_names)

    @property
    def names(self) -> list[str]:
        """Every column x reads, once each, in order."""
        x = self.x_col
        parts = [x] if isinstance(x, str) else (
            [c for cs in x.values() for c in cs] if isinstance(x, dict) else x)
        return list(dict.fromkeys(parts))

    def __len__(self) -> int:
        return self.rows.num_rows

    def describe(self, index: int) -> str:
        return self.rows.where(index)

    def arrays(self, indices: np.ndarray) -> Any:
        """x of rows `indices`, in their own dtypes (one read of the rows)."""
        table = self.rows.take(indices, self.names)

        def column(name: str) -> np.ndarray:
            return column_array(table.column(name), name, self.widths[name],
                                lambda k: self.rows.where(int(indices[k])))

        def side_by_side(names: list[str]) -> np.ndarray:
            parts = [column(n) for n in names]
            return np.concatenate([p.reshape(len(indices), -1) for p in parts], axis=1)

        x = self.x_col
        if isinstance(x, str):
            return column(x)
        if isinstance(x, dict):
            return {key: side_by_side(names) for key, names in x.items()}
        return side_by_side(x)

    @property
    def features(self) -> TableFeatureSpace | None:
        """The x columns as SMOTE's feature space, read when asked (None for named
        inputs, as for a dict of arrays)."""
        return None if isinstance(self.x_col, dict) else TableFeatureSpace(self)

    def load(self, index: int) -> Any:
        x = self.arrays(np.array([index], np.int64))
        return {k: v[0] for k, v in x.items()} if isinstance(x, dict) else x[0]

    def load_batch(self, request: BatchRequest) -> tuple[Any, Any]:
        """The batch's rows read once (its partners' too, for SMOTE), converted to the
        batch's dtype (a value the dtype would change is an error naming its row)."""
        if request.augment is not None:
            return load_each(request, self.load, self.describe)
        indices = request.indices
        with request.stage("read"):
            x = self.arrays(indices)
            partners, lams = request.partners, request.lams
            if partners is not None and lams is not None:
                synthetic = partners >= 0
                others = self.arrays(partners[synthetic])
                blend = lambda a, b: batching.blend_rows(  # noqa: E731
                    a.astype(np.float32), b, lams[synthetic], synthetic)
                x = ({k: blend(v, others[k]) for k, v in x.items()} if isinstance(x, dict)
                     else blend(x, others))
        with request.stage("assemble"):
            return batching.convert(x, request.dtype, request.rescale, request.buffers,
                                    lambda k: self.describe(int(indices[k]))), None


class TableFeatureSpace:
    """The feature rows of a table's x columns (flat float32), read when a sampler asks
    for them; pickled as the table's reader (never its rows)."""

    def __init__(self, source: TableFeatures) -> None:
        self.source = source

    def __len__(self) -> int:
        return len(self.source)

    def __getitem__(self, indices: Any) -> np.ndarray:
        rows = np.asarray(indices, dtype=np.int64)
        x = self.source.arrays(rows.reshape(-1))
        flat = np.asarray(x, dtype=np.float32).reshape(x.shape[0], -1)
        return flat[0] if rows.ndim == 0 else flat


class ImageCells:
    """The read hook of a table's image column: row k's encoded bytes, from a cell of
    bytes, of a path (str), or of {"bytes": ..., "path": ...} (Hugging Face's `Image`
    feature: the bytes when present, else the file at the path)."""

    def __init__(self, rows: TableRows, column: str) -> None:
        self.rows, self.column = rows, column
        kind = rows.schema.field(column).type
        if not is_image_cell(kind):
            raise TypeError(f"`image_col` must name a column of {IMAGE_CELLS}. "
                            f"Received: column {column!r} of type {kind}.")
        null = rows.null_rows(column)
        if null is not None:
            raise null_error(column, rows.where(null))
        self._ready: dict[int, list[Any]] = {}  # row -> [cell, batches holding it]
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def batch(self, indices: np.ndarray) -> Iterator[None]:
        """The cells of rows `indices` read in one `take` (each row group a batch's rows
        lie in read once, whatever the cache holds), served to the decode threads while
        the batch is made; batches made at once (the work-ahead's) keep their own."""
        wanted = np.unique(np.asarray(indices, dtype=np.int64))
        cells = self.rows.take(wanted, [self.column]).column(0).to_pylist()
        with self._lock:
            for k, cell in zip(wanted.tolist(), cells):
                entry = self._ready.setdefault(k, [cell, 0])
                entry[1] += 1
        try:
            yield
        finally:
            with self._lock:
                for k in wanted.tolist():
                    entry = self._ready[k]
                    entry[1] -= 1
                    if not entry[1]:
                        del self._ready[k]

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_ready"], state["_lock"] = {}, None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def __call__(self, index: int) -> bytes:
        entry = self._ready.get(int(index))
        value = entry[0] if entry is not None else self.rows.value(index, self.column)
        data = image_bytes(value, self.column, self.rows.where(index))
        if isinstance(data, list):  # not an image column: refused when made
            raise TypeError(f"Column {self.column!r} holds lists, not {IMAGE_CELLS}.")
        return data


class TableImages(ImageSource):
    """The images of a table's column (see `ImageCells`), decoded by the loader; SMOTE
    searches `features=` only (no thumbnails of every row's image)."""

    @property
    def features(self) -> None:  # type: ignore[override]
        return None

    def load_batch(self, request: BatchRequest) -> tuple[Any, Any]:
        """The batch's images, their cells read in one `take` first (`ImageCells.batch`):
        a row group is read once for the batch, not once per row."""
        cells = self.loader.read
        if not isinstance(cells, ImageCells):
            return super().load_batch(request)
        partners = request.partners
        wanted = request.indices if partners is None else np.concatenate(
            [request.indices, partners[partners >= 0]])
        with cells.batch(wanted):
            return super().load_batch(request)


class TableImagesAndFeatures:
    """A table's image column and its x columns as one sample of a two-input model:
    x = {image name: the image, **the x columns' inputs} (a dict of arrays per batch;
    one x column is the input named after it, as `TableFeatures` gives it).

    One row gives both parts, always: the images are decoded first, each loader row
    telling which row's image it holds (a bad image skipped with on_error="skip" stands
    in by another row of its class), and the features are read for those rows. SMOTE
    blends both parts with the same partner and weight, and searches its neighbours in
    the x columns (`features`); augmentation transforms the image alone.

    Args:
        images: the image column's source (`TableImages`).
        table_features: the x columns (`TableFeatures`): one column, or a dict of
            inputs.
        image_name: the image's key in x.
    """

    def __init__(self, images: ImageSource, table_features: TableFeatures,
                 image_name: str) -> None:
        x_col = table_features.x_col
        if isinstance(x_col, list) or image_name in ([x_col] if isinstance(x_col, str)
                                                     else x_col):
            raise ValueError(f"The image input {image_name!r} needs x columns named "
                             f"otherwise: one column, or a dict of inputs. Received: "
                             f"x_col={x_col!r}.")
        self.images, self.table_features, self.image_name = (images, table_features,
                                                             image_name)
        self.labels, self.class_names = images.labels, images.class_names

    def __len__(self) -> int:
        return len(self.images)

    def describe(self, index: int) -> str:
        return self.images.describe(index)

    @property
    def loader(self) -> Any:
        return self.images.loader

    @property
    def rescale(self) -> float | None:
        """The images' `rescale` (the features are never rescaled)."""
        return self.images.rescale

    @property
    def file_paths(self) -> list[str]:
        return self.images.file_paths

    @property
    def remote(self) -> bool:
        return self.images.remote

    def prefetch(self, indices: np.ndarray) -> None:
        self.images.prefetch(indices)

    def forget(self) -> None:
        self.images.forget()

    def pace(self, waited: bool) -> None:
        self.images.pace(waited)

    def check(self, dtype: str | None) -> None:
        self.images.check(dtype)

    def validate(self) -> list[str]:
        return self.images.validate()

    @property
    def features(self) -> TableFeatureSpace:
        """SMOTE's feature space: every x column side by side, read when asked."""
        return TableFeatureSpace(TableFeatures(self.table_features.rows,
                                               self.table_features.names))

    def for_processes(self, processes: int) -> TableImagesAndFeatures:
        images = self.images.for_processes(processes)
        return self if images is self.images else TableImagesAndFeatures(
            images, self.table_features, self.image_name)

    def _named(self, features: Any) -> dict[str, Any]:
        """The x columns' inputs: a dict as x_col's, or one column under its name."""
        x_col = self.table_features.x_col
        return {x_col: features} if isinstance(x_col, str) else features

    def load(self, index: int) -> Any:
        return {self.image_name: self.images.load(index),
                **self._named(self.table_features.load(index))}

    def load_batch(self, request: BatchRequest) -> tuple[Any, Any]:
        """The batch's images (and SMOTE partners') decoded, the features of the rows
        whose images were decoded read in one take, both blended with the same weights,
        the images augmented, then each part converted (`rescale`: images only)."""
        loader, indices, partners = self.images.loader, request.indices, request.partners
        n = len(indices)
        synthetic, wanted = np.zeros(0, np.int64), indices
        if partners is not None:
            synthetic = np.flatnonzero(partners >= 0)
            wanted = np.concatenate([indices, partners[synthetic]])
        pixels = np.empty((len(wanted),) + loader.sample_shape, loader.pixel_dtype)

        def chunk(a: int, b: int) -> list[int]:
            held: list[int] = []  # the row whose image each position holds
            loader.load_rows(wanted[a:b], pixels[a:b], None, request.substitutes, held)
            return held

        cells = loader.read
        loader.prefetch(wanted)
        with cells.batch(wanted) if isinstance(cells, ImageCells) else (
                contextlib.nullcontext()):
            with request.stage("decode"):
                loaded = np.asarray([row for part in loader.decode_pool.in_threads(
                    len(wanted), chunk) for row in part], np.int64)
        with request.stage("read"):
            features = self._named(self.table_features.arrays(loaded))
        image = pixels[:n]
        if len(synthetic):
            assert request.lams is not None
            rows = np.zeros(n, bool)
            rows[synthetic] = True
            lams = request.lams[synthetic]
            image = batching.blend_rows(image, pixels[n:], lams, rows)
            features = {k: batching.blend_rows(v[:n].astype(np.float32), v[n:], lams, rows)
                        for k, v in features.items()}
        else:
            features = {k: v[:n] for k, v in features.items()}
        if request.augment is not None:
            with request.stage("augment"):
                done = [x for part in loader.decode_pool.in_threads(n, lambda a, b: [
                    np.asarray(request.augmented(image[k], request.positions[k])[0])
                    for k in range(a, b)]) for x in part]
            with request.stage("assemble"):
                image = default_assemble(request, self.describe)(done, indices)
        with request.stage("assemble"):
            x = {self.image_name: batching.convert(image, request.dtype, request.rescale,
                                                   request.buffers)}
            x.update(batching.convert(features, request.dtype, None, request.buffers,
                                      lambda k: self.describe(int(loaded[k]))))
        return x, None


def table_labels(rows: TableRows, y_col: str, label_mode: str | None,
                 class_names: Sequence[str] | None = None,
                 num_classes: int | None = None, delimiter: str | None = "|") -> Any:
    """The labels of column `y_col` as `labels.encoding.encode` takes them: class ids or
    class names for the class modes (a string column's names mapped as every kerasgen
    generator maps them), values for "raw" (numbers, or lists of numbers as rows);
    a null is an error naming the row. Reads that column alone."""
    rows.check_columns([y_col], "y_col")
    column = rows.column(y_col)
    refuse_nulls(column, y_col, rows.where)
    if label_mode == "raw":
        width = column_width(rows, y_col, "y_col")
        values = column_array(column, y_col, width, rows.where)
        return values.astype(np.float32) if values.dtype.kind == "f" else values
    if is_list(column.type) and label_mode != "multi_label":
        raise ValueError(f"Column {y_col!r} holds lists of labels, but label_mode="
                         f"{label_mode!r} takes one class per row. Pass label_mode="
                         "'multi_label', or 'raw' for lists of numbers.")
    types = pyarrow_module().types
    kind = column.type
    if types.is_floating(kind) and label_mode != "multi_label":
        values = np.asarray(column.to_numpy())
        if not np.all(values == np.round(values)):
            bad = int(np.flatnonzero(values != np.round(values))[0])
            raise ValueError(
                f"Column {y_col!r} must hold class ids or class names for label_mode="
                f"{label_mode!r}. Received: {values[bad]!r} at {rows.where(bad)}. Pass "
                "label_mode='raw' for real-valued targets.")
    cells = column.to_pylist()
    if types.is_boolean(kind):  # False, True: class ids 0 and 1
        cells = [int(c) for c in cells]
    return label_cells.column_labels(cells, label_mode, delimiter, y_col, rows.where,
                                     class_names, num_classes)
