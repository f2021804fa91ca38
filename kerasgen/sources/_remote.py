"""Paths beyond the local disk: URLs read through fsspec.

Any path with a protocol (`s3://`, `gs://`, `https://`, `memory://`, any protocol fsspec
has an implementation for) is a remote path; `file://` and plain paths are local. A
`Store` holds the options to open them (`storage_options=`, as fsspec takes them) and
does every remote operation a generator needs, once and deterministically (listings are
sorted as the local walk sorts), concurrently where there are many (an I/O thread pool
of its own, so latency is not paid one object at a time), and with retries: a transfer
that fails or comes back shorter than the listing said is tried again, then is a
ConnectionError naming the object and the attempts. A missing object is
FileNotFoundError naming it at once (with on_error="skip" a generator skips it as a
missing local file). A transfer error is never taken for a bad file.
"""

from __future__ import annotations

import os
import re
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from typing import IO, Any, NoReturn

import numpy as np

from kerasgen import _checks
from kerasgen.sources import _remote_cache
from kerasgen.sources._remote_cache import RemoteCache

PIP = 'pip install "kerasgen3[remote]"'
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*://")
IO_THREADS = 32  # transfers in flight at once per process (waiting, not computing)
_PENDING_MAX = 4096  # objects fetched ahead and not yet read, at most


def is_url(path: Any) -> bool:
    """Whether `path` is a URL with a protocol other than file:// (read through fsspec)."""
    return (isinstance(path, str) and bool(_URL.match(path))
            and not path.startswith("file://"))


def any_url(paths: Iterable[Any]) -> bool:
    return any(is_url(p) for p in paths)


def local(path: Any) -> Any:
    """A file:// URL as a plain path; anything else unchanged."""
    if isinstance(path, str) and path.startswith("file://"):
        return path[len("file://"):]
    return path


def protocol(url: str) -> str:
    return url.split("://", 1)[0].split("::")[-1]


def _fsspec() -> Any:
    try:
        import fsspec
    except ImportError as error:
        raise ImportError(f"Reading URLs (s3://, gs://, https://, ...) needs fsspec: "
                          f"{PIP}") from error
    return fsspec


def check_options(storage_options: Any) -> dict[str, Any]:
    if storage_options is None:
        return {}
    if not isinstance(storage_options, Mapping):
        _checks.fail("storage_options", "a dict of fsspec filesystem options (None: "
                     "none)", storage_options, TypeError)
    return dict(storage_options)


def check_cache(remote_cache: Any) -> RemoteCache | None:
    if remote_cache is None or isinstance(remote_cache, RemoteCache):
        return remote_cache
    if isinstance(remote_cache, (str, os.PathLike)):
        return RemoteCache(remote_cache)
    return _checks.fail("remote_cache", "a folder path or a kg.RemoteCache (None: no "
                        "cache)", remote_cache, TypeError)


class Store:
    """Opens, lists and reads the URLs of one generator (see the module's docstring).

    Args:
        storage_options: keyword arguments for fsspec's filesystem (credentials, an
            endpoint, ...), applied to every URL.
        cache: a RemoteCache for local copies of what is read, or None. Shards (read by
            position, not whole) always get a local copy: without a cache, in this
            process's temporary folder.
        retries: further attempts after a failed transfer (waiting 0.1 s, then twice as
            long each time).
        io_threads: transfers in flight at once for `prefetch`.
    """

    def __init__(self, storage_options: Mapping[str, Any] | None = None,
                 cache: RemoteCache | None = None, retries: int = 3,
                 io_threads: int = IO_THREADS) -> None:
        self.storage_options = check_options(storage_options)
        self.cache = cache
        self.retries = retries
        self.io_threads = io_threads
        self.sizes: dict[str, int] = {}  # url -> size, as a listing gave it
        self.versions: dict[str, str] = {}  # url -> ETag or modification time
        self._setup()

    def _setup(self) -> None:
        self._fs: dict[str, Any] = {}
        self._lock = threading.Lock()
        self._pending: dict[str, Future[np.ndarray]] = {}
        self._reading: dict[str, Future[np.ndarray]] = {}  # fetches `read` is making now
        self._recent: dict[str, None] = {}  # URLs read lately (oldest first)
        self._pool: tuple[int, ThreadPoolExecutor] | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        for name in ("_fs", "_lock", "_pending", "_reading", "_recent", "_pool"):
            state.pop(name)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._setup()

    # ------------------------------------------------------------- filesystems
    def filesystem(self, url: str) -> tuple[Any, str]:
        """(fsspec filesystem, path within it) of `url`."""
        fsspec = _fsspec()
        name = url.split("://", 1)[0]
        fs = self._fs.get(name)
        if fs is None:
            try:
                fs, _ = fsspec.core.url_to_fs(url, **self._options(name))
            except ImportError as error:
                raise ImportError(f"Reading {url} needs fsspec's {protocol(url)!r} "
                                  f"filesystem: {error} ({PIP} installs s3fs, gcsfs and "
                                  "aiohttp)") from error
            except ValueError as error:  # an unknown protocol
                raise ValueError(f"Cannot open {url}: {error}") from error
            self._fs[name] = fs
        return fs, fsspec.core.strip_protocol(url)

    def _options(self, name: str) -> dict[str, Any]:
        """The filesystem options for protocol `name`: storage_options, and for S3 as
        many pooled connections as I/O threads (botocore keeps 10), unless given."""
        options = dict(self.storage_options)
        if name in ("s3", "s3a"):
            config = dict(options.get("config_kwargs") or {})
            config.setdefault("max_pool_connections", max(self.io_threads, 10))
            options["config_kwargs"] = config
        return options

    def canon(self, url: str) -> str:
        """`url` as listings write it ("memory://a" and "memory:///a" are one object)."""
        fs, path = self.filesystem(url)
        return self.url(fs, path)

    def relative(self, url: str, root: str) -> str:
        """The path of `url` relative to the folder URL `root`."""
        _, path = self.filesystem(url)
        base = _fsspec().core.strip_protocol(root).rstrip("/")
        return path[len(base):].lstrip("/") if path.startswith(base) else path

    def url(self, fs: Any, path: str) -> str:
        """The URL of `path` in `fs`, as a generator names it."""
        return path if _URL.match(path) else fs.unstrip_protocol(path)

    def _note(self, url: str, info: Mapping[str, Any]) -> None:
        size = info.get("size")
        if isinstance(size, int):
            self.sizes[url] = size
        version = next((_stamp(info[k]) for k in ("ETag", "etag", "md5Hash", "generation",
                                                  "LastModified", "mtime", "updated",
                                                  "created")
                        if info.get(k) is not None), "")
        self.versions[url] = f"{version}:{size}"

    def _retrying(self, what: str, url: str, call: Callable[[], Any]) -> Any:
        """call(), tried again on a transfer error; FileNotFoundError and PermissionError
        at once, naming `url`."""
        last: Any = None
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(min(0.1 * 2 ** (attempt - 1), 2.0))
            try:
                return call()
            except FileNotFoundError as error:
                if not _transfer_error(error):
                    raise FileNotFoundError(f"{what[0].upper() + what[1:]} not found: "
                                            f"{url}") from None
                cause = error.__cause__
                last = f"{type(cause).__name__}: {cause}"
            except PermissionError as error:
                raise PermissionError(f"Cannot read {what} {url}: {error}. Pass the "
                                      "credentials as storage_options=.") from error
            except _Short as error:
                last = error
            except Exception as error:  # noqa: BLE001 - every transport's own errors
                last = f"{type(error).__name__}: {error}"
        raise ConnectionError(f"Cannot read {what} {url}: {last} (after "
                              f"{self.retries + 1} attempts). Check the connection and "
                              "the server, then run again.")

    # ------------------------------------------------------------- listings
    def find(self, url: str, what: str = "folder") -> list[tuple[str, str]]:
        """(path relative to `url`, URL) of every object under the folder `url` (a
        prefix), in the local walk's order: a folder's files sorted by name, then its
        subfolders; names starting with '.' are left out at any depth. Empty when there
        is nothing there."""
        fs, path = self.filesystem(url)
        web = _is_web(url)
        if web:  # fsspec's links are quoted: the root must be too
            path = url = quote_url(url)
        fs.invalidate_cache(path)  # fsspec keeps listings: this one must be of now
        found = (self._walk(fs, path, what) if web else self._retrying(
            what, url, lambda: fs.find(path, withdirs=False, detail=True)))
        root = path.rstrip("/")
        urls = []
        for name, info in found.items():
            rel = name[len(root):].lstrip("/") if name.startswith(root) else name
            if web:
                rel = urllib.parse.unquote(rel)  # the names, as a local copy has them
            if not rel or any(part.startswith(".") for part in rel.split("/")):
                continue
            full = self.url(fs, name)
            self._note(full, info)
            urls.append((walk_key(rel), rel, full))
        return [(rel, full) for _, rel, full in sorted(urls)]

    def _walk(self, fs: Any, root: str, what: str) -> dict[str, Any]:
        """{name: info} of every file under `root`, one listing per folder, each retried
        (fsspec's own walk of an HTTP server leaves out a folder whose page fails)."""
        found: dict[str, Any] = {}
        folders = [root]
        while folders:
            folder = folders.pop()
            try:
                entries = self._retrying(what, folder, lambda: fs.ls(folder, detail=True))
            except FileNotFoundError:
                if folder == root:
                    return {}
                raise
            for info in entries:
                name = info["name"]
                if info.get("type") == "directory":
                    if name.rstrip("/") != folder.rstrip("/") and name.startswith(
                            root.rstrip("/")):
                        folders.append(name)
                else:
                    found[name] = info
        return found

    def exists(self, urls: list[str], what: str = "file") -> list[bool]:
        """Whether each object of `urls` exists (and notes its size): one listing per
        folder holding them, concurrently; an object a listing does not show is asked
        for by itself (a server without listings)."""
        folders: dict[str, list[int]] = {}
        for i, url in enumerate(urls):
            folders.setdefault(url.rsplit("/", 1)[0], []).append(i)
        result = [False] * len(urls)

        def listed(folder: str) -> set[str]:
            fs, path = self.filesystem(folder)
            fs.invalidate_cache(path)
            try:
                entries = fs.ls(path, detail=True)
            except (FileNotFoundError, NotADirectoryError):
                return set()
            except Exception:  # noqa: BLE001 - no listing here: each object is asked for
                return set()
            names = set()
            for info in entries:
                if info.get("type") == "directory":
                    continue
                full = self.url(fs, info["name"])
                self._note(full, info)
                names.add(full)
            return names

        with ThreadPoolExecutor(min(self.io_threads, max(len(folders), 1))) as pool:
            for names, members in zip(pool.map(listed, folders), folders.values()):
                for i in members:
                    result[i] = self.canon(urls[i]) in names
            unsure = [i for i, ok in enumerate(result) if not ok]
            for i, ok in zip(unsure, pool.map(lambda i: self._info(urls[i], what), unsure)):
                result[i] = ok
        return result

    def _info(self, url: str, what: str) -> bool:
        fs, path = self.filesystem(url)
        fs.invalidate_cache(path)
        try:
            info = self._retrying(what, url, lambda: fs.info(path))
        except FileNotFoundError:
            return False
        if info.get("type") == "directory":
            return False
        self._note(self.canon(url), info)
        return True

    def version(self, path: str) -> str | None:
        """The version of the object `path` (ETag or time, and size) as its listing
        gave it, or asked for now; None for a local path."""
        if not is_url(path):
            return None
        canon = self.canon(path)
        if canon not in self.versions and not self._info(path, "file"):
            self._missing(path, "file")
        return self.versions[canon]

    def isdir(self, url: str) -> bool:
        fs, path = self.filesystem(url)
        return bool(self._retrying("folder", url, lambda: fs.isdir(path)))

    def ls_folders(self, url: str) -> list[str]:
        """The names of the subfolders of `url`, sorted (hidden ones left out)."""
        fs, path = self.filesystem(url)
        fs.invalidate_cache(path)
        entries = self._retrying("folder", url, lambda: fs.ls(path, detail=True))
        names = {urllib.parse.unquote(info["name"].rstrip("/").rsplit("/", 1)[-1])
                 for info in entries if info.get("type") == "directory"}
        return sorted(n for n in names if n and not n.startswith("."))

    def expand(self, pattern: str) -> list[str]:
        """The URLs matching the glob `pattern`, sorted."""
        fs, path = self.filesystem(pattern)
        fs.invalidate_cache()
        found = self._retrying("glob pattern", pattern,
                               lambda: fs.glob(path, detail=True))
        urls = []
        for name, info in sorted(found.items()):
            if info.get("type") == "directory":
                continue
            full = self.url(fs, name)
            self._note(full, info)
            urls.append(full)
        return urls

    # ------------------------------------------------------------- reads
    def read(self, url: str, what: str = "image file") -> np.ndarray:
        """The bytes of the object `url` as uint8 (fetched ahead by `prefetch`, from the
        cache, or now; a fetch another thread is making now is waited for, not made
        twice)."""
        with self._lock:
            future = self._pending.pop(url, None)
            self._recent[url] = None  # read: not to be fetched ahead again this epoch
            while len(self._recent) > _PENDING_MAX:
                self._recent.pop(next(iter(self._recent)))
        if future is not None:
            try:
                return future.result()
            except Exception:  # noqa: BLE001 - fetched ahead, maybe long ago: ask again now
                pass
        with self._lock:
            shared = self._reading.get(url)
            if shared is None:
                mine: Future[np.ndarray] = Future()
                self._reading[url] = mine
        if shared is not None:
            return shared.result()
        try:
            data = self._fetch(url, what)
        except BaseException as error:
            mine.set_exception(error)
            raise
        else:  # the waiters have it before a new reader could start a second fetch
            mine.set_result(data)
        finally:
            with self._lock:
                self._reading.pop(url, None)
        return data

    def _key(self, url: str) -> str:
        """`url`'s entry name in the cache."""
        canon = self.canon(url)
        return RemoteCache.key(canon, self.versions.get(canon, ""))

    def _fetch(self, url: str, what: str) -> np.ndarray:
        key = None
        if self.cache is not None:
            key = self._key(url)
            held = self.cache.get_bytes(key)
            if held is not None:
                return np.frombuffer(held, np.uint8)
        fs, path = self.filesystem(url)
        canon = self.url(fs, path)
        expected = self.sizes.get(canon)
        options = _one_request(fs, expected)

        def get() -> bytes:
            data = fs.cat_file(path, **options)
            if expected is not None and len(data) != expected:
                fs.invalidate_cache(path)
                now = fs.info(path).get("size")  # replaced since it was listed?
                if now != len(data):
                    raise _Short(f"got {len(data)} of its {expected} bytes")
                self.sizes[canon] = now
            return data

        data = self._retrying(what, url, get)
        if key is not None and self.cache is not None:
            self.cache.put_bytes(key, data, url)
        return np.frombuffer(data, np.uint8)

    def prefetch(self, urls: Iterable[str], what: str = "image file") -> None:
        """Starts fetching `urls` on the I/O threads; `read` then waits for them. An
        object this process has read from the cache before is left to `read` (one
        local read, no transfer)."""
        pool = self._executor()
        cache = self.cache
        with self._lock:
            for url in urls:
                if url in self._pending or url in self._recent or (
                        cache is not None and cache.known(self._key(url))):
                    continue  # fetched ahead, read already, or a known local copy
                while len(self._pending) >= _PENDING_MAX:  # the oldest, never read
                    self._pending.pop(next(iter(self._pending))).cancel()
                self._pending[url] = pool.submit(self._fetch, url, what)

    def forget(self) -> None:
        """Drops what was fetched ahead and not read (an epoch ended: every object may
        be read, and fetched ahead, again)."""
        with self._lock:
            pending, self._pending = self._pending, {}
            self._recent.clear()
        for future in pending.values():
            future.cancel()

    def _executor(self) -> ThreadPoolExecutor:
        if self._pool is None or self._pool[0] != os.getpid():  # remade after a fork
            self._pool = (os.getpid(), ThreadPoolExecutor(
                self.io_threads, thread_name_prefix="kerasgen-io"))
        return self._pool[1]

    def open(self, url: str, what: str = "file") -> IO[bytes]:
        """A binary file object reading `url` (for a CSV file, say), whole in memory."""
        import io
        return io.BytesIO(self.read(url, what).tobytes())

    def local_copy(self, url: str, what: str = "shard") -> str:
        """A local file holding the object `url`: its path in the cache (downloaded
        first when absent, in one stream, restarted on a transfer error)."""
        cache = self.cache if self.cache is not None else _remote_cache.scratch()
        fs, path = self.filesystem(url)
        canon = self.url(fs, path)
        if canon not in self.versions and not self._info(url, what):
            self._missing(url, what)
        expected = self.sizes.get(canon)

        def fill(f: IO[bytes]) -> None:
            def download() -> None:
                f.seek(0)
                f.truncate()
                got = 0
                with fs.open(path, "rb", block_size=8 << 20) as remote:
                    for block in iter(lambda: remote.read(8 << 20), b""):
                        f.write(block)
                        got += len(block)
                if expected is not None and got != expected:
                    raise _Short(f"got {got} of its {expected} bytes")
            self._retrying(what, url, download)

        return cache.path(RemoteCache.key(canon, self.versions.get(canon, "")), fill, url)

    def _missing(self, url: str, what: str) -> NoReturn:
        raise FileNotFoundError(f"{what[0].upper() + what[1:]} not found: {url}")


def _one_request(fs: Any, size: int | None) -> dict[str, Any]:
    """cat_file's options reading an object of `size` bytes (as its listing gave it) in
    one request: s3fs first asks for the size of an object it reads whole (a HEAD
    request, to split a large one into ranges), which the listing already gave."""
    if not type(fs).__module__.startswith("s3fs."):
        return {}
    limit = getattr(fs, "default_block_size", None)
    if size is not None and isinstance(limit, int) and size <= limit:
        return {"max_concurrency": 1}
    return {}


def _stamp(value: Any) -> str:
    """A version mark as text: a time (a datetime or seconds, as listings and `info` of
    one filesystem may give it differently) as its seconds."""
    if hasattr(value, "timestamp"):
        value = value.timestamp()
    if isinstance(value, float):
        return repr(round(value, 6))
    return str(value)


def _is_web(url: str) -> bool:
    return protocol(url) in ("http", "https")


def quote_url(url: str) -> str:
    """`url` with its path quoted as HTTP needs ('a b' -> 'a%20b'; '%' itself quoted
    once), unless it already is."""
    head, rest = url.split("://", 1)
    host, _, path = rest.partition("/")
    if urllib.parse.unquote(path) != path:
        return url  # quoted already
    return f"{head}://{host}/{urllib.parse.quote(path, safe='/')}"


def _transfer_error(error: FileNotFoundError) -> bool:
    """Whether fsspec reported a failed transfer as FileNotFoundError (its HTTP
    filesystem does, for any failure of `info`): a cause other than a 404 or 410."""
    cause = error.__cause__
    if cause is None:
        return False
    status = getattr(cause, "status", None)
    if status is not None:
        return status not in (404, 410)
    return isinstance(cause, OSError) or type(cause).__module__.startswith("aiohttp")


class _Short(Exception):
    """A transfer that ended before the object's size."""


def walk_key(rel: str) -> tuple[tuple[int, str], ...]:
    """The sort key of the relative path `rel` in the local walk's order: in each folder
    its files (sorted by name) before its subfolders (sorted by name)."""
    parts = rel.split("/")
    return tuple((1, p) for p in parts[:-1]) + ((0, parts[-1]),)
