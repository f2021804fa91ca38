"""TFRecord files: their framing (a record is a length, its masked CRC32C, the data and
its masked CRC32C), GZIP and ZLIB compression as tf.data names it, and the two reads of
one file: `TFRecordFiles` by the offsets of an index (random access), `TFRecordRecords`
as a stream; both check every CRC and give the same records."""

from __future__ import annotations

import os
import struct
import sys
from collections.abc import Iterator, Sequence
from typing import IO, Any, Literal, Protocol

try:
    import google_crc32c
except ImportError:  # named with the pip command in import_example
    google_crc32c = None  # type: ignore[assignment]

from kerasgen import _budget, _checks
from kerasgen._progress import progress
from kerasgen._typing import StrPath
from kerasgen.formats import example as example_mod
from kerasgen.formats.base import (Broken, OpenFiles, ShardReader, TooLarge, first_of,
                                   open_shard, read_at)
from kerasgen.formats.compression import NAMES, ShardStream, sniff
from kerasgen.storage import remote as _remote

PIP = 'pip install "kerasgen3[tfrecord]"'
# compression_type as tf.data.TFRecordDataset names it ("" and None: none)
COMPRESSION_TYPES = (None, "", "GZIP", "ZLIB")
CompressionType = Literal["", "GZIP", "ZLIB"]  # COMPRESSION_TYPES, less None


def import_example(generator: str = "TFRecordGenerator", pip: str = PIP,
                   crc: bool = True) -> Any:
    """The tf.train.Example class (and, with `crc`, google-crc32c checked), or an
    ImportError naming `generator` and the pip command."""
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


def header_length(header: bytes) -> int | None:
    """The length a record's 12-byte header declares, or None when the header fails
    its masked CRC32C (the one reading of TFRecord framing, for every reader)."""
    length, stored = struct.unpack("<QI", header)
    return int(length) if masked_crc(header[:8]) == stored else None


def data_ok(data: bytes, footer: bytes) -> bool:
    """Whether a record's data matches the masked CRC32C of its 4-byte footer."""
    return masked_crc(data) == struct.unpack("<I", footer)[0]


def compression_of(head: bytes) -> str | None:
    """"GZIP" or "ZLIB" when `head`, a file's first bytes, starts such a stream."""
    kind = sniff(head, zlib=True)
    return kind if kind in ("GZIP", "ZLIB") else None


def foreign_compression(head: bytes) -> str | None:
    """The name of a compression TFRecord files are never written with ("bzip2", "xz",
    "zstd") when `head`, a file's first bytes, starts such a stream, else None."""
    kind = sniff(head)
    return NAMES[kind] if kind in ("BZ2", "XZ", "ZSTD") else None


def foreign_hint(head: bytes) -> str:
    """What to say of a file whose first record fails its CRC but whose first bytes are
    another compression's ("" when they are not)."""
    name = foreign_compression(head)
    return (f"it is {name}-compressed, which no TFRecord reader decompresses (tf.data "
            f"reads GZIP and ZLIB): decompress it ({name} -d)" if name else "")


def is_tfrecord(head: bytes) -> bool:
    """Whether `head` starts with a TFRecord header (a length and its valid CRC)."""
    return (len(head) >= 12 and google_crc32c is not None
            and masked_crc(head[:8]) == struct.unpack("<I", head[8:12])[0])


def check_compression(compression_type: Any) -> str:
    """`compression_type` checked, as tf.data names it: "" for none."""
    if not (compression_type is None or (isinstance(compression_type, str)
                                         and compression_type in COMPRESSION_TYPES)):
        _checks.fail("compression_type", "None, '' (uncompressed), 'GZIP' or 'ZLIB', as "
                     "tf.data.TFRecordDataset names them", compression_type)
    return compression_type or ""


def decompress(source: str, out: IO[bytes], kind: str, name: str,
               what: str = "TFRecord file",
               limit: int | None = _budget.MAX_RECORD_BYTES) -> None:
    """Writes the decompressed bytes of the file `source` (`kind`: "GZIP" or "ZLIB",
    concatenated streams read in turn) to `out`, streamed a megabyte at a time; a stream
    that is cut short, corrupt or not `kind` is a ValueError naming `name`. The bytes
    follow the TFRecord framing as they are decompressed (`Framing`): a record whose
    length fails its CRC32C check, or is above `limit` (max_record_bytes), is refused
    before the bytes after its header are written, so a corrupt stream or a bomb
    inflating to gigabytes costs a megabyte, not the disk."""
    framing = Framing(f"{name} (decompressed)", limit)
    with _checks.open_regular(source, f"the {what}") as f:
        stream = ShardStream(f, kind)
        head = stream.head
        if not head:
            raise ValueError(f"{name} is empty: not a {kind} stream "
                             f"(compression_type={kind!r}).")
        found = compression_of(head)
        if found != kind:
            hint = (f"it is {found}-compressed: pass compression_type={found!r}" if found
                    else "it is an uncompressed TFRecord file: pass compression_type=None"
                    if is_tfrecord(head) else foreign_hint(head)
                    or "nor any stream TFRecordWriter writes")
            raise ValueError(f"{name} is not a {kind} stream (compression_type={kind!r}): "
                             f"{hint}.")
        try:
            for data in stream.chunks():
                framing.feed(data)
                out.write(data)
        except Broken as error:
            raise ValueError(f"{name}{str(error)[2:]}. Restore an intact copy, or write the "
                             "file again.") from None
    framing.end()


class Framing:
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


# ------------------------------------------------------------------ random access
def refuse_compressed(path: StrPath, head: bytes) -> None:
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
    if foreign_compression(head) is not None:
        raise ValueError(f"{path}: {foreign_hint(head)} and pass the file, or write it "
                         "with compression_type='GZIP'.")


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
                        refuse_compressed(name, header)
                    raise ValueError(f"{name} is truncated: an incomplete header of record "
                                     f"{record} at byte {offset}.")
                length = header_length(header)
                if length is None:
                    if record == 0:
                        refuse_compressed(name, header)
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


class Container(Protocol):
    """What the Example records of a generator are read from: their count, the bytes of
    record k (checked), and record k in words ("record 3 (byte 120) of part-0.tfrecord")."""

    generator: str  # the public generator reading it, in errors
    shards: Any  # formats.shards.Shards

    def __len__(self) -> int: ...

    def data(self, k: int) -> bytes: ...

    def where(self, k: int) -> str: ...

    def version_at(self, k: int) -> tuple[int, int]: ...


class TFRecordFiles:
    """The records of TFRecord files (uncompressed local files: `shards.paths`, a
    `formats.shards.Shards`), read by the offsets of an index built once, each record's
    CRC32C checked when read."""

    generator = "TFRecordGenerator"

    def __init__(self, shards: Any, verbose: int = 1) -> None:
        self.shards = shards
        self.index = index_records(shards.paths, verbose,
                                   [shards.shown(i) for i in range(len(shards))],
                                   shards.max_record_bytes)
        self.files = OpenFiles(self.open_file)

    def __len__(self) -> int:
        return len(self.index)

    def open_file(self, number: int) -> IO[bytes]:
        return self.shards.opened(
            number, lambda path: _checks.open_regular(path, "the TFRecord file"))

    def data(self, k: int) -> bytes:
        """The data of record `k`, once its CRC32C matched the one stored."""
        number, offset, length, record = self.index[k]
        both = read_at(self.files.get(number), offset, length + 4)
        data, footer = both[:length], both[length:]
        if len(footer) < 4:
            raise ValueError(f"{self.shards.shown(number)} is truncated: "
                             f"{self.where(k)} ends early (the file changed after "
                             f"it was indexed).")
        if not data_ok(data, footer):
            raise ValueError(
                f"{self.shards.shown(number)} is corrupt: the data of record {record} (byte "
                f"{offset - 12}) fails its CRC32C check ({length} bytes). Rewrite the file, "
                f"or restore an intact copy.")
        return data

    def version_at(self, k: int) -> tuple[int, int]:
        """(file number, byte offset of its data) of record `k` (`SampleVersions`)."""
        return self.index[k][0], self.index[k][1]

    def where(self, k: int) -> str:
        number, offset, _, record = self.index[k]
        return f"record {record} (byte {offset - 12}) of {self.shards.shown(number)}"


# ------------------------------------------------------------------ streamed
def tfrecord_records(f: IO[bytes], compression: str,
                     limit: int | None = _budget.MAX_RECORD_BYTES) -> Iterator[bytes]:
    """The data of each record of the TFRecord file open as `f` ("" for uncompressed,
    "GZIP" or "ZLIB"), streamed, each length and data checked against its CRC32C; a
    file cut short or corrupt anywhere is a `Broken` error, a length above `limit`
    (max_record_bytes) a `TooLarge` one, before the record is read."""
    stream = ShardStream(f, compression or None)
    found = compression_of(stream.head)
    if compression and found != compression:
        plain = is_tfrecord(stream.head)
        raise Broken(f"it is not a {compression} stream (compression_type={compression!r})"
                     + (": it is an uncompressed TFRecord file, pass compression_type=None"
                        if plain else f": it is {found}-compressed" if found
                        else " (empty)" if not stream.head else
                        f": {foreign_hint(stream.head)}" if foreign_compression(stream.head)
                        else ""))
    number = 0
    while True:
        header = stream.read(12)
        if not header:
            return
        if len(header) < 12:
            raise Broken("it is truncated: a record's 12-byte header is cut short")
        length = header_length(header)
        if length is None:
            hint = (f" (it is {found}-compressed: pass compression_type={found!r})"
                    if number == 0 and found and not compression else
                    f" ({foreign_hint(stream.head)})" if number == 0
                    and foreign_compression(stream.head) else "")
            raise Broken(f"it is corrupt: a record's length fails its CRC32C check{hint}")
        if limit is not None and length > limit:
            raise _budget.too_large(f"its header (at byte {stream.pos - 12})", length, limit,
                                    "declares a length of", error=TooLarge)
        data, footer = stream.read(length), stream.read(4)
        if len(footer) < 4:
            raise Broken(f"it is truncated: the record ends early ({len(data)} of its "
                         f"{length} bytes)")
        if not data_ok(data, footer):
            raise Broken(f"it is corrupt: the record's data fails its CRC32C check "
                         f"({length} bytes)")
        number += 1
        yield data


class TFRecordRecords(ShardReader):
    """records="tfrecord": the tf.train.Example records of TFRecord files, streamed
    (`compression_type` "", "GZIP" or "ZLIB"); x is the bytes of feature `image_key`,
    the label feature `label_key` (an int64 class id or a bytes class name)."""

    kind = "tfrecord"

    def __init__(self, names: Sequence[str], image_key: str | None, label_key: str | None,
                 labeled: bool = True, store: _remote.Store | None = None,
                 compression_type: str = "",
                 max_record_bytes: int | None = _budget.MAX_RECORD_BYTES) -> None:
        super().__init__(names, image_key, label_key, labeled, store, max_record_bytes)
        self.compression_type = compression_type
        self._example = import_example("StreamGenerator")

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
        key, image = first_of(features, self.image_keys, "image_key", where)
        x = example_mod.one_value(image, key, where)
        if not self.labeled:
            return x, None
        found, label = first_of(features, self.label_keys, "label_key", where)
        return x, example_mod.one_value(label, found, where, text=True)

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state.pop("_example")
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._example = import_example("StreamGenerator")
