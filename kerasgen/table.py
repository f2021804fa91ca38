"""TableGenerator: batches from a table: a pyarrow.Table, a pandas DataFrame, Arrow IPC
(Feather v2) files, Parquet files or a ray.data.Dataset (`formats.table_ray`), read by
row number (`formats.table_rows`), each
batch only its rows (a Parquet file's row groups, an IPC file's record batches, those
its rows lie in). A thin builder: the reader, the source (`sources._table`: numeric and
list columns, an image column decoded by the one `ImageLoader`, or both as a two-input
sample; labels of one column through the label modes) and one `ImageOptions`, handed to
`Generator`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from kerasgen import _checks, _redact
from kerasgen._typing import (Cache, ColorMode, Decoder, ImageSize, Interpolation, OnError,
                              StrPath)
from kerasgen.base import Generator
from kerasgen.builders.common import check_common, worker_processes
from kerasgen.formats.base import SampleVersions
from kerasgen.formats.table_copy import copied_if_needed
from kerasgen.formats.table_ray import is_ray_dataset, is_ray_stream, ray_rows
from kerasgen.formats.table_rows import (MAX_CACHE_BYTES, FileRows, TableRows, open_rows,
                                         pyarrow_module)
from kerasgen.loading import images
from kerasgen.loading.image_loader import ImageLoader
from kerasgen.loading.options import ImageOptions
from kerasgen.storage import remote as _remote
from kerasgen.storage.remote_cache import RemoteCache
from kerasgen.sources._table import (ImageCells, TableFeatures, TableImages,
                                     TableImagesAndFeatures, XCol, table_labels, x_columns)

# the label modes a table's label column takes ("auto": see TableGenerator)
TABLE_LABEL_MODES = ("int", "categorical", "binary", "multi_label", "raw")
TableLabelMode = Literal["int", "categorical", "binary", "multi_label", "raw"]
# what `label_mode=` takes, in its hint's order (tests/test_typing.py compares them)
LABEL_MODES = TABLE_LABEL_MODES + ("auto", None)


class TableGenerator(Generator):
    """Batches of the rows of a table: numeric columns as features, a column of encoded
    images decoded as the image generators decode files, or both (a dict of inputs);
    labels from one column.

    Args:
        table: a pyarrow.Table (or RecordBatch); a pandas DataFrame (converted to Arrow
            once); or local files: an Arrow IPC / Feather v2 file (memory-mapped: a
            batch reads the record batches its rows lie in), Parquet files (a row group
            is read, with the selected columns only, when a row in it is asked for);
            a path, a glob pattern ("data/train-*.parquet", matches sorted) or a list of
            them, read as one table in that order. The files' kind is read from their
            first bytes. Or a `ray.data.Dataset`: materialized once, in order (its
            blocks stay in Ray's object store; the driver holds their references and
            row counts, counted beside the blocks), a batch fetching the blocks its
            rows lie in, the columns read only (see docs/tables.md#a-ray-dataset);
            made in this process's threads or in Ray actors (`engine=kg.RayEngine()`),
            not in worker processes (`use_multiprocessing=True` is refused).
        x_col: the features: a numeric column ((n,) batches; a list column of numbers,
            each row one length: (n, length)); a list of them ((n, k): side by side, a
            list column taking its length); or {input name: column or columns} (dict
            batches, for a model with named inputs). With `image_col`: one column (its
            input named after it) or a dict, beside the image (see below).
        y_col: the label column: class ids or class names for "int", "categorical",
            "binary" (names mapped to ids as every kerasgen generator maps them: sorted,
            or as `class_names` says); lists of labels for "multi_label"; numbers or
            lists of numbers for "raw". Read whole once (that column alone).
        image_col: a column of encoded images (PNG, JPEG, ... bytes), of image paths, or
            of {"bytes", "path"} structs (Hugging Face's `Image` feature), decoded by
            kerasgen's ImageLoader with the image options below (as TFRecordGenerator
            decodes its records). With `x_col` too, x is a dict for a two-input model:
            {image_col: images (n, h, w, c), **x_col's inputs}; one row gives both
            parts always (a bad image skipped with on_error="skip" stands in by another
            row of its class, features and all); SMOTE blends both with one partner
            and weight, its neighbours found in the x columns; `augment` and `rescale`
            apply to the images alone.
        label_mode: "auto" (default): None without `y_col`; with it "raw" when the
            column holds floats or lists of numbers, "multi_label" for lists of class
            names, else "int". Or "int", "categorical",
            "binary", "multi_label", "raw", None (x alone).
        class_names: the classes in class-id order (default: the sorted distinct
            labels).
        label_delimiter: separates several labels in one string cell for "multi_label"
            ("a|b"), as CSVGenerator's; a cell holding it under a single-label mode is
            an error naming its row. None: a cell is one label.
        max_cache_bytes: the decoded row groups (record batches) of files, or the
            fetched blocks of a Ray dataset, kept in memory for the next batches,
            least recently used dropped (default 256 MiB; at least the last one read
            is kept). Each worker process (each Ray actor) has its own.
        arrow_copy: for Parquet files read in a shuffled or sampled order. None
            (default): where the columns read hold more than `max_cache_bytes` (a
            shuffled batch would read its row groups again: `datasets` writes groups of
            up to 100 MB), those columns are copied once into an uncompressed,
            memory-mapped Arrow file in `remote_cache` (keyed by the file's version;
            else this process's temporary folder), as `datasets` converts Parquet
            before reading it; rows are still named by the Parquet file. True: always;
            False: never (read by row group).
        image_size: for `image_col`: (height, width) every image is resized to; the
            other image options (`color_mode`, `interpolation`, `crop_to_aspect_ratio`,
            `pad_to_aspect_ratio`, `rescale`, `decoder`, `on_error`, `decode_threads`,
            `max_pixels`, `bit_depth`, `verbose`) as for ImageFolderGenerator.
        cache: for `image_col`: decoded images kept, as for ImageFolderGenerator, but
            None by default; a file path only for a table of files (keyed by each
            file's size and time).
        storage_options: options for fsspec's filesystem when `table` names URLs
            (s3://, gs://, https://...: each object copied once, then read by row
            group as a local file; see docs/remote.md).
        remote_cache: a folder (or `kg.RemoteCache`) keeping those copies across runs;
            None: this process's temporary folder.
        **common: see `kg.Generator`.

    A null (missing value) in a column the generator reads is a ValueError naming the
    column and the row ("row 7 of data/b.parquet"), when the generator is made where
    the table (or a Parquet file's statistics) say so, else when its batch is read.
    """

    prefetch_auto = 4  # as the image generators: batches made ahead, two at a time
    ahead_threads = 2  # (its readers and image cells are thread-safe)

    # table: a pyarrow.Table, a pandas DataFrame, or file paths (pyarrow has no hints)
    def __init__(self, table: Any, *,
                 x_col: XCol | None = None, y_col: str | None = None,
                 image_col: str | None = None,
                 label_mode: TableLabelMode | Literal["auto"] | None = "auto",
                 class_names: Sequence[str] | None = None, num_classes: int | None = None,
                 label_delimiter: str | None = "|",
                 max_cache_bytes: int = MAX_CACHE_BYTES, arrow_copy: bool | None = None,
                 image_size: ImageSize = (256, 256), color_mode: ColorMode = "rgb",
                 interpolation: Interpolation = "bilinear",
                 crop_to_aspect_ratio: bool = False, pad_to_aspect_ratio: bool = False,
                 rescale: float | None = None, cache: Cache = None,
                 on_error: OnError = "raise", decode_threads: int | None = None,
                 decoder: Decoder = "opencv", max_pixels: int | None = images.MAX_PIXELS,
                 bit_depth: int | None = None, verbose: int = 1,
                 storage_options: Mapping[str, Any] | None = None,
                 remote_cache: StrPath | RemoteCache | None = None, **common: Any) -> None:
        _checks.labels_come_from(self, common, "the `y_col` column (y_col=...)")
        check_common(self, common)
        _checks.one_of("label_mode", label_mode, LABEL_MODES)
        if x_col is None and image_col is None:
            raise ValueError(
                "TableGenerator reads x from `x_col` (numeric columns), from `image_col` "
                "(encoded images), or from both (a two-input model): pass one of them or "
                "both. Received: x_col=None, image_col=None.")
        if x_col is not None:
            x_columns(x_col)  # its form, before a file is read
        if image_col is not None and not isinstance(image_col, str):
            _checks.fail("image_col", "a column name (str)", image_col, TypeError)
        inputs = None if x_col is None or image_col is None else _inputs(x_col, image_col)
        if y_col is not None and not isinstance(y_col, str):
            _checks.fail("y_col", "one column name (str)", y_col, TypeError)
        options = ImageOptions.of(locals()).for_dtype(common.get("dtype", "float32"))
        store = _remote.Store(storage_options, _remote.check_cache(remote_cache))
        if is_ray_dataset(table) or is_ray_stream(table):
            _refuse_processes(common)
            rows: TableRows = ray_rows(table, max_cache_bytes)
        else:
            rows = open_rows(table, max_cache_bytes, store)
        ordered = common.get("shuffle", True) is False and common.get("sampler") is None
        rows = copied_if_needed(rows, _columns(x_col, image_col, y_col), arrow_copy,
                                ordered, store, verbose)
        if label_mode == "auto":
            label_mode = None if y_col is None else _auto_mode(rows, y_col)
        if class_names is None and y_col is not None:
            class_names = rows.class_names(y_col)  # a Hugging Face ClassLabel's names
        if label_mode is not None and y_col is None:
            raise ValueError(f"label_mode={label_mode!r} needs the label column: pass "
                             "`y_col`. Received: y_col=None.")
        labels = None
        if y_col is not None and label_mode is not None:
            labels = table_labels(rows, y_col, label_mode, class_names, num_classes,
                                  label_delimiter)
        self.rows, self.x_col, self.y_col, self.image_col = rows, x_col, y_col, image_col
        self._image_options = options
        source: TableFeatures | TableImages | TableImagesAndFeatures
        if image_col is not None:
            source = _image_source(rows, image_col, labels, class_names, options,
                                   worker_processes(common))
            if inputs is not None:
                source = TableImagesAndFeatures(source, TableFeatures(rows, inputs),
                                                image_col)
        else:
            assert x_col is not None
            source = TableFeatures(rows, x_col, labels, class_names)
        super().__init__(source=source, label_mode=label_mode, num_classes=num_classes,
                         **common)

    @property
    def image_options(self) -> ImageOptions:
        """The image options of `image_col` (checked once, frozen), `rescale` as
        `gen.rescale` is now."""
        return self._image_options.with_rescale(self.rescale)

    @property
    def num_rows(self) -> int:
        return self.rows.num_rows

    @property
    def paths(self) -> list[str]:
        """The table's files (glob patterns expanded); [] for an in-memory table."""
        return self.rows.paths if isinstance(self.rows, FileRows) else []

    @property
    def loader(self) -> ImageLoader | None:
        """The ImageLoader of `image_col` (None for numeric columns)."""
        return getattr(self.source, "loader", None)

    @property
    def skipped(self) -> list[str]:
        """The rows skipped so far (on_error="skip": their image could not be decoded)."""
        return [] if self.loader is None else _redact.redact_all(self.loader.skipped)


def _refuse_processes(common: dict[str, Any]) -> None:
    """A Ray dataset's blocks are read through Ray: in the driver's threads or in Ray
    actors (`engine=`), never in kerasgen's own worker processes (not Ray workers)."""
    processes = worker_processes(common)
    if processes is not None:
        raise ValueError(
            "A ray.data.Dataset's blocks are read through Ray, which kerasgen's worker "
            "processes are not connected to: `use_multiprocessing` must be False for it: "
            "read it on threads (the default) or on Ray actors (engine=kg.RayEngine()). "
            f"Received: use_multiprocessing=True, workers={processes}.")


def _columns(x_col: XCol | None, image_col: str | None, y_col: str | None) -> list[str]:
    """The columns a generator reads, in the order they are named."""
    named = x_columns(x_col) if x_col is not None else []
    if isinstance(named, dict):
        named = [c for columns in named.values() for c in columns]
    return ([named] if isinstance(named, str) else list(named)) + [
        c for c in (image_col, y_col) if c is not None]


def _inputs(x_col: XCol, image_col: str) -> XCol:
    """The x columns beside an image column: one column (its input named after it) or
    a dict {input name: column or columns}; a list is refused (no name to give it), as
    is an input named as the image column."""
    if not isinstance(x_col, (str, Mapping)):
        raise ValueError(
            "With `image_col`, batches are dicts of named inputs, so `x_col` must be one "
            "column (its input is named after it) or a dict {input name: column or "
            f"columns}}. Received: x_col={x_col!r}, image_col={image_col!r}. Pass, for "
            f"instance, x_col={{'meta': {list(x_col)!r}}}.")
    if image_col in ([x_col] if isinstance(x_col, str) else x_col):
        raise ValueError(
            f"The image input is named after `image_col` ({image_col!r}), so `x_col` "
            f"cannot name an input {image_col!r} too. Received: x_col={x_col!r}, "
            f"image_col={image_col!r}. Name the x columns' input otherwise "
            "(x_col={'meta': [...]}).")
    return x_col


def _auto_mode(rows: TableRows, y_col: str) -> TableLabelMode:
    """label_mode="auto" of column `y_col`: "raw" for floats and lists of numbers,
    "multi_label" for lists of class names, else "int"."""
    rows.check_columns([y_col], "y_col")
    pa = pyarrow_module()
    kind = rows.schema.field(y_col).type
    lists = pa.types.is_list(kind) or pa.types.is_fixed_size_list(kind) or (
        pa.types.is_large_list(kind))
    if lists and not (pa.types.is_integer(kind.value_type) or
                      pa.types.is_floating(kind.value_type)):
        return "multi_label"
    return "raw" if pa.types.is_floating(kind) or lists else "int"


def _image_source(rows: TableRows, column: str, labels: Any,
                  class_names: Sequence[str] | None, options: ImageOptions,
                  processes: int | None) -> TableImages:
    """The images of `column`, decoded by an ImageLoader of `options` reading each row's
    bytes through `ImageCells` (a file cache keys rows by their file's version)."""
    rows.check_columns([column], "image_col")
    store = None
    if isinstance(rows, FileRows):
        store = SampleVersions(rows)
    elif options.cache is not None and not (isinstance(options.cache, str) and
                                            options.cache.strip().lower() in (
                                                "auto", "memory", "none")):
        _checks.fail("cache", "'auto', 'memory' or None for an in-memory table (a file "
                     "cache keys images by their files)", options.cache)
    names = [rows.where(k) for k in range(rows.num_rows)]
    loader = ImageLoader(names, options, read=ImageCells(rows, column),
                         processes=processes, store=store)
    return TableImages(loader, labels, class_names=class_names, rescale=options.rescale,
                       describe=rows.where)
