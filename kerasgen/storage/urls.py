"""URLs: which paths are read through fsspec (`is_url`), their names (`local`,
`protocol`, `quote_url`, the local walk's order `walk_key`), and `Filesystems`: the
fsspec filesystem of each protocol, opened once with a store's options (the clients' own
retries off, time-outs as s3fs's). Secrets in a URL are made known to kerasgen._redact
(`remember`) before anything names it."""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Iterable, Mapping
from typing import Any

from kerasgen import _redact

PIP = 'pip install "kerasgen3[remote]"'
URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*://")
CONNECT_TIMEOUT, READ_TIMEOUT = 5.0, 15.0  # HTTP(S), as s3fs's own for S3


def is_url(path: Any) -> bool:
    """Whether `path` is a URL with a protocol other than file:// (read through fsspec)."""
    return (isinstance(path, str) and bool(URL.match(path))
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


def fsspec_module() -> Any:
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


def remember(url: str) -> None:
    """Makes the secrets of `url` known to kerasgen._redact (a URL with no user
    information or query has none: nothing to parse)."""
    if "@" in url or "?" in url:
        _redact.remember_url(url)


def is_web(url: str) -> bool:
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


class Filesystems:
    """The fsspec filesystems of one store, one per protocol, opened with its options.

    Args:
        storage_options: keyword arguments for fsspec's filesystem, applied to every URL.
        io_threads: the transfers in flight at once (S3 gets as many pooled connections).
    """

    def __init__(self, storage_options: Mapping[str, Any], io_threads: int) -> None:
        self.storage_options, self.io_threads = storage_options, io_threads
        self._fs: dict[str, Any] = {}

    def __getstate__(self) -> dict[str, Any]:
        return {"storage_options": self.storage_options, "io_threads": self.io_threads}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._fs = {}

    def filesystem(self, url: str) -> tuple[Any, str]:
        """(fsspec filesystem, path within it) of `url`."""
        fsspec = fsspec_module()
        name = url.split("://", 1)[0]
        fs = self._fs.get(name)
        if fs is None:
            try:
                fs, _ = fsspec.core.url_to_fs(url, **self.options(name))
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

    def options(self, name: str) -> dict[str, Any]:
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
        base = fsspec_module().core.strip_protocol(root).rstrip("/")
        return path[len(base):].lstrip("/") if path.startswith(base) else path

    def url(self, fs: Any, path: str) -> str:
        """The URL of `path` in `fs`, as a generator names it."""
        return path if URL.match(path) else fs.unstrip_protocol(path)
