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

import json
import os
import re
import struct
import sys
import tarfile
import threading
import zlib
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import IO, Any, Literal, Union

import numpy as np
from keras.utils import PyDataset

from kerasgen.pipeline import batching
from kerasgen import _budget, _redact
from kerasgen import _checks
from kerasgen.sources import _remote
from kerasgen import _images as images
from kerasgen import _labels as labels_mod
from kerasgen import _seeding as seeding
from kerasgen import tfrecord as tfrecord_mod
from kerasgen import webdataset as wds
from kerasgen.pipeline.augmenting import Augmentation
from kerasgen._typing import ColorMode, DType, ImageSize, Interpolation

# Seeding streams of their own (kerasgen._seeding numbers the others 0-6).
SHARD_ORDER = 7  # the permutation of the shards of pass p: (seed, 7, pass)
SHUFFLE_BUFFER = 8  # the buffer of a stream: (seed, 8, pass, host_index, stream)
READERS = ("webdataset", "tfrecord")
Reader = Literal["webdataset", "tfrecord"]  # READERS
LABEL_MODES = ("int", "categorical", "binary", None)
StreamLabelMode = Literal["int", "categorical", "binary"]  # LABEL_MODES, less None
KEYS = {"webdataset": ("jpg;png;jpeg", "cls"), "tfrecord": ("image", "label"),
        "callable": ("image", "label")}  # (image_key, label_key) by default
KEEP = 4  # raw batches of records a stream keeps (asked for, or passed on the way)
_CHUNK = 1 << 18  # bytes read from a shard at once
_TAIL = 1 << 15  # bytes kept of what a tar stream read last (its end check)
_MAGIC = ((b"\x1f\x8b", "GZIP"), (b"BZh", "BZ2"), (b"\xfd7zXZ\x00", "XZ"))
_SLACK = 1 << 16  # what tarfile reads ahead of a header, beyond the budget of its reads
_KEY_COST = 40  # bytes a key remembered in a set costs beyond the string itself
_INTEGER = re.compile(r"\s*[+-]?\d+\s*")

Item = tuple[int, int, Any]  # (shard number, record number in the shard, raw record)
ReadShard = Callable[[str], Iterable[Any]]  # records=fn: fn(shard) -> its records
Shards = Union[str, "os.PathLike[str]", Sequence[Union[str, "os.PathLike[str]"]]]


class _Broken(ValueError):
    """A shard that cannot be read on; the message is the reason alone (the stream
    names the shard and the record)."""


class _TooLarge(ValueError):
    """A sample or record above max_record_bytes (`_budget.too_large`'s error in this
    module); the stream names the shard and the record."""


class _Overrun(Exception):
    """tarfile read past `ShardStream.stop` (an extended header larger than the budget)."""


# ------------------------------------------------------------------ bytes of a shard
def open_shard(name: str, store: _remote.Store) -> IO[bytes]:
    """The shard `name` open for reading: a URL through `store` (ranges read under its
    retry budget and breaker), a local regular file (a FIFO or a device is refused)
    otherwise."""
    try:
        if _remote.is_url(name):
            return store.open_stream(name, "shard")
        return _checks.open_regular(_remote.local(name), "shard")
    except FileNotFoundError:
        raise FileNotFoundError(f"Shard not found: {name}") from None


class ShardStream:
    """`read(n)` over the bytes of the open file `f`, decompressed as `compression`
    says (None: not; "auto": as its first bytes say; "GZIP", "ZLIB", "BZ2", "XZ"),
    concatenated streams in turn, each checked to its end marker, at most
    `_budget.CHUNK` bytes decompressed at a time: a stream cut short or failing to
    decompress is a `_Broken` error. It counts the bytes it gave (`pos`) and, with
    `tail=True`, keeps the last ones (`tail`); a read past `stop` (when set) is an
    `_Overrun`."""

    def __init__(self, f: IO[bytes], compression: str | None, tail: bool = False) -> None:
        self.f = f
        self.head = self._first(12)
        if compression == "auto":
            compression = next((k for magic, k in _MAGIC if self.head.startswith(magic)),
                               None)
        self.kind = compression
        self._inflater = None if compression is None else _budget.Inflater(compression)
        self._input, self._eof = self.head, False
        self._buf, self._at = b"", 0  # decompressed bytes, and how many were given
        self.pos, self._keep = 0, tail
        self.stop: int | None = None
        self._recent: deque[bytes] = deque()  # what was given last, _TAIL bytes or more
        self._recent_size = 0

    def _first(self, n: int) -> bytes:
        head = b""
        while len(head) < n:
            more = self.f.read(n - len(head))
            if not more:
                break
            head += more
        return head

    @property
    def tail(self) -> bytes:
        return b"".join(self._recent)

    def peek(self, n: int) -> bytes:
        """The next `n` bytes (fewer at the end), left to `read`."""
        while len(self._buf) - self._at < n and not self._eof:
            more = self._fill()
            self._buf, self._at = self._buf[self._at:] + more, 0
        return self._buf[self._at:self._at + n]

    def read(self, n: int = -1) -> bytes:
        parts = []
        while n != 0:
            if self._at == len(self._buf):
                if self._eof:
                    break
                self._buf, self._at = self._fill(), 0
                continue
            end = len(self._buf) if n < 0 else min(len(self._buf), self._at + n)
            parts.append(self._buf[self._at:end])
            n -= (end - self._at) if n > 0 else 0
            self._at = end
        data = b"".join(parts)
        self.pos += len(data)
        if self.stop is not None and self.pos > self.stop:
            raise _Overrun
        if self._keep and data:
            self._recent.append(data)
            self._recent_size += len(data)
            while self._recent_size - len(self._recent[0]) >= _TAIL:
                self._recent_size -= len(self._recent.popleft())
        return data

    def _fill(self) -> bytes:
        """The next bytes, at most `_budget.CHUNK` of them decompressed (maybe none
        yet); at the end, b"" and _eof."""
        inflater = self._inflater
        while True:
            if inflater is not None:
                try:
                    out = inflater.read()
                except _budget.BadStream as error:
                    raise _Broken(str(error)) from None
                if out:
                    return out
            data, self._input = self._input or self.f.read(_CHUNK), b""
            if inflater is None or not data:
                self._eof = not data
                if inflater is not None:
                    try:
                        inflater.finish()
                    except _budget.BadStream as error:
                        raise _Broken(str(error)) from None
                return data
            inflater.feed(data)


def tar_samples(f: IO[bytes], limit: int | None = _budget.MAX_RECORD_BYTES,
                fields: Iterable[str] | None = None) -> Iterator[dict[str, Any]]:
    """The samples of the tar shard open as `f` (gzip, bzip2 or xz compressed, or not),
    streamed: its regular members grouped by key as webdataset groups them
    ({"__key__": key, field: bytes}, metadata members and names without a field left
    out; with `fields`, the data of the members of other fields is passed over, not
    read: their field holds None). The archive must end with tar's end-of-archive
    marker; a shard cut short or corrupt anywhere, a key met again after others, or a
    field twice in a sample, is a `_Broken` error.

    `limit` (max_record_bytes; None: none) bounds what one sample may take in memory,
    checked before anything is read for it: a member's declared size, a sample's
    members together (the data read, and 512 bytes for each member not read), tarfile's
    own reads of a header (a pax header or a GNU long name declaring gigabytes), and
    the keys of the shard's samples remembered to find a sample split across it (at
    least `_budget.MAX_RECORD_BYTES` of them, so a lower limit refuses no shard of many
    samples); above it, a `_TooLarge` error names the member (or sample) and its byte
    offset in the (decompressed) stream."""
    stream = ShardStream(f, "auto", tail=True)
    wanted = None if fields is None else set(fields)
    sample: dict[str, Any] | None = None
    held = 0  # bytes the sample takes: the data read, a header per member not read
    seen: set[str] = set()
    remembered = 0  # bytes the keys in `seen` take, at most the budget or its default
    bound = sys.maxsize if limit is None else limit
    keys_bound = sys.maxsize if limit is None else max(limit, _budget.MAX_RECORD_BYTES)

    def too_large(what: str, size: int | None, verb: str = "declares", hint: str = "",
                  most: int = bound) -> ValueError:
        return _budget.too_large(what, size, most, verb, hint, _TooLarge)

    def header(call: Callable[[], Any], at: int) -> Any:
        """call(): tarfile reading the header at byte `at`, within the budget."""
        stream.stop = None if limit is None else stream.pos + limit + _SLACK
        try:
            return call()
        except _Overrun:
            raise too_large(f"the tar header at byte {at} (a pax header or a GNU long "
                            "name, read whole by tarfile)", None, "takes") from None
        finally:
            stream.stop = None

    try:
        _check_extended(stream.peek(tarfile.BLOCKSIZE), 0, limit)
        tar = header(lambda: tarfile.open(fileobj=stream, mode="r|",  # type: ignore[call-overload]
                                          bufsize=tarfile.RECORDSIZE), 0)
        while True:
            if tar.firstmember is None:  # (tarfile.open read the first header)
                _skip_to(tar.fileobj, tar.offset)  # the data not read, in bounded reads
                _check_extended(_peek(tar.fileobj), tar.offset, limit)
            info = header(tar.next, tar.offset)
            if info is None:
                break
            tar.members = []  # a stream keeps no list of its members
            if not info.isreg() or not info.name or wds.is_meta(info.name):
                continue
            key, field = wds.base_plus_ext(info.name)
            if key is None or field is None:
                continue
            field = field.lower()
            if sample is None or sample["__key__"] != key:
                if sample is not None:
                    yield sample
                if key in seen:
                    raise _Broken(f"sample {key!r} is not in one piece: member {info.name} "
                                  "comes after members of other samples (a sample's "
                                  "members must be consecutive)")
                seen.add(key)
                remembered += sys.getsizeof(key) + _KEY_COST
                if remembered > keys_bound:
                    raise too_large(f"the keys of its {len(seen):,} samples up to {key!r} "
                                    "(remembered to find a sample split across the shard)",
                                    remembered, "take", "Split the shard into smaller "
                                    "ones, or ", keys_bound)
                sample, held = {"__key__": key}, 0
            if field in sample:
                raise _Broken(f"sample {key!r} has two members of field {field!r} "
                              "(webdataset refuses it too: \"duplicate file name in tar "
                              "file\")")
            read = wanted is None or field in wanted
            if read and info.size > bound:
                raise too_large(f"member {info.name} of sample {key!r} (at byte "
                                f"{info.offset})", info.size)
            held += info.size if read else tarfile.BLOCKSIZE
            if held > bound:
                raise too_large(f"sample {key!r}, its members up to {info.name} (at byte "
                                f"{info.offset}; one not read counts as its 512-byte "
                                "header),", held, "take")
            if read:
                member = tar.extractfile(info)
                sample[field] = member.read() if member is not None else b""
            else:
                sample[field] = None
        end = tar.offset
    except tarfile.ReadError as error:
        if "unexpected end of data" in str(error):
            raise _Broken("it is truncated: it ends inside a member's data (an interrupted "
                          "download or copy?)") from None
        raise _Broken(f"it is not a tar archive, or it is corrupt (tarfile: {error})") from None
    # tarfile stops quietly at a header cut short or failing its checksum: the
    # end-of-archive marker (a block of zeros) must follow the last member
    begin = end - (stream.pos - len(stream.tail))
    block = stream.tail[begin:begin + tarfile.BLOCKSIZE] if begin >= 0 else bytes(512)
    if len(block) < tarfile.BLOCKSIZE:
        raise _Broken(f"it is truncated: it ends at byte {stream.pos}, where a tar header "
                      "or the end-of-archive marker should be (an interrupted download or "
                      "copy?)")
    if block.count(0) != tarfile.BLOCKSIZE:
        raise _Broken(f"it is corrupt: the block at byte {end} is neither a tar header "
                      "(its checksum fails) nor the end-of-archive marker")
    if sample is not None:
        yield sample


def _peek(fileobj: Any) -> bytes:
    """The next block of tarfile's stream `fileobj` (a tarfile._Stream), left unread;
    b"" when its buffer is not what this knows (then only `header`'s budget holds)."""
    buf = getattr(fileobj, "buf", None)
    if getattr(fileobj, "comptype", None) != "tar" or not isinstance(buf, bytes) or (
            not isinstance(getattr(fileobj, "pos", None), int)):
        return b""
    if len(buf) >= tarfile.BLOCKSIZE:  # what tarfile reads next is in its buffer
        return buf[:tarfile.BLOCKSIZE]
    block = fileobj.read(tarfile.BLOCKSIZE)
    fileobj.buf, fileobj.pos = block + fileobj.buf, fileobj.pos - len(block)
    return block


def _check_extended(block: bytes, at: int, limit: int | None) -> None:
    """A `_TooLarge` error when `block`, the tar header at byte `at`, is a pax header
    or a GNU long name (which tarfile reads whole) declaring more than `limit` bytes;
    anything else is left to tarfile."""
    if limit is None or block[156:157] not in (b"x", b"g", b"L", b"K") or len(
            block) < tarfile.BLOCKSIZE:
        return
    try:
        size = tarfile.nti(block[124:136])  # type: ignore[attr-defined]
        if size <= limit or tarfile.nti(block[148:156]) != (  # type: ignore[attr-defined]
                sum(block) - sum(block[148:156]) + 256):  # its checksum fails: tarfile's
            return
    except (tarfile.HeaderError, ValueError):
        return
    kind = "a GNU long name" if block[156:157] in (b"L", b"K") else "a pax header"
    raise _budget.too_large(f"the tar header at byte {at} ({kind}, which tarfile reads "
                            "whole)", size, limit, error=_TooLarge)


def _skip_to(fileobj: Any, offset: int) -> None:
    """Reads tarfile's stream `fileobj` on to byte `offset` in reads of 64 KiB at most,
    stopping at its end (tarfile then finds it truncated): tarfile's own seek would
    read a declared 100 GB in 10 KB reads even past the end of the data."""
    while fileobj.tell() < offset:
        if not fileobj.read(min(offset - fileobj.tell(), 1 << 16)):
            return


def tfrecord_records(f: IO[bytes], compression: str,
                     limit: int | None = _budget.MAX_RECORD_BYTES) -> Iterator[bytes]:
    """The data of each record of the TFRecord file open as `f` ("" for uncompressed,
    "GZIP" or "ZLIB"), streamed, each length and data checked against its CRC32C; a
    file cut short or corrupt anywhere is a `_Broken` error, a length above `limit`
    (max_record_bytes) a `_TooLarge` one, before the record is read."""
    stream = ShardStream(f, compression or None)
    found = tfrecord_mod.compression_of(stream.head)
    if compression and found != compression:
        plain = tfrecord_mod.is_tfrecord(stream.head)
        raise _Broken(f"it is not a {compression} stream (compression_type={compression!r})"
                      + (": it is an uncompressed TFRecord file, pass compression_type=None"
                         if plain else f": it is {found}-compressed" if found
                         else " (empty)" if not stream.head else ""))
    number = 0
    while True:
        header = stream.read(12)
        if not header:
            return
        if len(header) < 12:
            raise _Broken("it is truncated: a record's 12-byte header is cut short")
        length = tfrecord_mod.header_length(header)
        if length is None:
            hint = (f" (it is {found}-compressed: pass compression_type={found!r})"
                    if number == 0 and found and not compression else "")
            raise _Broken(f"it is corrupt: a record's length fails its CRC32C check{hint}")
        if limit is not None and length > limit:
            raise _budget.too_large(f"its header (at byte {stream.pos - 12})", length, limit,
                                    "declares a length of", error=_TooLarge)
        data, footer = stream.read(length), stream.read(4)
        if len(footer) < 4:
            raise _Broken(f"it is truncated: the record ends early ({len(data)} of its "
                          f"{length} bytes)")
        if tfrecord_mod.masked_crc(data) != struct.unpack("<I", footer)[0]:
            raise _Broken(f"it is corrupt: the record's data fails its CRC32C check "
                          f"({length} bytes)")
        number += 1
        yield data


# ------------------------------------------------------------------ readers
def _keys(key: Any, argument: str) -> list[str]:
    """The alternatives of `key` ("image;jpg" -> ["image", "jpg"]), case kept."""
    if not isinstance(key, str) or not key.strip() or any(
            not part.strip() or part != part.strip() for part in key.split(";")):
        _checks.fail(argument, "a key, or alternatives separated by ';' ('jpg;png')", key,
                     TypeError if not isinstance(key, str) else ValueError)
    return key.split(";")


def _first(record: Mapping[str, Any], keys: list[str], argument: str, where: str) -> Any:
    found = next((k for k in keys if k in record), None)
    if found is None:
        held = ", ".join(repr(k) for k in record if k != "__key__")
        raise ValueError(f"{where[0].upper() + where[1:]} has no {';'.join(keys)!r} "
                         f"({argument}): it holds {held}. Pass {argument}= naming one of "
                         "them" + (", or label_mode=None to read no labels"
                                   if argument == "label_key" else "") + ".")
    return record[found]


class Records:
    """How the records of one shard are read (`__call__`: (shard number, record number,
    raw record) in order, errors naming the shard and the record) and what a raw record
    holds (`parse`: (x, label)). Subclasses: `WebDatasetRecords`, `TFRecordRecords`,
    `CallableRecords`."""

    kind = "callable"

    def __init__(self, names: Sequence[str], image_key: str | None, label_key: str | None,
                 labeled: bool = True, store: _remote.Store | None = None,
                 max_record_bytes: int | None = _budget.MAX_RECORD_BYTES) -> None:
        self.names = list(names)
        self.labeled = labeled  # whether `parse` must find a label
        self.store = store if store is not None else _remote.Store()  # reads URLs
        self.max_record_bytes = max_record_bytes  # what one record may take
        image_key = KEYS[self.kind][0] if image_key is None else image_key
        label_key = KEYS[self.kind][1] if label_key is None else label_key
        self.image_keys = self._keys(image_key, "image_key")
        self.label_keys = self._keys(label_key, "label_key")

    def _keys(self, key: Any, argument: str) -> list[str]:
        return _keys(key, argument)

    def records(self, name: str) -> Iterable[Any]:
        raise NotImplementedError

    def parse(self, raw: Any, where: str) -> tuple[Any, Any]:
        """(x, label) of a raw record (label None when `labeled` is False); `where`
        (from `describe`) names it in errors."""
        raise NotImplementedError

    def describe(self, raw: Any, where: str) -> str:
        """The raw record at `where` ("record k of shard s") as errors name it."""
        return where

    def __call__(self, shard: int) -> Iterator[Item]:
        name, number = self.names[shard], 0
        try:
            for raw in self.records(name):
                yield shard, number, raw
                number += 1
        except FileNotFoundError as error:
            if str(error) == f"Shard not found: {name}":
                raise
            raise FileNotFoundError(f"Cannot read record {number} of shard {name}: "
                                    f"{error}") from error
        except _Broken as error:
            raise ValueError(f"Cannot read record {number} of shard {name}: {error}. "
                             "Restore an intact copy, or write the shard again.") from None
        except _TooLarge as error:
            raise ValueError(f"Cannot read record {number} of shard {name}: "
                             f"{error}") from None
        except (ConnectionError, PermissionError):
            raise  # the store's, naming the shard: a transfer, never a bad shard
        except (OSError, ValueError, EOFError) as error:
            raise ValueError(f"Cannot read record {number} of shard {name}: "
                             f"{type(error).__name__}: {error}") from error


class WebDatasetRecords(Records):
    """records="webdataset": samples of tar shards as webdataset groups them; x is the
    first field of `image_key` a sample holds, the label the first of `label_key`,
    read as webdataset's default decoder reads it (by the field's last extension: an
    integer for "cls", a class name for "txt", either for "json")."""

    kind = "webdataset"

    def _keys(self, key: Any, argument: str) -> list[str]:
        return wds.fields_of(key, argument)  # lowercased, as members' fields are

    def records(self, name: str) -> Iterator[dict[str, Any]]:
        fields = self.image_keys + (self.label_keys if self.labeled else [])
        with open_shard(name, self.store) as f:
            yield from tar_samples(f, self.max_record_bytes, fields)

    def describe(self, raw: Any, where: str) -> str:
        return f"sample {raw['__key__']!r} ({where})"

    def parse(self, raw: Any, where: str) -> tuple[Any, Any]:
        x = _first(raw, self.image_keys, "image_key", where)
        if not self.labeled:
            return x, None
        _first(raw, self.label_keys, "label_key", where)
        field = next(k for k in self.label_keys if k in raw)
        return x, _field_label(raw[field], field, where)


def _field_label(data: bytes, field: str, where: str) -> int | str:
    kind = field.rsplit(".", 1)[-1]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"The {field!r} label of {where} must be UTF-8 text. Received: "
                         f"{data[:40]!r}.") from None
    if kind in wds.JSON_FIELDS:
        try:
            value = json.loads(text)
        except (ValueError, RecursionError):  # RecursionError: "[[[[...]]]]" nested deep
            value = None
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            raise ValueError(f"The {field!r} label of {where} must be a JSON class id or "
                             f"class name. Received: {data[:40]!r}.")
        return value
    if kind in wds.INT_FIELDS:
        if not _INTEGER.fullmatch(text):
            raise ValueError(f"The {field!r} label of {where} must be an integer class id "
                             f"as text, as webdataset reads {kind!r}. Received: "
                             f"{data[:40]!r}.")
        return int(text)
    return text.strip()


class TFRecordRecords(Records):
    """records="tfrecord": the tf.train.Example records of TFRecord files
    (`compression_type` "", "GZIP" or "ZLIB"); x is the bytes of feature `image_key`,
    the label feature `label_key` (an int64 class id or a bytes class name)."""

    kind = "tfrecord"

    def __init__(self, names: Sequence[str], image_key: str | None, label_key: str | None,
                 labeled: bool = True, store: _remote.Store | None = None,
                 compression_type: str = "",
                 max_record_bytes: int | None = _budget.MAX_RECORD_BYTES) -> None:
        super().__init__(names, image_key, label_key, labeled, store, max_record_bytes)
        self.compression_type = compression_type
        self._example = tfrecord_mod.import_example("StreamGenerator")

    def records(self, name: str) -> Iterator[bytes]:
        with open_shard(name, self.store) as f:
            yield from tfrecord_records(f, self.compression_type, self.max_record_bytes)

    def parse(self, raw: Any, where: str) -> tuple[Any, Any]:
        try:
            example = self._example.FromString(raw)
        except Exception:  # noqa: BLE001 - protobuf's DecodeError, by any name
            raise ValueError(f"{where[0].upper() + where[1:]} is not a tf.train.Example "
                             f"({len(raw)} bytes).") from None
        features = example.features.feature
        image = _first(features, self.image_keys, "image_key", where)
        key = next(k for k in self.image_keys if k in features)
        x = _feature_value(image, key, where)
        if not self.labeled:
            return x, None
        label = _first(features, self.label_keys, "label_key", where)
        found = next(k for k in self.label_keys if k in features)
        return x, _feature_value(label, found, where, text=True)

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state.pop("_example")
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._example = tfrecord_mod.import_example("StreamGenerator")


def _feature_value(feature: Any, key: str, where: str, text: bool = False) -> Any:
    """The one value of a tf.train.Feature (bytes, decoded as text with `text`)."""
    which = feature.WhichOneof("kind")
    values: Any = getattr(feature, which).value if which else ()
    if len(values) != 1 or which not in ("bytes_list", "int64_list"):
        raise ValueError(f"Feature {key!r} of {where} must hold one bytes or int64 value. "
                         f"Received: {len(values)} values in {which or 'no list'}.")
    value = values[0]
    return value.decode("utf-8", "replace") if text and isinstance(value, bytes) else value


class CallableRecords(Records):
    """records=fn: `fn(shard)` gives the records of a shard, each (x, label), a dict
    (x at `image_key`, the label at `label_key`) or x alone."""

    def __init__(self, fn: Callable[[str], Iterable[Any]], names: Sequence[str],
                 image_key: str | None, label_key: str | None, labeled: bool = True) -> None:
        super().__init__(names, image_key, label_key, labeled)
        self.fn = fn

    def records(self, name: str) -> Iterable[Any]:
        return self.fn(name)

    def parse(self, raw: Any, where: str) -> tuple[Any, Any]:
        if isinstance(raw, tuple) and len(raw) == 2:
            return raw
        if isinstance(raw, Mapping):
            x = _first(raw, self.image_keys, "image_key", where)
            labeled = self.labeled
            return x, _first(raw, self.label_keys, "label_key", where) if labeled else None
        return raw, None


# ------------------------------------------------------------------ order and streams
class ShardOrder:
    """Which shards pass p, host `host_index` and virtual stream j read.

    Pass p's shards are the permutation of (seed, SHARD_ORDER, p) (shuffle=True) or
    their order; the host keeps [host_index::num_hosts] of them (every host the same
    number each pass) and deals them to its streams: stream j reads [j::num_streams].
    A host has at most as many streams as shards (`num_streams` is that number).
    """

    def __init__(self, num_shards: int, seed: int, shuffle: bool, num_hosts: int = 1,
                 host_index: int = 0, num_streams: int = 4) -> None:
        self.num_shards, self.seed, self.shuffle = num_shards, seed, shuffle
        self.num_hosts = _checks.positive_int("num_hosts", num_hosts)
        if self.num_hosts > num_shards:
            _checks.fail("num_hosts", f"at most the number of shards ({num_shards}): hosts "
                         "split the shards, and each host needs one", num_hosts)
        self.host_index = _checks.non_negative_int("host_index", host_index)
        if self.host_index >= self.num_hosts:
            _checks.fail("host_index", f"less than num_hosts={self.num_hosts}", host_index)
        self.requested_streams = _checks.positive_int("num_streams", num_streams)
        per_host = len(range(self.host_index, num_shards, self.num_hosts))
        self.num_streams = min(self.requested_streams, per_host)

    def host_shards(self, pass_: int) -> np.ndarray:
        order = (seeding.rng(self.seed, SHARD_ORDER, pass_).permutation(self.num_shards)
                 if self.shuffle else np.arange(self.num_shards))
        return order[self.host_index::self.num_hosts]

    def stream_shards(self, stream: int, pass_: int) -> list[int]:
        return self.host_shards(pass_)[stream::self.num_streams].tolist()

    def reachable(self, stream: int) -> set[int]:
        """Every shard that `stream` may read in some pass."""
        return (set(range(self.num_shards)) if self.shuffle
                else set(self.stream_shards(stream, 0)))


class VirtualStream:
    """Virtual stream `stream` of a host: its shards of each pass (`order`) read by
    `read` (shard number -> Items) one after another, through a shuffle buffer of
    `buffer_size` records drawn from (seed, SHUFFLE_BUFFER, pass, host, stream): the
    buffer is filled, then each incoming record takes the place of a uniformly chosen
    buffered one, which is emitted; at the pass's end the buffer is drained in a random
    order. `batch(k)` is records [k * batch_size, (k + 1) * batch_size) of what it
    emits, passes following one another.

    It remembers where each pass it met began (`pass_starts`: pass -> records emitted
    before it) and restarts from the latest one at or before a batch it is already
    past. One lock per stream; a forked worker process starts reading afresh.
    """

    def __init__(self, order: ShardOrder, stream: int, read: Callable[[int], Iterator[Item]],
                 batch_size: int, buffer_size: int, names: Sequence[str]) -> None:
        self.order, self.stream, self.read = order, stream, read
        self.batch_size, self.buffer_size, self.names = batch_size, buffer_size, names
        self.pass_starts: dict[int, int] = {0: 0}
        self._setup()

    def _setup(self) -> None:
        self._pid = os.getpid()
        self._lock = threading.Lock()
        self._records: Iterator[Item] | None = None
        self._emitted = 0  # records taken from _records
        self._kept: OrderedDict[int, list[Item]] = OrderedDict()
        self._empty: set[int] = set()  # shards of the empty passes in a row

    def __getstate__(self) -> dict[str, Any]:
        keep = ("order", "stream", "read", "batch_size", "buffer_size", "names",
                "pass_starts")
        return {k: self.__dict__[k] for k in keep}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._setup()

    # ----------------------------------------------------------------- positions
    def pass_at(self, position: int) -> tuple[int, int]:
        """(pass, its start) of the latest known pass that starts at or before the
        record `position` of the stream."""
        with self._lock:
            starts = dict(self.pass_starts)
        p = max(q for q, start in starts.items() if start <= position)
        return p, starts[p]

    def move_to(self, pass_: int, start: int) -> None:
        """Forgets all reading: the next read begins at pass `pass_`, which starts at
        record `start`."""
        with self._lock:
            self._drop()
            self.pass_starts = {pass_: start}
            self._kept.clear()

    # ----------------------------------------------------------------- reading
    def batch(self, k: int) -> list[Item]:
        if self._pid != os.getpid():  # a forked process: the parent's file is not ours
            self._setup()
        with self._lock:
            kept = self._kept.get(k)
            if kept is not None:
                return kept
            try:
                return self._read_to(k)
            except BaseException:
                self._drop()
                raise

    def _read_to(self, k: int) -> list[Item]:
        size = self.batch_size
        start = k * size
        if self._records is None or start < self._emitted:
            p = max(q for q, s in self.pass_starts.items() if s <= start)
            self._drop()
            self._records, self._emitted = self._passes(p), self.pass_starts[p]
            self._empty = set()
            self._take(-self._emitted % size, keep=False)  # to a batch's first record
        while self._emitted < start:
            m = self._emitted // size
            records = self._take(size, keep=k - m <= KEEP)
            if records:
                self._keep(m, records)
        records = self._take(size, keep=True)
        self._keep(k, records)
        return records

    def _take(self, n: int, keep: bool) -> list[Item]:
        assert self._records is not None
        taken = []
        for _ in range(n):
            item = next(self._records)
            self._emitted += 1
            if keep:
                taken.append(item)
        return taken

    def _keep(self, k: int, records: list[Item]) -> None:
        self._kept[k] = records
        self._kept.move_to_end(k)
        while len(self._kept) > KEEP:
            self._kept.popitem(last=False)

    def _drop(self) -> None:
        if self._records is not None:
            records, self._records = self._records, None
            records.close()  # type: ignore[attr-defined]

    def _passes(self, p: int) -> Iterator[Item]:
        """The records emitted from pass p on, without end."""
        while True:
            self.pass_starts[p] = self._emitted
            count = 0
            for item in self._pass(p):
                count += 1
                yield item
            if count:
                self._empty.clear()
            else:
                self._no_records(p)
            p += 1

    def _pass(self, p: int) -> Iterator[Item]:
        shards = self.order.stream_shards(self.stream, p)
        items = (item for shard in shards for item in self.read(shard))
        size = self.buffer_size
        if size <= 1:
            yield from items
            return
        rng = seeding.rng(self.order.seed, SHUFFLE_BUFFER, p, self.order.host_index,
                          self.stream)
        buffer: list[Item] = []
        slots: list[int] = []
        for item in items:
            if len(buffer) < size:
                buffer.append(item)
                continue
            if not slots:
                slots = rng.integers(0, size, 256).tolist()[::-1]
            i = slots.pop()
            out, buffer[i] = buffer[i], item
            yield out
        for i in rng.permutation(len(buffer)).tolist():
            yield buffer[i]

    def _no_records(self, p: int) -> None:
        """Refuses a stream that can never emit a record again: when the empty passes
        in a row have read every shard it may read, all of them are empty."""
        self._empty.update(self.order.stream_shards(self.stream, p))
        reachable = self.order.reachable(self.stream)
        if not self._empty >= reachable:
            return
        shown = ", ".join(self.names[s] for s in sorted(reachable)[:5]) + (
            ", ..." if len(reachable) > 5 else "")
        if len(reachable) == self.order.num_shards:
            raise ValueError(f"Every shard is empty ({len(reachable)} shards: {shown}): the "
                             "stream holds no record to make a batch of.")
        raise ValueError(
            f"Every shard of virtual stream {self.stream} (of host {self.order.host_index})"
            f" is empty ({shown}): with shuffle=False stream j reads the host's shards "
            "[j::num_streams] in every pass, so it would never make a batch. Remove the "
            f"empty shards, or pass a smaller num_streams (now {self.order.num_streams}).")


# ------------------------------------------------------------------ the generator
def shard_names(shards: Any, what: str, store: _remote.Store) -> list[str]:
    """The shards `shards` names: a path or URL, a glob pattern, WebDataset's brace
    notation ("shard-{000..099}.tar") or a list of them, in order."""
    requirement = (f"a {what} path or URL, a glob or brace pattern, or a non-empty list "
                   "of them")
    items = ([shards] if isinstance(shards, (str, os.PathLike))
             else list(shards) if isinstance(shards, Iterable)
             and not isinstance(shards, (bytes, Mapping)) else None)
    if not items:
        _checks.fail("shards", requirement, shards, ValueError if items == [] else TypeError)
    names: list[str] = []
    for item in items:
        if not isinstance(item, (str, os.PathLike)):
            _checks.fail("shards", requirement, shards, TypeError, f"{item!r} is not a path")
        path = _remote.local(os.fspath(item))
        if "{" in path and (_remote.is_url(path) or not os.path.exists(path)):
            try:
                names += wds.expand_braces(path)
            except ValueError:
                _checks.fail("shards", requirement, shards, hint=f"{path!r} has unbalanced "
                             "braces")
        else:
            names.append(path)
    return tfrecord_mod.expand(names, what, store)


def _check_exists(names: list[str], store: _remote.Store) -> None:
    urls = [n for n in names if _remote.is_url(n)]
    found = dict(zip(urls, store.exists(urls, "shard"))) if urls else {}
    for name in names:
        if not found.get(name, _remote.is_url(name) or os.path.exists(name)):
            raise FileNotFoundError(f"Shard not found: {name}")


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
