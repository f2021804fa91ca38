"""Files put in place atomically, through a temporary file no one else can have planted."""

import contextlib
import os
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


@contextlib.contextmanager
def replacing(path, mode="wb"):
    """Yields a new file object; when the block ends without an error, the file replaces
    `path` atomically (a reader sees the old file or the new one, never half of one).

    The temporary file is made by `tempfile.mkstemp` in `path`'s folder (so the rename
    stays on one file system): a new name, opened with O_CREAT | O_EXCL | O_NOFOLLOW, so
    a file or symlink planted there beforehand is never written through. It gets the
    permissions a plain `open(path, "w")` would give and is removed on any error.
    """
    path = os.fspath(path)
    folder, name = os.path.split(os.path.abspath(path))
    fd, temporary = tempfile.mkstemp(dir=folder, prefix=f".{name}.", suffix=".tmp")
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
