"""A worker process's main loop (`serve`): it rebuilds the batch maker from its pickle,
maps the slots it is sent, and makes each batch asked for into its slot (or pickled, where
it does not fit), until it is told to stop or its parent is gone (at its next read of the
pipe; on Linux at once, mid-batch included: `end_with_parent`).

It ignores SIGINT (the parent ends it: see pipeline/workers.py), never starts a Ray
instance of its own (RAY_ENABLE_AUTO_CONNECT=0), and a batch's error is
sent back to be raised where the batch is asked for (pipeline/handover.py).
"""

from __future__ import annotations

import contextlib
import ctypes
import mmap
import multiprocessing.connection
import os
import pickle
import signal
import sys
from multiprocessing import reduction
from typing import Any

import numpy as np

from kerasgen import _quiet
from kerasgen.pipeline import handover
from kerasgen.arrays import shm as _shm


def serve(conn: multiprocessing.connection.Connection, from_fork_server: bool = False,
          ) -> None:
    """A worker process: makes the batches asked for until told to stop (or its parent
    is gone: `from_fork_server`, see `end_with_parent`)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent ends us (pipeline/workers.py)
    if from_fork_server:
        let_fork_server_end()
        if not end_with_parent():
            return  # the fork server has ended already: so has the training process
    # never a Ray instance of a worker's own: Ray's first call in a process would start
    # one (`ray.init()`) where it finds no cluster to join (pickle_work refuses Ray's
    # objects; this holds for what reaches Ray another way)
    os.environ["RAY_ENABLE_AUTO_CONNECT"] = "0"
    try:
        payload = conn.recv_bytes()
        fds = [reduction.recv_handle(conn) for _ in range(conn.recv())]
    except (EOFError, OSError):  # the parent is gone before it sent the work
        return
    work: Any  # the batch maker, unpickled (None where it could not be)
    failed: Exception | None
    work, failed = None, None
    try:
        with _shm.passing_fds(fds), _quiet.tensorflow_quiet(default_level=None):
            work = pickle.loads(payload)
    except Exception as error:  # noqa: BLE001 - any failure is every task's error
        failed = error
        if hasattr(error, "add_note"):
            error.add_note("kerasgen: a worker process could not rebuild the generator's "
                           "batch maker from its pickle (a module it names may not be "
                           "importable there).")
    slots: dict[int, np.ndarray] = {}  # slot number -> its shared memory
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):  # the parent is gone
            return
        if message is None:
            return
        if message[0] == "slot":
            fd = reduction.recv_handle(conn)
            slots[message[1]] = np.frombuffer(mmap.mmap(fd, message[2]), np.uint8)
            os.close(fd)
            continue
        _, task_id, slot, epoch, offset, index, seed, batch_shuffle = message
        reply: tuple[Any, ...]
        try:
            if failed is not None:
                raise failed
            batch = work.batch(epoch, offset, index, seed, batch_shuffle)
            layout, needed = handover.layout_of(batch)
            memory = slots[slot]
            if needed <= len(memory):
                handover.write(memory, batch, layout)
                reply = ("done", task_id, layout)
            else:
                reply = ("pickled", task_id,
                         pickle.dumps(batch, protocol=pickle.HIGHEST_PROTOCOL), needed)
        except Exception as error:  # noqa: BLE001 - sent to the caller, which raises it
            reply = ("error", task_id) + handover.error_parts(error)
        try:
            conn.send(reply)
        except OSError:  # the parent is gone (killed, interrupted): end quietly
            return


def end_with_parent() -> bool:
    """Linux: this process gets SIGTERM when its parent ends (`PR_SET_PDEATHSIG`). The
    parent is the fork server, which ends with the training process (a SIGTERM, a
    SIGKILL, an exit), once no worker holds its "alive" pipe (`let_fork_server_end`).
    So a worker in the middle of a batch (a slow one, a read that never returns) ends
    with them, not when the batch is done: a pipe read notices only between batches.
    False where the parent has ended already. (Not for a worker spawned by the training
    process itself: its parent would be the thread that started it.)"""
    if not sys.platform.startswith("linux"):
        return True
    parent = os.getppid()
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM, 0, 0, 0)  # 1: PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # no libc to ask: the pipe read still ends it
        return True
    return os.getppid() == parent


def let_fork_server_end() -> None:
    """Closes this worker's copy of the fork server's "alive" pipe (multiprocessing
    hands one to every process it forks, so that it may fork others): the fork server
    ends when every copy is closed, and a worker's copy would keep it (and its resource
    tracker) running after the training process ends, for as long as the worker's batch
    takes. A worker is daemonic: it starts no process of its own."""
    from multiprocessing import forkserver

    server: Any = forkserver._forkserver  # noqa: SLF001 - the fork server of this process
    fd = getattr(server, "_forkserver_alive_fd", None)
    if fd is not None:
        with contextlib.suppress(OSError):
            os.close(fd)
        server._forkserver_alive_fd = None  # noqa: SLF001
