"""StreamGenerator: a stream of shards of unknown length, as a Keras PyDataset.

The shards (WebDataset tar files, TFRecord files, or anything a `records(shard)` callable
reads) are read sequentially, never indexed, so the stream has no length: the generator
is infinite (`num_batches` is None; `fit` takes `steps_per_epoch`, as over a repeated
tf.data dataset), and batch b is a pure function of (seed, b, the shards' contents),
wherever it is made:

- pass p (0, 1, 2, ...) reads the shards in the seeded permutation of pass p
  (shuffle=True) or in order, and host h of H keeps perm[h::H] of it (`ShardOrder`);
- a host deals its shards of a pass to `num_streams` virtual streams: stream j reads
  shards [j::num_streams] one after another through a seeded shuffle buffer that is
  drained at the pass's end, so each record of a pass is emitted once in that pass and
  a pass's records depend on nothing before it (`VirtualStream`);
- batch b is the (b // num_streams)-th batch of stream b % num_streams (`StreamOrder`).

A stream and a random-access generator differ only in their order: `StreamOrder` hands
the shared batch maker (`pipeline.making.BatchMaker`) a `StreamSlice` carrying batch b's
raw records, where `EpochOrder` hands it a permutation's slice; the records are parsed,
decoded (the image loader: `ImageOptions`, `on_error`, `cache`, `decoder`...) and
labelled by `sources._stream_records.RecordSource`, augmented by the shared augmentation
stage, and the batch is made where `pipeline.feeding.Placement` says: here, ahead on
threads (`prefetch`), on worker threads, or in kerasgen's own worker processes
(use_multiprocessing=True: shared-memory batch slots, forkserver), never Keras's pool.
A stream is read by whichever thread or process makes one of its batches: forward to
it (the records of the batches on the way are read but not decoded; the last few are
kept), or, when it is already past, again from the start of the pass the batch lies in.
`get_state` records where each stream's pass began; `set_state` replays that pass from
its start, without decoding.
"""


from __future__ import annotations

import os
import sys
import threading
import zlib
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, Union

from keras.utils import PyDataset

from kerasgen import _budget, _checks, _keras_compat, _redact
from kerasgen import _seeding as seeding
from kerasgen import _stats as stats_mod
from kerasgen import tfrecord as tfrecord_mod
from kerasgen._typing import (
    BatchAugmentSteps,
    Cache,
    ColorMode,
    Decoder,
    DType,
    ImageSize,
    Interpolation,
    OnError,
)
from kerasgen.arrays import batching
from kerasgen.formats.base import KEYS, CallableRecords, Item, ReadShard, ShardReader, open_shard  # noqa: F401  (see Shards below)
from kerasgen.formats.compression import ShardStream  # noqa: F401
from kerasgen.formats.names import check_exists, shard_names
from kerasgen.formats.table_shards import TableShardRecords
from kerasgen.formats.tar import tar_samples  # noqa: F401
from kerasgen.formats.tfrecord import (
    TFRecordRecords,
    tfrecord_records,  # noqa: F401
)
from kerasgen.formats.webdataset import WebDatasetRecords
from kerasgen.labels import encoding as label_encoding
from kerasgen.loading import images
from kerasgen.loading.options import ImageOptions
from kerasgen.pipeline import feeding as _feeding
from kerasgen.pipeline import making as _making
from kerasgen.pipeline.augmenting import Augmentation
from kerasgen.pipeline.stream_order import (  # noqa: F401
    KEEP,
    SHARD_ORDER,
    SHUFFLE_BUFFER,
    ShardOrder,
    StreamOrder,
    VirtualStream,
)
from kerasgen.sources import _core as sources_mod
from kerasgen.sources._stream_records import RecordSource
from kerasgen.storage import remote as _remote

if TYPE_CHECKING:
    import tensorflow as tf

    from kerasgen.pipeline.ray_engine import RayEngine

READERS = ("webdataset", "tfrecord", "parquet", "arrow")
Reader = Literal["webdataset", "tfrecord", "parquet", "arrow"]  # READERS
LABEL_MODES = ("int", "categorical", "binary", None)
StreamLabelMode = Literal["int", "categorical", "binary"]  # LABEL_MODES, less None
ShardPaths = Union[str, "os.PathLike[str]", Sequence[Union[str, "os.PathLike[str]"]]]

# The names this module defined before its readers and its order moved (issue 49) to
# kerasgen/formats/ and pipeline/stream_order.py, still importable from here.
Shards = ShardPaths  # the `shards` argument's type (tfrecord.Shards is another thing)
Records = ShardReader  # a shard's records read as a stream (tfrecord.Records: Examples)
# a stream's own defaults of the image options (the rest are ImageOptions')
OPTION_DEFAULTS = {"cache": None, "verbose": 0, "bit_depth": 8}  # 8: as it always decoded


class StreamGenerator(PyDataset):
    """Batches from a stream of shards read sequentially, without end: a Keras
    PyDataset whose `num_batches` is None (pass `steps_per_epoch` to `fit`, as for a
    repeated tf.data dataset; `len(gen)` is a TypeError).

    ```python
    gen = kg.StreamGenerator("shards/train-{000..099}.tar", records="webdataset",
                             image_size=(224, 224), class_names=names,
                             label_mode="categorical", batch_size=64, seed=1)
    model.fit(gen, steps_per_epoch=1000, epochs=10)
    ```

    Batch b depends only on (seed, b, the shards' contents), the same with any workers,
    threads or processes: the order of passes, hosts, virtual streams and shuffle
    buffers is the module's docstring's.

    Args:
        shards: the shards: paths or URLs (read through fsspec with `storage_options`,
            in ranges under kerasgen's retry budget, docs/remote.md),
            glob patterns, WebDataset's brace notation, or a list of them; for a
            callable `records`, any names it reads.
        records: how a shard is read: "webdataset" (tar files, plain or compressed,
            samples grouped by key), "tfrecord" (tf.train.Example records), "parquet" or
            "arrow" (the rows of Parquet / Arrow IPC files: docs/remote.md), or a callable
            `fn(shard) -> iterable of records`, each (x, label), a dict, or x alone.
        image_key: where x is: a webdataset field ("jpg;png;jpeg" by default;
            alternatives separated by ";"), a feature name ("image"), or the key of a
            callable's dict records.
        label_key: where the label is, as `image_key` ("cls" by default; "label").
        compression_type: for "tfrecord": None or "" (uncompressed), "GZIP" or "ZLIB".
        image_size: the size encoded images (bytes) are resized to, as by the image
            generators (so are `color_mode`, `interpolation` and `max_pixels`);
            image_size=None keeps each image's size. Arrays are taken as they are.
        max_record_bytes: the most bytes one record may take in memory (256 MiB; None:
            no limit), checked before it is read or decompressed (a tar member's size,
            a sample's members together, the keys of a shard's samples, a TFRecord
            record's length; compressed shards inflate a megabyte at a time); above it
            a ValueError names the shard, the record, the member and its byte offset.
            Not used by a callable `records`.
        label_mode: "int", "categorical", "binary" or None (batches are x alone).
        class_names: the classes, given up front (a stream cannot infer them): class
            names map string labels to ids; an unknown name is a ValueError naming the
            shard and the record.
        num_classes: the number of classes, given up front; an id outside
            [0, num_classes) is a ValueError naming the shard and the record.
        batch_size: records per batch (every batch is full: a stream has no end).
        shuffle: permute the shards each pass and shuffle records in a buffer.
        seed: int, or None to draw one once (shown by `repr`); with num_hosts > 1 and
            shuffle=True every host must pass the same seed.
        shuffle_buffer: records each stream's shuffle buffer holds (0 or 1: none).
        num_streams: virtual streams per host (a fixed number, not the worker count; at
            most the host's number of shards).
        num_hosts: read only this host's share of each pass (see `shard`); "auto": this process's.
        host_index: this host, 0 to `num_hosts - 1` (None: 0, or "auto"'s).
        augment: None, an albumentations transform or `fn(image, rng) -> image`, applied
            to each record with draws from (seed, its position b * batch_size + i).
        batch_augment: Keras layers or `fn(x, y, rng) -> (x, y)` applied to each batch
            with draws from (seed, b), as on the other generators.
        dtype: the batches' x dtype: "float32", "float16", "uint8", or None.
        rescale: as on the image generators (so are `crop_to_aspect_ratio`,
            `pad_to_aspect_ratio`, `decoder`, `decode_threads` and `bit_depth`; the image
            options make one `ImageOptions`, and encoded images of a fixed `image_size`
            decode on the image loader's threads).
        on_error: as on the image generators: with "skip" a record whose image cannot
            be decoded is replaced by another record of its class in its batch (of the
            batch, unlabeled), with a warning, and named in `gen.skipped`.
        cache: None (default), "auto" or "memory": decoded images kept by (shard,
            record number), so later passes decode none of them again (their records
            are still read); "auto" within 1 GiB (or a tenth of the memory), "memory"
            without limit. Each worker process keeps its own; no file cache (a
            stream's records have no lasting index). Needs `image_size`.
        stats: record where the time of making batches goes (`gen.stats()`).
        storage_options: fsspec options for URLs (credentials, endpoint...).
        prefetch: batches made ahead on background threads with workers <= 1
            ("auto": 4, made two at a time, for the built-in readers; 0, none,
            for a callable `records`, whose code may not expect a second thread).
        workers: as on the other generators (so are `use_multiprocessing` and
            `max_queue_size`): workers > 1 threads of the generator's own, or with
            use_multiprocessing=True kerasgen's own worker processes (forkserver,
            batches in shared memory, never Keras's process pool). A worker process
            reads each stream it makes batches of itself (skipping the records of
            batches other workers make, without decoding them), starting at the latest
            pass start the training process knew when the processes started.
        engine: `kg.RayEngine(...)`: Ray actors read the streams as worker processes do.

    `fit` warns that its default shuffle=True is ignored for an infinite PyDataset (the
    stream shuffles itself): pass `fit(..., shuffle=False)` to silence it.
    """

    prefetch_auto = 4  # batches worked ahead with prefetch="auto" (the built-in readers)
    ahead_threads = 2  # threads making them (one decodes while the other finishes)

    @_redact.errors
    def __init__(self, shards: ShardPaths, records: Reader | ReadShard = "webdataset", *,
                 image_key: str | None = None, label_key: str | None = None,
                 compression_type: tfrecord_mod.CompressionType | None = None,
                 image_size: ImageSize | None = (256, 256), color_mode: ColorMode = "rgb",
                 interpolation: Interpolation = "bilinear",
                 crop_to_aspect_ratio: bool = False, pad_to_aspect_ratio: bool = False,
                 max_pixels: int | None = images.MAX_PIXELS,
                 max_record_bytes: int | None = _budget.MAX_RECORD_BYTES,
                 label_mode: StreamLabelMode | None = "int",
                 class_names: Sequence[str] | None = None, num_classes: int | None = None,
                 batch_size: int = 32, shuffle: bool = True, seed: int | None = None,
                 shuffle_buffer: int = 1000, num_streams: int = 4, num_hosts: int | str = 1,
                 host_index: int | None = None, augment: Callable[..., Any] | None = None,
                 batch_augment: BatchAugmentSteps | None = None,
                 dtype: DType | None = "float32", rescale: float | None = None,
                 cache: Cache = None, on_error: OnError = "raise",
                 decode_threads: int | None = None, decoder: Decoder = "opencv",
                 stats: bool = False, storage_options: Mapping[str, Any] | None = None,
                 prefetch: int | str = "auto", workers: int = 1,
                 use_multiprocessing: bool = False, max_queue_size: int = 10,
                 engine: RayEngine | None = None, **unknown: Any) -> None:
        self._config = {k: v for k, v in locals().items()
                        if k not in ("self", "unknown", "__class__")}
        self._config.update(unknown)
        # the image options, checked once (frozen), as the image generators take them
        self.image_options = options = ImageOptions.take(  # the rest of `unknown` refused
            {k: v for k, v in self._config.items() if k in ImageOptions.names()},
            OPTION_DEFAULTS)
        unknown = {k: v for k, v in unknown.items() if k not in ImageOptions.names()}
        if unknown:
            _checks.unknown_arguments(self, unknown)
        placement = _feeding.Placement(  # a callable's code may expect one thread
            workers, use_multiprocessing, max_queue_size, prefetch,
            0 if callable(records) else self.prefetch_auto, self.ahead_threads, engine)
        super().__init__(workers=placement.workers,  # as Keras reads them (see base.py)
                         use_multiprocessing=placement.processes,
                         max_queue_size=placement.max_queue_size)
        if shuffle and num_hosts != 1 and seed is None:
            raise ValueError("`seed` must be an integer with num_hosts > 1 and shuffle=True: "
                             "every host must draw the same permutation of the shards. "
                             "Received: seed=None.")
        seed = seeding.resolve_seed(seed)
        self.batch_size = _checks.positive_int("batch_size", batch_size)
        self.shuffle = bool(shuffle)
        self.shuffle_buffer = _checks.non_negative_int("shuffle_buffer", shuffle_buffer)
        self.dtype = _checks.one_of("dtype", dtype, batching.DTYPES)
        self.image_size, self.color_mode = options.image_size, options.color_mode
        self.interpolation, self.max_pixels = options.interpolation, options.max_pixels
        self.max_record_bytes = _budget.check_max_record_bytes(max_record_bytes)
        self.label_mode = _checks.one_of("label_mode", label_mode, LABEL_MODES)
        self.class_names, self.num_classes = _classes(label_mode, class_names, num_classes)
        store = _remote.Store(storage_options)  # shards' listings and reads, one budget
        self.records = _reader(records, shards, image_key, label_key, compression_type,
                               store, self.label_mode is not None, self.max_record_bytes)
        self.shards = self.records.names
        shard_order = ShardOrder(len(self.shards), seed, self.shuffle, num_hosts,
                                 host_index, num_streams)
        self.num_streams = shard_order.num_streams
        self.num_hosts, self.host_index = shard_order.num_hosts, shard_order.host_index
        self._order = StreamOrder(shard_order, self.records, self.batch_size,
                                  self.shuffle_buffer if self.shuffle else 0, self.shards)
        self.source = placement.share(RecordSource(
            self.records, options, self.label_mode, self.class_names,
            self.num_classes, self.dtype))
        self._stats = stats_mod.BatchTimings() if stats else None
        self.augment, self.batch_augment = augment, batch_augment
        self._maker = _maker(self, placement)
        self._placement = placement
        self.prefetch = placement.prefetch
        self.fit_wait_s = None  # set by kg.callbacks.PipelineStats each epoch
        self._setup()
        self._feeding.warm_up()

    def _setup(self) -> None:
        self._pid, self._lock, self._asked = os.getpid(), threading.Lock(), 0
        self._feeding = _feeding.Feeding(self._maker, self._order, self._placement,
                                         pace=self.source.pace, name=type(self).__name__)

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        for name in ("_pid", "_lock", "_asked", "_feeding"):
            state.pop(name)
        state["_order"] = self._order.copy()
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._setup()

    def __repr__(self) -> str:
        host = f", host_index={self.host_index} of {self.num_hosts}" if (
            self.num_hosts > 1) else ""
        return (f"StreamGenerator({len(self.shards)} shards, records="
                f"{self.records.kind!r}, batch_size={self.batch_size}, "
                f"shuffle={self.shuffle}, seed={self.seed}, num_streams={self.num_streams}"
                f"{host})")

    # ----------------------------------------------------------------- what users read
    @property
    def seed(self) -> int:
        """The seed every random draw derives from (drawn once when given as None)."""
        return self._order.seed

    @property
    def epoch(self) -> int:
        """0: a stream is one endless epoch (its passes are not Keras's epochs)."""
        return 0

    @property
    def skipped(self) -> list[str]:
        """The records skipped as bad (on_error="skip") in this process."""
        return self.source.skipped

    @property
    def rescale(self) -> float | None:
        return self._maker.rescale

    def stats(self, reset: bool = False) -> dict[str, Any]:
        """As `kg.Generator.stats` (needs stats=True)."""
        return stats_mod.report(self._stats, self.fit_wait_s, reset)

    @property
    def timings(self) -> stats_mod.BatchTimings | None:
        return self._stats  # the record of the stages' time (stats=True), or None

    # ----------------------------------------------------------------- PyDataset face
    @property
    def num_batches(self) -> None:
        """None: a stream has no end (Keras reads batches 0, 1, 2, ...); Keras's adapter
        is adopted as for `kg.Generator` (its workers dropped: see _keras_compat)."""
        _keras_compat.adopt_adapter(True, own_workers=self._feeding.own_workers)
        self._feeding.prepare()
        return None

    def __len__(self) -> int:
        raise TypeError("A StreamGenerator has no length: it streams its shards without "
                        "end. Pass steps_per_epoch= to fit (steps= to evaluate and "
                        "predict), as for a repeated tf.data dataset.")

    def __bool__(self) -> bool:
        return True

    def on_epoch_end(self) -> None:
        """Nothing moves: Keras's next epoch goes on with the next batches (worker
        processes end a few seconds later unless a batch is asked for)."""
        self._feeding.idle()

    def shard(self, num_hosts: int, host_index: int) -> StreamGenerator:
        """A generator reading host `host_index`'s share of each pass, the shards
        perm[host_index::num_hosts] (tf.data's `shard` over files; a partition)."""
        if self.num_hosts != 1:
            raise ValueError(f"This generator is already host {self.host_index} of "
                             f"{self.num_hosts}: call shard() on the unsharded one.")
        return StreamGenerator(**{**self._config, "seed": self.seed,
                                  "num_hosts": num_hosts, "host_index": host_index})

    def __getitem__(self, index: int) -> Any:
        index = _batch_index(index)
        if self._pid != os.getpid():
            self._setup()
        with self._lock:
            self._asked = max(self._asked, index + 1)
        try:
            batch = self._feeding.get(index, sys.maxsize)
        except Exception as error:  # name the batch, also when raised in a worker process
            _redact.redact_error(error)
            if getattr(error, "kerasgen_bad_file", None):  # the data's fault
                raise error.with_traceback(None) from None
            raise
        if self._stats is not None and not _keras_compat.in_probe():
            self._stats.served(0, index, batching.batch_len(batch))
        return batch

    @_redact.errors
    def make_batch(self, index: int) -> Any:
        """Batch `index`, made here and now (no work-ahead, no worker): what
        `gen[index]` returns, the same bytes."""
        return self._feeding.make(int(index))

    def to_tf_dataset(self, num_parallel_calls: int | None = None,
                      prefetch: int | None = None) -> tf.data.Dataset:
        """An endless tf.data.Dataset of the batches gen[0], gen[1], ... (pass
        steps_per_epoch to fit); num_parallel_calls=None: made by the generator (its
        work-ahead, workers), else by tf.data's threads. Needs TensorFlow."""
        from kerasgen.adapter import tfdata

        return tfdata.stream_dataset(self, num_parallel_calls, prefetch)

    # ----------------------------------------------------------------- state
    def get_state(self, batches_done: int | None = None) -> dict[str, Any]:
        """A small JSON-able dict that `set_state` resumes from: the seed, the next
        batch, each stream's (pass, start) of the pass its next batch lies in, and what
        identifies the stream. `batches_done`: batches consumed (model.fit's steps since
        it started or was restored); None: one past the highest batch asked for here
        (exact for a loop over `gen[i]`, not for Keras or tf.data, which ask ahead)."""
        done = (self._asked if batches_done is None
                else _checks.non_negative_int("batches_done", batches_done))
        return self._order.get_state(done, _identity(self))

    def set_state(self, state: Mapping[str, Any]) -> None:
        """Resumes from `get_state()`'s dict (here, or in another process, with any
        workers): the following batches are those the saved generator would have
        given. A state of other shards, hosts, streams, batch size or shuffle is a
        ValueError naming what changed, and changes nothing."""
        self._order.set_state(state, _identity(self))
        self._asked = 0
        self._feeding.restart()  # worker processes start anew where the state stands


def _maker(gen: StreamGenerator, placement: _feeding.Placement) -> _making.BatchMaker:
    """The batch maker of a stream: the shared one, over its `RecordSource` (whose
    batches carry their labels, encoded: the maker's targets pass them on)."""
    sources_mod.check_batches(gen.source, gen.dtype, None, None)
    maker = _making.BatchMaker(
        gen.source, label_encoding.Targets(None), name=type(gen).__name__, dtype=gen.dtype,
        rescale=gen.image_options.rescale, augment=None if gen.augment is None else Augmentation(
            gen.augment, gen.label_mode, one_shape=gen.batch_size > 1),
        batch_augment=gen.batch_augment, label_mode=gen.label_mode, timings=gen.timings)
    placement.check(maker)
    return maker


def _batch_index(index: Any) -> int:
    """`gen[index]`'s index checked: a non-negative integer (a stream has no end)."""
    if isinstance(index, bool) or not hasattr(index, "__index__"):
        raise TypeError(f"Batch index must be an integer. Received: {index!r}")
    if int(index) < 0:
        raise IndexError(f"Batch index must be non-negative: a stream has no end to "
                         f"count from. Received: {int(index)}")
    return int(index)


def _identity(gen: StreamGenerator) -> dict[str, Any]:
    """What identifies a stream in its states."""
    names = "\n".join(gen.shards).encode("utf-8")
    return {"shards": f"{len(gen.shards)}:{zlib.crc32(names):08x}",
            "num_hosts": gen.num_hosts, "host_index": gen.host_index,
            "num_streams": gen.num_streams, "batch_size": gen.batch_size,
            "shuffle": gen.shuffle, "shuffle_buffer": gen.shuffle_buffer}


def _classes(label_mode: str | None, class_names: Sequence[str] | None,
             num_classes: int | None) -> tuple[list[str] | None, int | None]:
    """(class_names, num_classes) checked: a stream cannot infer its classes."""
    names = None if class_names is None else [str(c) for c in class_names]
    if names is not None and len(set(names)) != len(names):
        _checks.fail("class_names", "distinct names", class_names)
    if num_classes is not None:
        num_classes = _checks.positive_int("num_classes", num_classes)
    if names is not None:
        if num_classes is not None and num_classes != len(names):
            _checks.fail("num_classes", f"len(class_names) = {len(names)}, or None",
                         num_classes)
        num_classes = len(names)
    if label_mode == "binary":
        if num_classes not in (None, 2):
            _checks.fail("num_classes", "2 (or None) with label_mode='binary'", num_classes)
        num_classes = 2
    if label_mode == "categorical" and num_classes is None:
        raise ValueError("label_mode='categorical' needs `num_classes` or `class_names`: a "
                         "stream cannot infer its classes. Received: num_classes=None, "
                         "class_names=None.")
    return names, num_classes


def _reader(records: Any, shards: Any, image_key: str | None, label_key: str | None,
            compression_type: Any, store: _remote.Store, labeled: bool,
            max_record_bytes: int | None) -> ShardReader:
    """The reader of `records=` over the shards named by `shards`, checked."""
    if callable(records):
        if compression_type is not None:
            _checks.fail("compression_type", "None with a callable `records` (it reads its "
                         "shards itself)", compression_type)
        return CallableRecords(records, shard_names(shards, "shard", store), image_key,
                               label_key, labeled)
    if records not in READERS:
        _checks.fail("records", "'webdataset', 'tfrecord', 'parquet', 'arrow' or a "
                     "callable fn(shard) -> iterable of records", records,
                     TypeError if not isinstance(records, str) else ValueError)
    if records == "webdataset" and compression_type is not None:
        _checks.fail("compression_type", "None with records='webdataset' (compressed tar "
                     "shards are recognised by their first bytes)", compression_type)
    if records in ("parquet", "arrow") and compression_type is not None:
        _checks.fail("compression_type", f"None with records={records!r} (a Parquet or "
                     "Arrow IPC file's columns say how they are compressed)",
                     compression_type)
    reader: ShardReader
    if records in ("parquet", "arrow"):
        names = shard_names(shards, "Parquet or Arrow IPC file", store)
        check_exists(names, store)  # before the first one's schema is read
        reader = TableShardRecords(names, image_key, label_key, labeled, store,
                                   max_record_bytes, records)
    elif records == "tfrecord":
        compression = tfrecord_mod.check_compression(compression_type)
        names = shard_names(shards, "TFRecord file", store)
        reader = TFRecordRecords(names, image_key, label_key, labeled, store, compression,
                                 max_record_bytes)
    else:
        names = shard_names(shards, "WebDataset shard", store)
        reader = WebDatasetRecords(names, image_key, label_key, labeled, store,
                                   max_record_bytes)
    check_exists(reader.names, store)
    return reader
