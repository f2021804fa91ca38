"""Where a path read from data may lead: one confinement rule for every reader.

A path that comes from data (a CSV or SQL cell, a COCO `file_name`, a VOC `<filename>`,
a folder entry, a mask or target image paired by name) is joined to its `Root` (the
`directory` argument, or the reader's documented default) and must stay inside it:
neither '..', nor an absolute path, nor a URL, nor a symbolic link on its way may take
it out. What leaves is refused with one message that names the entry as written, where
it was read (`source`: "line 4 of list.csv", "image 3 of COCO file a.json"...), the
root, why it is outside and the argument that lifts the rule (`allow_outside=True`, or
`follow_links=True` for folder walks).

The rule is checked twice: when the generator is built (`Root.check`, on the real path)
and again when each file is opened (by `loading.images.read_file`: on Linux the real path
of the file itself, found through an O_PATH descriptor before it is opened for reading,
`open_within`; elsewhere the real path before opening it, `opened`, whose last component
is then opened without following a link), so a file replaced by a link after the
listing is refused, not read.

URL roots (s3://, gs://, https://...) compare keys: `join_url` never leaves the bucket
or host, and `url_inside` says whether a URL lies under a folder URL.
"""

from __future__ import annotations

import os
import posixpath
import urllib.parse
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from kerasgen.storage import remote as _remote

_NO_AUTHORITY = ("memory", "file", "local")  # protocols whose paths start at "/"


@dataclass(frozen=True)
class Root:
    """A folder (a local path or a URL) that the paths of some data must stay in.

    folder: as given (shown in messages); real: its real path (None for a URL);
    label: how messages name it ("`directory`", "`mask_dir`", "the COCO file's
    folder"); lift: the argument that reads outside it ("allow_outside=True").
    """

    folder: str
    real: str | None
    label: str = "`directory`"
    lift: str = "allow_outside=True"

    @classmethod
    def of(cls, folder: Any, label: str = "`directory`",
           lift: str = "allow_outside=True") -> Root:
        folder = _remote.local(os.fspath(folder))
        real = None if _remote.is_url(folder) else os.path.realpath(folder)
        return cls(folder, real, label, lift)

    @property
    def remote(self) -> bool:
        return self.real is None

    def __str__(self) -> str:
        return f"{self.label} ({self.folder})"

    def join(self, name: str, source: str = "") -> str:
        """The path of the entry `name` (read at `source`) in this folder (a URL `name`
        as it is); a name going above a URL's bucket or host, or holding a NUL byte,
        is a ValueError naming it."""
        if "\x00" in name:
            raise ValueError(f"The path {name!r} in {source or 'the data'} holds a NUL "
                             "byte, which no file name can hold. Fix that entry.")
        if _remote.is_url(name):
            return name
        if not self.remote:
            return os.path.normpath(os.path.join(self.folder, _remote.local(name)))
        try:
            return join_url(self.folder, name)
        except ValueError as error:
            raise ValueError(f"{error} At {source}." if source else str(error)) from None

    def holds(self, real: str) -> bool:
        """Whether the real local path `real` is this folder or lies under it."""
        if self.real is None:
            return False
        # the common case, a file below the folder, without splitting both paths
        return real.startswith(self.real.rstrip(os.sep) + os.sep) or inside(real, self.real)

    def why_outside(self, name: str, path: str) -> str | None:
        """Why `path` (the entry `name` joined to this folder) lies outside it, in
        words; None when it lies inside."""
        if self.remote:
            if _remote.is_url(path) and url_inside(path, self.folder):
                return None
            if not _remote.is_url(path):
                return "it is a local path, not a key under that URL"
            if name.startswith("/"):
                return "it starts at the bucket's (or host's) root ('/')"
            return ("it names another bucket, host or protocol" if _remote.is_url(name)
                    else "its '..' goes above it")
        if _remote.is_url(path):
            return "it is a URL, not a file in that folder"
        real = os.path.realpath(path)
        if self.holds(real):
            return None
        if os.path.isabs(_remote.local(name)):
            return "it is an absolute path"
        if not inside(os.path.abspath(path), os.path.abspath(self.folder)):
            return "its '..' goes above it"
        return f"a symbolic link on its way leads to {real}"

    def check(self, name: str, path: str, source: str, fix: str = "") -> str:
        """`path` (the entry `name` joined to this folder, read at `source`) when it
        lies inside; else the one ValueError (see `refuse`)."""
        why = self.why_outside(name, path)
        if why is not None:
            refuse([Escape(name, source, why)], self, fix)
        return path

    def confine(self, name: str, source: str, fix: str = "") -> str:
        """The entry `name` (read at `source`) joined to this folder and checked."""
        return self.check(name, self.join(name, source), source, fix)


class Escape(NamedTuple):
    """One entry that leaves its root: as written, where it was read, why."""

    entry: str
    source: str
    why: str


def message(escapes: Sequence[Escape], root: Root, fix: str = "") -> str:
    """The one message of entries that leave `root` (the first five shown). `fix` says
    what to change in the data; the argument that lifts the rule is always named."""
    lift = (f"Nothing outside {root.label} is read unless {root.lift}"
            + (f": {fix}, or pass {root.lift} if that is intended." if fix else "."))
    if len(escapes) == 1:
        e = escapes[0]
        return f"The path {e.entry!r} in {e.source} leaves {root}: {e.why}. {lift}"
    shown = "; ".join(f"{e.entry!r} in {e.source} ({e.why})" for e in escapes[:5])
    return (f"{len(escapes)} paths leave {root}: {shown}{' ...' if len(escapes) > 5 else ''}."
            f" {lift}")


def refuse(escapes: Sequence[Escape], root: Root, fix: str = "") -> None:
    """Raises the ValueError of `message` when `escapes` is not empty."""
    if escapes:
        raise ValueError(message(escapes, root, fix))


# ------------------------------------------------------------------ at open time
def roots(value: Any) -> tuple[Root, ...]:
    """The local roots of `value`: None (none), a real folder path (a str: `directory`),
    a Root, or several of them."""
    if value is None:
        return ()
    if isinstance(value, (str, os.PathLike)):
        value = Root(os.fspath(value), os.fspath(value))
    if isinstance(value, Root):
        value = (value,)
    return tuple(r for r in value if not r.remote)


# Linux names the file an open descriptor refers to (its real path, as the kernel
# resolved it) under /proc/self/fd: one system call, where os.path.realpath walks every
# component in Python (about a tenth of a small image's decode)
FD_PATHS = ("/proc/self/fd" if hasattr(os, "O_PATH") and os.path.isdir("/proc/self/fd")
            else None)


def opened(path: str, within: Iterable[Root], what: str) -> str:
    """The real path to open for the file `path`, which must lie in one of `within`
    now, as it is opened (a symbolic link that replaced it, or a folder on its way,
    after the generator was built is refused: ValueError naming it). Where the system
    names an open file's real path (`FD_PATHS`), `open_within` is used instead."""
    within = tuple(within)
    real = os.path.realpath(path)
    if any(r.holds(real) for r in within):
        return real
    raise _led_out(path, real, within, what)


def open_within(path: str, within: Sequence[Root], what: str, flags: int) -> int:
    """A descriptor of the file `path` opened with `flags`, once the real path the
    kernel resolved for it lies in one of `within` (else the ValueError of `opened`).
    Linux only (FD_PATHS): `path` is first opened with O_PATH, which opens nothing (no
    device, FIFO or file outside is opened before it is refused); /proc/self/fd names
    that descriptor's real path; the file is then opened through the descriptor, so
    what is read is what was checked, with no moment for a link to be swapped in."""
    handle = os.open(path, os.O_PATH | os.O_CLOEXEC)
    try:
        link = f"{FD_PATHS}/{handle}"
        try:
            real = os.readlink(link)
        except OSError:  # no name for it here: the check before opening, as elsewhere
            return os.open(opened(path, within, what), flags | os.O_NOFOLLOW)
        if not any(r.holds(real) for r in within):
            raise _led_out(path, real, within, what)
        return os.open(link, flags)
    finally:
        os.close(handle)


def _led_out(path: str, real: str, within: Sequence[Root], what: str) -> ValueError:
    return ValueError(f"Cannot read {what} {path}: it now leads to {real}, "
                      f"{_outside(within)} (a symbolic link replaced it, or a folder on its "
                      f"way, after the generator was built). {_unless(within)}")


def became_link(path: str, within: Iterable[Root], what: str) -> ValueError:
    """The error of a file that became a symbolic link as it was opened."""
    within = tuple(within)
    return ValueError(f"Cannot read {what} {path}: it became a symbolic link as it was "
                      f"opened. {_unless(within)}")


def _outside(within: Sequence[Root]) -> str:
    return "outside " + " and ".join(str(r) for r in within)


def _unless(within: Sequence[Root]) -> str:
    labels = " or ".join(dict.fromkeys(r.label for r in within))
    lifts = " or ".join(dict.fromkeys(r.lift for r in within))
    return f"Nothing outside {labels} is read unless {lifts}."


def inside(real: str, root: str) -> bool:
    """Whether the real path `real` is the real folder `root` or lies under it."""
    try:
        return os.path.commonpath([real, root]) == root
    except ValueError:  # different drives, or a relative and an absolute path
        return False


# ------------------------------------------------------------------ URLs
def join_url(base: str, name: str) -> str:
    """The URL of `name` (relative, '..' allowed, or starting with '/' from the
    bucket's or host's root) in the folder URL `base`. The bucket (or host) is never
    left: a name going above its root is a ValueError. Over HTTP the name is quoted."""
    head, rest = base.split("://", 1)
    if rest.startswith("/") or head in _NO_AUTHORITY:  # no bucket or host: memory://a
        authority, path = "", rest.lstrip("/")
    else:
        authority, _, path = rest.partition("/")
    parts = [] if name.startswith("/") else [p for p in path.split("/") if p]
    for k, part in enumerate(name.split("/")):
        if part == "." or (part == "" and (k == 0 or not parts)):
            continue  # a key may hold '//': kept, not collapsed
        if part == "..":
            if not parts:
                raise ValueError(f"The path {name!r} leaves {head}://{authority}: it goes "
                                 f"above its root from {base}.")
            parts.pop()
        else:
            parts.append(part)
    key = "/".join(parts)
    if head in ("http", "https"):
        key = urllib.parse.quote(key, safe="/")
    return f"{head}://{authority}/{key}" if authority else f"{head}:///{key}"


def url_inside(url: str, root: str) -> bool:
    """Whether the URL `url`, its '..' resolved, lies under the folder URL `root`."""
    def parts(u: str) -> tuple[tuple[str, str], list[str]]:
        head, rest = u.split("://", 1)
        if rest.startswith("/") or head in _NO_AUTHORITY:
            authority, path = "", rest
        else:
            authority, _, path = rest.partition("/")
        path = posixpath.normpath("/" + urllib.parse.unquote(path))
        return (head, authority), [p for p in path.split("/") if p]

    (where, under_url), (top, under_root) = parts(url), parts(root)
    return (where == top and under_url[:len(under_root)] == under_root
            and len(under_url) > len(under_root))
