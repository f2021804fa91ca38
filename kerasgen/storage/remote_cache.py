"""RemoteCache: local copies of remote objects and shards, size-bounded, checked and shared.

One folder, any number of processes: an entry is a data file and, beside it, a small
JSON file (its URL, version, size and CRC32) written after the data, each put in place
atomically (`_atomic.replacing`), so a reader sees a complete entry or none. An entry
whose size or checksum does not match (a disk error, a file changed by hand) is removed
and fetched again, never read. Two processes filling one entry at once both write whole
copies of the same bytes; the last rename wins. Beyond `max_bytes`, the entries used
least recently (their JSON file's modification time, touched on each use) are removed
until the folder fits; a process reading a removed shard through an open file keeps
reading it (POSIX), and one opening it later fetches it again. A process remembers the
size and CRC32 of the entries it has read or written, so reading one again is one read
of its data, still checked against that CRC32 (a removed or damaged entry is fetched
again, as the first time), and marks its use at most every 30 seconds.

Nothing secret is written: an entry's name is a hash of the object's URL without its
credentials (`object_url`: no user information, no token or signature in its query, so
a signed URL signed again tomorrow finds the same entry, checked by its version), and its
JSON file holds the URL redacted.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
import threading
import time
import zlib
from collections.abc import Callable
from typing import IO, Any

from kerasgen import _atomic, _checks, _redact

_CHUNK = 1 << 20
_TOUCH_EVERY = 30.0  # seconds between two marks of use of one entry by one process
# query parameters that carry a credential or a signature, not the object's identity:
# tokens, keys, passwords; a signed URL's (S3's X-Amz-*, GCS's X-Goog-*, CloudFront's)
def object_url(url: str) -> str:
    """What identifies the object of `url` (a cache entry's name is made of it): `url`
    without user information and without the query parameters that carry a credential
    or a signature. Text after a '|' (a kind of copy: "URL|gunzipped") is kept."""
    front, bar, kind = url.rpartition("|")
    if bar and not any(c in kind for c in "/?=&"):
        url = front
    else:
        bar = kind = ""
    head, sep, rest = url.partition("://")
    if not sep:
        return url + bar + kind
    authority, slash, path = rest.partition("/")
    authority = authority.rsplit("@", 1)[-1]
    path, hash_, fragment = path.partition("#")
    path, question, query = path.partition("?")
    if not slash:
        authority, question, query = authority.partition("?")
    if question:
        pairs = [p for p in query.split("&") if p]
        names = {p.partition("=")[0].lower() for p in pairs}
        sas = "sig" in names
        pairs = [p for p in pairs if not _redact.credential_field(p.partition("=")[0], sas)]
        query = "&".join(pairs)
        question = "?" if query else ""
    return f"{head}://{authority}{slash}{path}{question}{query}{hash_}{fragment}{bar}{kind}"


def crc32_of_file(path: str) -> int:
    """The CRC32 of the file `path`, read in chunks."""
    crc = 0
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(_CHUNK), b""):
            crc = zlib.crc32(block, crc)
    return crc


class RemoteCache:
    """A local, size-bounded cache of the remote objects (images) and shards (TFRecord,
    tar, ArrayRecord files) a generator reads, kept between runs and shared by processes.

    Args:
        folder: where the copies are kept (made if missing).
        max_bytes: the bytes of copies kept (least recently used removed first); None:
            no bound. The folder is measured (and trimmed) each time a process has added
            an eighth of the bound since it last did, so it may hold up to that much more
            per process between two trims. A single entry larger than the bound is kept
            (it is in use), and the others are removed.

    Pass it as `remote_cache=` to a generator, or a folder path for a cache without bound.
    An entry is keyed by the object's URL (without its credentials or signature) and its
    version as the store reports it (ETag, generation, or modification time, with the
    size), asked again at each epoch, so a changed object is fetched again; objects of a
    store that reports no version are not kept (docs/remote.md).
    """

    def __init__(self, folder: str | os.PathLike[str], max_bytes: int | None = None) -> None:
        if not isinstance(folder, (str, os.PathLike)):
            _checks.fail("folder", "a path to a folder", folder, TypeError)
        self.folder = os.path.abspath(os.fspath(folder))
        if os.path.exists(self.folder) and not os.path.isdir(self.folder):
            raise FileExistsError(f"`remote_cache` must be a folder. Received: "
                                  f"{self.folder!r}, which is a file.")
        self.max_bytes = None if max_bytes is None else _checks.positive_int(
            "max_bytes", max_bytes)
        os.makedirs(self.folder, exist_ok=True)
        self._lock = threading.Lock()
        self._checked: set[str] = set()  # shards this process verified in full
        self._known: dict[str, tuple[int, int, float]] = {}  # key -> size, CRC32, use mark
        self._added = 0  # bytes this process added since it last measured the folder

    def __repr__(self) -> str:
        return f"RemoteCache({self.folder!r}, max_bytes={self.max_bytes})"

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state.update(_lock=None, _checked=set(), _known={}, _added=0)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    @staticmethod
    def key(url: str, version: str = "") -> str:
        """The entry name of `url` at `version`: of `object_url(url)`, so no secret of
        the URL takes part in it."""
        if "@" in url or "?" in url:
            url = object_url(url)
        return hashlib.sha256(f"{url}\n{version}".encode()).hexdigest()

    def _files(self, key: str) -> tuple[str, str]:
        folder = os.path.join(self.folder, key[:2])
        return os.path.join(folder, key), os.path.join(folder, key + ".json")

    def _meta(self, key: str) -> dict[str, Any] | None:
        data, meta = self._files(key)
        try:
            with open(meta, encoding="utf-8") as f:
                info = json.load(f)
            if os.path.getsize(data) != info["size"]:
                raise ValueError("size")
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError):
            self._remove(key)  # damaged: fetched again
            return None
        with contextlib.suppress(OSError):
            os.utime(meta)  # used now: least recently used goes first
        return info

    def get_bytes(self, key: str) -> bytes | None:
        """The bytes of entry `key`, checked against its CRC32; None when absent or
        damaged (a damaged entry is removed)."""
        known = self._known.get(key)
        if known is None:
            info = self._meta(key)
            if info is None:
                return None
            known = (info["size"], info["crc32"], time.monotonic())
        try:
            with open(self._files(key)[0], "rb") as f:
                data = f.read()
        except OSError:  # removed (by another process, say) since
            self._known.pop(key, None)
            return None
        size, crc, used = known
        if len(data) != size or zlib.crc32(data) != crc:
            self._remove(key)
            return None
        now = time.monotonic()
        if now - used > _TOUCH_EVERY:
            try:
                os.utime(self._files(key)[1])
            except OSError:  # being removed: these bytes were whole, the next read asks
                self._known.pop(key, None)
                return data
            used = now
        self._known[key] = (size, crc, used)
        return data

    def holds(self, key: str) -> bool:
        """Whether entry `key` is complete in the folder (its size as written; its
        CRC32 is checked when it is next used)."""
        return key in self._known or self._meta(key) is not None

    def known(self, key: str) -> bool:
        """Whether this process has read or written entry `key` (and has not seen it
        removed): reading it again takes no transfer unless it was removed since."""
        return key in self._known

    def put_bytes(self, key: str, data: bytes, url: str) -> None:
        """Keeps `data` as entry `key` (the object `url`)."""
        def fill(f: IO[bytes]) -> None:
            f.write(data)
        self._write(key, url, fill)

    def path(self, key: str, fill: Callable[[IO[bytes]], None], url: str) -> str:
        """The local path of entry `key`, complete and checked (its CRC32 once per
        process); when absent or damaged, `fill(f)` writes it first (`url` names it)."""
        data = self._files(key)[0]
        info = self._meta(key)
        if info is not None and key not in self._checked:
            if crc32_of_file(data) != info["crc32"]:
                self._remove(key)
                info = None
        if info is None:
            self._write(key, url, fill)
        with self._lock:
            self._checked.add(key)
        return data

    def _write(self, key: str, url: str, fill: Callable[[IO[bytes]], None]) -> None:
        data, meta = self._files(key)
        os.makedirs(os.path.dirname(data), exist_ok=True)
        with _atomic.replacing(data) as f:
            fill(f)
            f.flush()
            os.fsync(f.fileno())
        size, crc = os.path.getsize(data), crc32_of_file(data)
        with _atomic.replacing(meta, "w") as f:
            json.dump({"url": _redact.redact_url(object_url(url)), "size": size,
                       "crc32": crc}, f)
        with self._lock:
            self._checked.add(key)
            self._known[key] = (size, crc, time.monotonic())
            self._added += size
            over = self.max_bytes is not None and self._added > self.max_bytes // 8
            if over:
                self._added = 0
        if over or (self.max_bytes is not None and size > self.max_bytes // 8):
            self.evict(keep=key)

    def _remove(self, key: str) -> None:
        for path in reversed(self._files(key)):  # the JSON first: then it is absent
            with contextlib.suppress(OSError):
                os.unlink(path)
        with self._lock:
            self._checked.discard(key)
            self._known.pop(key, None)

    def entries(self) -> list[tuple[float, int, str]]:
        """(last use, size, key) of every complete entry."""
        found = []
        for sub in _listdir(self.folder):
            folder = os.path.join(self.folder, sub)
            for name in _listdir(folder):
                if not name.endswith(".json") or name.startswith("."):
                    continue
                key = name[:-5]
                try:
                    used = os.stat(os.path.join(folder, name)).st_mtime
                    size = os.path.getsize(os.path.join(folder, key))
                except OSError:
                    continue
                found.append((used, size, key))
        return found

    def size(self) -> int:
        """Bytes held by complete entries."""
        return sum(size for _, size, _ in self.entries())

    def evict(self, keep: str | None = None) -> None:
        """Removes the least recently used entries (never `keep`) until the folder holds
        at most `max_bytes`."""
        if self.max_bytes is None:
            return
        found = sorted(self.entries())
        total = sum(size for _, size, _ in found)
        for _, size, key in found:
            if total <= self.max_bytes:
                break
            if key == keep:
                continue
            self._remove(key)
            total -= size

    def clear(self) -> None:
        """Removes every entry."""
        for _, _, key in self.entries():
            self._remove(key)


def _listdir(folder: str) -> list[str]:
    try:
        return os.listdir(folder)
    except OSError:
        return []


_SCRATCH: list[RemoteCache] = []


def scratch() -> RemoteCache:
    """This process's temporary cache (without `remote_cache=`: shards still need a local
    copy), in a `kerasgen-PID-downloads` folder removed when the process exits."""
    if not _SCRATCH or not os.path.isdir(_SCRATCH[0].folder):
        folder = tempfile.mkdtemp(prefix=f"kerasgen-{os.getpid()}-downloads-")
        _SCRATCH[:] = [RemoteCache(folder)]
        import atexit
        atexit.register(shutil.rmtree, folder, True)
    return _SCRATCH[0]
