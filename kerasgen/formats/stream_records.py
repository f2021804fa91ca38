"""Records read from shards as streams: tar (WebDataset) and TFRecord shards opened,
decompressed by their first bytes and read in order, their records parsed into (x, label);
shard names expanded (paths, globs, braces, URLs)."""

from __future__ import annotations

import json
import os
import re
import struct
import sys
import tarfile
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import IO, Any

from kerasgen import _budget, _checks
from kerasgen import tfrecord as tfrecord_mod
from kerasgen import webdataset as wds
from kerasgen.sources import _remote

_CHUNK = 1 << 18  # bytes read from a shard at once
_TAIL = 1 << 15  # bytes kept of what a tar stream read last (its end check)
_MAGIC = ((b"\x1f\x8b", "GZIP"), (b"BZh", "BZ2"), (b"\xfd7zXZ\x00", "XZ"))
_SLACK = 1 << 16  # what tarfile reads ahead of a header, beyond the budget of its reads
_KEY_COST = 40  # bytes a key remembered in a set costs beyond the string itself
_INTEGER = re.compile(r"\s*[+-]?\d+\s*")
KEYS = {"webdataset": ("jpg;png;jpeg", "cls"), "tfrecord": ("image", "label"),
        "callable": ("image", "label")}  # (image_key, label_key) by default

Item = tuple[int, int, Any]  # (shard number, record number in the shard, raw record)
ReadShard = Callable[[str], Iterable[Any]]  # records=fn: fn(shard) -> its records

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

