"""Paths beyond the local disk: URLs read through fsspec.

Any path with a protocol (`s3://`, `gs://`, `https://`, `memory://`, any protocol fsspec
has an implementation for) is a remote path; `file://` and plain paths are local. A
`Store` holds the options to open them (`storage_options=`, as fsspec takes them) and
does every remote operation a generator needs, once and deterministically (listings are
sorted as the local walk sorts), concurrently where there are many (an I/O thread pool
of its own, so latency is not paid one object at a time), and with one retry budget per
object: the clients' own retries are turned off where they can be (s3fs, botocore), a
transfer that fails or comes back shorter than the listing said is tried again (RETRIES
times, backing off, within DEADLINE seconds of its first attempt), then is a
ConnectionError naming the object, the attempts and the store. A store whose last
BREAKER requests all failed, for any objects, is held down (`_Breaker`): one probe at a
time goes to it, the other requests wait, so a store that is down is named within
seconds and never sees a storm of retries. A missing object is FileNotFoundError naming
it at once (with on_error="skip" a generator skips it as a missing local file). A
transfer error is never taken for a bad file.

With a `RemoteCache`, what is read is kept, keyed by the object's URL (without its
secrets) and its version (ETag, generation or modification time, and size). The
versions are asked again at each epoch (`forget`): one listing per folder where a
listing gives them (S3, GCS, memory), a HEAD request per object where it does not
(HTTP); an object whose store gives no version at all is never kept (read anew each
time, shards copied once per process), with a warning. So a changed object is fetched
again from the next epoch on, in this run and the next.

Secrets (a URL's password or query tokens, `storage_options` credentials) are made known
to `kerasgen._redact` once, never written to the cache, and kept out of this module's
messages.
"""

from __future__ import annotations

import io
import os
import re
import threading
import urllib.parse
import uuid
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from typing import IO, Any, NoReturn

import numpy as np

from kerasgen import _atomic, _redact
from kerasgen.sources import _remote_cache, _retry
from kerasgen.sources._remote_cache import RemoteCache

PIP = 'pip install "kerasgen3[remote]"'
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*://")
IO_THREADS = 32  # transfers in flight at once per process (waiting, not computing)
_PENDING_MAX = 4096  # objects fetched ahead and not yet read, at most
STREAM_BLOCK = 8 << 20  # bytes of one range of a streamed object (`open_stream`)
CONNECT_TIMEOUT, READ_TIMEOUT = 5.0, 15.0  # HTTP(S), as s3fs's own for S3



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
    if not isinstance(storage_options, Mapping):  # never echoed: it may hold a secret
        raise TypeError("`storage_options` must be a dict of fsspec filesystem options "
                        "(None: none). Received: "
                        f"{_redact.describe_options(storage_options)}.")
    return dict(storage_options)


def check_cache(remote_cache: Any) -> RemoteCache | None:
    if remote_cache is None or isinstance(remote_cache, RemoteCache):
        return remote_cache
    if isinstance(remote_cache, (str, os.PathLike)):
        return RemoteCache(remote_cache)
    raise TypeError("`remote_cache` must be a folder path or a kg.RemoteCache (None: no "
                    f"cache). Received: remote_cache={_redact.redact(repr(remote_cache))}")


class Store:
    """Opens, lists and reads the URLs of one generator (see the module's docstring).

    Args:
        storage_options: keyword arguments for fsspec's filesystem (credentials, an
            endpoint, ...), applied to every URL.
        cache: a RemoteCache for local copies of what is read, or None. Shards (read by
            position, not whole) always get a local copy: without a cache, in this
            process's temporary folder.
        retries: further attempts after a failed transfer (waiting about 0.1 s, then
            twice as long each time), all within `deadline`.
        io_threads: transfers in flight at once for `prefetch`.
        deadline: seconds after an object's first attempt after which no other starts
            (a request under way ends by its client's time-outs).
    """

    def __init__(self, storage_options: Mapping[str, Any] | None = None,
                 cache: RemoteCache | None = None, retries: int = _retry.RETRIES,
                 io_threads: int = IO_THREADS, deadline: float = _retry.DEADLINE) -> None:
        self.storage_options = check_options(storage_options)
        self.cache = cache
        self.io_threads = io_threads
        self.sizes: dict[str, int] = {}  # url -> size, as a listing gave it
        self.versions: dict[str, str] = {}  # url -> "ETag or time:size" (":size": none)
        self._checked: dict[str, int] = {}  # url -> the round its version was asked in
        self._copied: dict[str, str] = {}  # url -> the version of its local copy
        self._folders: set[str] = set()  # folders whose listings gave versions
        self._round = 0  # epochs begun (forget); a version of an earlier one is asked again
        self._token = uuid.uuid4().hex  # this store and its copies in worker processes
        self._signal: str | None = None  # the file whose change tells a copy of a round
        self.retry = _retry.Retry(self.storage_options, retries, deadline)  # budget, breakers
        self._setup()

    def _setup(self) -> None:
        _redact.remember(_redact.option_secrets(self.storage_options))
        self._fs: dict[str, Any] = {}
        self._lock = threading.Lock()
        self._pending: dict[str, Future[np.ndarray]] = {}
        self._reading: dict[str, Future[np.ndarray]] = {}  # fetches `read` is making now
        self._recent: dict[str, None] = {}  # URLs read lately (oldest first)
        self._pool: tuple[int, ThreadPoolExecutor] | None = None
        self._listings: dict[tuple[str, int], Future[None]] = {}  # folder, round
        self._warned: set[str] = set()  # stores said to give no version
        self._seen_signal: tuple[int, int] | None = None  # the signal file, as last seen
        self._asked_all = -1  # the round `version` asked every HTTP object's version in

    def __getstate__(self) -> dict[str, Any]:
        if self._signal is None and self.versions:  # copies will hear of each round
            self._signal = os.path.join(_remote_cache.scratch().folder,
                                        f"round-{self._token}")
        state = self.__dict__.copy()
        for name in ("_fs", "_lock", "_pending", "_reading", "_recent", "_pool",
                     "_listings", "_warned", "_seen_signal", "_asked_all"):
            state.pop(name)
        state["_copy"] = True
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._setup()
        self._current_round()  # the original may have begun an epoch since it was pickled

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
                raise ImportError(f"Reading {_redact.redact(url)} needs fsspec's "
                                  f"{protocol(url)!r} filesystem: {error} ({PIP} installs "
                                  "s3fs, gcsfs and aiohttp)") from error
            except ValueError as error:  # an unknown protocol
                raise ValueError(_redact.redact(f"Cannot open {url}: {error}")) from error
            if type(fs).__module__.startswith("s3fs."):
                fs.retries = 1  # s3fs's own loop (5 by default) off: one budget, ours
            _redact.guard_logging()  # the storage libraries' log records redacted
            self._fs[name] = fs
        return fs, fsspec.core.strip_protocol(url)

    def _options(self, name: str) -> dict[str, Any]:
        """The filesystem options for protocol `name`: storage_options, and unless they
        say otherwise, for S3 as many pooled connections as I/O threads (botocore keeps
        10) and no retries of botocore's own (kerasgen's are the budget), for HTTP(S)
        time-outs as s3fs's (aiohttp waits 5 minutes)."""
        options = dict(self.storage_options)
        if name in ("s3", "s3a"):
            config = dict(options.get("config_kwargs") or {})
            config.setdefault("max_pool_connections", max(self.io_threads, 10))
            config.setdefault("retries", {"total_max_attempts": 1, "mode": "standard"})
            options["config_kwargs"] = config
        elif name in ("http", "https"):
            client = dict(options.get("client_kwargs") or {})
            if "timeout" not in client:
                import aiohttp
                client["timeout"] = aiohttp.ClientTimeout(
                    total=None, sock_connect=CONNECT_TIMEOUT, sock_read=READ_TIMEOUT)
            options["client_kwargs"] = client
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

    def _note(self, url: str, info: Mapping[str, Any], round_: int | None = None) -> None:
        """Keeps the size and version of `url` from `info` (a listing's entry, or `info`),
        as asked in `round_` (this one by default) when it holds a version."""
        size = info.get("size")
        if isinstance(size, int):
            self.sizes[url] = size
        version = next((_stamp(info[k]) for k in _VERSION_FIELDS
                        if info.get(k) is not None), "")
        self.versions[url] = f"{version}:{size}"
        if version:
            self._checked[url] = self._round if round_ is None else round_
            if not _is_web(url):
                self._folders.add(url.rsplit("/", 1)[0])

    # ------------------------------------------------------------- listings
    def find(self, url: str, what: str = "folder") -> list[tuple[str, str]]:
        """(path relative to `url`, URL) of every object under the folder `url` (a
        prefix), in the local walk's order: a folder's files sorted by name, then its
        subfolders; names starting with '.' are left out at any depth. Empty when there
        is nothing there."""
        _remember(url)
        fs, path = self.filesystem(url)
        web = _is_web(url)
        if web:  # fsspec's links are quoted: the root must be too
            path = url = quote_url(url)
        fs.invalidate_cache(path)  # fsspec keeps listings: this one must be of now
        found = (self._walk(fs, path, what) if web else self.retry.call(
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
                entries = self.retry.call(what, folder, lambda: fs.ls(folder, detail=True))
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
            _remember(url)
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
            info = self.retry.call(what, url, lambda: fs.info(path))
        except FileNotFoundError:
            return False
        if info.get("type") == "directory":
            return False
        self._note(self.canon(url), info)
        return True

    def version(self, path: str) -> str | None:
        """The version of the object `path` (ETag or time, and size) as asked this epoch
        (its listing, or asked for now; "unversioned ..." for a store that gives none:
        one of this store alone); None for a local path."""
        if not is_url(path):
            return None
        round_ = self._current_round()
        if _is_web(path) and self._asked_all != round_:  # HEADs at once, not in turn
            self._asked_all = round_
            todo = [u for u in self.versions if _is_web(u) and self._checked.get(u) != round_]
            if len(todo) > 1:
                with ThreadPoolExecutor(min(self.io_threads, len(todo))) as pool:
                    list(pool.map(lambda u: _quietly(self._info, u, "file"), todo))
        version = self._confirmed(path, "file")
        return f"unversioned {self._token}" if version is None else version

    # ------------------------------------------------------------- versions, by epoch
    def _current_round(self) -> int:
        """The epoch round: this store's own, or in a copy (a worker process) one more
        each time the original began an epoch (its signal file changed)."""
        if self._signal is not None and getattr(self, "_copy", False):
            mark = _mark(self._signal)
            if mark != self._seen_signal:
                self._seen_signal = mark
                try:
                    with open(self._signal, encoding="utf-8") as f:
                        told = int(f.read())
                except (OSError, ValueError):
                    told = self._round
                if told > self._round:
                    self._next_round(told)
        return self._round

    def _next_round(self, round_: int | None = None) -> None:
        with self._lock:
            self._round = self._round + 1 if round_ is None else round_
            self._listings.clear()
            pending, self._pending = self._pending, {}
            self._recent.clear()
        for future in pending.values():
            future.cancel()

    def _confirmed(self, url: str, what: str) -> str | None:
        """The version of `url` as asked this round ("stamp:size"), asked now when it was
        not (one listing of its folder where listings give versions, else a HEAD
        request); None when its store gives none."""
        canon = self.canon(url)
        round_ = self._current_round()
        if self._checked.get(canon) != round_:
            if not _is_web(canon):
                self._list_folder(canon.rsplit("/", 1)[0], round_)
            if self._checked.get(canon) != round_ and not self._info(url, what):
                self._missing(url, what)
        version = self.versions[canon]
        if self._checked.get(canon) == round_:
            return version
        name = self.retry.store_name(canon)
        if name not in self._warned:
            self._warned.add(name)
            _redact.warn(
                f"{name} gives no version (ETag, Last-Modified, generation) of {canon}, so "
                "`remote_cache` could not tell when such an object changes: objects of "
                "this store are not kept in it but read anew each time (shards copied "
                "once per process). Serve ETag or Last-Modified headers to cache them.",
                stacklevel=2)
        return None

    def _list_folder(self, folder: str, round_: int) -> None:
        """One listing of `folder` for this round, shared by the threads that need it:
        it notes the versions of every object in it."""
        with self._lock:
            future = self._listings.get((folder, round_))
            mine = future is None
            if mine:
                future = self._listings[(folder, round_)] = Future()
        assert future is not None
        if not mine:
            future.result()
            return
        try:
            fs, path = self.filesystem(folder)
            fs.invalidate_cache(path)
            try:
                entries = self.retry.call("folder", folder,
                                         lambda: fs.ls(path, detail=True))
            except (FileNotFoundError, NotADirectoryError):
                entries = []  # its objects are asked for one by one: missing
            for info in entries:
                if info.get("type") != "directory":
                    self._note(self.url(fs, info["name"]), info, round_)
        except BaseException as error:
            with self._lock:  # the next reader asks again
                self._listings.pop((folder, round_), None)
            future.set_exception(error)
            raise
        future.set_result(None)

    def _known_key(self, url: str) -> str | None:
        """The cache key of `url` when its version was asked this round (no request)."""
        canon = self.canon(url)
        if self._checked.get(canon) != self._round:
            return None
        return RemoteCache.key(canon, self.versions[canon])

    def isdir(self, url: str) -> bool:
        fs, path = self.filesystem(url)
        return bool(self.retry.call("folder", url, lambda: fs.isdir(path)))

    def ls_folders(self, url: str) -> list[str]:
        """The names of the subfolders of `url`, sorted (hidden ones left out)."""
        _remember(url)
        fs, path = self.filesystem(url)
        fs.invalidate_cache(path)
        entries = self.retry.call("folder", url, lambda: fs.ls(path, detail=True))
        names = {urllib.parse.unquote(info["name"].rstrip("/").rsplit("/", 1)[-1])
                 for info in entries if info.get("type") == "directory"}
        return sorted(n for n in names if n and not n.startswith("."))

    def expand(self, pattern: str) -> list[str]:
        """The URLs matching the glob `pattern`, sorted."""
        _remember(pattern)
        fs, path = self.filesystem(pattern)
        fs.invalidate_cache()
        found = self.retry.call("glob pattern", pattern,
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
        twice). A fetch ahead that failed is that fetch's error: its retries were the
        object's."""
        _remember(url)
        with self._lock:
            entry = self._pending.pop(url, None)
            self._recent[url] = None  # read: not to be fetched ahead again this epoch
            while len(self._recent) > _PENDING_MAX:
                self._recent.pop(next(iter(self._recent)))
        if entry is not None and not entry.cancelled():
            return entry.result()
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

    def _fetch(self, url: str, what: str) -> np.ndarray:
        key = None
        if self.cache is not None:
            version = self._confirmed(url, what)
            if version is not None:
                key = RemoteCache.key(self.canon(url), version)
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
                    raise _retry.Short(f"got {len(data)} of its {expected} bytes")
                self.sizes[canon] = now
            return data

        data = self.retry.call(what, url, get)
        if key is not None and self.cache is not None:
            self.cache.put_bytes(key, data, url)
        return np.frombuffer(data, np.uint8)

    def prefetch(self, urls: Iterable[str], what: str = "image file") -> None:
        """Starts fetching `urls` on the I/O threads; `read` then waits for them. An
        object this process has read from the cache before (its version asked this
        epoch) is left to `read` (one local read, no transfer)."""
        pool = self._executor()
        cache = self.cache
        self._current_round()
        with self._lock:
            for url in urls:
                if url in self._pending or url in self._recent:
                    continue  # fetched ahead, or read already
                if cache is not None:
                    key = self._known_key(url)
                    if key is not None and cache.known(key):
                        continue  # a known local copy
                while len(self._pending) >= _PENDING_MAX:  # the oldest, never read
                    self._pending.pop(next(iter(self._pending))).cancel()
                self._pending[url] = pool.submit(self._fetch, url, what)

    def forget(self) -> None:
        """An epoch ended: drops what was fetched ahead and not read (every object may
        be read, and fetched ahead, again), and the versions are asked again before
        the cache answers (worker processes' copies hear of it through a file)."""
        self._next_round()
        if self.cache is not None and not getattr(self, "_copy", False):
            pool, round_ = self._executor(), self._round
            for folder in list(self._folders):  # asked now: ready when the epoch reads
                pool.submit(_quietly, self._list_folder, folder, round_)
        if self._signal is not None and not getattr(self, "_copy", False):
            try:
                os.makedirs(os.path.dirname(self._signal), exist_ok=True)
                with _atomic.replacing(self._signal, "w") as f:
                    f.write(str(self._round))
            except OSError:  # the copies' cache answers on: no worse than before
                pass

    def _executor(self) -> ThreadPoolExecutor:
        if self._pool is None or self._pool[0] != os.getpid():  # remade after a fork
            self._pool = (os.getpid(), ThreadPoolExecutor(
                self.io_threads, thread_name_prefix="kerasgen-io"))
        return self._pool[1]

    def open(self, url: str, what: str = "file") -> IO[bytes]:
        """A binary file object reading `url` (for a CSV file, say), whole in memory."""
        return io.BytesIO(self.read(url, what).tobytes())

    def open_stream(self, url: str, what: str = "shard") -> IO[bytes]:
        """A binary file object reading the object `url` from its start, in ranges of
        `STREAM_BLOCK` bytes, each range an object's read here: under its own retry
        budget and the store's breaker, as `read` (a stream over a stopped store fails
        within the deadline, naming the object and the store, never retried by the
        client underneath). A missing object is FileNotFoundError naming it."""
        _remember(url)
        fs, path = self.filesystem(url)
        canon = self.url(fs, path)
        if canon not in self.sizes and not self._info(url, what):
            self._missing(url, what)
        return io.BufferedReader(_Ranges(self, fs, path, url, self.sizes.get(canon), what),
                                 buffer_size=STREAM_BLOCK)

    def local_copy(self, url: str, what: str = "shard") -> str:
        """A local file holding the object `url`: its path in the cache (downloaded
        first when absent, in one stream, restarted on a transfer error). Copied again
        (another process's cache removed it), an object that changed since its first
        copy is an error: what was read of the first (an index) no longer holds."""
        _remember(url)
        fs, path = self.filesystem(url)
        canon = self.url(fs, path)
        version = self._confirmed(url, what)
        again = canon in self._copied  # copied before: what it found must still hold
        first = self._copied.setdefault(canon, version or "")
        if version is None:  # no version: never kept for another run to trust
            cache, key = _remote_cache.scratch(), RemoteCache.key(
                canon, f"unversioned {self._token}")
        else:
            cache = self.cache if self.cache is not None else _remote_cache.scratch()
            key = RemoteCache.key(canon, version)
        expected = self.sizes.get(canon)

        def fill(f: IO[bytes]) -> None:
            if again and first:  # its version now, asked of the store
                if not self._info(url, what):
                    self._missing(url, what)
                if self.versions[canon] != first:
                    raise ValueError(_redact.redact(
                        f"The {what} {canon} changed since this generator read it "
                        f"(version {first}, now {self.versions[canon]}): what it found "
                        "in it no longer holds. Build the generator again."))

            def download() -> None:
                f.seek(0)
                f.truncate()
                got = 0
                with fs.open(path, "rb", block_size=8 << 20) as remote:
                    for block in iter(lambda: remote.read(8 << 20), b""):
                        f.write(block)
                        got += len(block)
                if expected is not None and got != expected:
                    raise _retry.Short(f"got {got} of its {expected} bytes")
            self.retry.call(what, url, download)

        return cache.path(key, fill, url)

    def _missing(self, url: str, what: str) -> NoReturn:
        raise FileNotFoundError(f"{what[0].upper() + what[1:]} not found: "
                                f"{_redact.redact(url)}")


_VERSION_FIELDS = ("ETag", "etag", "md5Hash", "generation", "LastModified", "mtime",
                   "updated", "Last-Modified", "created")


class _Ranges(io.RawIOBase):
    """The raw reader behind `Store.open_stream`: `readinto` fetches the next range of
    the object (`size` bytes, or until a range comes back short where it is unknown)."""

    def __init__(self, store: Store, fs: Any, path: str, url: str, size: int | None,
                 what: str) -> None:
        super().__init__()
        self.store, self.fs, self.path, self.url = store, fs, path, url
        self.size, self.what, self.pos = size, what, 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        want = len(buffer)
        if self.size is not None:
            want = min(want, self.size - self.pos)
        if want <= 0:
            return 0
        start = self.pos

        def get() -> bytes:
            data = self.fs.cat_file(self.path, start=start, end=start + want)
            if self.size is not None and len(data) != want:
                raise _retry.Short(f"got {len(data)} of the {want} bytes at {start}")
            return data

        data = self.store.retry.call(self.what, self.url, get)
        buffer[:len(data)] = data
        self.pos += len(data)
        if self.size is None and len(data) < want:
            self.size = self.pos  # the end, where the store gave no size
        return len(data)


def _quietly(call: Callable[..., Any], *args: Any) -> None:
    """call(*args), its error left to the next caller that needs what it makes."""
    try:
        call(*args)
    except Exception:  # noqa: BLE001 - a reader asks again, and raises
        pass


def _remember(url: str) -> None:
    """Makes the secrets of `url` known to kerasgen._redact (a URL with no user
    information or query has none: nothing to parse)."""
    if "@" in url or "?" in url:
        _redact.remember_url(url)


def _mark(path: str) -> tuple[int, int] | None:
    """What identifies the file `path` now (replaced: another), None when absent."""
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return stat.st_ino, stat.st_mtime_ns


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


def walk_key(rel: str) -> tuple[tuple[int, str], ...]:
    """The sort key of the relative path `rel` in the local walk's order: in each folder
    its files (sorted by name) before its subfolders (sorted by name)."""
    parts = rel.split("/")
    return tuple((1, p) for p in parts[:-1]) + ((0, parts[-1]),)
