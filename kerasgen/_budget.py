"""What one record may expand to in memory: the byte budget of the shard readers.

Every size a shard file declares or a compressed stream produces is checked against
`max_record_bytes` (default `MAX_RECORD_BYTES`, 256 MiB; None lifts it) before anything
is allocated or read for it: a tar member's declared size, a sample's members together, a
TFRecord record's length, an ArrayRecord chunk's decoded size. Compressed streams are
decompressed by `Inflater`, at most `CHUNK` output bytes per call, so no single call
expands a small input into gigabytes, and a reader stops as soon as a budget is passed.
(tests/test_dropin.py holds this module in the foundations layer.)
"""

from __future__ import annotations

import bz2
import lzma
import numbers
import zlib
from typing import Any

from kerasgen import _checks

# The RGB bytes of the largest image `max_pixels` lets through (89,478,485 x 3 + 1)
MAX_RECORD_BYTES = 256 << 20
CHUNK = 1 << 20  # the most decompressed bytes one `Inflater.read` gives
_ERRORS = (zlib.error, OSError, EOFError, lzma.LZMAError)


def check_max_record_bytes(max_record_bytes: Any) -> int | None:
    """None (no limit) or a positive int: the most bytes one record may expand to."""
    if max_record_bytes is not None and (isinstance(max_record_bytes, bool) or not isinstance(
            max_record_bytes, numbers.Integral) or max_record_bytes <= 0):
        _checks.fail("max_record_bytes", "None or a positive integer (default 268_435_456: "
                     "256 MiB)", max_record_bytes)
    return None if max_record_bytes is None else int(max_record_bytes)


def too_large(what: str, size: int | None, limit: int, verb: str = "declares",
              hint: str = "", error: type[ValueError] = ValueError) -> ValueError:
    """The error for `what` (a member, a record, named with its file) whose `size` is
    above `limit` (None: unknown, only more); `hint`: another way out than raising the
    limit, ending with "or " (the sentence goes on with "pass a larger ..."); `error`:
    the ValueError class to raise (a reader's own, which its caller names)."""
    amount = "" if size is None else f"{size:,} bytes, "
    return error(
        f"{what} {verb} {amount}more than max_record_bytes={limit:,} bytes (a guard "
        "against decompression bombs and lengths that lie, as max_pixels is for images)"
        f". {hint}{'p' if hint else 'P'}ass a larger `max_record_bytes`, or "
        "max_record_bytes=None, if records are meant to be that large.")


class BadStream(ValueError):
    """A compressed stream that fails to decompress or ends early; the message is the
    reason alone ("it is corrupt: ..."), the caller names the file."""


def _decompressor(kind: str) -> Any:
    if kind in ("GZIP", "ZLIB"):
        return zlib.decompressobj(31 if kind == "GZIP" else 15)
    return bz2.BZ2Decompressor() if kind == "BZ2" else lzma.LZMADecompressor()


class Inflater:
    """Decompresses streams of `kind` ("GZIP", "ZLIB", "BZ2", "XZ"), concatenated
    streams in turn, at most `chunk` bytes per `read`: `feed(data)` when `read()` gives
    b"" (it needs input), `finish()` at the end of the input (a stream cut short is a
    `BadStream`). A stream that fails to decompress is a `BadStream` too."""

    def __init__(self, kind: str, chunk: int = CHUNK) -> None:
        self.kind, self.chunk = kind, chunk
        self._d = _decompressor(kind)
        self._zlib = kind in ("GZIP", "ZLIB")
        self._input = b""
        self._more = False  # output may be pending without more input
        self.fed = False  # whether the stream now being read got any input

    def feed(self, data: bytes) -> None:
        self._input += data

    def read(self) -> bytes:
        """Up to `chunk` decompressed bytes (b"": feed more input)."""
        while self._input or self._more:
            data, self._input = self._input, b""
            try:
                out = self._d.decompress(data, self.chunk)
            except _ERRORS as error:
                raise BadStream(f"it is corrupt: its {self.kind} stream fails to "
                                f"decompress ({error})") from None
            self.fed = self.fed or bool(data)
            if self._zlib:
                self._input = self._d.unconsumed_tail
                self._more = len(out) == self.chunk
            else:
                self._more = not self._d.eof and not self._d.needs_input
            if self._d.eof:  # a stream ended; what follows is the next one
                self._input = self._d.unused_data + self._input
                self._d, self._more, self.fed = _decompressor(self.kind), False, False
            if out:
                return out
        return b""

    def finish(self) -> None:
        """At the end of the input: a stream begun and not ended is cut short."""
        if self.fed:
            raise BadStream(f"it is truncated: its {self.kind} stream ends before its end "
                            "marker (an interrupted download or copy?)")
