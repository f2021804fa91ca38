"""WebDatasetGenerator: images and labels in WebDataset tar shards, by random access.

A WebDataset shard is a plain tar file; a *sample* is the group of consecutive members
sharing a key (the member path up to the first dot of its file name), each member a
field named by the rest of its name, lowercased ("cls", "jpg", "seg.png"). This module
reads them as the webdataset package does (`base_plus_ext`, `group_by_keys`,
`tar_file_iterator`'s metadata rule, `to_tuple("jpg;png")`'s alternatives), without
importing it: an index of every sample's image member (shard, byte offset, size) is
built once, the labels read then, and images are read by offset when a batch asks for
them. Shuffling across shards, samplers, worker threads or processes and
get_state/set_state then work as for image files, and batch b of epoch e is the same
whatever the workers.

The shards are `tfrecord.Shards`: paths, lists, glob patterns and URLs (remote shards
copied once into a local cache, copied again if another process's size bound removed
the copy), to which this module adds WebDataset's brace notation.
"""

from __future__ import annotations

import json
import os
import re
import string
import sys
import tarfile
import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import IO, Any, Literal

import numpy as np

from kerasgen import _budget
from kerasgen import _checks
from kerasgen.sources import _remote
from kerasgen import _images as images
from kerasgen._progress import progress
from kerasgen.sources._remote_cache import RemoteCache
from kerasgen._typing import (Cache, ColorMode, Decoder, ImageSize, Interpolation, OnError,
                              StrPath)
from kerasgen.generators import _check_common, _ImageFileGenerator, image_source
from kerasgen.tfrecord import Shards
from kerasgen import _redact

WHAT = "WebDataset shard"
# webdataset's default decoders (autodecode.decoders) of the labels kerasgen reads,
# chosen, as there, by the field's last extension ("seg.cls" reads as "cls")
INT_FIELDS = ("cls", "cls2", "index", "inx", "id")  # int(data): a class id
TEXT_FIELDS = ("txt", "text", "transcript")  # data.decode("utf-8"): a class name
JSON_FIELDS = ("json", "jsn")  # json.loads(data): a class id or a class name
LABEL_MODES = ("int", "categorical", "binary", "raw", None)
WebDatasetLabelMode = Literal["int", "categorical", "binary", "raw"]  # LABEL_MODES less None
# webdataset's tariterators: a member's key and field, and the metadata members skipped
_KEY = re.compile(r"^((?:.*/|)[^.]+)[.]([^/]*)$")
_META = re.compile(r"__[^/]*__($|/)")
_COMPRESSED = ((b"\x1f\x8b", "gzip"), (b"BZh", "bzip2"), (b"\xfd7zXZ\x00", "xz"),
               (b"\x28\xb5\x2f\xfd", "zstd"))
_INDEX_THREADS = 8  # shards indexed at once
_OPEN_PER_THREAD = 16  # shards a decode thread keeps open (least recently used closed)
_BLOCK = tarfile.BLOCKSIZE


# ------------------------------------------------------------------ webdataset's rules
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


_INT_RANGE = re.compile(r"^(-?\d+)\.\.(-?\d+)(?:\.\.-?(\d+))?$")
_CHAR_RANGE = re.compile(r"^([A-Za-z])\.\.([A-Za-z])(?:\.\.-?(\d+))?$")
_ALPHABET = string.ascii_uppercase + string.ascii_lowercase


def expand_braces(pattern: str) -> list[str]:
    """The names of WebDataset's brace notation, as the braceexpand package (which
    webdataset uses) writes them, in its order: "{a,b}", integer ranges "{0..9}"
    (zero-padded to the wider bound when a bound starts with 0: "{000..009}"), letter
    ranges "{a..e}", steps "{0..8..2}", nested braces. No backslash escapes. Unbalanced
    braces are a ValueError."""
    start = pattern.find("{")
    close = pattern.find("}")
    if start < 0 or (0 <= close < start):
        if close >= 0:
            raise ValueError(f"Unbalanced braces in {pattern!r}.")
        return [pattern]
    depth = 0
    for end in range(start, len(pattern)):
        depth += {"{": 1, "}": -1}.get(pattern[end], 0)
        if depth == 0:
            break
    else:
        raise ValueError(f"Unbalanced braces in {pattern!r}.")
    head, expression, tail = pattern[:start], pattern[start + 1:end], pattern[end + 1:]
    middle = _alternatives(expression)
    if middle is None:  # not a range or a list: the braces are kept
        middle = ["{" + inner + "}" for inner in expand_braces(expression)]
    rest = expand_braces(tail)
    return [head + one + other for one in middle for other in rest]


def _alternatives(expression: str) -> list[str] | None:
    """The names of one brace expression (a range or a comma list), or None."""
    found = _INT_RANGE.match(expression)
    if found:
        first, last, step = found.groups()
        padded = any(s.startswith(("0", "-0")) for s in (first, last) if s not in ("0", "-0"))
        width = max(len(first), len(last)) if padded else 0
        by = (int(step) or 1) if step else 1
        a, b = int(first), int(last)
        numbers = range(a, b + 1, by) if a < b else range(a, b - 1, -by)
        return [f"%0{width}d" % n for n in numbers]
    found = _CHAR_RANGE.match(expression)
    if found:
        first, last, step = found.groups()
        by = (int(step) or 1) if step else 1
        a, b = _ALPHABET.index(first), _ALPHABET.index(last)
        if a < b:
            return list(_ALPHABET[a:b + 1:by])
        return list(_ALPHABET[a:(b or -len(_ALPHABET)) - 1:-by])
    parts, depth, begin = [], 0, 0
    for k, c in enumerate(expression):
        depth += {"{": 1, "}": -1}.get(c, 0)
        if c == "," and depth == 0:
            parts.append(expression[begin:k])
            begin = k + 1
    if not parts:
        return None
    parts.append(expression[begin:])
    return [name for part in parts for name in expand_braces(part)]


def shard_names(shards: Any) -> list[str]:
    """The paths, URLs and glob patterns `shards` names (one, WebDataset's brace
    notation, or a list of them), in order, braces expanded (in braceexpand's order);
    `Shards` then expands the glob patterns. A local path that exists is that file,
    braces or not."""
    requirement = f"a {WHAT} path or URL, a glob pattern, a brace pattern or a non-empty " \
                  "list of them"
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
        if not isinstance(path, str):
            _checks.fail("shards", requirement, shards, TypeError, f"{item!r} is not a path")
        if ("{" in path or "}" in path) and (_remote.is_url(path) or not os.path.exists(path)):
            try:
                names += expand_braces(path)
            except ValueError:
                _checks.fail("shards", requirement, shards, ValueError,
                             f"{path!r} has unbalanced braces")
        else:
            names.append(path)
    return names


# ------------------------------------------------------------------ one shard
class _Sample:
    """One group of consecutive members sharing a key: {field: (offset, size, name)}."""

    __slots__ = ("key", "fields")

    def __init__(self, key: str) -> None:
        self.key = key
        self.fields: dict[str, tuple[int, int, str]] = {}

    def members(self) -> str:
        return ", ".join(name for _, _, name in self.fields.values())


def _compression(head: bytes) -> str | None:
    return next((kind for magic, kind in _COMPRESSED if head.startswith(magic)), None)


def list_samples(f: IO[bytes], name: str,
                 limit: int | None = _budget.MAX_RECORD_BYTES) -> list[_Sample]:
    """The samples of the tar shard open as `f` (named `name` in errors), in tar order:
    its regular members, less webdataset's metadata members and names without a field,
    grouped by key. Reads the tar headers only (by offset), then checks the archive's
    end: a shard that is cut short, corrupt, compressed or not a tar file, a key met
    again after other keys, or a field twice in one sample, is a ValueError naming the
    shard (and the key); a pax header or GNU long name declaring more than `limit`
    bytes (max_record_bytes) is a ValueError naming its byte offset."""
    size = os.fstat(f.fileno()).st_size
    kind = _compression(_read_at(f, 0, 6))
    if kind is not None:
        raise ValueError(
            f"{name} is {kind}-compressed: WebDatasetGenerator reads each image by its byte "
            "offset in the tar file, so shards must be uncompressed tar files (as "
            "webdataset's TarWriter and ShardWriter write them). Decompress it "
            f"once{' (gunzip)' if kind == 'gzip' else ''} and pass the .tar file.")
    members = tar_members(f, size, limit, name)
    if members is None:  # something the quick reader leaves to tarfile (or an error)
        members = tarfile_members(f, size, name)
    samples: list[_Sample] = []
    seen: dict[str, int] = {}  # key -> number of its sample in the shard
    for member, offset, length in members:
        _add_member(samples, seen, member, offset, length, name)
    return samples


def _read_at(f: IO[bytes], offset: int, size: int) -> bytes:
    if _PREAD is not None:
        return _PREAD(f.fileno(), size, offset)
    f.seek(offset)
    return f.read(size)


_PREAD = getattr(os, "pread", None)
_REGULAR = (b"0", b"\0", b"7")  # tarfile.REGULAR_TYPES, less GNU sparse files
_NOT_REGULAR = (b"1", b"2", b"3", b"4", b"5", b"6")  # links, devices, folders, FIFOs
_NAMES = sys.getfilesystemencoding()  # tarfile's default encoding of names


def tar_members(f: IO[bytes], size: int, limit: int | None = None,
                name: str = "the shard") -> list[tuple[str, int, int]] | None:
    """(name, data offset, size) of the regular members of the tar file open as `f`
    (`size` bytes), exactly as `tarfile` reads them, a few times faster: the headers of
    the ustar, GNU and pax formats, with GNU long names and pax paths and sizes. None
    when it meets anything else (a global pax header, a sparse or unknown member, a
    signed checksum, a header that fails its checksum or is cut short): `tarfile`
    then reads the file (`tarfile_members`), and names what is wrong. A pax header or
    GNU long name (which tarfile reads whole) declaring more than `limit` bytes is a
    ValueError naming `name` and its byte offset."""
    members: list[tuple[str, int, int]] = []
    offset = 0
    extended: tuple[bytes, Any] | None = None  # a GNU long name or pax header, for the next
    while True:
        block = _read_at(f, offset, _BLOCK)
        if len(block) < _BLOCK:
            return None
        total = sum(block)
        if total == 0:  # the end-of-archive marker
            return members if extended is None else None
        stored, length = _octal(block[148:156]), _octal(block[124:136])
        if stored is None or length is None or stored != total - sum(block[148:156]) + 256:
            return None
        kind, data = block[156:157], offset + _BLOCK
        following = data + -(-length // _BLOCK) * _BLOCK
        if kind in (b"x", b"g", b"L", b"K") and limit is not None and length > limit:
            raise _budget.too_large(
                f"The tar header at byte {offset} of {name} ("
                + ("a GNU long name" if kind in (b"L", b"K") else "a pax header")
                + ", which tarfile reads whole)", length, limit)
        if kind in (b"x", b"L", b"K"):
            if extended is not None or length > 1 << 20:
                return None
            payload = _read_at(f, data, length)
            if len(payload) != length:
                return None
            if kind != b"K":  # a long link name: links are not read
                value = _pax(payload) if kind == b"x" else _nts(payload)
                if value is None:
                    return None
                extended = (kind, value)
            offset = following
            continue
        name, prefix = _nts(block[:100]), _nts(block[345:500])
        if kind == b"\0" and name.endswith("/"):
            kind = b"5"  # a folder, in the old V7 form
        if kind == b"5":
            name = name.rstrip("/")
        if prefix:
            name = prefix + "/" + name
        if extended is not None:
            if extended[0] == b"L":
                name = extended[1]
            else:
                path, pax_size = extended[1]
                name = name if path is None else path.rstrip("/")
                if pax_size is not None:
                    length = pax_size
                    following = data + -(-length // _BLOCK) * _BLOCK
            if kind == b"5":
                name = name.rstrip("/")
            extended = None
        if kind in _REGULAR:
            if data + length > size:
                return None
            members.append((name, data, length))
            offset = following
        elif kind in _NOT_REGULAR:
            offset = data  # tarfile reads no data after these
        else:
            return None


def _octal(field: bytes) -> int | None:
    """A header's number field, as tarfile reads it (None: base-256, or not a number)."""
    if field[:1] in (b"\x80", b"\xff"):
        return None
    try:
        return int(field.split(b"\0", 1)[0].decode("ascii").strip() or "0", 8)
    except (UnicodeDecodeError, ValueError):
        return None


def _nts(field: bytes) -> str:
    """A header's string field, as tarfile decodes it."""
    return field.split(b"\0", 1)[0].decode(_NAMES, "surrogateescape")


_PAX_RECORD = re.compile(rb"(\d+) ([^=]+)=")


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
    # tarfile stops quietly at a header cut short or failing its checksum: the
    # end-of-archive marker (a block of zeros) must follow the last member
    block = _read_at(f, end, _BLOCK)
    if len(block) < _BLOCK:
        raise ValueError(_truncated(name, f"at byte {end}, where a tar header or the "
                                          "end-of-archive marker should be"))
    if block.count(0) != _BLOCK:
        raise ValueError(f"{name} is corrupt: the block at byte {end} is neither a tar "
                         "header (its checksum fails) nor the end-of-archive marker. "
                         "Restore an intact copy, or write the shard again.")
    return members


def _truncated(name: str, where: str) -> str:
    return (f"{name} is truncated: it ends {where} (an interrupted download or copy?). "
            "Restore an intact copy, or write the shard again.")


def _add_member(samples: list[_Sample], seen: dict[str, int], member: str, offset: int,
                size: int, shard: str) -> None:
    """Adds the regular member `member` (its data: `size` bytes at `offset`) to
    `samples`, as webdataset's `tar_file_iterator` and `group_by_keys` read it."""
    if not member or is_meta(member):
        return
    key, field = base_plus_ext(member)
    if key is None or field is None:
        return
    field = field.lower()
    current = samples[-1] if samples else None
    if current is None or current.key != key:
        if key in seen:
            raise ValueError(
                f"Sample {key!r} of {shard} is not in one piece: member {member} comes "
                f"after members of other samples ({samples[seen[key]].members()} came "
                "first). A sample's members must be consecutive in the tar, and each key "
                "names one sample of a shard (webdataset would read two samples of that "
                "key). Write the shard again with each sample's members together.")
        seen[key] = len(samples)
        current = _Sample(key)
        samples.append(current)
    if field in current.fields:
        raise ValueError(
            f"Sample {key!r} of {shard} has two members of field {field!r}: "
            f"{current.fields[field][2]} and {member} (webdataset refuses it too: "
            "\"duplicate file name in tar file\"). Write the shard again with one member "
            "per field.")
    current.fields[field] = (offset, size, member)


# ------------------------------------------------------------------ all the shards
class TarSamples:
    """The samples of WebDataset shards (local files: `shards.paths`), with the offset
    and size of each one's image member and, read once, its label.

    Args:
        shards: the shard files (`tfrecord.Shards`: local copies of remote ones).
        image_key: the image field, or alternatives separated by ";" (the first one a
            sample holds is read), as webdataset's `to_tuple("jpg;png")`.
        label_key: the label field (alternatives as for `image_key`), or None: no labels.
        verbose: progress bars of the index.
        max_record_bytes: the most bytes an image or label member may have (None: no
            limit); a larger one is a ValueError naming the shard and the member when
            the shards are indexed.
    """

    def __init__(self, shards: Shards, image_key: str, label_key: str | None,
                 verbose: int = 1,
                 max_record_bytes: int | None = _budget.MAX_RECORD_BYTES) -> None:
        self.shards = shards
        self.max_record_bytes = max_record_bytes
        self.image_key, self.label_key = image_key, label_key
        self._image_fields = fields_of(image_key, "image_key")
        self._label_fields = None if label_key is None else fields_of(label_key, "label_key")
        count = len(shards)
        with ThreadPoolExecutor(min(_INDEX_THREADS, count)) as pool:
            found = list(progress(pool.map(self._index_shard, range(count)),
                                  "Indexing WebDataset shards", count, verbose))
        parts = [part for part, _ in found]
        for number, part in enumerate(parts):
            if not part[0]:
                _redact.warn(f"{shards.names[number]} holds no sample: no member of it "
                             "is a field of a key (key.jpg, key.cls, ...).", stacklevel=3)
        self.keys: list[str] = [key for keys, _, _ in parts for key in keys]
        if not self.keys:
            raise ValueError(f"No samples in {', '.join(shards.names)}: no member of these "
                             "shards is a field of a key (key.jpg, key.cls, ...).")
        self.shard = np.concatenate([np.full(len(keys), number, np.int32)
                                     for number, (keys, _, _) in enumerate(parts)])
        self.offsets = np.concatenate([np.asarray(o, np.int64) for _, o, _ in parts])
        self.sizes = np.concatenate([np.asarray(s, np.int64) for _, _, s in parts])
        labels = [label for _, labels in found if labels is not None for label in labels]
        self.labels: Any = None
        if label_key is not None:
            ints = all(isinstance(v, int) for v in labels)
            self.labels = np.asarray(labels, np.int64) if ints else labels
        self._local = threading.local()

    def __len__(self) -> int:
        return len(self.keys)

    def _index_shard(self, number: int) -> tuple[tuple[list[str], list[int], list[int]],
                                                       list[Any] | None]:
        """((keys, image offsets, image sizes), labels or None) of shard `number`."""
        name = self.shards.shown(number)
        keys, offsets, sizes = [], [], []
        labels: list[Any] | None = None if self._label_fields is None else []
        limit = self.max_record_bytes
        bound = sys.maxsize if limit is None else limit
        with self.shards.opened(number, lambda path: _checks.open_regular(
                path, f"the {WHAT}")) as f:
            for sample in list_samples(f, name, self.max_record_bytes):
                offset, size, member = sample.fields[self._first(
                    sample, self._image_fields, "image_key", name)]
                if size > bound:
                    raise _budget.too_large(f"Member {member} of {name} (sample "
                                            f"{sample.key!r}, the image at byte {offset})",
                                            size, bound)
                keys.append(sample.key)
                offsets.append(offset)
                sizes.append(size)
                if labels is not None and self._label_fields is not None:
                    field = self._first(sample, self._label_fields, "label_key", name)
                    labels.append(_label(f, sample, field, name, limit))
        return (keys, offsets, sizes), labels

    def _first(self, sample: _Sample, fields: list[str], argument: str, shard: str) -> str:
        """The first of `fields` that `sample` holds, or a ValueError naming it."""
        found = next((field for field in fields if field in sample.fields), None)
        if found is not None:
            return found
        given = self.image_key if argument == "image_key" else self.label_key
        if argument == "image_key":
            guesses = [f for f in sample.fields if f.rsplit(".", 1)[-1] in _IMAGE_FIELDS]
            hint = (f"Pass image_key={';'.join(guesses)!r} (its image's field)" if guesses
                    else "Pass image_key= naming the field of its image")
        else:
            guesses = [f for f in sample.fields if f.rsplit(".", 1)[-1] in
                       INT_FIELDS + TEXT_FIELDS + JSON_FIELDS]
            hint = (f"Pass label_key={';'.join(guesses)!r}" if guesses
                    else "Pass label_key= naming the field of its label")
            hint += ", or label_mode=None to read the images without labels"
        raise ValueError(
            f"Sample {sample.key!r} of {shard} has no member for {argument}={given!r}: its "
            f"members are {sample.members()}. {hint}.")

    # ----------------------------------------------------------------- reading
    def describe(self, index: int) -> str:
        """Sample `index` as errors and `gen.skipped` name it: "shard#key"."""
        return f"{self.shards.names[int(self.shard[index])]}#{self.keys[index]}"

    def _file(self, number: int) -> IO[bytes]:
        handles = getattr(self._local, "files", None)
        if handles is None:
            handles = self._local.files = OrderedDict()  # per thread, least recent first
        f = handles.get(number)
        if f is not None:
            handles.move_to_end(number)
            return f
        if len(handles) >= _OPEN_PER_THREAD:
            handles.popitem(last=False)[1].close()
        f = handles[number] = self.shards.opened(
            number, lambda path: _checks.open_regular(path, f"the {WHAT}"))
        return f

    def read(self, index: int) -> np.ndarray:
        """The bytes of sample `index`'s image member."""
        number = int(self.shard[index])
        offset, size = int(self.offsets[index]), int(self.sizes[index])
        data = _read_at(self._file(number), offset, size)
        if len(data) != size:
            raise ValueError(f"{self.shards.shown(number)} is truncated: the image of "
                             f"sample {self.keys[index]!r} ends early (the shard changed "
                             "after it was indexed).")
        return np.frombuffer(data, np.uint8)

    def version(self, number: int) -> str:
        """What identifies the content of shard `number` (a decoded-image file cache is
        rebuilt when it changes): the URL's version for a remote shard, the local file's
        size and time otherwise."""
        remote = self.shards.store.version(self.shards.names[number])
        if remote is not None:
            return remote
        stat = os.stat(self.shards.paths[number])
        return f"{stat.st_size}:{stat.st_mtime_ns}"

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state.pop("_local", None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._local = threading.local()


# image extensions suggested when a sample has no member of `image_key`
_IMAGE_FIELDS = ("jpg", "jpeg", "png", "webp", "bmp", "gif", "tif", "tiff", "ppm", "pgm",
                 "jp2", "jpe", "jfif")


def fields_of(key: Any, argument: str) -> list[str]:
    """The fields `key` names ("jpg;png" -> ["jpg", "png"]), lowercased as webdataset
    lowercases members' fields."""
    if not isinstance(key, str) or not key.strip() or any(
            not part.strip() or part != part.strip() for part in key.split(";")):
        _checks.fail(argument, "a field name (the extension of a member: 'jpg'), or "
                     "alternatives separated by ';' ('jpg;png;jpeg')", key,
                     TypeError if not isinstance(key, str) else ValueError)
    return [part.lower() for part in key.split(";")]


def _label(f: IO[bytes], sample: _Sample, field: str, shard: str,
           limit: int | None = _budget.MAX_RECORD_BYTES) -> int | str:
    """The label in member `field` of `sample`: a class id or a class name, read as
    webdataset's default decoder reads the field (by its last extension), once its
    size is checked against `limit` (max_record_bytes)."""
    offset, size, member = sample.fields[field]
    where = f"Member {member} of {shard} (sample {sample.key!r})"
    if limit is not None and size > limit:
        raise _budget.too_large(f"{where}, the label at byte {offset},", size, limit)
    data = _read_at(f, offset, size)
    kind = field.rsplit(".", 1)[-1]
    shown = data[:40] + (b"..." if len(data) > 40 else b"")
    if kind not in INT_FIELDS + TEXT_FIELDS + JSON_FIELDS:
        raise ValueError(
            f"`label_key` must name a field holding a class id ({', '.join(INT_FIELDS)}: "
            f"an integer as text), a class name ({', '.join(TEXT_FIELDS)}) or either "
            f"({', '.join(JSON_FIELDS)}: a JSON number or string), as webdataset decodes "
            f"them. Received: label_key's field {field!r} ({member} of {shard}). Rename "
            "the members, or pass label_key= naming such a field.")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{where} must hold UTF-8 text (a label). Received: "
                         f"{shown!r}.") from None
    if kind in INT_FIELDS:
        if not re.fullmatch(r"\s*[+-]?\d+\s*", text):
            raise ValueError(
                f"{where} must hold an integer class id as text, as webdataset's "
                f"{kind!r} field does. Received: {shown!r}. Write the class id (b'3'), "
                "or pass label_key= naming a field that holds the class name "
                "(label_key='txt').")
        return int(text)
    if kind in JSON_FIELDS:
        try:
            value = json.loads(text)
        except (ValueError, RecursionError):  # RecursionError: "[[[[...]]]]" nested deep
            value = None
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            raise ValueError(f"{where} must hold a JSON class id (3) or class name "
                             f"(\"cat\") as its label. Received: {shown!r}.")
        if isinstance(value, int):
            return value
        text = value
    name = text.strip()  # "cat\n" (written by `echo cat`) is the class "cat"
    if not name:
        raise ValueError(f"{where} must hold a class name. Received: {shown!r} (empty).")
    return name


class _Versions(_remote.Store):
    """The store of the loader: it reads no URL (images come from `samples.read`); a
    decoded-image file cache keys each sample ("shard#key") by its shard's version and
    its image's offset."""

    def __init__(self, samples: TarSamples) -> None:
        super().__init__()
        self.samples = samples
        self._found: tuple[dict[str, int], dict[int, str]] | None = None

    def version(self, path: str) -> str | None:
        if self._found is None:
            self._found = ({self.samples.describe(k): k for k in range(len(self.samples))},
                           {})
        numbers, shards = self._found
        index = numbers.get(path)
        if index is None:
            return None
        number = int(self.samples.shard[index])
        if number not in shards:
            shards[number] = self.samples.version(number)
        return f"{shards[number]}@{int(self.samples.offsets[index])}"

    def __getstate__(self) -> dict[str, Any]:
        state = super().__getstate__()
        state["_found"] = None
        return state


# ------------------------------------------------------------------ the generator
class WebDatasetGenerator(_ImageFileGenerator):
    """Images (and their labels) from WebDataset tar shards, with random access.

    A sample is the group of consecutive tar members sharing a key, as webdataset reads
    it ("n02085620_7.jpg" and "n02085620_7.cls" are the fields "jpg" and "cls" of sample
    "n02085620_7"); members named "__...__" (metadata) and file names without a dot are
    left out, as webdataset leaves them. When the generator is made, every shard is
    indexed once (its tar headers: no image is read) and the label members are read;
    images are read by their byte offset when a batch needs them, and decoded by the
    same `ImageLoader` as image files (a thread pool, the cache, the bad-file policy).
    Shuffling is then global across shards, samplers see every label, and batch b of
    epoch e is the same with any workers, threads or processes. Shards must be
    uncompressed tar files (what webdataset writes by default).

    Remote shards (URLs) are downloaded once, when the generator is made, into
    `remote_cache` (checked; a copy another process's size bound removed is downloaded
    again when next opened); worker processes read the same local copies.

    Args:
        shards: a shard (path or URL), a glob pattern ("data/train-*.tar", its matches
            sorted), WebDataset's brace notation ("data/train-{000000..000099}.tar",
            expanded as webdataset expands it), or a list of them, read in that order.
            URLs: s3://, gs://, https://, memory://, any protocol fsspec reads (the
            [remote] extra). A shard that does not exist, a pattern matching nothing, a
            shard that is not an uncompressed tar file, or that is truncated or corrupt,
            is an error naming it.
        image_key: the field of the image ("jpg"), or alternatives separated by ";",
            the first one a sample holds being read, as webdataset's
            `to_tuple("jpg;png;jpeg")` (the default). A sample holding none is an error
            naming the shard and the key.
        label_key: the field of the label (alternatives as for `image_key`): "cls"
            (default; also "cls2", "index", "inx", "id") holds an integer class id as
            text; "txt" ("text", "transcript") a class name (surrounding whitespace
            dropped), class ids then following the sorted names, or `class_names`;
            "json" a JSON class id or class name. A sample without it, or a label that
            is not what its field holds, is an error naming the shard and the key.
            Unused with label_mode=None.
        label_mode: "int" (default, as Keras), "categorical", "binary", "raw" (class
            ids) or None (batches are x alone; no label is read).
        class_names: the classes in class-id order: names for the ids of a "cls" field
            (default "0", "1", ...: every id below the largest is a class), or the class
            names of a "txt" field in the order to number them (default: sorted).
        on_error: as for ImageFolderGenerator. With "skip" an image that cannot be
            decoded is replaced by another sample of its class, with a warning, and
            `gen.skipped` names it "shard#key", as `gen.file_paths` names every sample.
        max_record_bytes: the most bytes an image or label member may have (default
            268_435_456, 256 MiB; None: no limit), read from the tar headers when the
            shards are indexed, before anything is read, as `max_pixels` guards
            decoding; a larger member (or a pax header or GNU long name declaring more)
            is a ValueError naming the shard, the member, its sample and byte offset.
        storage_options: options of fsspec's filesystem for URLs (credentials,
            `client_kwargs={"endpoint_url": ...}`, ...).
        remote_cache: a folder (or `kg.RemoteCache(folder, max_bytes=...)`) keeping the
            local copies of remote shards between runs, checked and shared by
            processes; None (default): a temporary folder of this process.
        **common: see `kg.Generator`.

    `image_size`, `color_mode`, `interpolation`, `crop_to_aspect_ratio`,
    `pad_to_aspect_ratio`, `rescale`, `cache`, `max_pixels`, `decode_threads`, `decoder`
    and `verbose` are as for ImageFolderGenerator.

    Example:

    ```python
    import keras
    import kerasgen as kg

    train = kg.WebDatasetGenerator("s3://bucket/train-{000000..000127}.tar",
                                   image_key="jpg;png", label_key="cls",
                                   image_size=(224, 224), batch_size=64, seed=0,
                                   remote_cache="/data/shards")
    model.fit(train, epochs=10)   # gen.class_names, gen.labels, samplers as usual
    ```
    """

    def __init__(self, shards: StrPath | Iterable[StrPath], *,
                 image_key: str = "jpg;png;jpeg", label_key: str | None = "cls",
                 image_size: ImageSize = (256, 256), color_mode: ColorMode = "rgb",
                 class_names: Sequence[str] | None = None,
                 label_mode: WebDatasetLabelMode | None = "int",
                 interpolation: Interpolation = "bilinear",
                 crop_to_aspect_ratio: bool = False, pad_to_aspect_ratio: bool = False,
                 rescale: float | None = None, cache: Cache = "auto",
                 on_error: OnError = "raise", decode_threads: int | None = None,
                 decoder: Decoder = "opencv", verbose: int = 1,
                 max_pixels: int | None = images.MAX_PIXELS,
                 max_record_bytes: int | None = _budget.MAX_RECORD_BYTES,
                 storage_options: Mapping[str, Any] | None = None,
                 remote_cache: StrPath | RemoteCache | None = None,
                 **common: Any) -> None:
        _checks.labels_come_from(self, common, "the `label_key` field of each sample")
        self.max_record_bytes = _budget.check_max_record_bytes(max_record_bytes)
        _check_common(self, common)  # before any shard is fetched
        _checks.one_of("label_mode", label_mode, LABEL_MODES)
        _checks.one_of("on_error", on_error, ("raise", "skip"))
        fields_of(image_key, "image_key")
        if label_mode is not None:
            if label_key is None:
                _checks.fail("label_key", "a field name ('cls') with label_mode="
                             f"{label_mode!r}", label_key, ValueError,
                             "Pass label_mode=None to read the images without labels")
            fields_of(label_key, "label_key")
        aspect = images.aspect_mode(crop_to_aspect_ratio, pad_to_aspect_ratio)
        store = _remote.Store(storage_options, _remote.check_cache(remote_cache))
        files = Shards(shard_names(shards), WHAT, store, "", verbose)
        self.samples = TarSamples(files, image_key,
                                  None if label_mode is None else label_key, verbose,
                                  self.max_record_bytes)
        self.image_key, self.label_key = image_key, label_key
        self.crop_to_aspect_ratio = bool(crop_to_aspect_ratio)
        self.pad_to_aspect_ratio = bool(pad_to_aspect_ratio)
        source = image_source(
            [self.samples.describe(k) for k in range(len(self.samples))],
            self.samples.labels, class_names, common, rescale=rescale,
            describe=self.samples.describe, image_size=image_size, color_mode=color_mode,
            interpolation=interpolation, cache=cache, on_error=on_error,
            decode_threads=decode_threads, decoder=decoder, verbose=verbose,
            aspect=aspect, max_pixels=max_pixels, read=self.samples.read,
            store=_Versions(self.samples))
        super().__init__(source=source, label_mode=label_mode, **common)

    # what users read, kept on the generator (the samples hold them)
    @property
    def paths(self) -> list[str]:
        """The shards, as given (patterns expanded; URLs, not their local copies)."""
        return list(self.samples.shards.names)

    @property
    def local_paths(self) -> list[str]:
        """The local file read for each of `paths`: the shard itself, or its copy."""
        return list(self.samples.shards.paths)

    @property
    def keys(self) -> list[str]:
        """The key of each sample ("__key__" in webdataset), in sample order."""
        return self.samples.keys

    @property
    def index(self) -> list[tuple[int, int, int]]:
        """(shard number, byte offset, size) of each sample's image member."""
        return list(zip(self.samples.shard.tolist(), self.samples.offsets.tolist(),
                        self.samples.sizes.tolist()))
