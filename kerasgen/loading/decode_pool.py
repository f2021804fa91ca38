"""The decode thread pool of a loader and its sizing: the cores this process may use,
split between worker processes, and narrowed while training finds its batches ready."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import numpy as np

_T = TypeVar("_T")


def usable_cores() -> int:
    """Cores this process may run on (its CPU affinity where the OS tells)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return os.cpu_count() or 1


class DecodePool:
    """The threads that decode a batch (OpenCV releases the GIL).

    Args:
        decode_threads: the pool's threads; None: `usable_cores()` split between
            `processes` (and paced, see `pace`).
        processes: the worker processes sharing the machine's cores, or None.
    """

    def __init__(self, decode_threads: int | None, processes: int | None) -> None:
        self.decode_threads = decode_threads
        self.processes = processes
        self._lock = threading.Lock()
        self._executor: tuple[int, ThreadPoolExecutor] | None = None
        self.width: int | None = None  # decode threads used per batch (None: all)
        self._ahead_streak = 0

    def in_threads(self, n: int, work: Callable[[int, int], _T]) -> list[_T]:
        """Runs work(a, b) over contiguous chunks of range(n) on the pool (in this thread
        when the pool has one thread); returns the results in chunk order."""
        threads = min(self.width or self.threads(), n)
        if threads <= 1:
            return [work(0, n)]
        bounds = np.linspace(0, n, threads + 1).astype(int)
        futures = [self.pool().submit(work, a, b) for a, b in zip(bounds[:-1], bounds[1:])]
        return [future.result() for future in futures]

    def pace(self, waited: bool) -> None:
        """Sizes decoding to what training leaves free, from the work-ahead's news of
        each batch: while the caller finds its batches ready (8 in a row), one decode
        thread fewer is used per batch, down to one, leaving the cores to the model;
        the first time it has to wait, all of them again (so it never starves)."""
        if self.decode_threads is not None:
            return
        if waited:
            self.width, self._ahead_streak = None, 0
            return
        self._ahead_streak += 1
        if self._ahead_streak >= 8:
            self._ahead_streak = 0
            self.width = max(1, (self.width or self.threads()) - 1)

    def threads(self) -> int:
        """Decode threads of this process's pool: `decode_threads`, else the cores this
        process may use, split between worker processes."""
        if self.decode_threads is not None:
            return self.decode_threads
        return max(1, usable_cores() // (self.processes or 1))

    def pool(self) -> ThreadPoolExecutor:
        """This process's pool; a forked worker process makes its own (a pool inherited
        through fork has no threads and would never run a task)."""
        executor = self._executor
        if executor is None or executor[0] != os.getpid():
            with self._lock:
                executor = self._executor
                if executor is None or executor[0] != os.getpid():
                    executor = (os.getpid(), ThreadPoolExecutor(
                        self.threads(), thread_name_prefix="kerasgen-decode"))
                    self._executor = executor
        return executor[1]

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state.update(_executor=None, _lock=None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()
