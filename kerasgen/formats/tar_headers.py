"""Tar headers read by offset, as `tarfile` reads them, a few times faster (the ustar,
GNU and pax formats, GNU long names, pax paths and sizes), and the one check of an
extended header (a pax header or a GNU long name, which tarfile reads whole) against
max_record_bytes, for the indexed and the streamed tar readers."""

from __future__ import annotations

import re
import sys
import tarfile
from typing import IO, Any

from kerasgen import _budget
from kerasgen.formats.base import read_at

BLOCK = tarfile.BLOCKSIZE
EXTENDED = (b"x", b"g", b"L", b"K")  # pax headers (local, global), GNU long names
_REGULAR = (b"0", b"\0", b"7")  # tarfile.REGULAR_TYPES, less GNU sparse files
_NOT_REGULAR = (b"1", b"2", b"3", b"4", b"5", b"6")  # links, devices, folders, FIFOs
_NAMES = sys.getfilesystemencoding()  # tarfile's default encoding of names
_PAX_RECORD = re.compile(rb"(\d+) ([^=]+)=")


def octal(field: bytes) -> int | None:
    """A header's number field, as tarfile reads it (None: base-256, or not a number)."""
    if field[:1] in (b"\x80", b"\xff"):
        return None
    try:
        return int(field.split(b"\0", 1)[0].decode("ascii").strip() or "0", 8)
    except (UnicodeDecodeError, ValueError):
        return None


def checksum_ok(block: bytes) -> bool:
    """Whether the tar header `block` passes its (unsigned) checksum."""
    stored = octal(block[148:156])
    return stored is not None and stored == sum(block) - sum(block[148:156]) + 256


def check_extended(block: bytes, what: str, limit: int | None,
                   error: type[ValueError] = ValueError) -> None:
    """An `error` (`_budget.too_large`'s) when the tar header `block` (`what`: "the tar
    header at byte 0 of x.tar") is a pax header or a GNU long name declaring more than
    `limit` bytes; anything else (another header, a failing checksum) is left to the
    reader."""
    if limit is None or len(block) < BLOCK or block[156:157] not in EXTENDED:
        return
    size = octal(block[124:136])
    if size is None or size <= limit or not checksum_ok(block):
        return
    kind = "a GNU long name" if block[156:157] in (b"L", b"K") else "a pax header"
    raise _budget.too_large(f"{what} ({kind}, which tarfile reads whole)", size, limit,
                            error=error)


def tar_members(f: IO[bytes], size: int, limit: int | None = None,
                name: str = "the shard") -> list[tuple[str, int, int]] | None:
    """(name, data offset, size) of the regular members of the tar file open as `f`
    (`size` bytes), exactly as `tarfile` reads them, a few times faster. None when it
    meets anything else (a global pax header, a sparse or unknown member, a signed
    checksum, a header that fails its checksum or is cut short): `tarfile` then reads
    the file, and names what is wrong. A pax header or GNU long name declaring more
    than `limit` bytes is a ValueError naming `name` and its byte offset."""
    members: list[tuple[str, int, int]] = []
    offset = 0
    extended: tuple[bytes, Any] | None = None  # a GNU long name or pax header, for the next
    while True:
        block = read_at(f, offset, BLOCK)
        if len(block) < BLOCK:
            return None
        total = sum(block)
        if total == 0:  # the end-of-archive marker
            return members if extended is None else None
        stored, length = octal(block[148:156]), octal(block[124:136])
        if stored is None or length is None or stored != total - sum(block[148:156]) + 256:
            return None
        kind, data = block[156:157], offset + BLOCK
        if kind in EXTENDED:
            check_extended(block, f"The tar header at byte {offset} of {name}", limit)
        following = data + -(-length // BLOCK) * BLOCK
        if kind in (b"x", b"L", b"K"):
            if extended is not None or length > 1 << 20:
                return None
            payload = read_at(f, data, length)
            if len(payload) != length:
                return None
            if kind != b"K":  # a long link name: links are not read
                value = _pax(payload) if kind == b"x" else _nts(payload)
                if value is None:
                    return None
                extended = (kind, value)
            offset = following
            continue
        member, prefix = _nts(block[:100]), _nts(block[345:500])
        if kind == b"\0" and member.endswith("/"):
            kind = b"5"  # a folder, in the old V7 form
        if kind == b"5":
            member = member.rstrip("/")
        if prefix:
            member = prefix + "/" + member
        if extended is not None:
            if extended[0] == b"L":
                member = extended[1]
            else:
                path, pax_size = extended[1]
                member = member if path is None else path.rstrip("/")
                if pax_size is not None:
                    length = pax_size
                    following = data + -(-length // BLOCK) * BLOCK
            if kind == b"5":
                member = member.rstrip("/")
            extended = None
        if kind in _REGULAR:
            if data + length > size:
                return None
            members.append((member, data, length))
            offset = following
        elif kind in _NOT_REGULAR:
            offset = data  # tarfile reads no data after these
        else:
            return None


def _nts(field: bytes) -> str:
    """A header's string field, as tarfile decodes it."""
    return field.split(b"\0", 1)[0].decode(_NAMES, "surrogateescape")


def _pax(payload: bytes) -> tuple[str | None, int | None] | None:
    """(path, size) of a pax extended header (None each when absent), or None for what
    only tarfile reads (sparse files, other character sets, records it refuses)."""
    path, size, position = None, None, 0
    while True:
        found = _PAX_RECORD.match(payload, position)
        if not found:
            return path, size
        length, keyword = int(found.group(1)), found.group(2)
        if length == 0 or keyword.startswith(b"GNU.sparse") or keyword == b"hdrcharset":
            return None
        value = payload[found.end(2) + 1:found.start(1) + length - 1]
        try:
            if keyword == b"path":
                path = value.decode("utf-8")
            elif keyword == b"size":
                size = int(value.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            return None
        position += length
