"""ArrayRecord files (grain's format): random access of their own (an index of chunks,
each checked by its hash when read) through ArrayRecordReader, one reader per thread and
file; each chunk's decoded size checked against max_record_bytes before any is read."""

from __future__ import annotations

import os
import re
import struct
from typing import Any, NoReturn

import numpy as np

from kerasgen import _budget, _checks, _redact
from kerasgen._progress import progress
from kerasgen.formats.base import Broken, OpenFiles
from kerasgen.formats.tfrecord import TFRecordRecords, import_example, is_tfrecord
from kerasgen.storage import remote as _remote

PIP = 'pip install "kerasgen3[arrayrecord]"'
# Random access: no read-ahead (it would read past the record asked for), one thread
# per read (the decode threads already read in parallel, each with its own reader).
READER_OPTIONS = "readahead_buffer_size:0,max_parallelism:1"
# Riegeli's layout (riegeli/doc/riegeli_records_file_format.md): 64 KiB blocks, each
# starting with a 24-byte block header; chunks with a 40-byte header
_BLOCK, _BLOCK_HEADER, _CHUNK_HEADER = 1 << 16, 24, 40
_USABLE = _BLOCK - _BLOCK_HEADER
_KNOWN_CHUNKS = b"smprt"  # signature, metadata, padding, simple and transposed records
_RECORD_CHUNKS = b"rt"
_HEADER = struct.Struct("<QQQQ")  # data_size, data_hash, chunk_type | num_records << 8,
#                                    decoded_data_size
_WINDOW = 4096  # bytes read at once while walking the chunks


def reader_class() -> Any:
    try:
        from array_record.python.array_record_module import ArrayRecordReader
    except ImportError as error:
        raise ImportError(f"ArrayRecordGenerator needs the array_record package: {PIP} "
                          "(or pip install array-record)") from error
    return ArrayRecordReader


def check_chunks(path: str, name: str, limit: int | None) -> None:
    """Refuses, before ArrayRecordReader decodes any of them, a chunk of the ArrayRecord
    file at `path` (named `name`) whose records decode to more than `limit` bytes
    (max_record_bytes): the chunks are walked by their 40-byte headers (read by offset,
    a few kilobytes at a time), whose `decoded_data_size` is what a read of any record
    of the chunk allocates. A header it cannot follow (not a Riegeli file, cut short,
    damaged) is left to ArrayRecordReader, which names the file when it meets it."""
    if limit is None:
        return
    with _checks.open_regular(path, "the ArrayRecord file") as f:
        fd, size = f.fileno(), os.fstat(f.fileno()).st_size
        window, begin = b"", 0  # bytes of the file from `begin`
        pos = records = 0
        found: tuple[int, int, int, int] | None = None  # a chunk above the limit
        later = 0  # record chunks after it (the last two are the file's index)
        while pos < size:
            at = pos + _BLOCK_HEADER if pos % _BLOCK == 0 else pos
            boundary = -at % _BLOCK  # a block header may interrupt the chunk header
            need = _CHUNK_HEADER + (_BLOCK_HEADER if boundary < _CHUNK_HEADER else 0)
            if at + need > begin + len(window):
                window, begin = os.pread(fd, max(_WINDOW, need), at), at
            header = window[at - begin:at - begin + need]
            if boundary < _CHUNK_HEADER:
                header = header[:boundary] + header[boundary + _BLOCK_HEADER:]
            if len(header) < _CHUNK_HEADER:
                break
            data_size, _, kind_count, decoded = _HEADER.unpack_from(header, 8)
            kind, count = kind_count & 0xFF, kind_count >> 8
            if kind not in _KNOWN_CHUNKS:
                break
            if kind in _RECORD_CHUNKS:
                if found is not None:
                    later += 1
                    if later == 2:
                        _refuse(*found, name, limit)
                elif decoded > limit:
                    found = (pos, records, count, decoded)
                records += count
            # where the chunk ends (the format's AddWithOverhead and
            # RoundUpToPossibleChunkBoundary)
            chunk = _CHUNK_HEADER + data_size
            end = pos + chunk + (chunk + (pos + _USABLE - 1) % _BLOCK) // _USABLE * _BLOCK_HEADER
            least = pos + count
            left = _BLOCK - 1 - (least + _BLOCK - 1) % _BLOCK
            pos = max(end, least + left - _USABLE + 1 if left >= _USABLE else least)
        if found is not None:  # among the last two record chunks of a whole walk
            _refuse(*found, name, limit, index=pos >= size)


def _refuse(pos: int, first: int, count: int, decoded: int, name: str, limit: int,
            index: bool = False) -> NoReturn:
    verb, hint = "decodes to", ""
    if index:
        what = f"The index of {name} (a chunk at byte {pos})"
    elif count == 1:
        what = f"Record {first} of {name} (a chunk at byte {pos})"
    else:
        what = (f"Records {first} to {first + count - 1} of {name}, one chunk at byte {pos} "
                "that a read of any of them decodes whole,")
        verb = "decode to"
        hint = ("Write the file with group_size:1 (ArrayRecordWriter(path, "
                "'group_size:1')), or ")
    raise _budget.too_large(what, decoded, limit, verb, hint)


class ArrayRecordFiles:
    """The records of ArrayRecord files (local: `shards.paths`), read by number through
    ArrayRecordReader, one reader per thread and file (a reader is not shared between
    threads). A file whose chunks decode to more than `max_record_bytes` (a record, or
    a group of records read together) is refused when it is opened, before any is
    decoded."""

    generator = "ArrayRecordGenerator"

    def __init__(self, shards: Any, verbose: int = 1,
                 max_record_bytes: int | None = _budget.MAX_RECORD_BYTES) -> None:
        self.shards = shards
        self._reader = reader_class()
        self.readers = OpenFiles(self.open_reader)
        counts = []
        for number in progress(range(len(shards)), "Opening ArrayRecord files",
                               len(shards), verbose):
            shards.opened(number, lambda path: check_chunks(path, shards.shown(number),
                                                            max_record_bytes))
            reader = self.readers.get(number)
            counts.append(reader.num_records())
            self._check_groups(number, reader)
        self.starts = np.concatenate([[0], np.cumsum(counts, dtype=np.int64)])

    def __len__(self) -> int:
        return int(self.starts[-1])

    @property
    def index(self) -> list[tuple[int, int]]:
        """(file number, record number in the file) per record."""
        return [(number, position) for number in range(len(self.shards))
                for position in range(int(self.starts[number + 1] - self.starts[number]))]

    def open_reader(self, number: int) -> Any:
        """A new reader of file `number` (`readers` keeps one per thread and file)."""
        return self.shards.opened(number, self._opener(number))

    def _opener(self, number: int) -> Any:
        def opener(path: str) -> Any:
            if not os.path.exists(path):  # the reader would only say "not ok"
                raise FileNotFoundError(f"ArrayRecord file not found: {path}")
            if not os.path.isfile(path):
                raise ValueError(f"Cannot read the ArrayRecord file "
                                 f"{self.shards.shown(number)}: it is not a regular file.")
            reader = self._reader(path, READER_OPTIONS)
            if not reader.ok():
                with open(path, "rb") as f:
                    if is_tfrecord(f.read(12)):
                        raise ValueError(
                            f"{self.shards.shown(number)} is not an ArrayRecord file: it "
                            "is a TFRecord file (read it with kg.TFRecordGenerator).")
                raise ValueError(
                    f"{self.shards.shown(number)} is not an ArrayRecord file, or it is "
                    "truncated (ArrayRecordReader cannot open it). Write it with "
                    "array_record's ArrayRecordWriter, or restore an intact copy.")
            return reader
        return opener

    def _check_groups(self, number: int, reader: Any) -> None:
        """Warns when the file was written with groups of several records: each random
        read then decodes a whole group (grain asks for group_size:1 too)."""
        found = re.search(r"group_size:(\d+)", reader.writer_options_string() or "")
        if found and int(found[1]) > 1:
            _redact.warn(
                f"{self.shards.shown(number)} was written with group_size:{found[1]}: "
                f"every record read decodes its group of {found[1]} records, so shuffled "
                "reading is that much slower. Write it with ArrayRecordWriter(path, "
                "'group_size:1') for random access.", stacklevel=4)

    def locate(self, k: int) -> tuple[int, int]:
        """(file number, record number in the file) of record `k`."""
        number = int(np.searchsorted(self.starts, k, side="right")) - 1
        return number, int(k - self.starts[number])

    def data(self, k: int) -> bytes:
        """The bytes of record `k` (ArrayRecord checks its chunk's hash)."""
        number, position = self.locate(k)
        reader = self.readers.get(number)
        try:
            return bytes(reader.read([position])[0])
        except RuntimeError as error:  # riegeli's errors: a hash mismatch, a cut file
            raise ValueError(f"{self.shards.shown(number)} is corrupt: record {position} "
                             f"cannot be read ({error}). Rewrite the file, or restore an "
                             "intact copy.") from None

    def version_at(self, k: int) -> tuple[int, int]:
        """(file number, record number in it) of record `k` (`SampleVersions`)."""
        return self.locate(k)

    def where(self, k: int) -> str:
        number, position = self.locate(k)
        return f"record {position} of {self.shards.shown(number)}"

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state.pop("_reader", None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._reader = reader_class()


class ArrayRecordRecords(TFRecordRecords):
    """The streamed read of ArrayRecord files: their tf.train.Example records in file
    order, `batch` at a time (the chunks checked against max_record_bytes first, as
    `ArrayRecordFiles` checks them), parsed as `TFRecordRecords` parses them; a remote
    file is read from its local copy."""

    kind = "arrayrecord"
    batch = 64  # records read at once

    def __init__(self, names: Any, image_key: str | None, label_key: str | None,
                 labeled: bool = True, store: _remote.Store | None = None,
                 max_record_bytes: int | None = _budget.MAX_RECORD_BYTES) -> None:
        reader_class()
        super().__init__(names, image_key, label_key, labeled, store, "", max_record_bytes)
        self._example = import_example("ArrayRecordRecords", PIP, False)

    def records(self, name: str) -> Any:
        path = (self.store.local_copy(name, "ArrayRecord file") if _remote.is_url(name)
                else _remote.local(name))
        if not os.path.exists(path):
            raise FileNotFoundError(f"Shard not found: {name}")
        check_chunks(path, name, self.max_record_bytes)
        reader = reader_class()(path, "readahead_buffer_size:0")
        if not reader.ok():
            raise Broken("it is not an ArrayRecord file, or it is truncated "
                         "(ArrayRecordReader cannot open it)")
        try:
            count = reader.num_records()
            for start in range(0, count, self.batch):
                try:
                    chunk = reader.read(list(range(start, min(count, start + self.batch))))
                except RuntimeError as error:  # riegeli's: a hash mismatch, a cut file
                    raise Broken(f"it is corrupt ({error})") from None
                yield from (bytes(data) for data in chunk)
        finally:
            reader.close()

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._example = import_example("ArrayRecordRecords", PIP, False)
