"""StreamGenerator: a stream of shards of unknown length, as a Keras PyDataset.

The shards (WebDataset tar files, TFRecord files, or anything a `records(shard)` callable
reads) are read sequentially, never indexed, so the stream has no length: the generator
is infinite (`num_batches` is None; `fit` takes `steps_per_epoch`, as over a repeated
tf.data dataset), and batch b is a pure function of (seed, b, the shards' contents),
whatever Keras's workers are:

- pass p (0, 1, 2, ...) reads the shards in the seeded permutation of pass p
  (shuffle=True) or in order, and host h of H keeps perm[h::H] of it (`ShardOrder`);
- a host deals its shards of a pass to `num_streams` virtual streams: stream j reads
  shards [j::num_streams] one after another through a seeded shuffle buffer that is
  drained at the pass's end, so each record of a pass is emitted once in that pass and
  a pass's records depend on nothing before it (`VirtualStream`);
- batch b is the (b // num_streams)-th batch of stream b % num_streams.

A stream is read by whichever worker asks for one of its batches: forward to it (the
records of the batches on the way are read but not decoded; the last few are kept), or,
when it is already past, again from the start of the pass the batch lies in. Decoding,
augmentation and assembly happen in `__getitem__`, in parallel across Keras's worker
threads or processes. `get_state` records where each stream's pass began; `set_state`
replays that pass from its start, without decoding.
"""


from __future__ import annotations

import os
import threading
import zlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, Union

import numpy as np
from keras.utils import PyDataset

from kerasgen import _budget, _checks, _redact
from kerasgen import _images as images
from kerasgen import _labels as labels_mod
from kerasgen import _seeding as seeding
from kerasgen import tfrecord as tfrecord_mod
from kerasgen._typing import ColorMode, DType, ImageSize, Interpolation
from kerasgen.formats.stream_records import (  # noqa: F401  (the names stream.py had)
    _INTEGER,
    KEYS,
    CallableRecords,
    Item,
    ReadShard,
    Records,
    TFRecordRecords,
    WebDatasetRecords,
    _check_exists,
    shard_names,
)
from kerasgen.pipeline import batching
from kerasgen.pipeline.augmenting import Augmentation
from kerasgen.pipeline.stream_order import ShardOrder, VirtualStream
from kerasgen.sources import _remote

READERS = ("webdataset", "tfrecord")
Reader = Literal["webdataset", "tfrecord"]  # READERS
LABEL_MODES = ("int", "categorical", "binary", None)
StreamLabelMode = Literal["int", "categorical", "binary"]  # LABEL_MODES, less None
Shards = Union[str, "os.PathLike[str]", Sequence[Union[str, "os.PathLike[str]"]]]


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

    Pass p (0, 1, ...) reads the shards in the seeded permutation of pass p (or their
    order, shuffle=False); each host keeps perm[host_index::num_hosts]; a host deals its
    shards to `num_streams` virtual streams, each reading its shards one after another
    through a seeded shuffle buffer (drained at each pass's end: every record of a pass
    comes once in that pass, and the buffer carries nothing into the next). Batch b is
    the (b // num_streams)-th batch of stream b % num_streams, so it depends only on
    (seed, b, the shards' contents): the same with any workers, threads or processes.

    Args:
        shards: the shards: paths or URLs (read through fsspec with `storage_options`,
            in ranges under kerasgen's retry budget, docs/remote.md),
            glob patterns, WebDataset's brace notation, or a list of them; for a
            callable `records`, any names it reads.
        records: how a shard is read: "webdataset" (tar files, plain or gzip/bzip2/xz
            compressed, members grouped into samples by key as webdataset does),
            "tfrecord" (tf.train.Example records), or a callable `fn(shard) -> iterable
            of records`, each (x, label), a dict, or x alone (label_mode=None).
        image_key: where x is: a webdataset field ("jpg;png;jpeg" by default;
            alternatives separated by ";"), a feature name ("image"), or the key of a
            callable's dict records.
        label_key: where the label is, as `image_key` ("cls" by default; "label").
        compression_type: for "tfrecord": None or "" (uncompressed), "GZIP" or "ZLIB".
        image_size: the size encoded images (bytes) are resized to, as by the image
            generators (so are `color_mode`, `interpolation` and `max_pixels`);
            image_size=None keeps each image's size. Arrays are taken as they are.
        max_record_bytes: the most bytes one record may take in memory (default
            268_435_456, 256 MiB; None: no limit), checked before it is read or
            decompressed, as `max_pixels` guards decoding: a tar member's declared size,
            a sample's members together (members of fields neither `image_key` nor
            `label_key` names are passed over, not read: each counts as its 512-byte
            header), the keys of a shard's samples (remembered to find a sample split
            across the shard: 256 MiB of them at least), a TFRecord record's length.
            Above it, a ValueError names the shard, the record, the member and its
            byte offset; a compressed shard is decompressed a megabyte at a time, so a
            small file expanding to gigabytes is refused with little memory. Not used
            by a callable `records`.
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
        num_hosts: read only this host's share of each pass (see `shard`).
        host_index: this host, 0 to `num_hosts - 1`.
        augment: None, an albumentations transform or `fn(image, rng) -> image`, applied
            to each record with draws from (seed, its position b * batch_size + i).
        dtype: the batches' x dtype: "float32", "float16", "uint8", or None.
        storage_options: fsspec options for URLs (credentials, endpoint...).
        workers: Keras's PyDataset argument, as are `use_multiprocessing` and
            `max_queue_size`. A worker process reads each stream it makes batches of
            itself (skipping the records of batches other workers make, without decoding
            them), so processes pay off when decoding and augmentation cost more than
            reading; Keras starts its pool anew each epoch, and a new process starts
            reading at the start of the latest pass the training process knew (its
            first, unless it read or was restored further).

    `fit` warns that its default shuffle=True is ignored for an infinite PyDataset (the
    stream shuffles itself): pass `fit(..., shuffle=False)` to silence it.
    """

    @_redact.errors
    def __init__(self, shards: Shards, records: Reader | ReadShard = "webdataset", *,
                 image_key: str | None = None, label_key: str | None = None,
                 compression_type: tfrecord_mod.CompressionType | None = None,
                 image_size: ImageSize | None = (256, 256), color_mode: ColorMode = "rgb",
                 interpolation: Interpolation = "bilinear",
                 max_pixels: int | None = images.MAX_PIXELS,
                 max_record_bytes: int | None = _budget.MAX_RECORD_BYTES,
                 label_mode: StreamLabelMode | None = "int",
                 class_names: Sequence[str] | None = None, num_classes: int | None = None,
                 batch_size: int = 32, shuffle: bool = True, seed: int | None = None,
                 shuffle_buffer: int = 1000, num_streams: int = 4, num_hosts: int = 1,
                 host_index: int = 0, augment: Callable[..., Any] | None = None,
                 dtype: DType | None = "float32",
                 storage_options: Mapping[str, Any] | None = None, workers: int = 1,
                 use_multiprocessing: bool = False, max_queue_size: int = 10,
                 **unknown: Any) -> None:
        if unknown:
            _checks.unknown_arguments(self, unknown)
        workers = _checks.non_negative_int("workers", workers)
        super().__init__(workers=workers, use_multiprocessing=bool(use_multiprocessing)
                         and workers > 0, max_queue_size=_checks.non_negative_int(
                             "max_queue_size", max_queue_size))
        self._config = {k: v for k, v in locals().items()
                        if k not in ("self", "unknown", "__class__")}
        if shuffle and num_hosts != 1 and seed is None:
            raise ValueError("`seed` must be an integer with num_hosts > 1 and shuffle=True: "
                             "every host must draw the same permutation of the shards. "
                             "Received: seed=None.")
        self.seed = seeding.resolve_seed(seed)
        self.batch_size = _checks.positive_int("batch_size", batch_size)
        self.shuffle = bool(shuffle)
        self.shuffle_buffer = _checks.non_negative_int("shuffle_buffer", shuffle_buffer)
        self.dtype = _checks.one_of("dtype", dtype, batching.DTYPES)
        self.image_size = None if image_size is None else _checks.image_size(image_size)
        self.color_mode = images.check_color_mode(color_mode)
        self.interpolation = images.check_interpolation(interpolation)
        self.max_pixels = images.check_max_pixels(max_pixels)
        self.max_record_bytes = _budget.check_max_record_bytes(max_record_bytes)
        self._set_labels(label_mode, class_names, num_classes)
        store = _remote.Store(storage_options)  # shards' listings and reads, one budget
        self.records = self._reader(records, shards, image_key, label_key,
                                    compression_type, store)
        self.shards = self.records.names
        self._order = ShardOrder(len(self.shards), self.seed, self.shuffle, num_hosts,
                                 host_index, num_streams)
        self.num_streams = self._order.num_streams
        self.num_hosts, self.host_index = self._order.num_hosts, self._order.host_index
        self._augment = None if augment is None else Augmentation(augment, self.label_mode)
        self._streams = self._new_streams()
        self._offset = 0  # the batch gen[0] is (set_state moves it)
        self._setup()

    def _setup(self) -> None:
        self._pid, self._lock, self._asked = os.getpid(), threading.Lock(), 0
        self._dtypes = batching.OneDtype()  # dtype=None: one dtype for every batch

    def _set_labels(self, label_mode: str | None, class_names: Sequence[str] | None,
                    num_classes: int | None) -> None:
        self.label_mode = _checks.one_of("label_mode", label_mode, LABEL_MODES)
        self.class_names = None if class_names is None else [str(c) for c in class_names]
        if self.class_names is not None and len(set(self.class_names)) != len(
                self.class_names):
            _checks.fail("class_names", "distinct names", class_names)
        if num_classes is not None:
            num_classes = _checks.positive_int("num_classes", num_classes)
        if self.class_names is not None:
            if num_classes is not None and num_classes != len(self.class_names):
                _checks.fail("num_classes", f"len(class_names) = {len(self.class_names)}, "
                             "or None", num_classes)
            num_classes = len(self.class_names)
        if label_mode == "binary":
            if num_classes not in (None, 2):
                _checks.fail("num_classes", "2 (or None) with label_mode='binary'",
                             num_classes)
            num_classes = 2
        if label_mode == "categorical" and num_classes is None:
            raise ValueError("label_mode='categorical' needs `num_classes` or `class_names`"
                             ": a stream cannot infer its classes. Received: "
                             "num_classes=None, class_names=None.")
        self.num_classes = num_classes
        self._ids = {name: i for i, name in enumerate(self.class_names or ())}

    def _reader(self, records: Any, shards: Any, image_key: str | None,
                label_key: str | None, compression_type: Any,
                store: _remote.Store) -> Records:
        labeled = self.label_mode is not None
        if callable(records):
            if compression_type is not None:
                _checks.fail("compression_type", "None with a callable `records` (it "
                             "reads its shards itself)", compression_type)
            return CallableRecords(records, shard_names(shards, "shard", store), image_key,
                                   label_key, labeled)
        if records not in READERS:
            _checks.fail("records", "'webdataset', 'tfrecord' or a callable "
                         "fn(shard) -> iterable of records", records,
                         TypeError if not isinstance(records, str) else ValueError)
        if records == "webdataset" and compression_type is not None:
            _checks.fail("compression_type", "None with records='webdataset' (compressed "
                         "tar shards are recognised by their first bytes)", compression_type)
        reader: Records
        if records == "tfrecord":
            compression = tfrecord_mod.check_compression(compression_type)
            names = shard_names(shards, "TFRecord file", store)
            reader = TFRecordRecords(names, image_key, label_key, labeled, store,
                                     compression, self.max_record_bytes)
        else:
            names = shard_names(shards, "WebDataset shard", store)
            reader = WebDatasetRecords(names, image_key, label_key, labeled, store,
                                       self.max_record_bytes)
        _check_exists(reader.names, store)
        return reader

    def _new_streams(self) -> list[VirtualStream]:
        buffer = self.shuffle_buffer if self.shuffle else 0
        return [VirtualStream(self._order, j, self.records, self.batch_size, buffer,
                              self.shards) for j in range(self.num_streams)]

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        for name in ("_pid", "_lock", "_asked", "_dtypes"):
            state.pop(name)
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

    # ----------------------------------------------------------------- PyDataset face
    @property
    def num_batches(self) -> None:
        """None: a stream has no end (Keras then reads batches 0, 1, 2, ...)."""
        return None

    def __len__(self) -> int:
        raise TypeError("A StreamGenerator has no length: it streams its shards without "
                        "end. Pass steps_per_epoch= to fit (steps= to evaluate and "
                        "predict), as for a repeated tf.data dataset.")

    def __bool__(self) -> bool:
        return True

    def shard(self, num_hosts: int, host_index: int) -> StreamGenerator:
        """A generator reading host `host_index`'s share of each pass: the shards
        perm[host_index::num_hosts] (tf.data's `shard` over files). The hosts' shares
        of a pass partition the shards."""
        if self.num_hosts != 1:
            raise ValueError(f"This generator is already host {self.host_index} of "
                             f"{self.num_hosts}: call shard() on the unsharded one.")
        return StreamGenerator(**{**self._config, "seed": self.seed,
                                  "num_hosts": num_hosts, "host_index": host_index})

    @_redact.errors
    def __getitem__(self, index: int) -> Any:
        if isinstance(index, bool) or not isinstance(index, (int, np.integer)):
            raise TypeError(f"Batch index must be an integer. Received: {index!r}")
        if index < 0:
            raise IndexError(f"Batch index must be non-negative: a stream has no end to "
                             f"count from. Received: {index}")
        if self._pid != os.getpid():
            self._setup()
        with self._lock:
            self._asked = max(self._asked, int(index) + 1)
        b = self._offset + int(index)
        items = self._streams[b % self.num_streams].batch(b // self.num_streams)
        return self._make(b, items)

    # ----------------------------------------------------------------- batches
    def _make(self, b: int, items: list[Item]) -> Any:
        samples, ids = [], []
        labeled = self.label_mode is not None
        for n, (shard, number, raw) in enumerate(items):
            where = self.records.describe(raw, f"record {number} of shard "
                                                f"{self.shards[shard]}")
            x, label = self.records.parse(raw, where)
            x = self._decode(x, where)
            try:
                if self._augment is not None:
                    x, _ = self._augment.apply(x, self.seed, 0, b * self.batch_size + n)
            except (ValueError, TypeError) as error:
                named = getattr(error, "named", None)
                if named is None:
                    raise
                raise named(where) from None
            samples.append(x)
            if labeled:
                ids.append(self._class_id(label, where))

        def record(n: int) -> str:
            return f"record {items[n][1]} of shard {self.shards[items[n][0]]}"

        # the type that holds every record, then `dtype` where given: a value it would
        # change is an error naming its record, never cast in silence
        x = batching.convert(batching.stack(samples, where=record), self.dtype,
                             where=record)
        if self.dtype is None:  # a batch of another dtype than the first: Keras'd cast it
            self._dtypes.check(x, f"batch {b}", lambda: record(0),
                               "Return one type for every record, or pass a `dtype`.")
        if not labeled:
            return x
        targets = labels_mod.Targets(self.label_mode, class_ids=np.asarray(ids, np.int64),
                                     num_classes=self.num_classes)
        return x, targets.batch(np.arange(len(ids)))

    def _decode(self, x: Any, where: str) -> Any:
        if isinstance(x, (bytes, bytearray, memoryview)) or (
                isinstance(x, np.ndarray) and x.dtype == np.uint8 and x.ndim == 1):
            data = x if isinstance(x, np.ndarray) else np.frombuffer(x, np.uint8)
            image = images.decode_bytes(data, self.color_mode, self.image_size, where,
                                        self.max_pixels)
            if self.image_size is None:
                return image
            return images.resize(image, self.image_size, self.color_mode,
                                 self.interpolation)
        if isinstance(x, (np.ndarray, np.generic, int, float, list)):
            return np.asarray(x)
        raise TypeError(f"A record's x must be encoded image bytes or an array. Received: "
                        f"{type(x).__name__} in {where}.")

    def _class_id(self, label: Any, where: str) -> int:
        if label is None:
            raise ValueError(f"{where[0].upper() + where[1:]} has no label, and "
                             f"label_mode={self.label_mode!r} needs one. Pass label_key= "
                             "naming it, or label_mode=None.")
        if isinstance(label, bytes):
            label = label.decode("utf-8", "replace")
        if isinstance(label, str):
            if label in self._ids:
                return self._ids[label]
            if not _INTEGER.fullmatch(label):
                names = (f"class_names={self.class_names}" if self.class_names is not None
                         else "no class_names (a stream cannot infer them)")
                raise ValueError(f"`class_names` must name every class of the stream. "
                                 f"Received: label {label!r} in {where}, and {names}.")
            label = int(label)
        if isinstance(label, bool) or not isinstance(label, (int, np.integer)):
            raise ValueError(f"A label must be a class id or a class name. Received: "
                             f"{label!r} ({type(label).__name__}) in {where}.")
        limit = self.num_classes
        if label < 0 or (limit is not None and label >= limit):
            raise ValueError(f"Label ids must lie in [0, num_classes) = [0, {limit}). "
                             f"Received: label {int(label)} in {where}.")
        return int(label)

    # ----------------------------------------------------------------- state
    def _identity(self) -> dict[str, Any]:
        names = "\n".join(self.shards).encode("utf-8")
        return {"shards": f"{len(self.shards)}:{zlib.crc32(names):08x}",
                "num_hosts": self.num_hosts, "host_index": self.host_index,
                "num_streams": self.num_streams, "batch_size": self.batch_size,
                "shuffle": self.shuffle, "shuffle_buffer": self.shuffle_buffer}

    def get_state(self, batches_done: int | None = None) -> dict[str, Any]:
        """A small JSON-able dict that `set_state` resumes from: the seed, the next
        batch and, for each stream, (pass, start) of the pass its next batch lies in,
        with what identifies the stream (shards, hosts, streams, batch size, shuffle).

        `batches_done`: batches of this generator consumed (model.fit's steps since it
        started or was restored); None: one past the highest batch asked for in this
        process, which is exact for a loop over `gen[i]`, not for Keras's workers or
        its tf.data prefetch (they ask for batches ahead).
        """
        done = (self._asked if batches_done is None
                else _checks.non_negative_int("batches_done", batches_done))
        batch = self._offset + done
        streams = [list(stream.pass_at(len(range(j, batch, self.num_streams))
                                       * self.batch_size))
                   for j, stream in enumerate(self._streams)]
        return {"seed": self.seed, "batch": batch, **self._identity(), "streams": streams}

    def set_state(self, state: Mapping[str, Any]) -> None:
        """Resumes from `get_state()`'s dict (here, or in another process, with any
        workers): the following batches are those the saved generator would have
        given. A state of other shards, hosts, streams, batch size or shuffle is a
        ValueError naming what changed, and changes nothing."""
        if not isinstance(state, Mapping):
            raise TypeError("`state` must be a dict from get_state(). Received: "
                            f"state of type {type(state).__name__}.")
        missing = [k for k in ("seed", "batch", "streams", *self._identity()) if k not in state]
        if missing:
            raise ValueError(f"The state lacks {', '.join(map(repr, missing))}: it is not "
                             "a StreamGenerator's get_state().")
        changed = [f"{k}={state[k]!r} (this generator: {v!r})"
                   for k, v in self._identity().items() if state[k] != v]
        if changed:
            raise ValueError("The state belongs to another stream: it was saved with "
                             + ", ".join(changed) + ".")
        seed = _checks.non_negative_int("state['seed']", state["seed"])
        batch = _checks.non_negative_int("state['batch']", state["batch"])
        streams = state["streams"]
        if not (isinstance(streams, Sequence) and len(streams) == self.num_streams and all(
                isinstance(s, Sequence) and len(s) == 2 and all(
                    isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in s)
                and (s[0] > 0 or s[1] == 0) for s in streams)):
            raise ValueError(f"state['streams'] must hold one [pass, start] pair of "
                             f"non-negative integers per stream ({self.num_streams}). "
                             f"Received: {streams!r}.")
        for j, (_, start) in enumerate(streams):
            if start > len(range(j, batch, self.num_streams)) * self.batch_size:
                raise ValueError(f"state['streams'][{j}] starts its pass at record {start}, "
                                 f"after the record where batch {batch} needs stream {j}: "
                                 "it is not a state get_state() wrote.")
        if seed != self.seed:
            self.seed = seed
            self._order = ShardOrder(len(self.shards), seed, self.shuffle, self.num_hosts,
                                     self.host_index, self._order.requested_streams)
            self._streams = self._new_streams()
        for stream, (pass_, start) in zip(self._streams, streams):
            stream.move_to(pass_, start)
        self._offset, self._asked = batch, 0
