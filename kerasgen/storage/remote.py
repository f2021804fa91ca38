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
BREAKER requests all failed, for any objects, is held down (`_retry.Breaker`): one probe at a
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
import threading
from collections.abc import Iterable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from typing import IO, Any

import numpy as np

from kerasgen import _redact
from kerasgen.storage import object_get as _object_get
from kerasgen.storage import remote_cache as _remote_cache
from kerasgen.storage import retry as _retry
from kerasgen.storage.catalog import Catalog, quietly as _quietly
from kerasgen.storage.remote_cache import RemoteCache
from kerasgen.storage.urls import (PIP, Filesystems, any_url, check_options, is_url, local,  # noqa: F401  (the storage layer's face)
    protocol, quote_url, remember, walk_key)

IO_THREADS = 64  # transfers in flight at once per process (waiting, not computing)
_PENDING_MAX = 4096  # objects fetched ahead and not yet read, at most
STREAM_BLOCK = 8 << 20  # bytes of one range of a streamed object (`open_stream`)


def check_cache(remote_cache: Any) -> RemoteCache | None:
    if remote_cache is None or isinstance(remote_cache, RemoteCache):
        return remote_cache
    if isinstance(remote_cache, (str, os.PathLike)):
        return RemoteCache(remote_cache)
    raise TypeError("`remote_cache` must be a folder path or a kg.RemoteCache (None: no "
                    f"cache). Received: remote_cache={_redact.redact(repr(remote_cache))}")


class Store:
    """Opens, lists and reads the URLs of one generator (see the module's docstring):
    its filesystems (`fs`), its retry budget (`retry`) and what it knows of its objects
    (`catalog`: listings, sizes, versions by epoch) are objects of their own; the store
    reads, fetches ahead, streams and copies.

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
        self.fs = Filesystems(self.storage_options, io_threads)
        self.retry = _retry.Retry(self.storage_options, retries, deadline)
        self.catalog = Catalog(self.fs, self.retry, io_threads)
        self.gets = _object_get.ObjectGets(self.storage_options)  # s3:// through obstore
        self._copied: dict[str, str] = {}  # url -> the version of its local copy
        self._setup()

    def _setup(self) -> None:
        _redact.remember(_redact.option_secrets(self.storage_options))
        self._lock = threading.Lock()
        self._pending: dict[str, Future[np.ndarray]] = {}
        self._reading: dict[str, Future[np.ndarray]] = {}  # fetches `read` is making now
        self._recent: dict[str, None] = {}  # URLs read lately (oldest first)
        self._pool: tuple[int, ThreadPoolExecutor] | None = None
        self.catalog.on_round = self._drop_ahead

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        for name in ("_lock", "_pending", "_reading", "_recent", "_pool"):
            state.pop(name)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._setup()

    # ------------------------------------------------------------- the parts' faces
    @property
    def sizes(self) -> dict[str, int]:
        return self.catalog.sizes

    @property
    def versions(self) -> dict[str, str]:
        return self.catalog.versions

    def filesystem(self, url: str) -> tuple[Any, str]:
        """(fsspec filesystem, path within it) of `url`."""
        return self.fs.filesystem(url)

    def canon(self, url: str) -> str:
        return self.fs.canon(url)

    def relative(self, url: str, root: str) -> str:
        return self.fs.relative(url, root)

    def url(self, fs: Any, path: str) -> str:
        return self.fs.url(fs, path)

    def find(self, url: str, what: str = "folder") -> list[tuple[str, str]]:
        return self.catalog.find(url, what)

    def exists(self, urls: list[str], what: str = "file") -> list[bool]:
        return self.catalog.exists(urls, what)

    def isdir(self, url: str) -> bool:
        return self.catalog.isdir(url)

    def ls_folders(self, url: str) -> list[str]:
        return self.catalog.ls_folders(url)

    def expand(self, pattern: str) -> list[str]:
        return self.catalog.expand(pattern)

    def version(self, path: str) -> str | None:
        return self.catalog.version(path)

    # ------------------------------------------------------------- reads
    def read(self, url: str, what: str = "image file") -> np.ndarray:
        """The bytes of the object `url` as uint8 (fetched ahead by `prefetch`, from the
        cache, or now; a fetch another thread is making now is waited for, not made
        twice). A fetch ahead that failed is that fetch's error: its retries were the
        object's."""
        remember(url)
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
            version = self.catalog.confirmed(url, what)
            if version is not None:
                key = RemoteCache.key(self.fs.canon(url), version)
                held = self.cache.get_bytes(key)
                if held is not None:
                    return np.frombuffer(held, np.uint8)
        fs, path = self.fs.filesystem(url)
        canon = self.fs.url(fs, path)
        expected = self.catalog.sizes.get(canon)
        options = _one_request(fs, expected)

        def get() -> bytes:
            client = self.gets.client(canon)
            if client is not None:  # one GET through obstore: its size is the object's now
                try:
                    data, now = self.gets.get(client, canon, self.retry.store_name(url))
                except _object_get.Redirected:
                    pass  # another region: fsspec follows S3 there (and reads it from now on)
                else:
                    if expected is not None and len(data) != expected:
                        if now != len(data):
                            raise _retry.Short(f"got {len(data)} of its {expected} bytes")
                        self.catalog.sizes[canon] = now  # replaced since it was listed
                    return data
            data = fs.cat_file(path, **options)
            if expected is not None and len(data) != expected:
                fs.invalidate_cache(path)
                now = fs.info(path).get("size")  # replaced since it was listed?
                if now != len(data):
                    raise _retry.Short(f"got {len(data)} of its {expected} bytes")
                self.catalog.sizes[canon] = now
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
        self.catalog.current_round()
        with self._lock:
            for url in urls:
                if url in self._pending or url in self._recent:
                    continue  # fetched ahead, or read already
                if cache is not None:
                    key = self.catalog.known_key(url)
                    if key is not None and cache.known(key):
                        continue  # a known local copy
                while len(self._pending) >= _PENDING_MAX:  # the oldest, never read
                    self._pending.pop(next(iter(self._pending))).cancel()
                self._pending[url] = pool.submit(self._fetch, url, what)

    def forget(self) -> None:
        """An epoch ended: drops what was fetched ahead and not read (every object may
        be read, and fetched ahead, again), and the versions are asked again before
        the cache answers (worker processes' copies hear of it through a file)."""
        self.catalog.next_round()
        if self.cache is not None and not self.catalog.copy:
            pool, round_ = self._executor(), self.catalog.round
            for folder in list(self.catalog.folders):  # asked now: ready when read
                pool.submit(_quietly, self.catalog.list_folder, folder, round_)
        self.catalog.tell_round()

    def _drop_ahead(self) -> None:
        """A new round: what was fetched ahead, and what was read, may be again."""
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
        return io.BytesIO(self.read(url, what).tobytes())

    def open_stream(self, url: str, what: str = "shard") -> IO[bytes]:
        """A binary file object reading the object `url` from its start, in ranges of
        `STREAM_BLOCK` bytes, each range an object's read here: under its own retry
        budget and the store's breaker, as `read` (a stream over a stopped store fails
        within the deadline, naming the object and the store, never retried by the
        client underneath). A missing object is FileNotFoundError naming it."""
        return io.BufferedReader(self._ranges(url, what), buffer_size=STREAM_BLOCK)

    def open_ranges(self, url: str, what: str = "shard",
                    buffer_size: int = 1 << 20) -> IO[bytes]:
        """`open_stream`, seekable: each read fetches one range from where the file
        stands (a Parquet or IPC reader reads the footer first, then the columns it
        needs), buffered by `buffer_size` bytes. The object's size is asked once."""
        ranges = self._ranges(url, what)
        if ranges.size is None:
            raise OSError(_redact.redact(f"The store gives no size of the {what} {url}: it "
                                         "cannot be read by ranges."))
        return io.BufferedReader(ranges, buffer_size=buffer_size)

    def _ranges(self, url: str, what: str) -> _Ranges:
        """The raw range reader of the object `url` (a missing object is a
        FileNotFoundError naming it), its size as the store lists it."""
        remember(url)
        fs, path = self.fs.filesystem(url)
        canon = self.fs.url(fs, path)
        if canon not in self.catalog.sizes and not self.catalog.info(url, what):
            self.catalog.missing(url, what)
        return _Ranges(self, fs, path, url, self.catalog.sizes.get(canon), what)

    def local_copy(self, url: str, what: str = "shard") -> str:
        """A local file holding the object `url`: its path in the cache (downloaded
        first when absent, in one stream, restarted on a transfer error). Copied again
        (another process's cache removed it), an object that changed since its first
        copy is an error: what was read of the first (an index) no longer holds."""
        remember(url)
        fs, path = self.fs.filesystem(url)
        canon = self.fs.url(fs, path)
        version = self.catalog.confirmed(url, what)
        again = canon in self._copied  # copied before: what it found must still hold
        first = self._copied.setdefault(canon, version or "")
        if version is None:  # no version: never kept for another run to trust
            cache, key = _remote_cache.scratch(), RemoteCache.key(
                canon, f"unversioned {self.catalog.token}")
        else:
            cache = self.cache if self.cache is not None else _remote_cache.scratch()
            key = RemoteCache.key(canon, version)
        expected = self.catalog.sizes.get(canon)

        def fill(f: IO[bytes]) -> None:
            if again and first:  # its version now, asked of the store
                if not self.catalog.info(url, what):
                    self.catalog.missing(url, what)
                if self.catalog.versions[canon] != first:
                    raise ValueError(_redact.redact(
                        f"The {what} {canon} changed since this generator read it "
                        f"(version {first}, now {self.catalog.versions[canon]}): what it found "
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


class _Ranges(io.RawIOBase):
    """The raw reader behind `Store.open_stream` and `open_ranges`: `readinto` fetches
    the next range of the object (`size` bytes, or until a range comes back short where
    it is unknown); seekable where the size is known."""

    def __init__(self, store: Store, fs: Any, path: str, url: str, size: int | None,
                 what: str) -> None:
        super().__init__()
        self.store, self.fs, self.path, self.url = store, fs, path, url
        self.size, self.what, self.pos = size, what, 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return self.size is not None

    def tell(self) -> int:
        return self.pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        if self.size is None:
            raise io.UnsupportedOperation("seek: the object's size is not known")
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self.pos, io.SEEK_END: self.size}[whence]
        if base + offset < 0:  # as a file refuses it
            raise OSError(f"Invalid seek to {base + offset} in {self.url}.")
        self.pos = base + offset
        return self.pos

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


