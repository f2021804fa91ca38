"""Tar shards as webdataset reads them: a member's key and field (`base_plus_ext`, the
metadata rule), members grouped by key into samples (`Grouper`, one rule for both
reads), and the two reads of one shard: `list_samples` by the offsets of its headers
(random access, uncompressed files), `tar_samples` as a stream (any compression)."""

from __future__ import annotations

import os
import re
import sys
import tarfile
from collections.abc import Callable, Iterable, Iterator
from typing import IO, Any

from kerasgen import _budget, _checks
from kerasgen.formats.base import Broken, TooLarge, read_at
from kerasgen.formats.compression import NAMES, ShardStream, Overrun, sniff
from kerasgen.formats.tar_headers import BLOCK, check_extended, tar_members

# webdataset's tariterators: a member's key and field, and the metadata members skipped
_KEY = re.compile(r"^((?:.*/|)[^.]+)[.]([^/]*)$")
_META = re.compile(r"__[^/]*__($|/)")
_SLACK = 1 << 16  # what tarfile reads ahead of a header, beyond the budget of its reads
_KEY_COST = 40  # bytes a key remembered in a set costs beyond the string itself


def base_plus_ext(name: str) -> tuple[str | None, str | None]:
    """(key, field) of the member `name`, as webdataset's `base_plus_ext` splits it:
    the path up to the first dot of the file name, and the rest (None, None when the
    file name has no dot, or starts with one)."""
    match = _KEY.match(name)
    if not match:
        return None, None
    return match.group(1), match.group(2)


def is_meta(name: str) -> bool:
    """Whether webdataset's `tar_file_iterator` skips the member `name` as metadata
    ("__meta__", "__info__/x.json")."""
    return bool(("/" not in name and name.startswith("__") and name.endswith("__"))
                or _META.match(name))


def fields_of(key: Any, argument: str) -> list[str]:
    """The fields `key` names ("jpg;png" -> ["jpg", "png"]), lowercased as webdataset
    lowercases members' fields."""
    if not isinstance(key, str) or not key.strip() or any(
            not part.strip() or part != part.strip() for part in key.split(";")):
        _checks.fail(argument, "a field name (the extension of a member: 'jpg'), or "
                     "alternatives separated by ';' ('jpg;png;jpeg')", key,
                     TypeError if not isinstance(key, str) else ValueError)
    return [part.lower() for part in key.split(";")]


def member_field(member: str) -> tuple[str, str] | None:
    """(key, field) of the regular member `member` as webdataset groups it (the field
    lowercased), or None: a metadata member, or a name without a field, left out."""
    if not member or is_meta(member):
        return None
    key, field = base_plus_ext(member)
    if key is None or field is None:
        return None
    return key, field.lower()


class Grouper:
    """Groups a shard's regular members, fed in tar order (`add`), into samples as
    webdataset's `tar_file_iterator` and `group_by_keys` do: metadata members and names
    without a field left out, fields lowercased, a sample's members consecutive. A key
    met again after other keys, or a field twice in one sample, is an error: a
    ValueError naming `shard`, or (`shard` None: a stream, whose reader names the shard)
    a `Broken` one. `keep` remembers each sample's members, for the message."""

    def __init__(self, shard: str | None = None, keep: bool = True) -> None:
        self.shard, self.keep = shard, keep
        self.seen: dict[str, str] = {}  # key -> its members ("" unless `keep`)
        self.key: str | None = None
        self.fields: dict[str, str] = {}  # field -> member, of the sample `key`

    def add(self, member: str, key: str, field: str) -> bool:
        """Adds `member` (its key and field: `member_field`); whether it starts a
        sample."""
        new = key != self.key
        if new:
            if key in self.seen:
                came = f" ({self.seen[key]} came first)" if self.keep else ""
                self._fail(f"ample {key!r}{{of}} is not in one piece: member {member} comes "
                           f"after members of other samples{came}", "A sample's members "
                           "must be consecutive in the tar, and each key names one sample "
                           "of a shard (webdataset would read two samples of that key). "
                           "Write the shard again with each sample's members together.",
                           " (a sample's members must be consecutive)")
            if self.key is not None and self.keep:
                self.seen[self.key] = ", ".join(self.fields.values())
            self.seen[key] = ""
            self.key, self.fields = key, {}
        if field in self.fields:
            self._fail(f"ample {key!r}{{of}} has two members of field {field!r}: "
                       f"{self.fields[field]} and {member} (webdataset refuses it too: "
                       "\"duplicate file name in tar file\")",
                       "Write the shard again with one member per field.")
        self.fields[field] = member
        return new

    def _fail(self, reason: str, hint: str, note: str = "") -> None:
        if self.shard is None:
            raise Broken("s" + reason.format(of="") + note)
        raise ValueError("S" + reason.format(of=f" of {self.shard}") + ". " + hint)


class Sample:
    """One group of consecutive members sharing a key: {field: (offset, size, name)}."""

    __slots__ = ("key", "fields")

    def __init__(self, key: str) -> None:
        self.key = key
        self.fields: dict[str, tuple[int, int, str]] = {}

    def members(self) -> str:
        return ", ".join(name for _, _, name in self.fields.values())


# ------------------------------------------------------------------ random access
def list_samples(f: IO[bytes], name: str,
                 limit: int | None = _budget.MAX_RECORD_BYTES) -> list[Sample]:
    """The samples of the tar shard open as `f` (named `name` in errors), in tar order
    (see `Grouper`). Reads the tar headers only (by offset), then checks the archive's
    end: a shard that is cut short, corrupt, compressed or not a tar file is a
    ValueError naming the shard; a pax header or GNU long name declaring more than
    `limit` bytes (max_record_bytes) is a ValueError naming its byte offset."""
    size = os.fstat(f.fileno()).st_size
    kind = sniff(read_at(f, 0, 6))
    if kind is not None:
        raise ValueError(
            f"{name} is {NAMES[kind]}-compressed: WebDatasetGenerator reads each image by its "
            "byte offset in the tar file, so shards must be uncompressed tar files (as "
            "webdataset's TarWriter and ShardWriter write them). Decompress it "
            f"once{' (gunzip)' if kind == 'GZIP' else ''} and pass the .tar file.")
    members = tar_members(f, size, limit, name)
    if members is None:  # something the quick reader leaves to tarfile (or an error)
        members = tarfile_members(f, size, name)
    samples: list[Sample] = []
    grouper = Grouper(name)
    for member, offset, length in members:
        found = member_field(member)
        if found is None:
            continue
        key, field = found
        if grouper.add(member, key, field):
            samples.append(Sample(key))
        samples[-1].fields[field] = (offset, length, member)
    return samples


def tarfile_members(f: IO[bytes], size: int, name: str) -> list[tuple[str, int, int]]:
    """(name, data offset, size) of the regular members of the tar file open as `f`, read
    by `tarfile` (every format it reads); a file that is not a tar file, or is cut short
    or corrupt, is a ValueError naming it (`name`)."""
    f.seek(0)
    members = []
    try:
        tar = tarfile.open(fileobj=f, mode="r:")  # seeks past each member's data
        for info in tar:
            if not info.isreg():
                continue
            if info.sparse is not None:
                raise ValueError(f"Member {info.name} of {name} is a sparse file, which "
                                 "cannot be read by offset. Write the shard again without "
                                 "--sparse.")
            if info.offset_data + info.size > size:
                raise ValueError(_truncated(name, f"inside member {info.name}"))
            members.append((info.name, info.offset_data, info.size))
        end = tar.offset
    except tarfile.ReadError as error:
        if "unexpected end of data" in str(error):
            raise ValueError(_truncated(name, "inside a member's data")) from None
        raise ValueError(f"{name} is not a tar file, or it is corrupt (tarfile: {error}). "
                         "Write the shard again (webdataset.TarWriter), or restore an "
                         "intact copy.") from None
    problem = end_of_archive(read_at(f, end, BLOCK), end, end)
    if problem is not None:
        raise ValueError(f"{name} {problem[3:]}. Restore an intact copy, or write the "
                         "shard again.")
    return members


def end_of_archive(block: bytes, at: int, size: int) -> str | None:
    """What is wrong with `block`, the 512 bytes at byte `at` after a tar's last member
    (tarfile stops quietly at a header cut short or failing its checksum: the
    end-of-archive marker, a block of zeros, must follow), or None; `size`: the bytes
    the file holds, when the block is cut short."""
    if len(block) < BLOCK:
        return (f"it is truncated: it ends at byte {size}, where a tar header or the "
                "end-of-archive marker should be (an interrupted download or copy?)")
    if block.count(0) != BLOCK:
        return (f"it is corrupt: the block at byte {at} is neither a tar header (its "
                "checksum fails) nor the end-of-archive marker")
    return None


def _truncated(name: str, where: str) -> str:
    return (f"{name} is truncated: it ends {where} (an interrupted download or copy?). "
            "Restore an intact copy, or write the shard again.")


# ------------------------------------------------------------------ streamed
def tar_samples(f: IO[bytes], limit: int | None = _budget.MAX_RECORD_BYTES,
                fields: Iterable[str] | None = None) -> Iterator[dict[str, Any]]:
    """The samples of the tar shard open as `f` (gzip, bzip2 or xz compressed, or not;
    zstd is named), streamed: its regular members grouped by key (`Grouper`), as
    {"__key__": key, field: bytes} (with `fields`, the data of the members of other
    fields is passed over, not read: their field holds None). The archive must end with
    tar's end-of-archive marker; a shard cut short or corrupt anywhere, a key met again
    after others, or a field twice in a sample, is a `Broken` error.

    `limit` (max_record_bytes; None: none) bounds what one sample may take in memory,
    checked before anything is read for it: a member's declared size, a sample's
    members together (the data read, and 512 bytes for each member not read), tarfile's
    own reads of a header (a pax header or a GNU long name declaring gigabytes), and
    the keys of the shard's samples remembered to find a sample split across it (at
    least `_budget.MAX_RECORD_BYTES` of them, so a lower limit refuses no shard of many
    samples); above it, a `TooLarge` error names the member (or sample) and its byte
    offset in the (decompressed) stream."""
    stream = ShardStream(f, "auto", tail=True)
    wanted = None if fields is None else set(fields)
    sample: dict[str, Any] | None = None
    held = 0  # bytes the sample takes: the data read, a header per member not read
    grouper = Grouper(None, keep=False)
    remembered = 0  # bytes the keys in `seen` take, at most the budget or its default
    bound = sys.maxsize if limit is None else limit
    keys_bound = sys.maxsize if limit is None else max(limit, _budget.MAX_RECORD_BYTES)

    def too_large(what: str, size: int | None, verb: str = "declares", hint: str = "",
                  most: int = bound) -> ValueError:
        return _budget.too_large(what, size, most, verb, hint, TooLarge)

    def header(call: Callable[[], Any], at: int) -> Any:
        """call(): tarfile reading the header at byte `at`, within the budget."""
        stream.stop = None if limit is None else stream.pos + limit + _SLACK
        try:
            return call()
        except Overrun:
            raise too_large(f"the tar header at byte {at} (a pax header or a GNU long "
                            "name, read whole by tarfile)", None, "takes") from None
        finally:
            stream.stop = None

    try:
        check_extended(stream.peek(BLOCK), "the tar header at byte 0", limit, TooLarge)
        tar = header(lambda: tarfile.open(fileobj=stream, mode="r|",  # type: ignore[call-overload]
                                          bufsize=tarfile.RECORDSIZE), 0)
        while True:
            if tar.firstmember is None:  # (tarfile.open read the first header)
                _skip_to(tar.fileobj, tar.offset)  # the data not read, in bounded reads
                check_extended(_peek(tar.fileobj), f"the tar header at byte {tar.offset}",
                               limit, TooLarge)
            info = header(tar.next, tar.offset)
            if info is None:
                break
            tar.members = []  # a stream keeps no list of its members
            if not info.isreg():
                continue
            found = member_field(info.name)
            if found is None:
                continue
            key, field = found
            if key != grouper.key and sample is not None:
                yield sample
            if grouper.add(info.name, key, field):
                remembered += sys.getsizeof(key) + _KEY_COST
                if remembered > keys_bound:
                    raise too_large(f"the keys of its {len(grouper.seen):,} samples up to "
                                    f"{key!r} (remembered to find a sample split across the "
                                    "shard)", remembered, "take", "Split the shard into "
                                    "smaller ones, or ", keys_bound)
                sample, held = {"__key__": key}, 0
            assert sample is not None
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
            raise Broken("it is truncated: it ends inside a member's data (an interrupted "
                         "download or copy?)") from None
        raise Broken(f"it is not a tar archive, or it is corrupt (tarfile: {error})") from None
    begin = end - (stream.pos - len(stream.tail))
    block = stream.tail[begin:begin + BLOCK] if begin >= 0 else bytes(BLOCK)
    problem = end_of_archive(block, end, stream.pos)
    if problem is not None:
        raise Broken(problem)
    if sample is not None:
        yield sample


def _peek(fileobj: Any) -> bytes:
    """The next block of tarfile's stream `fileobj` (a tarfile._Stream), left unread;
    b"" when its buffer is not what this knows (then only `header`'s budget holds)."""
    buf = getattr(fileobj, "buf", None)
    if getattr(fileobj, "comptype", None) != "tar" or not isinstance(buf, bytes) or (
            not isinstance(getattr(fileobj, "pos", None), int)):
        return b""
    if len(buf) >= BLOCK:  # what tarfile reads next is in its buffer
        return buf[:BLOCK]
    block = fileobj.read(BLOCK)
    fileobj.buf, fileobj.pos = block + fileobj.buf, fileobj.pos - len(block)
    return block


def _skip_to(fileobj: Any, offset: int) -> None:
    """Reads tarfile's stream `fileobj` on to byte `offset` in reads of 64 KiB at most,
    stopping at its end (tarfile then finds it truncated): tarfile's own seek would
    read a declared 100 GB in 10 KB reads even past the end of the data."""
    while fileobj.tell() < offset:
        if not fileobj.read(min(offset - fileobj.tell(), 1 << 16)):
            return
