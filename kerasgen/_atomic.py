"""Files put in place atomically, through a temporary file no one else can have planted."""

from __future__ import annotations

import contextlib
import os
import re
import tempfile


def _umask():
    try:  # Linux 4.7+: read it without changing it (os.umask would, for every thread)
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


_CLEANED: set[tuple[str, str]] = set()  # the targets whose orphans this process removed


def _remove_orphans(folder, name):
    """Removes the temporary files that a process killed while writing `name` left
    (`.NAME.PID.XXXX.tmp`, PID no longer running); once per target and process."""
    if (folder, name) in _CLEANED:
        return
    _CLEANED.add((folder, name))
    ours = re.compile(rf"\.{re.escape(name)}\.(\d+)\.[a-z0-9_]{{8}}\.tmp")  # mkstemp's
    try:
        entries = os.listdir(folder)
    except OSError:
        return
    for entry in entries:
        match = ours.fullmatch(entry)
        if match is None:
            continue
        pid = match.group(1)
        if int(pid) != os.getpid() and not running(int(pid)):
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(folder, entry))


def running(pid):
    """Whether the process `pid` is running (a process of another user counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's
        return True
    return True


@contextlib.contextmanager
def replacing(path, mode="wb"):
    """Yields a new file object; when the block ends without an error, the file replaces
    `path` atomically (a reader sees the old file or the new one, never half of one).

    The temporary file is made by `tempfile.mkstemp` in `path`'s folder (so the rename
    stays on one file system): a new name holding the writer's pid (so that the next
    writer of `path` removes what a process killed while writing left there), opened
    with O_CREAT | O_EXCL | O_NOFOLLOW, so a file or symlink planted there beforehand is
    never written through. It gets the
    permissions a plain `open(path, "w")` would give and is removed on any error.
    """
    path = os.fspath(path)
    folder, name = os.path.split(os.path.abspath(path))
    _remove_orphans(folder, name)
    fd: int | None  # None once the file object owns it
    fd, temporary = tempfile.mkstemp(dir=folder, prefix=f".{name}.{os.getpid()}.",
                                     suffix=".tmp")
    try:
        if hasattr(os, "fchmod"):
            os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, mode) as f:
            fd = None  # the file object owns it now
            yield f
        os.replace(temporary, path)
    except BaseException:
        if fd is not None:
            os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
