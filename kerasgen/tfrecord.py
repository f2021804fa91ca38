"""TFRecordGenerator: tf.train.Example records with random access through an index.

What ArrayRecordGenerator (arrayrecord.py) shares with it lives here too: `Shards`, the
files of one generator (paths, lists, glob patterns, URLs; remote and compressed files
materialised once as local files), and `Records`, the tf.train.Example records of a
*container* parsed by `feature_spec`. A container knows only how many records there are
and the bytes of record k: `TFRecordFiles` (offsets of an index, CRC32C-checked) here,
`ArrayRecordFiles` (ArrayRecord's own random access) in arrayrecord.py.
"""

from __future__ import annotations

import glob
import importlib
import inspect
import os
import struct
import sys
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import IO, Any, Literal, Protocol

import numpy as np

try:
    import google_crc32c
except ImportError:  # named with the pip command in TFRecordGenerator(...)
    google_crc32c = None  # type: ignore[assignment]

from kerasgen import _budget
from kerasgen import _checks
from kerasgen.sources import _remote
from kerasgen.sources import _remote_cache
from kerasgen.pipeline.batching import EXACT_INTEGERS
from kerasgen.sources._image import ImageSource, check_rescale
from kerasgen._progress import progress
from kerasgen.sources._remote_cache import RemoteCache
from kerasgen._typing import (ColorMode, Decoder, ImageSize, Interpolation, LabelMode,
                              StrPath)
from kerasgen.base import Generator
from kerasgen.loader import DECODERS, ImageLoader
from kerasgen.sources._core import ArraySource
from kerasgen import _redact

KINDS = ("image", "label", "float", "int")
FeatureKind = Literal["image", "label", "float", "int"]  # KINDS
# The tf.train.Feature lists each kind reads; anything else is an error, never a cast.
LISTS = {"image": ("bytes_list",), "label": ("int64_list", "bytes_list"),
         "float": ("float_list",), "int": ("int64_list",)}
A_LIST = {"bytes_list": "a bytes_list", "int64_list": "an int64_list",
          "float_list": "a float_list"}
SUGGEST = {"bytes_list": "'image' (encoded image bytes) or 'label' (class names)",
           "int64_list": "'int' (or 'label' for one class id)", "float_list": "'float'"}
PIP = 'pip install "kerasgen3[tfrecord]"'
FLOAT32_EXACT = EXACT_INTEGERS["float32"]  # larger integers would be rounded in batches
# compression_type as tf.data.TFRecordDataset names it ("" and None: none)
COMPRESSION_TYPES = (None, "", "GZIP", "ZLIB")
CompressionType = Literal["", "GZIP", "ZLIB"]  # COMPRESSION_TYPES, less None
_CACHE_SUFFIX = {"GZIP": "gunzip", "ZLIB": "zlib"}  # the decompressed copy's cache key
_CHUNK = 1 << 20
_FETCH_THREADS = 8  # shards fetched or decompressed at once


def import_example(generator: str = "TFRecordGenerator", pip: str = PIP,
                    crc: bool = True) -> Any:
    try:
        from tensorflow.core.example.example_pb2 import Example
    except ImportError as error:
        raise ImportError(f"{generator} needs TensorFlow: {pip} (or pip install "
                          "tensorflow-cpu)") from error
    if crc and google_crc32c is None:
        raise ImportError(f"{generator} checks each record's CRC32C with the "
                          f"google-crc32c package: {pip} (or pip install google-crc32c)")
    return Example


def masked_crc(data: bytes) -> int:
    """The masked CRC32C that TFRecord files store after a record's length and data."""
    crc = google_crc32c.value(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


# ------------------------------------------------------------------ files and shards
def _has_magic(path: str) -> bool:
    """Whether `path` is a glob pattern ('?' starts an http(s) URL's query, not a glob)."""
    magic = "*[" if path.startswith(("http://", "https://")) else "*?["
    return any(c in path for c in magic)


def expand(files: Any, what: str, store: _remote.Store) -> list[str]:
    """The files `files` names (a path, a URL, a glob pattern of either, or a list of
    them), in order: each pattern's matches sorted; a pattern matching nothing is a
    FileNotFoundError naming it. A path that exists is never read as a pattern."""
    requirement = f"a {what} path, a glob pattern or a non-empty list of them"
    items = ([files] if isinstance(files, (str, os.PathLike))
             else list(files) if isinstance(files, Iterable) and not isinstance(files, bytes)
             else None)
    if not items:
        _checks.fail("files", requirement, files, ValueError if items == [] else TypeError)
    names: list[str] = []
    for item in items:
        if not isinstance(item, (str, os.PathLike)):
            _checks.fail("files", requirement, files, TypeError,
                         f"{item!r} is not a path")
        path = _remote.local(os.fspath(item))
        if not _has_magic(path) or (not _remote.is_url(path) and os.path.exists(path)):
            names.append(path)
            continue
        if _remote.is_url(path):
            matches = store.expand(path)
        else:
            matches = sorted(p for p in glob.glob(path, recursive=True)
                             if not os.path.isdir(p))
        if not matches:
            raise FileNotFoundError(f"No {what} matches the pattern {path}.")
        names += matches
    return names


class Shards:
    """The files of one generator, each read from a local file.

    `names` are the files as users gave them (globs expanded: paths and URLs), what
    errors name; `paths` the local files read: the file itself, or a copy in the store's
    cache (`remote_cache=`, else this process's scratch cache) of a remote file (fetched
    once) or of a compressed one (decompressed once, streamed). Copies are made when the
    Shards are (in the main process); worker processes read the same local files. A copy
    that is gone when it is opened (removed by another process's size-bounded cache) is
    made again.

    Args:
        files: a path, a URL, a glob pattern or a list of them.
        what: what a file is, in errors ("TFRecord file").
        store: the `sources._remote.Store` that reads URLs (and holds the cache).
        compression: "" (none), "GZIP" or "ZLIB" (every file).
        verbose: a progress bar for copies taking over 2 s.
        max_record_bytes: the most bytes a record may declare while a compressed file
            is decompressed (see `decompress`); None: no limit.
    """

    def __init__(self, files: Any, what: str, store: _remote.Store,
                 compression: str = "", verbose: int = 1,
                 max_record_bytes: int | None = _budget.MAX_RECORD_BYTES) -> None:
        self.what = what
        self.store = store
        self.compression = compression or ""
        self.max_record_bytes = max_record_bytes
        self.names = expand(files, what, store)
        self._lock = threading.Lock()
        for name in self.names:  # before any download: a missing file fails at once
            if not _remote.is_url(name) and not os.path.exists(name):
                raise FileNotFoundError(f"{what} not found: {name}")
        copied = [i for i, name in enumerate(self.names) if self._copied(i)]
        self.paths = list(self.names)
        if copied:
            if store.cache is None:
                _remote_cache.scratch()  # made once, before the threads use it
            doing = "Decompressing" if self.compression else "Fetching"
            pool = ThreadPoolExecutor(min(_FETCH_THREADS, len(copied)))
            try:
                done = pool.map(lambda i: self._get(self.names[i]), copied)
                for i, path in zip(copied, progress(done, f"{doing} {what}s", len(copied),
                                                    verbose)):
                    self.paths[i] = path
            finally:  # after an error, the files not started yet are not fetched
                pool.shutdown(cancel_futures=True)

    def __len__(self) -> int:
        return len(self.names)

    def _copied(self, number: int) -> bool:
        return bool(self.compression) or _remote.is_url(self.names[number])

    def shown(self, number: int) -> str:
        """File `number` as errors name it (its offsets are the decompressed stream's)."""
        name = self.names[number]
        return f"{name} (decompressed)" if self.compression else name

    def opened(self, number: int, opener: Callable[[str], Any]) -> Any:
        """opener(local path of file `number`); a copy that is gone is made again."""
        try:
            return opener(self.paths[number])
        except FileNotFoundError:
            if not self._copied(number):
                raise
        with self._lock:
            self.paths[number] = self._get(self.names[number])
        return opener(self.paths[number])

    def _get(self, name: str) -> str:
        """The local path of `name`: itself, or its copy (made when absent)."""
        if not self.compression:
            return self.store.local_copy(name, self.what) if _remote.is_url(name) else name
        source: Callable[[], str]
        if _remote.is_url(name):
            canon = self.store.canon(name)
            try:
                version = self.store.version(name) or ""
            except FileNotFoundError:
                raise FileNotFoundError(f"{self.what} not found: {name}") from None

            def source() -> str:
                return self.store.local_copy(name, self.what)
        else:
            stat = os.stat(name)
            canon, version = os.path.abspath(name), f"{stat.st_mtime_ns}:{stat.st_size}"

            def source() -> str:
                return name
        cache = self.store.cache if self.store.cache is not None else _remote_cache.scratch()
        key = RemoteCache.key(f"{canon}|{_CACHE_SUFFIX[self.compression]}", version)
        return cache.path(key, lambda out: decompress(source(), out, self.compression,
                                                      name, self.what,
                                                      self.max_record_bytes), name)

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state.pop("_lock")
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()


def compression_of(head: bytes) -> str | None:
    """"GZIP" or "ZLIB" when `head`, a file's first bytes, starts such a stream."""
    if head[:2] == b"\x1f\x8b":
        return "GZIP"
    if len(head) >= 2 and head[0] & 0x0F == 8 and (head[0] << 8 | head[1]) % 31 == 0:
        return "ZLIB"
    return None


def is_tfrecord(head: bytes) -> bool:
    """Whether `head` starts with a TFRecord header (a length and its valid CRC)."""
    return (len(head) >= 12 and google_crc32c is not None
            and masked_crc(head[:8]) == struct.unpack("<I", head[8:12])[0])


def decompress(source: str, out: IO[bytes], kind: str, name: str,
               what: str = "TFRecord file",
               limit: int | None = _budget.MAX_RECORD_BYTES) -> None:
    """Writes the decompressed bytes of the file `source` (`kind`: "GZIP" or "ZLIB",
    concatenated streams read in turn) to `out`, streamed a megabyte at a time; a stream
    that is cut short, corrupt or not `kind` is a ValueError naming `name`. The bytes
    follow the TFRecord framing as they are decompressed (`_Framing`): a record whose
    length fails its CRC32C check, or is above `limit` (max_record_bytes), is refused
    before the bytes after its header are written, so a corrupt stream or a bomb
    inflating to gigabytes costs a megabyte, not the disk."""
    def wrong(head: bytes) -> ValueError:
        found = compression_of(head)
        hint = (f"it is {found}-compressed: pass compression_type={found!r}" if found
                else "it is an uncompressed TFRecord file: pass compression_type=None"
                if is_tfrecord(head) else "nor any stream TFRecordWriter writes")
        return ValueError(f"{name} is not a {kind} stream (compression_type={kind!r}): "
                          f"{hint}.")

    inflater = _budget.Inflater(kind)
    framing = _Framing(f"{name} (decompressed)", limit)
    with _checks.open_regular(source, f"the {what}") as f:
        first = True
        try:
            for block in iter(lambda: f.read(_CHUNK), b""):
                if first and compression_of(block) != kind:
                    raise wrong(block)
                first = False
                inflater.feed(block)
                data = inflater.read()
                while data:
                    framing.feed(data)
                    out.write(data)
                    data = inflater.read()
            if first:
                raise ValueError(f"{name} is empty: not a {kind} stream "
                                 f"(compression_type={kind!r}).")
            inflater.finish()
        except _budget.BadStream as error:
            raise ValueError(f"{name}{str(error)[2:]}. Restore an intact copy, or write the "
                             "file again.") from None
    framing.end()


class _Framing:
    """Follows the TFRecord framing of a stream fed chunk by chunk (`feed`): each
    record's 12-byte header is checked as soon as it is complete (its length's CRC32C,
    the length against `limit`), and `end` checks that the last record is whole. Errors
    name `name`, the record and its byte offset."""

    def __init__(self, name: str, limit: int | None) -> None:
        self.name, self.limit = name, limit
        self.pos = 0  # bytes fed
        self.next = 0  # where the next record's header begins
        self.record = 0  # its number
        self.partial = b""  # its first bytes, when a chunk ended inside it

    def feed(self, data: bytes) -> None:
        begin = self.pos
        self.pos += len(data)
        if self.partial:
            self.partial += data[:12 - len(self.partial)]
            if len(self.partial) < 12:
                return
            header, self.partial = self.partial, b""
            self._header(header)
        while self.next < self.pos:
            at = self.next - begin
            header = data[at:at + 12]
            if len(header) < 12:
                self.partial = header
                return
            self._header(header)

    def _header(self, header: bytes) -> None:
        length = header_length(header)
        if length is None:
            hint = " (what it decompresses to is not a TFRecord file)" if (
                self.record == 0) else ""
            raise ValueError(f"{self.name} is corrupt: the length of record {self.record} "
                             f"(at byte {self.next}) fails its CRC32C check{hint}. Rewrite "
                             "the file, or restore an intact copy.")
        if self.limit is not None and length > self.limit:
            raise _budget.too_large(f"Record {self.record} (byte {self.next}) of "
                                    f"{self.name}", length, self.limit,
                                    "declares a length of")
        self.next += 16 + length
        self.record += 1

    def end(self) -> None:
        if self.partial:
            raise ValueError(f"{self.name} is truncated: an incomplete header of record "
                             f"{self.record} at byte {self.next}.")
        if self.next > self.pos:
            raise ValueError(f"{self.name} is truncated: record {self.record - 1} ends "
                             f"early, at byte {self.pos} of {self.next}.")


def check_compression(compression_type: Any) -> str:
    """`compression_type` checked, as tf.data names it: "" for none."""
    if not (compression_type is None or (isinstance(compression_type, str)
                                         and compression_type in COMPRESSION_TYPES)):
        _checks.fail("compression_type", "None, '' (uncompressed), 'GZIP' or 'ZLIB', as "
                     "tf.data.TFRecordDataset names them", compression_type)
    return compression_type or ""


# ------------------------------------------------------------------ TFRecord container
def index_records(paths: Sequence[StrPath], verbose: int = 1,
                  names: Sequence[str] | None = None,
                  limit: int | None = _budget.MAX_RECORD_BYTES,
                  ) -> list[tuple[int, int, int, int]]:
    """[(file number, data offset, length, record number in the file)] of every record,
    reading only the 12-byte headers; the CRC of each length is checked here, before the
    length is trusted, and the length against `limit` (max_record_bytes; None: none).
    Errors name file i as `names[i]` (default: its path)."""
    index = []
    bound = sys.maxsize if limit is None else limit
    for number, path in enumerate(progress(paths, "Indexing TFRecord files", len(paths),
                                           verbose)):
        name = os.fspath(path) if names is None else names[number]
        with _checks.open_regular(path, "the TFRecord file") as f:
            size = os.fstat(f.fileno()).st_size
            offset = record = 0
            while offset < size:
                header = f.read(12)
                if len(header) < 12:
                    if record == 0:
                        _refuse_compressed(name, header)
                    raise ValueError(f"{name} is truncated: an incomplete header of record "
                                     f"{record} at byte {offset}.")
                length = header_length(header)
                if length is None:
                    if record == 0:
                        _refuse_compressed(name, header)
                    raise ValueError(
                        f"{name} is corrupt: the length of record {record} (at byte "
                        f"{offset}) fails its CRC32C check. Rewrite the file, or restore "
                        f"an intact copy.")
                if length > bound:
                    raise _budget.too_large(f"Record {record} (byte {offset}) of {name}",
                                            length, bound, "declares a length of")
                data_offset = offset + 12
                offset = data_offset + length + 4
                if offset > size:
                    raise ValueError(f"{name} is truncated: record {record} at byte "
                                     f"{data_offset - 12} claims {length} bytes.")
                index.append((number, data_offset, length, record))
                record += 1
                f.seek(offset)
    return index


def header_length(header: bytes) -> int | None:
    """The length a record's 12-byte header declares, or None when the header fails
    its masked CRC32C (the one reading of TFRecord framing, for every reader)."""
    length, stored = struct.unpack("<QI", header)
    return int(length) if masked_crc(header[:8]) == stored else None


def _refuse_compressed(path: StrPath, head: bytes) -> None:
    """Raises a ValueError saying so when `head`, the first bytes of `path`, start a
    GZIP or ZLIB stream (TFRecordWriter's compressed forms), not a record."""
    kind = compression_of(head)
    if kind is not None:
        raise ValueError(
            f"{path} is compressed with {kind} (compression_type={kind!r} when written). "
            f"Pass compression_type={kind!r}, as to tf.data.TFRecordDataset: kerasgen "
            "then decompresses it once into a local copy, whose records it reads by "
            f"offset. Decompress it beforehand{' (gunzip)' if kind == 'GZIP' else ''} "
            "to skip the copy.")


class Container(Protocol):
    """What `Records` reads records from: their count, the bytes of record k (checked),
    and record k in words ("record 3 (byte 120) of part-0.tfrecord")."""

    generator: str  # the public generator reading it, in errors
    shards: Shards

    def __len__(self) -> int: ...

    def data(self, k: int) -> bytes: ...

    def where(self, k: int) -> str: ...


class TFRecordFiles:
    """The records of TFRecord files (uncompressed local files: `shards.paths`), read by
    the offsets of an index built once, each record's CRC32C checked when read."""

    generator = "TFRecordGenerator"

    def __init__(self, shards: Shards, verbose: int = 1) -> None:
        self.shards = shards
        self.index = index_records(shards.paths, verbose,
                                   [shards.shown(i) for i in range(len(shards))],
                                   shards.max_record_bytes)
        self._local = threading.local()

    def __len__(self) -> int:
        return len(self.index)

    def _file(self, number: int) -> IO[bytes]:
        handles = getattr(self._local, "files", None)
        if handles is None:
            handles = self._local.files = {}  # one open file per thread and TFRecord
        f = handles.get(number)
        if f is None:
            f = handles[number] = self.shards.opened(
                number, lambda path: _checks.open_regular(path, "the TFRecord file"))
        return f

    def data(self, k: int) -> bytes:
        """The data of record `k`, once its CRC32C matched the one stored."""
        number, offset, length, record = self.index[k]
        f = self._file(number)
        f.seek(offset)
        data, footer = f.read(length), f.read(4)
        if len(footer) < 4:
            raise ValueError(f"{self.shards.shown(number)} is truncated: "
                             f"{self.where(k)} ends early (the file changed after "
                             f"it was indexed).")
        if masked_crc(data) != struct.unpack("<I", footer)[0]:
            raise ValueError(
                f"{self.shards.shown(number)} is corrupt: the data of record {record} (byte "
                f"{offset - 12}) fails its CRC32C check ({length} bytes). Rewrite the file, "
                f"or restore an intact copy.")
        return data

    def where(self, k: int) -> str:
        number, offset, _, record = self.index[k]
        return f"record {record} (byte {offset - 12}) of {self.shards.shown(number)}"

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state.pop("_local", None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._local = threading.local()


# ------------------------------------------------------------------ tf.train.Example
def _value(feature, kind, key, describe):
    """The value(s) of `feature` read as `kind`, or a ValueError naming the feature, the
    kind asked for and the list the record holds (`describe()` says which record)."""
    which = feature.WhichOneof("kind")
    values: Sequence[Any] = getattr(feature, which).value if which else ()
    if which is not None and which not in LISTS[kind]:
        hint = (f"Declare it {SUGGEST[which]}." if kind != "label" else
                "A label is one class id (int64_list) or one class name (bytes_list).")
        raise ValueError(
            f"`feature_spec[{key!r}]` is {kind!r}, which reads {' or '.join(LISTS[kind])}, "
            f"but feature {key!r} of {describe()} is {A_LIST[which]}. {hint}")
    if kind in ("image", "label"):
        if len(values) != 1:
            raise ValueError(
                f"`feature_spec[{key!r}]` is {kind!r}, which takes one value per record, but "
                f"feature {key!r} of {describe()} holds {len(values)}.")
        value = values[0]
        return value.decode() if kind == "label" and isinstance(value, bytes) else value
    if kind == "float":
        return np.asarray(values, dtype="float32")
    ints = np.asarray(values, dtype="int64")
    inexact = (ints > FLOAT32_EXACT) | (ints < -FLOAT32_EXACT)
    if inexact.any():
        raise ValueError(
            f"Feature {key!r} of {describe()} holds {int(ints[inexact.argmax()])}: numeric "
            f"features are float32 in batches, which hold integers exactly only up to "
            f"2**24. Leave the feature out of `feature_spec`, or scale it.")
    return ints


class _ExampleGenerator(Generator):
    """What TFRecordGenerator and ArrayRecordGenerator share: tf.train.Example records
    of a container (see `Records`), their feature spec, labels and image options."""

    prefetch_auto = 2

    def _setup(self, open_container: Callable[[_remote.Store], Container],
               feature_spec: Any, *, image_size: ImageSize, color_mode: ColorMode,
               interpolation: Interpolation, rescale: float | None, decoder: Decoder,
               label_mode: LabelMode | Literal["auto"] | None,
               class_names: Sequence[str] | None, verbose: int,
               storage_options: Mapping[str, Any] | None,
               remote_cache: StrPath | RemoteCache | None, example: Callable[[], Any],
               common: dict[str, Any]) -> None:
        """Checks the arguments and the dependencies (`example()` imports the Example
        class), opens the container (`open_container(store)`: the files listed, fetched
        and indexed) and starts the Generator."""
        known = inspect.signature(Generator.__init__).parameters
        unknown = {k: v for k, v in common.items() if k not in known}
        if unknown:  # Generator.__init__'s TypeError, before any file is fetched
            _checks.unknown_arguments(self, unknown)
        _checks.one_of("decoder", decoder, DECODERS)  # numeric records never use it
        spec = _check_spec(feature_spec)  # before any file is read
        example()
        store = _remote.Store(storage_options, _remote.check_cache(remote_cache))
        self.records = Records(open_container(store), spec, example, verbose)
        if label_mode == "auto":
            label_mode = "int" if self.records.label_key is not None else None
        super().__init__(source=self.records.source(image_size, color_mode, interpolation,
                                                    rescale, class_names, verbose, decoder),
                         label_mode=label_mode, **common)

    # what users read, kept on the generator (the records and the source hold them)
    @property
    def paths(self) -> list[str]:
        """The files, as given (glob patterns expanded; URLs, not their local copies)."""
        return self.records.paths

    @property
    def local_paths(self) -> list[str]:
        """The local file read for each of `paths`: the file itself, or its copy (a
        remote or compressed file's, in the cache)."""
        return list(self.records.container.shards.paths)

    @property
    def feature_spec(self) -> dict[str, FeatureKind]:
        return self.records.feature_spec

    @property
    def image_key(self) -> str | None:
        return self.records.image_key

    @property
    def label_key(self) -> str | None:
        return self.records.label_key

    @property
    def numeric_keys(self) -> list[str]:
        return self.records.numeric_keys

    @property
    def loader(self) -> ImageLoader | None:
        """The ImageLoader of "image" features (None for numeric ones)."""
        return getattr(self.source, "loader", None)

    @property
    def image_size(self) -> tuple[int, int] | None:
        """(height, width) of "image" features (None for numeric ones)."""
        return None if self.loader is None else self.loader.image_size

    @property
    def color_mode(self) -> ColorMode | None:
        return None if self.loader is None else self.loader.color_mode

    @property
    def interpolation(self) -> Interpolation | None:
        return None if self.loader is None else self.loader.interpolation


class TFRecordGenerator(_ExampleGenerator):
    """tf.train.Example records from TFRecord files, with random access: an index of
    record offsets is built once (with a progress bar), so shuffling, samplers and
    workers work as for the other generators. Needs TensorFlow (for the Example format)
    and google-crc32c: every record's length and data are checked against their stored
    CRC32C, as tf.data does, and a mismatch is an error naming the file, the record and
    its byte offset. Images are decoded by the same `ImageLoader` as image files: a batch
    on a thread pool, the next batches ahead of the training loop.

    Remote files (URLs) and compressed files are read from local copies made once, when
    the generator is made: a remote file is downloaded (and checked) into `remote_cache`,
    a compressed one decompressed into it, streamed; worker processes read the same
    copies. Batch b of epoch e is then the same as from the local, uncompressed files.

    Args:
        files: a TFRecord file, a glob pattern ("data/train-*.tfrecord", each pattern's
            matches sorted; one matching nothing is a FileNotFoundError naming it), or a
            list of them; local paths or URLs (s3://, gs://, https://, any protocol
            fsspec reads: the [remote] extra).
        feature_spec: {feature key: kind}, kinds "image" (one encoded image, bytes_list),
            "label" (one class id, int64_list, or one class name, bytes_list), "float"
            (float_list) / "int" (int64_list, up to 2**24 in magnitude): numeric
            features, concatenated in key order when there are several. One "image"
            key, or numeric keys, make x. A feature whose list is not the one its kind
            reads is an error naming the feature, both kinds and the record; nothing is
            cast. (Its old name `features=` still works, with a DeprecationWarning;
            `features=` holding an array is SMOTE's feature space, as on every
            generator.)
        compression_type: None or "" (default: uncompressed), "GZIP" or "ZLIB", as
            tf.data.TFRecordDataset takes it, for every file. A compressed file is
            decompressed once into a local copy (kept in `remote_cache`, keyed by the
            file and its version), which is indexed. A compressed file read without
            it is an error naming the compression_type to pass; a corrupt or truncated
            stream is an error naming the file.
        storage_options: options of fsspec's filesystem for URLs (credentials,
            `client_kwargs={"endpoint_url": ...}`, ...).
        remote_cache: a folder (or `kg.RemoteCache(folder, max_bytes=...)`) keeping the
            local copies of remote and compressed files between runs, checked and shared
            by processes; None (default): a temporary folder of this process. A copy
            removed by another process's size bound is made again when next opened.
        image_size: for "image" features, as for ImageFolderGenerator (so are
            `color_mode`, `interpolation` and `rescale`).
        decoder: "opencv" (default) or "nvimgcodec", for "image" features: as for
            ImageFolderGenerator (JPEG records decoded by nvImageCodec, the GPU's where
            CUDA is present).
        label_mode: "int" (default, as Keras) when there is a "label" feature, else None.
        max_record_bytes: the most bytes a record may declare (default 268_435_456,
            256 MiB; None: no limit), checked in each record's header before it is
            read, as `max_pixels` guards decoding, and while a compressed file is
            decompressed: its records' headers are checked as they come out, so a
            stream that is corrupt, or inflates to gigabytes, is refused within a
            megabyte, before it is written out. Above it, a ValueError names the file,
            the record and its byte offset.
        **common: see kg.Generator.
    """

    def __init__(self, files: StrPath | Iterable[StrPath],
                 feature_spec: Mapping[str, FeatureKind] | None = None, *,
                 compression_type: CompressionType | None = None,
                 image_size: ImageSize = (256, 256), color_mode: ColorMode = "rgb",
                 interpolation: Interpolation = "bilinear", rescale: float | None = None,
                 decoder: Decoder = "opencv",
                 label_mode: LabelMode | Literal["auto"] | None = "auto",
                 class_names: Sequence[str] | None = None, verbose: int = 1,
                 max_record_bytes: int | None = _budget.MAX_RECORD_BYTES,
                 storage_options: Mapping[str, Any] | None = None,
                 remote_cache: StrPath | RemoteCache | None = None,
                 **common: Any) -> None:
        _checks.labels_come_from(self, common, "the feature of kind 'label' in "
                                 "`feature_spec`")
        limit = self.max_record_bytes = _budget.check_max_record_bytes(max_record_bytes)
        if isinstance(common.get("features"), Mapping):  # the old name of feature_spec
            if feature_spec is not None:
                raise TypeError("TFRecordGenerator got two feature specs: `feature_spec` and "
                                "a dict `features`. Pass the {feature key: kind} dict as "
                                "`feature_spec` only; `features=` is SMOTE's feature space "
                                "(an array, one row per record).")
            _redact.warn("TFRecordGenerator(features={key: kind}) is deprecated: the spec "
                         "is now `feature_spec=` (or the second positional argument); "
                         "`features=` is SMOTE's feature space, as on every generator.",
                         DeprecationWarning, stacklevel=2)
            feature_spec = common.pop("features")
        compression = check_compression(compression_type)
        self.compression_type = compression

        def open_container(store: _remote.Store) -> TFRecordFiles:
            return TFRecordFiles(Shards(files, "TFRecord file", store, compression,
                                        verbose, limit), verbose)

        self._setup(open_container, feature_spec, image_size=image_size,
                    color_mode=color_mode, interpolation=interpolation, rescale=rescale,
                    decoder=decoder, label_mode=label_mode, class_names=class_names,
                    verbose=verbose, storage_options=storage_options,
                    remote_cache=remote_cache, example=import_example, common=common)

    @property
    def index(self) -> list[tuple[int, int, int, int]]:
        """(file number, data offset, length, record number in the file) per record (the
        offsets of the decompressed copy for a compressed file)."""
        return self.records.container.index  # type: ignore[attr-defined]

    @property
    def features(self) -> dict[str, FeatureKind]:
        """Deprecated: the {feature key: kind} dict is `feature_spec`."""
        _redact.warn("TFRecordGenerator.features is deprecated: use `feature_spec`.",
                     DeprecationWarning, stacklevel=2)
        return self.feature_spec


class Records:
    """The tf.train.Example records of a container (TFRecord offsets, ArrayRecord's
    random access: see `Container`), and their features by `feature_spec`.

    Args:
        container: the records' bytes, by number.
        feature_spec: {feature key: kind} (see TFRecordGenerator).
        example: imports and returns the Example class (again after unpickling).
        verbose: progress bars of the labels' scan.
    """

    def __init__(self, container: Container, feature_spec: Mapping[str, FeatureKind] | None,
                 example: Callable[[], Any] = import_example, verbose: int = 1) -> None:
        self.container = container
        self.feature_spec = _check_spec(feature_spec)
        spec = self.feature_spec
        self.image_key = next((k for k, v in spec.items() if v == "image"), None)
        self.label_key = next((k for k, v in spec.items() if v == "label"), None)
        self.numeric_keys = [k for k, v in spec.items() if v in ("float", "int")]
        self._import = example
        self._example = example()
        if not len(container):
            raise ValueError(f"No records in {', '.join(self.paths)}.")
        self.labels: list[Any] | None = None
        self.numeric: np.ndarray | None = None
        if self.label_key is not None or self.numeric_keys:
            self.labels, self.numeric = self._scan(verbose)
        else:  # images only: the first record's kind is checked now, each one when read
            self._read(self._record(0), self.image_key, 0)

    @property
    def paths(self) -> list[str]:
        """The files, as users gave them (globs expanded)."""
        return self.container.shards.names

    @property
    def index(self) -> Any:
        return getattr(self.container, "index", None)

    def source(self, image_size: ImageSize, color_mode: ColorMode,
               interpolation: Interpolation, rescale: float | None,
               class_names: Sequence[str] | None, verbose: int,
               decoder: Decoder = "opencv") -> ImageSource | ArraySource:
        """The records as a source: of "image" features, decoded by an ImageLoader, or of
        numeric ones, in memory."""
        if self.image_key is None:  # the image options apply to "image" features only
            return ArraySource(self.numeric, self.labels, class_names=class_names,
                               describe=self.describe)
        loader = ImageLoader([self.describe(i) for i in range(len(self.container))],
                             image_size, color_mode, interpolation, verbose=verbose,
                             read=self.image_bytes, decoder=decoder)
        return _RecordImages(loader, self.labels, class_names=class_names,
                             rescale=check_rescale(rescale), describe=self.describe)

    def _scan(self, verbose: int) -> tuple[list[Any] | None, np.ndarray | None]:
        """Labels (and numeric features) of every record, read once."""
        labels: list[Any] = []
        numeric: list[np.ndarray] = []
        for k in progress(range(len(self.container)), "Reading labels", len(self.container),
                          verbose):
            example = self._record(k)
            if self.image_key is not None:  # the kind only: images are decoded later
                self._read(example, self.image_key, k)
            if self.label_key is not None:
                labels.append(self._read(example, self.label_key, k))
            if self.numeric_keys:
                numeric.append(self._numeric_row(example, k, numeric[0] if numeric else None))
        return (labels if self.label_key is not None else None,
                np.stack(numeric) if numeric else None)

    def _numeric_row(self, example: Any, k: int, first: np.ndarray | None) -> np.ndarray:
        row = np.concatenate([self._read(example, key, k)
                              for key in self.numeric_keys]).astype("float32")
        if first is not None and len(row) != len(first):
            sizes = {key: len(self._read(example, key, k)) for key in self.numeric_keys}
            raise ValueError(
                f"Numeric features must have the same length in every record: "
                f"{self.describe(0)} has {len(first)} values, "
                f"{self.describe(k)} has {len(row)} ({sizes}).")
        return row

    def _read(self, example: Any, key: str | None, k: int) -> Any:
        assert key is not None
        return _value(self._feature(example, key, k), self.feature_spec[key], key,
                      lambda: self.describe(k))

    def _feature(self, example: Any, key: str, k: int) -> Any:
        features = example.features.feature
        if key not in features:
            where = self.describe(k)
            raise ValueError(f"{where[0].upper()}{where[1:]} has no feature {key!r}. Its "
                             f"features: {sorted(features)}.")
        return features[key]

    def _record(self, k: int) -> Any:
        """Record `k` parsed (its bytes checked by the container)."""
        data = self.container.data(k)
        try:
            example = self._example.FromString(data)
        except Exception as error:
            # protobuf comes with TensorFlow (and has no type hints)
            decode_error = importlib.import_module("google.protobuf.message").DecodeError
            if not isinstance(error, decode_error):
                raise
            raise ValueError(self._not_an_example(
                k, len(data), f"it does not parse as one: {error}")) from error
        if data and not example.HasField("features"):  # only fields Example lacks
            raise ValueError(self._not_an_example(k, len(data),
                                                  "it parses, but holds no `features`"))
        return example

    def _not_an_example(self, k: int, size: int, why: str) -> str:
        where = self.describe(k)
        return (f"{where[0].upper()}{where[1:]} is not a tf.train.Example ({why}; "
                f"{size} bytes). {self.container.generator} reads files of serialized "
                f"tf.train.Example records (writer.write(example.SerializeToString())); "
                f"rewrite the file so, or leave it out of `files`.")

    def describe(self, index: int) -> str:
        return self.container.where(index)

    def image_bytes(self, index: int) -> np.ndarray:
        """The encoded image of record `index`."""
        data = self._read(self._record(index), self.image_key, index)
        return np.frombuffer(data, dtype=np.uint8)

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state.pop("_example", None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._example = self._import()


class _RecordImages(ImageSource):
    """The images of TFRecord records: SMOTE searches `features=` only, as before
    records had thumbnails (decoding every record's image to find neighbours)."""

    @property
    def features(self) -> None:  # type: ignore[override]
        return None


def _check_spec(feature_spec: Any) -> dict[str, FeatureKind]:
    """`feature_spec` checked: {key: kind}, one "image" key or numeric keys for x, at
    most one "label" key."""
    if not isinstance(feature_spec, Mapping) or not feature_spec:
        _checks.fail("feature_spec", "a dict {feature key: kind}", feature_spec, TypeError)
    for key, kind in feature_spec.items():
        _checks.one_of(f"feature_spec[{key!r}]", kind, KINDS)
    spec = dict(feature_spec)
    kinds = list(spec.values())
    if kinds.count("image") > 1 or kinds.count("label") > 1:
        raise ValueError(f"`feature_spec` may name one 'image' and one 'label' key. "
                         f"Received: feature_spec={spec}.")
    if ("image" not in kinds) == (not any(k in ("float", "int") for k in kinds)):
        raise ValueError("`feature_spec` must name either one 'image' key or numeric "
                         "('float' / 'int') keys for x. Received: "
                         f"feature_spec={spec}.")
    return spec
