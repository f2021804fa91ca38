"""How kerasgen's worker processes start: from a fork server (spawn where there is none),
never as a fork of the training process, and never running the user's script.

The fork server imports kerasgen (`kerasgen._preload`) once, and each worker is a fork of
it. Its socket lives in multiprocessing's temporary folder, which kerasgen makes itself as
`kerasgen-<pid>-*` (holding a locked owner file while its process lives), so that one left
by a killed process is removed when the next process starts workers (`remove_orphans`).
Processes start with the parent's `__main__` hidden (`main_hidden`): the worker imports
what it needs itself (see pipeline/workers.py).
"""

from __future__ import annotations

import contextlib
import multiprocessing
import multiprocessing.util
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Iterator
from typing import Any

from kerasgen import _atomic

TEMP_PREFIX = "kerasgen-"  # multiprocessing's temporary folder, as kerasgen makes it
_OWNER_FILE = "owner.lock"  # locked by the folder's process for as long as it lives
# the longest folder path that leaves room for "/listener-XXXXXXXX", the fork server's
# socket, in a Unix socket's 104 bytes (macOS; 108 on Linux), the final NUL included
_SOCKET_FOLDER_MAX = 104 - 1 - len("/listener-XXXXXXXX")


def context() -> (multiprocessing.context.SpawnContext
                  | multiprocessing.context.ForkServerContext):
    """The multiprocessing context workers start in: forkserver, else spawn. The fork
    server imports kerasgen (so Keras and its backend) once, before any of their threads
    exist, and each worker is a fork of it: not an import each (5 s with TensorFlow)."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    temp_folder()
    ctx = multiprocessing.get_context("forkserver")
    from multiprocessing import forkserver

    server = forkserver._forkserver  # noqa: SLF001 - whether it has started
    if getattr(server, "_forkserver_pid", None) is None:  # not started yet
        preload = list(getattr(server, "_preload_modules", ["__main__"]))
        if "kerasgen._preload" not in preload:  # kerasgen.base, quietly
            ctx.set_forkserver_preload(preload + ["kerasgen._preload"])
    return ctx


def warm_up() -> None:
    """Starts the fork server now (it imports kerasgen while the caller goes on), so the
    first workers start as forks of it, not after a wait."""
    ctx = context()
    if ctx.get_start_method() == "forkserver":
        from multiprocessing import forkserver

        with main_hidden():
            forkserver.ensure_running()


def can_start() -> bool:
    """Whether this process may start worker processes (a daemonic one, like the workers
    of Keras's or torch's pools, may not)."""
    return not multiprocessing.current_process().daemon


_temp: dict = {}  # this process's folder and the open file that holds its lock


def temp_folder() -> str | None:
    """multiprocessing's temporary folder for this process (where the fork server's socket
    goes), made by kerasgen as `kerasgen-<pid>-*` when multiprocessing has made none yet,
    with the folders of dead processes removed first. None where multiprocessing's own
    (`pymp-*`, made for the caller's own use of it) is already there: kept as it is."""
    if _temp.get("pid") == os.getpid():
        return _temp["folder"]
    # multiprocessing's own settings of this process, which typeshed does not declare
    config = multiprocessing.current_process()._config  # type: ignore[attr-defined]  # noqa: SLF001
    folder = None
    if config.get("tempdir") is None:
        remove_orphans()
        folder = _make_temp_folder()
        if folder is not None:
            config["tempdir"] = folder
            multiprocessing.util.Finalize(None, _remove_temp_folder, args=(folder,),
                                          exitpriority=-100)  # as multiprocessing's own
    _temp.update(pid=os.getpid(), folder=folder)
    return folder


def _make_temp_folder() -> str | None:
    """A new `kerasgen-<pid>-*` folder holding this process's locked owner file; None
    where the temporary folder's path is too long for the fork server's socket in it
    (multiprocessing's shorter `pymp-*` may still fit)."""
    folder = tempfile.mkdtemp(prefix=f"{TEMP_PREFIX}{os.getpid()}-")
    if len(folder) > _SOCKET_FOLDER_MAX:
        os.rmdir(folder)
        return None
    fd = os.open(os.path.join(folder, _OWNER_FILE), os.O_CREAT | os.O_EXCL | os.O_RDWR,
                 0o600)
    lock(fd, wait=True)
    _temp["lock_fd"] = fd  # open (and locked) until this process ends
    return folder


def _remove_temp_folder(folder: str) -> None:
    """At exit: the folder goes, as multiprocessing's own would."""
    # multiprocessing's own settings of this process, which typeshed does not declare
    config = multiprocessing.current_process()._config  # type: ignore[attr-defined]  # noqa: SLF001
    if config.get("tempdir") == folder:
        config["tempdir"] = None
    shutil.rmtree(folder, ignore_errors=True)


def remove_orphans(where: str | None = None) -> list[str]:
    """Removes the `kerasgen-<pid>-*` folders in `where` (the temporary folder) of
    processes that are gone (killed: a normal exit removes its own), and only those:
    folders of this user whose process no longer runs and whose lock is free (a process
    of another pid namespace sharing the folder still holds its lock). Returns them."""
    where = tempfile.gettempdir() if where is None else where
    pattern = re.compile(rf"{re.escape(TEMP_PREFIX)}(\d+)-")
    removed = []
    with contextlib.suppress(OSError):
        for entry in os.scandir(where):
            match = pattern.match(entry.name)
            if match and _orphaned(entry, int(match.group(1))):
                shutil.rmtree(entry.path, ignore_errors=True)
                removed.append(entry.path)
    return removed


def _orphaned(entry: os.DirEntry[str], pid: int) -> bool:
    try:
        if not entry.is_dir(follow_symlinks=False) or (
                entry.stat(follow_symlinks=False).st_uid != os.getuid()):
            return False
    except OSError:
        return False
    if pid == os.getpid() or _atomic.running(pid):
        return False
    try:  # only a folder holding kerasgen's owner file (and the fork server's socket)
        names = os.listdir(entry.path)
        if _OWNER_FILE not in names or any(
                n != _OWNER_FILE and not n.startswith("listener-") for n in names):
            return False
        fd = os.open(os.path.join(entry.path, _OWNER_FILE), os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:  # no owner file: not known to be kerasgen's, kept
        return False
    try:
        return lock(fd, wait=False)
    finally:
        os.close(fd)


def lock(fd: int, wait: bool) -> bool:
    """Takes an exclusive lock of `fd` (released when the process ends, however it ends):
    False when another process holds it and `wait` is false."""
    import fcntl  # POSIX: reached only where workers start from a fork server

    try:
        fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
    except BlockingIOError:
        return False
    return True



@contextlib.contextmanager
def main_hidden() -> Iterator[None]:
    """Starts processes without multiprocessing's instruction to import the parent's
    `__main__` (the user's script) first; worker_loop.serve imports it itself when needed."""
    main = sys.modules["__main__"]
    saved: dict[str, Any] = {key: main.__dict__[key] for key in ("__file__", "__spec__")
                             if key in main.__dict__}
    main.__dict__.pop("__file__", None)
    main.__dict__["__spec__"] = None
    try:
        yield
    finally:
        main.__dict__.pop("__spec__", None)
        main.__dict__.update(saved)

