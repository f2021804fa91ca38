"""What crosses from a worker process to the training process, and how.

A batch is written into a slot (`Slot`): anonymous shared memory (arrays/shm.py) mapped
by both processes, written again only once nothing holds the arrays handed out (reference
counts, as in batching.BufferPool). Only the batch's layout crosses the pipe
(`layout_of`: offsets, dtypes and shapes; values that are not arrays pickled apart, so
that one that cannot be rebuilt fails its batch alone), and the caller's arrays are views
of the slot (`views`). A batch's exception crosses as its pickle, its summary and its
traceback (`error_parts`), rebuilt in the parent (`rebuilt`) or named there where it
cannot be.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import pickle
import sys
import traceback
import weakref
from typing import Any

import numpy as np

from kerasgen.arrays import shm as _shm

ALIGN = 64  # where each array of a batch starts in a slot
# references of a free slot's array in `Slot.free`: the attribute, getrefcount's argument
_FREE = 2


class Slot:
    """A shared-memory block one batch is written into."""

    def __init__(self, number: int, capacity: int) -> None:
        self.number, self.capacity = number, capacity
        self.fd = _shm.shared_memory(capacity)
        self.array = np.frombuffer(mmap.mmap(self.fd, capacity), np.uint8)
        self.busy = False  # a worker is writing it
        self.close = weakref.finalize(self, os.close, self.fd)

    def free(self) -> bool:
        return not self.busy and sys.getrefcount(self.array) == _FREE


def unpickled(data: bytes, what: str) -> Any:
    """pickle.loads(data); what cannot be rebuilt here is a RuntimeError naming `what`."""
    try:
        return pickle.loads(data)
    except Exception as error:  # noqa: BLE001 - whatever stops unpickling it
        raise RuntimeError(
            f"{what} was made in a kerasgen worker process, but cannot be unpickled in "
            f"the training process ({type(error).__name__}: {error}).") from None


def rebuilt(data: bytes | None, summary: str, trace: str) -> BaseException:
    """The exception a batch raised in a worker (`data`: pickled, or None where it could
    not be), with the worker's traceback as a note; where it cannot be rebuilt here (its
    class takes other arguments than its pickle gives, say), a RuntimeError with its
    type and message."""
    error: Any = None  # what the pickle holds (an exception, where it could be rebuilt)
    if data is not None:
        with contextlib.suppress(Exception):
            error = pickle.loads(data)
    if not isinstance(error, BaseException):
        error = RuntimeError(f"{summary} (raised in a kerasgen worker process; the "
                             "exception cannot be rebuilt in the training process)")
    if hasattr(error, "add_note"):
        error.add_note(f"kerasgen worker process traceback:\n{trace}")
    return error


def views(memory: np.ndarray, layout: tuple[Any, ...]) -> Any:
    """The batch described by `layout`, as arrays viewing `memory`."""
    kind = layout[0]
    if kind == "array":
        _, offset, dtype, shape = layout
        dtype = np.dtype(dtype)
        size = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        return memory[offset:offset + size].view(dtype).reshape(shape)
    if kind == "value":  # pickled apart, so that what cannot be rebuilt fails one batch
        return unpickled(layout[1], "a value of its batch")
    if kind == "dict":
        return {key: views(memory, part) for key, part in layout[1]}
    parts = [views(memory, part) for part in layout[1]]
    return tuple(parts) if kind == "tuple" else parts


def layout_of(batch: Any, offset: int = 0) -> tuple[tuple[Any, ...], int]:
    """(layout, bytes needed): where each array of `batch` goes in a slot."""
    if isinstance(batch, np.ndarray) and batch.dtype != object:
        start = -(-offset // ALIGN) * ALIGN
        return ("array", start, batch.dtype.str, batch.shape), start + batch.nbytes
    if isinstance(batch, dict):
        parts = []
        for key, value in batch.items():
            part, offset = layout_of(value, offset)
            parts.append((key, part))
        return ("dict", parts), offset
    if isinstance(batch, (tuple, list)):
        parts = []
        for value in batch:
            part, offset = layout_of(value, offset)
            parts.append(part)
        return ("tuple" if isinstance(batch, tuple) else "list", parts), offset
    return ("value", pickle.dumps(batch, protocol=pickle.HIGHEST_PROTOCOL)), offset


def write(memory: np.ndarray, batch: Any, layout: tuple[Any, ...]) -> None:
    kind = layout[0]
    if kind == "array":
        views(memory, layout)[...] = batch
    elif kind == "dict":
        for key, part in layout[1]:
            write(memory, batch[key], part)
    elif kind in ("tuple", "list"):
        for value, part in zip(batch, layout[1]):
            write(memory, value, part)


def error_parts(error: BaseException) -> tuple[bytes | None, str, str]:
    """(pickle or None, "Type: message", traceback) of the exception being handled: the
    parent rebuilds it from these (`rebuilt`), or says what it was."""
    trace = traceback.format_exc()
    summary = f"{type(error).__name__}: {error}"
    try:
        data = pickle.dumps(error, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:  # noqa: BLE001 - whatever stops pickling it
        data = None
    return data, summary, trace
