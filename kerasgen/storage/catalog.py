"""What a store knows of its objects: listings in the local walk's order, sizes, and
versions (ETag, generation or time, and size) as asked in each epoch round. A round
begins with each epoch (`next_round`); a version older than the round is asked again
(one listing per folder where listings give versions, else a HEAD request), and a copy
in a worker process hears of each round through a signal file."""

from __future__ import annotations

import os
import threading
import urllib.parse
import uuid
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, NoReturn

from kerasgen import _atomic, _redact
from kerasgen.storage import remote_cache as _remote_cache
from kerasgen.storage.remote_cache import RemoteCache
from kerasgen.storage.retry import Retry
from kerasgen.storage.urls import Filesystems, is_url, is_web, quote_url, remember, walk_key

_VERSION_FIELDS = ("ETag", "etag", "md5Hash", "generation", "LastModified", "mtime",
                   "updated", "Last-Modified", "created")


class Catalog:
    """The listings, sizes and versions of one store's objects, by epoch round.
    Args:
        fs: the store's filesystems.
        retry: the store's retry budget and breakers.
        io_threads: requests in flight at once (HEAD requests of an HTTP store)."""

    def __init__(self, fs: Filesystems, retry: Retry, io_threads: int) -> None:
        self.fs, self.retry, self.io_threads = fs, retry, io_threads
        self.sizes: dict[str, int] = {}  # url -> size, as a listing gave it
        self.versions: dict[str, str] = {}  # url -> "ETag or time:size" (":size": none)
        self.checked: dict[str, int] = {}  # url -> the round its version was asked in
        self.folders: set[str] = set()  # folders whose listings gave versions
        self.round = 0  # epochs begun; a version of an earlier one is asked again
        self.token = uuid.uuid4().hex  # this store and its copies in worker processes
        self.signal: str | None = None  # the file whose change tells a copy of a round
        self.copy = False  # a copy in a worker process
        self.on_round: Callable[[], None] | None = None  # told of each new round
        self._setup()

    def _setup(self) -> None:
        self._lock = threading.Lock()
        self._listings: dict[tuple[str, int], Future[None]] = {}  # folder, round
        self._warned: set[str] = set()  # stores said to give no version
        self._seen_signal: tuple[int, int] | None = None  # the signal file, as last seen
        self._asked_all = -1  # the round `version` asked every HTTP object's version in

    def __getstate__(self) -> dict[str, Any]:
        if self.signal is None and self.versions:  # copies will hear of each round
            self.signal = os.path.join(_remote_cache.scratch().folder, f"round-{self.token}")
        state = self.__dict__.copy()
        for name in ("_lock", "_listings", "_warned", "_seen_signal", "_asked_all",
                     "on_round"):
            state.pop(name)
        return {**state, "copy": True, "on_round": None}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._setup()
        self.current_round()  # the original may have begun an epoch since it was pickled

    def note(self, url: str, info: Mapping[str, Any], round_: int | None = None) -> None:
        """Keeps the size and version of `url` from `info` (a listing's entry, or `info`),
        as asked in `round_` (this one by default) when it holds a version."""
        size = info.get("size")
        if isinstance(size, int):
            self.sizes[url] = size
        version = next((stamp(info[k]) for k in _VERSION_FIELDS
                        if info.get(k) is not None), "")
        self.versions[url] = f"{version}:{size}"
        if version:
            self.checked[url] = self.round if round_ is None else round_
            if not is_web(url):
                self.folders.add(url.rsplit("/", 1)[0])

    def find(self, url: str, what: str = "folder") -> list[tuple[str, str]]:
        """(path relative to `url`, URL) of every object under the folder `url` (a
        prefix), in the local walk's order: a folder's files sorted by name, then its
        subfolders; names starting with '.' are left out at any depth. Empty when there
        is nothing there."""
        remember(url)
        fs, path = self.fs.filesystem(url)
        web = is_web(url)
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
            full = self.fs.url(fs, name)
            self.note(full, info)
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
            remember(url)
            folders.setdefault(url.rsplit("/", 1)[0], []).append(i)
        result = [False] * len(urls)

        def listed(folder: str) -> set[str]:
            fs, path = self.fs.filesystem(folder)
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
                full = self.fs.url(fs, info["name"])
                self.note(full, info)
                names.add(full)
            return names

        with ThreadPoolExecutor(min(self.io_threads, max(len(folders), 1))) as pool:
            for names, members in zip(pool.map(listed, folders), folders.values()):
                for i in members:
                    result[i] = self.fs.canon(urls[i]) in names
            unsure = [i for i, ok in enumerate(result) if not ok]
            for i, ok in zip(unsure, pool.map(lambda i: self.info(urls[i], what), unsure)):
                result[i] = ok
        return result

    def info(self, url: str, what: str) -> bool:
        fs, path = self.fs.filesystem(url)
        fs.invalidate_cache(path)
        try:
            info = self.retry.call(what, url, lambda: fs.info(path))
        except FileNotFoundError:
            return False
        if info.get("type") == "directory":
            return False
        self.note(self.fs.canon(url), info)
        return True

    def version(self, path: str) -> str | None:
        """The version of the object `path` (ETag or time, and size) as asked this epoch
        (its listing, or asked for now; "unversioned ..." for a store that gives none:
        one of this store alone); None for a local path."""
        if not is_url(path):
            return None
        round_ = self.current_round()
        if is_web(path) and self._asked_all != round_:  # HEADs at once, not in turn
            self._asked_all = round_
            todo = [u for u in self.versions if is_web(u) and self.checked.get(u) != round_]
            if len(todo) > 1:
                with ThreadPoolExecutor(min(self.io_threads, len(todo))) as pool:
                    list(pool.map(lambda u: quietly(self.info, u, "file"), todo))
        version = self.confirmed(path, "file")
        return f"unversioned {self.token}" if version is None else version

    def current_round(self) -> int:
        """The epoch round: this store's own, or in a copy (a worker process) one more
        each time the original began an epoch (its signal file changed)."""
        if self.signal is not None and self.copy:
            seen = file_mark(self.signal)
            if seen != self._seen_signal:
                self._seen_signal = seen
                try:
                    with open(self.signal, encoding="utf-8") as f:
                        told = int(f.read())
                except (OSError, ValueError):
                    told = self.round
                if told > self.round:
                    self.next_round(told)
        return self.round

    def next_round(self, round_: int | None = None) -> None:
        with self._lock:
            self.round = self.round + 1 if round_ is None else round_
            self._listings.clear()
        if self.on_round is not None:
            self.on_round()

    def confirmed(self, url: str, what: str) -> str | None:
        """The version of `url` as asked this round ("stamp:size"), asked now when it was
        not (one listing of its folder where listings give versions, else a HEAD
        request); None when its store gives none."""
        canon = self.fs.canon(url)
        round_ = self.current_round()
        if self.checked.get(canon) != round_:
            if not is_web(canon):
                self.list_folder(canon.rsplit("/", 1)[0], round_)
            if self.checked.get(canon) != round_ and not self.info(url, what):
                self.missing(url, what)
        version = self.versions[canon]
        if self.checked.get(canon) == round_:
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

    def list_folder(self, folder: str, round_: int) -> None:
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
            fs, path = self.fs.filesystem(folder)
            fs.invalidate_cache(path)
            try:
                entries = self.retry.call("folder", folder,
                                         lambda: fs.ls(path, detail=True))
            except (FileNotFoundError, NotADirectoryError):
                entries = []  # its objects are asked for one by one: missing
            for info in entries:
                if info.get("type") != "directory":
                    self.note(self.fs.url(fs, info["name"]), info, round_)
        except BaseException as error:
            with self._lock:  # the next reader asks again
                self._listings.pop((folder, round_), None)
            future.set_exception(error)
            raise
        future.set_result(None)

    def known_key(self, url: str) -> str | None:
        """The cache key of `url` when its version was asked this round (no request)."""
        canon = self.fs.canon(url)
        if self.checked.get(canon) != self.round:
            return None
        return RemoteCache.key(canon, self.versions[canon])

    def isdir(self, url: str) -> bool:
        fs, path = self.fs.filesystem(url)
        return bool(self.retry.call("folder", url, lambda: fs.isdir(path)))

    def ls_folders(self, url: str) -> list[str]:
        """The names of the subfolders of `url`, sorted (hidden ones left out)."""
        remember(url)
        fs, path = self.fs.filesystem(url)
        fs.invalidate_cache(path)
        entries = self.retry.call("folder", url, lambda: fs.ls(path, detail=True))
        names = {urllib.parse.unquote(info["name"].rstrip("/").rsplit("/", 1)[-1])
                 for info in entries if info.get("type") == "directory"}
        return sorted(n for n in names if n and not n.startswith("."))

    def expand(self, pattern: str) -> list[str]:
        """The URLs matching the glob `pattern`, sorted."""
        remember(pattern)
        fs, path = self.fs.filesystem(pattern)
        fs.invalidate_cache()
        found = self.retry.call("glob pattern", pattern,
                               lambda: fs.glob(path, detail=True))
        urls = []
        for name, info in sorted(found.items()):
            if info.get("type") == "directory":
                continue
            full = self.fs.url(fs, name)
            self.note(full, info)
            urls.append(full)
        return urls

    def tell_round(self) -> None:
        """Tells the copies in worker processes of this round (the signal file), and
        lists the folders again now, so that the epoch's reads find versions ready."""
        if self.copy:
            return
        if self.signal is not None:
            try:
                os.makedirs(os.path.dirname(self.signal), exist_ok=True)
                with _atomic.replacing(self.signal, "w") as f:
                    f.write(str(self.round))
            except OSError:  # the copies' cache answers on: no worse than before
                pass

    def missing(self, url: str, what: str) -> NoReturn:
        raise FileNotFoundError(f"{what[0].upper() + what[1:]} not found: "
                                f"{_redact.redact(url)}")


def file_mark(path: str) -> tuple[int, int] | None:
    """What identifies the file `path` now (replaced: another), None when absent."""
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return stat.st_ino, stat.st_mtime_ns


def stamp(value: Any) -> str:
    """A version mark as text: a time (a datetime or seconds, as listings and `info` of
    one filesystem may give it differently) as its seconds."""
    if hasattr(value, "timestamp"):
        value = value.timestamp()
    if isinstance(value, float):
        return repr(round(value, 6))
    return str(value)


def quietly(call: Callable[..., Any], *args: Any) -> None:
    """call(*args), its error left to the next caller that needs what it makes."""
    try:
        call(*args)
    except Exception:  # noqa: BLE001 - a reader asks again, and raises
        pass
