"""A worker process's main loop (`serve`): it rebuilds the batch maker from its pickle,
maps the slots it is sent, and makes each batch asked for into its slot (or pickled, where
it does not fit), until it is told to stop or its parent is gone.

It ignores SIGINT (the parent ends it: see pipeline/workers.py), and a batch's error is
sent back to be raised where the batch is asked for (pipeline/handover.py).
"""

from __future__ import annotations

import mmap
import multiprocessing.connection
import os
import pickle
import signal
from multiprocessing import reduction
from typing import Any

import numpy as np

from kerasgen import _quiet
from kerasgen.pipeline import handover
from kerasgen.arrays import shm as _shm


def serve(conn: multiprocessing.connection.Connection) -> None:
    """A worker process: makes the batches asked for until told to stop."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent ends us (pipeline/workers.py)
    payload = conn.recv_bytes()
    fds = [reduction.recv_handle(conn) for _ in range(conn.recv())]
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

