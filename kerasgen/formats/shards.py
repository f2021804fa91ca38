"""`Shards`: the files of one indexed generator (paths, lists, glob patterns, URLs),
each read from a local file: the file itself, or a copy made once (a remote file
fetched, a compressed TFRecord file decompressed) in the store's cache."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from kerasgen import _budget
from kerasgen._progress import progress
from kerasgen.formats.names import expand
from kerasgen.formats.tfrecord import decompress
from kerasgen.storage import remote as _remote
from kerasgen.storage import remote_cache as _remote_cache
from kerasgen.storage.remote_cache import RemoteCache

CACHE_SUFFIX = {"GZIP": "gunzip", "ZLIB": "zlib"}  # the decompressed copy's cache key
FETCH_THREADS = 8  # shards fetched or decompressed at once


class Shards:
    """The files of one generator, each read from a local file.

    `names` are the files as users gave them (globs expanded: paths and URLs), what
    errors name; `paths` the local files read: the file itself, or a copy in the store's
    cache (`remote_cache=`, else this process's scratch cache) of a remote file (fetched
    once) or of a compressed one (decompressed once, streamed). Copies are made when the
    Shards are (in the main process); worker processes read the same local files. A copy
    that is gone when it is opened (removed by another process's size-bounded cache) is
    made again.

    Args:
        files: a path, a URL, a glob pattern or a list of them.
        what: what a file is, in errors ("TFRecord file").
        store: the `storage.remote.Store` that reads URLs (and holds the cache).
        compression: "" (none), "GZIP" or "ZLIB" (every file).
        verbose: a progress bar for copies taking over 2 s.
        max_record_bytes: the most bytes a record may declare while a compressed file
            is decompressed (see `formats.tfrecord.decompress`); None: no limit.
    """

    def __init__(self, files: Any, what: str, store: _remote.Store,
                 compression: str = "", verbose: int = 1,
                 max_record_bytes: int | None = _budget.MAX_RECORD_BYTES) -> None:
        self.what = what
        self.store = store
        self.compression = compression or ""
        self.max_record_bytes = max_record_bytes
        self.names = expand(files, what, store)
        self._lock = threading.Lock()
        for name in self.names:  # before any download: a missing file fails at once
            if not _remote.is_url(name) and not os.path.exists(name):
                raise FileNotFoundError(f"{what} not found: {name}")
        copied = [i for i, name in enumerate(self.names) if self._copied(i)]
        self.paths = list(self.names)
        if copied:
            if store.cache is None:
                _remote_cache.scratch()  # made once, before the threads use it
            doing = "Decompressing" if self.compression else "Fetching"
            pool = ThreadPoolExecutor(min(FETCH_THREADS, len(copied)))
            try:
                done = pool.map(lambda i: self._get(self.names[i]), copied)
                for i, path in zip(copied, progress(done, f"{doing} {what}s", len(copied),
                                                    verbose)):
                    self.paths[i] = path
            finally:  # after an error, the files not started yet are not fetched
                pool.shutdown(cancel_futures=True)

    def __len__(self) -> int:
        return len(self.names)

    def _copied(self, number: int) -> bool:
        return bool(self.compression) or _remote.is_url(self.names[number])

    def shown(self, number: int) -> str:
        """File `number` as errors name it (its offsets are the decompressed stream's)."""
        name = self.names[number]
        return f"{name} (decompressed)" if self.compression else name

    def opened(self, number: int, opener: Callable[[str], Any]) -> Any:
        """opener(local path of file `number`); a copy that is gone is made again."""
        try:
            return opener(self.paths[number])
        except FileNotFoundError:
            if not self._copied(number):
                raise
        with self._lock:
            self.paths[number] = self._get(self.names[number])
        return opener(self.paths[number])

    def version(self, number: int) -> str:
        """What identifies the content of file `number`: the URL's version for a
        remote file, the local file's size and time otherwise."""
        remote = self.store.version(self.names[number])
        if remote is not None:
            return remote
        stat = os.stat(self.paths[number])
        return f"{stat.st_size}:{stat.st_mtime_ns}"

    def _get(self, name: str) -> str:
        """The local path of `name`: itself, or its copy (made when absent)."""
        if not self.compression:
            return self.store.local_copy(name, self.what) if _remote.is_url(name) else name
        source: Callable[[], str]
        if _remote.is_url(name):
            canon = self.store.canon(name)
            try:
                version = self.store.version(name) or ""
            except FileNotFoundError:
                raise FileNotFoundError(f"{self.what} not found: {name}") from None

            def source() -> str:
                return self.store.local_copy(name, self.what)
        else:
            stat = os.stat(name)
            canon, version = os.path.abspath(name), f"{stat.st_mtime_ns}:{stat.st_size}"

            def source() -> str:
                return name
        cache = self.store.cache if self.store.cache is not None else _remote_cache.scratch()
        key = RemoteCache.key(f"{canon}|{CACHE_SUFFIX[self.compression]}", version)
        return cache.path(key, lambda out: decompress(source(), out, self.compression,
                                                      name, self.what,
                                                      self.max_record_bytes), name)

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state.pop("_lock")
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()
