"""Compression of shard files: what a file's first bytes say it is (`sniff`), and
`ShardStream`, a file's bytes decompressed as they are read, a megabyte at most at a
time (`_budget.Inflater`), for every reader of every format."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from typing import IO

from kerasgen import _budget
from kerasgen.formats.base import Broken

CHUNK = 1 << 18  # bytes read from a shard at once
TAIL = 1 << 15  # bytes kept of what a stream gave last (a tar stream's end check)
# The magic bytes of each compression, by the name `_budget.Inflater` takes
MAGIC = ((b"\x1f\x8b", "GZIP"), (b"BZh", "BZ2"), (b"\xfd7zXZ\x00", "XZ"),
         (b"\x28\xb5\x2f\xfd", "ZSTD"))
# what errors call each (as its tool is named)
NAMES = {"GZIP": "gzip", "ZLIB": "zlib", "BZ2": "bzip2", "XZ": "xz", "ZSTD": "zstd"}
UNREAD = ("ZSTD",)  # named when met, not decompressed (no bounded decompressor here)


def sniff(head: bytes, zlib: bool = False) -> str | None:
    """The compression `head`, a file's first bytes, starts ("GZIP", "BZ2", "XZ",
    "ZSTD"; with `zlib`, a zlib header too: "ZLIB", which two bytes cannot tell from
    data for certain, so only where TFRecordWriter may have written it), or None."""
    found = next((kind for magic, kind in MAGIC if head.startswith(magic)), None)
    if found is None and zlib and len(head) >= 2 and head[0] & 0x0F == 8 and (
            head[0] << 8 | head[1]) % 31 == 0:
        return "ZLIB"
    return found


class Overrun(Exception):
    """A read past `ShardStream.stop` (tarfile reading an extended header larger than
    the budget)."""


class ShardStream:
    """`read(n)` over the bytes of the open file `f`, decompressed as `compression`
    says (None: not; "auto": as its first bytes say; "GZIP", "ZLIB", "BZ2", "XZ"),
    concatenated streams in turn, each checked to its end marker, at most
    `_budget.CHUNK` bytes decompressed at a time: a stream cut short or failing to
    decompress is a `Broken` error, and so is a zstd stream ("auto"), named as zstd.
    It counts the bytes it gave (`pos`) and, with `tail=True`, keeps the last ones
    (`tail`); a read past `stop` (when set) is an `Overrun`."""

    def __init__(self, f: IO[bytes], compression: str | None, tail: bool = False) -> None:
        self.f = f
        self.head = self._first(12)
        if compression == "auto":
            compression = sniff(self.head)
        if compression in UNREAD:
            raise Broken(f"it is {NAMES[compression]}-compressed, which kerasgen does not "
                         "decompress (gzip, bzip2 and xz it does): decompress it once "
                         f"({NAMES[compression]} -d), or write it with one of those")
        self.kind = compression
        self._inflater = None if compression is None else _budget.Inflater(compression)
        self._input, self._eof = self.head, False
        self._buf, self._at = b"", 0  # decompressed bytes, and how many were given
        self.pos, self._keep = 0, tail
        self.stop: int | None = None
        self._recent: deque[bytes] = deque()  # what was given last, TAIL bytes or more
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
            raise Overrun
        if self._keep and data:
            self._recent.append(data)
            self._recent_size += len(data)
            while self._recent_size - len(self._recent[0]) >= TAIL:
                self._recent_size -= len(self._recent.popleft())
        return data

    def chunks(self) -> Iterator[bytes]:
        """The rest of the bytes, as they come (at most `_budget.CHUNK` at a time)."""
        while True:
            if self._at < len(self._buf):
                data, self._buf, self._at = self._buf[self._at:], b"", 0
            elif self._eof:
                return
            else:
                data = self._fill()
            if data:
                self.pos += len(data)
                yield data

    def _fill(self) -> bytes:
        """The next bytes, at most `_budget.CHUNK` of them decompressed (maybe none
        yet); at the end, b"" and _eof."""
        inflater = self._inflater
        while True:
            if inflater is not None:
                try:
                    out = inflater.read()
                except _budget.BadStream as error:
                    raise Broken(str(error)) from None
                if out:
                    return out
            data, self._input = self._input or self.f.read(CHUNK), b""
            if inflater is None or not data:
                self._eof = not data
                if inflater is not None:
                    try:
                        inflater.finish()
                    except _budget.BadStream as error:
                        raise Broken(str(error)) from None
                return data
            inflater.feed(data)
