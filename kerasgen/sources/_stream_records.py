"""The source of a stream's batches: raw records (shard, record number, raw) parsed,
decoded through the image loader and labelled, for the shared batch maker.

A stream's records have no index that lasts (each pass reads them anew, in another
order), so the source is made per batch: `RecordSource.of_records(records)` is a
`BatchRecords`, a source of that batch's records numbered 0..n-1 (what the
`pipeline.stream_order.StreamSlice` of the batch says), which `pipeline.making.BatchMaker`
loads like any other. Encoded images of a fixed `image_size` decode as an image
generator's files do: one `ImageLoader` (the decode threads, `decoder`, `max_pixels`,
the aspect ratio, `on_error="skip"`), driven by `sources._image.ImageSource` (augmentation
in the decode threads, `rescale`, the dtype); the loader reads the batch's bytes through
its `read=` hook. Anything else (arrays, or image_size=None: each image its own size)
is loaded one record at a time (`sources.load_each`). A bad image skipped
(on_error="skip") is replaced by another record of its class in the same batch, and
named in `skipped` as the indexed generators name it: "shard#key" (a WebDataset
sample, as `WebDatasetGenerator`), else "record n of shard".

`cache` ("auto", "memory", None) keeps decoded images keyed by (shard, record number):
the next pass decodes none of them again (its records are still read from the shards).
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from kerasgen import _checks, _redact
from kerasgen.loading import images
from kerasgen.labels import encoding as labels_mod
from kerasgen.formats.labels import INTEGER
from kerasgen.loader import ImageLoader
from kerasgen.loading.options import ImageOptions
from kerasgen.loading import cache as cache_mod
from kerasgen.sources import _batch_request as sources_mod
from kerasgen.sources._image import ImageSource

Item = tuple[int, int, Any]  # (shard number, record number in the shard, raw record)
CACHES = (None, "auto", "memory")


def check_cache(cache: Any) -> str | None:
    """`cache=` of a stream: None, "auto" or "memory" (a file cache needs samples that
    keep their index: a stream's are read anew each pass)."""
    if isinstance(cache, str) and cache.strip().lower() in ("none", "auto", "memory"):
        word = cache.strip().lower()
        return None if word == "none" else word
    if cache not in CACHES:
        _checks.fail("cache", "None, 'auto' or 'memory' for a stream (its records have no "
                     "lasting index, so no cache file)", cache,
                     ValueError if isinstance(cache, str) else TypeError)
    return cache


class RecordCache:
    """Decoded images keyed by (shard, record number), within `capacity` bytes (None:
    no limit): what is kept stays, what no longer fits is decoded again."""

    def __init__(self, capacity: int | None) -> None:
        self.capacity = capacity
        self.used = 0
        self.found: dict[tuple[int, int], np.ndarray] = {}
        self._lock = threading.Lock()

    def get(self, key: tuple[int, int]) -> np.ndarray | None:
        return self.found.get(key)

    def put(self, key: tuple[int, int], sample: np.ndarray) -> None:
        with self._lock:
            if key in self.found or (self.capacity is not None
                                     and self.used + sample.nbytes > self.capacity):
                return
            self.found[key] = sample.copy()
            self.used += sample.nbytes

    def __getstate__(self) -> dict[str, Any]:  # a worker process keeps its own
        return {"capacity": self.capacity}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["capacity"])  # type: ignore[misc]


class _Keyed:
    """One batch's view of a `RecordCache`: the loader's sample k is `keys[k]`."""

    def __init__(self, cache: RecordCache, keys: Sequence[tuple[int, int]]) -> None:
        self.cache, self.keys = cache, keys

    def get(self, index: int) -> np.ndarray | None:
        return self.cache.get(self.keys[index])

    def put(self, index: int, sample: np.ndarray) -> None:
        self.cache.put(self.keys[index], sample)


class RecordSource:
    """What a stream's batches are made from: its `reader` (a `formats.base.ShardReader`
    reader: `parse`, `describe`, `names`), the image options, the label mode and
    classes (`class_names` map string labels to ids; `num_classes` bounds ids), the
    batch dtype (for the loader's bit depth). `of_records(records)` is one batch's
    source. `skipped` lists the records skipped as bad (on_error="skip")."""

    labels = None  # a stream's labels are read with its records

    def __init__(self, reader: Any, options: ImageOptions, label_mode: str | None,
                 class_names: Sequence[str] | None, num_classes: int | None,
                 dtype: str | None, processes: int | None = None) -> None:
        self.reader, self.options = reader, options
        self.names = reader.names
        self.label_mode, self.num_classes = label_mode, num_classes
        self.class_names = None if class_names is None else list(class_names)
        self._ids = {name: i for i, name in enumerate(self.class_names or ())}
        self.rescale = options.rescale
        self.dtype = dtype
        spec = check_cache(options.cache)
        if options.image_size is None and (spec is not None or options.aspect):
            name = "cache" if spec is not None else f"{options.aspect}_to_aspect_ratio"
            _checks.fail(name, f"left out with image_size=None (images of their own size "
                         f"are neither {'cached' if spec else 'cropped nor padded'})",
                         spec if spec is not None else True)
        self.cache = None if spec is None else RecordCache(
            cache_mod.auto_budget() if spec == "auto" else None)
        self.loader = None
        if options.image_size is not None:
            self.loader = ImageLoader(  # the cache is the stream's own (`RecordCache`)
                [], options.replace(cache=None, bit_depth=options.depth(dtype)),
                read=_no_record, processes=processes)
        self.skipped: list[str] = [] if self.loader is None else self.loader.skipped
        self.lock = threading.Lock()  # of `skipped`
        self._warned = False

    def __len__(self) -> int:
        return 0  # no lasting samples: each batch has a source of its own

    def describe(self, index: int) -> str:
        return f"record at position {index} of the stream"

    def for_processes(self, processes: int) -> RecordSource:
        """This source with its decode threads split between `processes` workers."""
        shared = RecordSource(self.reader, self.options, self.label_mode, self.class_names,
                              self.num_classes, self.dtype, processes)
        shared.skipped, shared.lock = self.skipped, self.lock
        if shared.loader is not None:
            shared.loader.skipped = self.skipped
        return shared

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "lock": None}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.lock = threading.Lock()

    def check(self, dtype: str | None) -> None:
        """Refuses a `rescale` the batch dtype cannot take (as the image generators)."""
        if self.loader is not None:
            ImageSource(self.loader, rescale=self.rescale).check(dtype)
        elif self.rescale is not None and dtype not in ("float32", "float16"):
            raise ValueError(
                f"`rescale` applies to float batches only. Received: rescale={self.rescale}"
                f" with dtype={dtype!r}. Use dtype='float32', or drop rescale and let the "
                "model rescale (a keras.layers.Rescaling layer).")

    def pace(self, waited: bool) -> None:
        if self.loader is not None:
            self.loader.pace(waited)

    def of_records(self, records: Sequence[Item]) -> BatchRecords:
        """The source of one batch's records, parsed and labelled."""
        return BatchRecords(self, records)

    # ----------------------------------------------------------------- one record
    def label_value(self, label: Any, where: str) -> Any:
        """A record's label as `labels.targets` reads labels: a class id (an integer: a
        WebDataset "cls" field, an int64 feature, an int), or a class name of
        `class_names` (text: a "txt" or "json" string, a bytes feature, a str), as
        WebDatasetGenerator and TFRecordGenerator read the same records. A label that
        is missing, of another type (a bool, a float), or a name without `class_names`
        (a stream cannot infer its classes), is a ValueError naming the record."""
        if label is None:
            raise ValueError(f"{where[0].upper() + where[1:]} has no label, and "
                             f"label_mode={self.label_mode!r} needs one. Pass label_key= "
                             "naming it, or label_mode=None.")
        if isinstance(label, bytes):
            label = label.decode("utf-8", "replace")
        if isinstance(label, str):
            if label in self._ids or self.class_names is not None:
                return label  # not one of class_names: `labels.targets` says so
            hint = (" Text is a class name, as the indexed generators read it: pass "
                    "class_names in class-id order, or store the id as a number."
                    if INTEGER.fullmatch(label) else "")
            raise ValueError(f"`class_names` must name every class of the stream. "
                             f"Received: label {label!r} in {where}, and no class_names "
                             f"(a stream cannot infer them).{hint}")
        if isinstance(label, (bool, np.bool_)) or not isinstance(label, (int, np.integer)):
            raise ValueError(f"A label must be a class id or a class name. Received: "
                             f"{label!r} ({type(label).__name__}) in {where}.")
        return label

    def decode(self, x: Any, where: str) -> Any:
        """A record's x: encoded image bytes decoded (and resized to `image_size`), an
        array as it is."""
        data = _encoded(x)
        if data is not None:
            options = self.options
            image = images.decode_bytes(data, options.color_mode, options.image_size, where,
                                        options.max_pixels, options.depth(self.dtype))
            if options.image_size is None:
                return image
            return images.resize(image, options.image_size, options.color_mode,
                                 options.interpolation, aspect=options.aspect)
        if isinstance(x, (np.ndarray, np.generic, int, float, list)):
            return np.asarray(x)
        raise TypeError(f"A record's x must be encoded image bytes or an array. Received: "
                        f"{type(x).__name__} in {where}.")

    def skip(self, name: str, error: Exception) -> None:
        """Records a bad record skipped, by its `skipped_name` (a warning the first
        time)."""
        if name in self.skipped:
            return
        self.skipped.append(name)
        if not self._warned:
            self._warned = True
            _redact.warn(f"Skipping an undecodable image, replaced by another record of "
                         f"its class in its batch: {error} `gen.skipped` lists every "
                         "skipped record.", stacklevel=2)


def _no_record(index: int) -> bytes:
    raise AssertionError("the stream's loader reads a batch's records only")


def _encoded(x: Any) -> np.ndarray | None:
    """x as a uint8 array of encoded bytes, or None when it is not encoded bytes."""
    if isinstance(x, (bytes, bytearray, memoryview)):
        return np.frombuffer(x, np.uint8)
    if isinstance(x, np.ndarray) and x.dtype == np.uint8 and x.ndim == 1:
        return x
    return None


class BatchRecords:
    """The records of one batch of a stream as a source: sample k is record k, named
    "record n of shard s" (or as its format names it) in errors; its label is checked
    and mapped to a class id when the batch is loaded."""

    labels = None

    def __init__(self, shared: RecordSource, records: Sequence[Item]) -> None:
        self.shared = shared
        reader, names = shared.reader, shared.names
        self.keys = [(shard, number) for shard, number, _ in records]
        self.records = records
        self.where = [reader.describe(raw, f"record {number} of shard {names[shard]}")
                      for shard, number, raw in records]
        parsed = [reader.parse(raw, where) for (_, _, raw), where in zip(records,
                                                                         self.where)]
        self.xs = [x for x, _ in parsed]
        self.targets = None  # the labels as `labels.targets` encodes them, with their checks
        if shared.label_mode is not None:
            self.targets = labels_mod.encode_class_labels(
                [shared.label_value(label, where) for (_, label), where in zip(
                    parsed, self.where)], shared.label_mode, shared.class_names,
                shared.num_classes, self.describe)
        self.ids = None if self.targets is None else self.targets.class_ids
        self.class_names = shared.class_names

    def __len__(self) -> int:
        return len(self.xs)

    def describe(self, index: int) -> str:
        return self.where[index]

    def skipped_name(self, index: int) -> str:
        """Record `index` as `gen.skipped` names it: "shard#key" for a WebDataset
        sample (as `WebDatasetGenerator` names it), else "record n of shard"."""
        shard, number, raw = self.records[index]
        name = self.shared.names[shard]
        if isinstance(raw, dict) and isinstance(raw.get("__key__"), str):
            return f"{name}#{raw['__key__']}"
        return f"record {number} of {name}"

    def load(self, index: int) -> Any:
        return self.shared.decode(self.xs[index], self.where[index])

    def load_batch(self, request: sources_mod.BatchRequest) -> tuple[Any, Any]:
        """(x, the labels encoded, or None): the batch's images decoded by the loader
        where they are encoded images of one size, else one record at a time."""
        shared = self.shared
        request = dataclasses.replace(request, class_ids=self.ids,
                                      class_names=shared.class_names, num_samples=len(self))
        datas = [_encoded(x) for x in self.xs]
        if shared.loader is not None and all(d is not None for d in datas):
            skipped = shared.skipped
            x, _ = ImageSource(self._loader(datas), rescale=request.rescale,
                               describe=self.describe).load_batch(request)
            if skipped:  # the loader named them as its errors do; renamed whenever some
                # are listed, not only when this call added one: a second thread making
                # this batch (the work-ahead's and the caller's) may add its entry after
                # the first one's renaming, and its own count would then look unchanged
                self._rename_skipped(skipped)
        else:
            load = self.load if shared.options.on_error == "raise" else self._load_or_skip(
                request)
            x, _ = sources_mod.load_each(request, load, self.describe)
        if self.targets is None:
            return x, None
        return x, self.targets.batch(np.arange(len(self)))

    def _loader(self, datas: list[Any]) -> ImageLoader:
        """The stream's loader reading this batch: its threads, options and `skipped`
        shared, `read` and the names this batch's, the cache keyed by (shard, record)."""
        template = self.shared.loader
        assert template is not None
        if hasattr(template, "pool") and template.threads() > 1:
            template.pool()  # made once, in this process: the batches' loaders share it
        loader = object.__new__(ImageLoader)
        loader.__dict__.update(template.__dict__)
        loader.file_paths = self.where
        loader.read = datas.__getitem__
        cache = self.shared.cache
        loader.cache = None if cache is None else _Keyed(cache, self.keys)
        return loader

    def _rename_skipped(self, skipped: list[str]) -> None:
        """The records of this batch in `skipped` renamed by `skipped_name`, once each."""
        names = {where: self.skipped_name(k) for k, where in enumerate(self.where)}
        with self.shared.lock:
            renamed: list[str] = []
            for entry in skipped:
                entry = names.get(entry, entry)
                if entry not in renamed:
                    renamed.append(entry)
            skipped[:] = renamed

    def _load_or_skip(self, request: sources_mod.BatchRequest) -> Any:
        def load(index: int) -> Any:
            try:
                return self.load(index)
            except ValueError as error:
                self.shared.skip(self.skipped_name(index), error)
                candidates, group = request.substitutes(index)
                for j in candidates:
                    try:
                        return self.load(int(j))
                    except ValueError as other:
                        self.shared.skip(self.skipped_name(int(j)), other)
                raise ValueError(f"No record of {group} in its batch could be decoded to "
                                 f"stand in for {self.where[index]}; `gen.skipped` lists "
                                 "the bad records.") from None
        return load
