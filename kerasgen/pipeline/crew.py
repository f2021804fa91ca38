"""One start of a `WorkerPool`'s processes (`Crew`), with the thread that receives their
batches.

A crew starts `count` worker processes (pipeline/worker_start.py), each running
`worker_loop.serve`, and sends each the pool's pickled work (the batch maker and the
order) and the file descriptors of the shared caches it names. It asks the least busy
worker for each batch, sending a slot's file descriptor the first time that worker
writes it. Its receiving thread hands each batch to its future (pipeline/handover.py),
and a worker's end to the batches it owed: a stop's end drops them (CancelledError: made
where asked for), a death fails them and breaks the pool, a message it cannot read fails
every batch owed. No caller waits forever.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import multiprocessing.connection
import os
import signal
import threading
import time
import weakref
from concurrent.futures import CancelledError, Future
from multiprocessing import reduction
from typing import Any, Protocol

from kerasgen.pipeline import handover, worker_loop, worker_start

STOP_GRACE_S = 10.0  # how long a stop waits for the batches asked for (then: SIGTERM)


class Pool(Protocol):
    """What a crew reads of its pool (pipeline/workers.py's `WorkerPool`), and writes:
    `broken` when a worker dies, `fits` when a batch did not fit its slot."""

    count: int
    name: str
    lock: threading.Lock
    payload: bytes
    fds: list[int]
    broken: Exception | None

    def fits(self, needed: int) -> None: ...


def stop_crew(box: list[Crew | None]) -> None:
    """A pool was collected: its processes end."""
    crew = box[0]
    if crew is not None and crew.pid == os.getpid():
        crew.stop()


class Crew:
    """One start of a pool's processes, with the thread receiving their batches."""

    def __init__(self, pool: Pool) -> None:
        self.pool: Pool = weakref.proxy(pool)  # ReferenceError once it is collected
        self.count, self.name = pool.count, pool.name
        self.pid = os.getpid()
        self.lock = pool.lock
        self.processes: list[multiprocessing.process.BaseProcess] = []
        self.conns: list[multiprocessing.connection.Connection] = []
        self.known: list[set[int]] = []  # per worker: slot numbers it has mapped
        # per worker: {task id: (future, slot, task)}
        self.owed: list[dict[int, tuple[Future[Any], handover.Slot, tuple[Any, ...]]]] = []
        self.next_task = 0
        self.stopping = False
        ctx = worker_start.context()
        with worker_start.main_hidden():
            for number in range(self.count):
                ours, theirs = multiprocessing.Pipe(duplex=True)
                process = ctx.Process(target=worker_loop.serve,
                                      args=(theirs, ctx.get_start_method() == "forkserver"),
                                      name=f"kerasgen-worker-{number}", daemon=True)
                process.start()
                theirs.close()
                ours.send_bytes(pool.payload)
                ours.send(len(pool.fds))
                for fd in pool.fds:
                    reduction.send_handle(ours, fd, process.pid)
                self.processes.append(process)
                self.conns.append(ours)
                self.known.append(set())
                self.owed.append({})
        self.thread = threading.Thread(target=self._receive, name="kerasgen-receive",
                                       daemon=True)
        self.thread.start()

    def send(self, future: Future[Any], slot: handover.Slot, task: tuple[Any, ...]) -> None:
        """Asks the least busy worker for `task` into `slot` (under the pool's lock)."""
        worker = min(range(self.count), key=lambda k: len(self.owed[k]))
        self.next_task += 1
        self.owed[worker][self.next_task] = (future, slot, task)
        conn = self.conns[worker]
        try:
            if slot.number not in self.known[worker]:
                conn.send(("slot", slot.number, slot.capacity))
                reduction.send_handle(conn, slot.fd, self.processes[worker].pid)
                self.known[worker].add(slot.number)
            conn.send(("task", self.next_task, slot.number) + tuple(task))
        except OSError:
            pass  # the worker is gone: the receiving thread reports it

    def stop(self, grace: float = STOP_GRACE_S) -> None:
        """Ends the processes: each makes the batches it was asked for and ends; those
        still running after `grace` seconds (all together) are terminated, the batches
        they owed dropped (`_dropped`)."""
        with self.lock:
            self.stopping = True
            for conn in self.conns:
                with contextlib.suppress(OSError):
                    conn.send(None)
        deadline = time.monotonic() + grace
        for process in self.processes:
            process.join(timeout=max(0.0, deadline - time.monotonic()))
        for process in self.processes:
            if process.is_alive():
                process.terminate()
        for process in self.processes:
            process.join(timeout=5)
        self.thread.join(timeout=5)
        for conn in self.conns:
            conn.close()

    def _receive(self) -> None:
        """The receiving thread: batches to their futures, a worker's end to the batches
        it owed. It never ends with a batch unanswered (`_failed`)."""
        try:
            self._receive_all()
        except BaseException as error:  # noqa: BLE001 - no caller may wait forever
            self._failed(error)

    def _receive_all(self) -> None:
        waiting = {conn: k for k, conn in enumerate(self.conns)}
        sentinels = {process.sentinel: k for k, process in enumerate(self.processes)}
        while waiting:
            for ready in multiprocessing.connection.wait(list(waiting) + list(sentinels)):
                if ready in waiting:
                    worker = waiting[ready]
                    if self._read(worker):
                        continue
                elif ready in sentinels:  # it ended: what it sent first comes first
                    worker = sentinels[ready]
                    conn = self.conns[worker]
                    while conn in waiting and conn.poll(0) and self._read(worker):
                        pass
                else:
                    continue
                waiting.pop(self.conns[worker], None)
                sentinels.pop(self.processes[worker].sentinel, None)
                self._ended(worker)

    def _read(self, worker: int) -> bool:
        """Delivers the next message of `worker`: False when its pipe has ended."""
        try:
            message = self.conns[worker].recv()
        except (EOFError, OSError):
            return False
        self._deliver(worker, message)
        return True

    def _deliver(self, worker: int, message: tuple[Any, ...]) -> None:
        kind, task_id = message[0], message[1]
        with self.lock:
            owed = self.owed[worker].pop(task_id, None)
        if owed is None:  # already answered (dropped by a stop)
            return
        future, slot, _ = owed
        try:
            result = self._result(kind, message, slot)
        except Exception as error:  # noqa: BLE001 - the batch's error, for its caller
            slot.busy = False
            future.set_exception(error)
            return
        slot.busy = False
        future.set_result(result)

    def _result(self, kind: str, message: tuple[Any, ...], slot: handover.Slot) -> Any:
        """The batch a message carries (raised: the batch's error)."""
        if kind == "done":
            return handover.views(slot.array, message[2])
        if kind == "pickled":  # it did not fit: later slots are made big enough
            with contextlib.suppress(ReferenceError):
                self.pool.fits(message[3])
            return handover.unpickled(message[2], "its batch")
        raise handover.rebuilt(*message[2:])

    def _ended(self, worker: int) -> None:
        """`worker`'s process has ended: told to (a stop: it exits with 0, or ends by
        the stop's SIGTERM), or not (it died, also while a stop waited)."""
        process = self.processes[worker]
        process.join(timeout=1)
        if self.stopping and process.exitcode in (0, -signal.SIGTERM):
            self._dropped(worker)
        else:
            self._died(worker)

    def _dropped(self, worker: int) -> None:
        """A stopped worker left batches unmade (nobody was waiting for them): each is
        made where it is asked for, if it is (a CancelledError tells WorkAhead so)."""
        with self.lock:
            owed, self.owed[worker] = self.owed[worker], {}
        for future, slot, _ in owed.values():
            slot.busy = False
            future.set_exception(CancelledError())

    def _died(self, worker: int) -> None:
        process = self.processes[worker]
        process.join(timeout=1)
        code = process.exitcode
        how = (f"was killed by signal {signal.Signals(-code).name}" if code and code < 0
               else f"exited with code {code}")
        error = RuntimeError(
            f"A kerasgen worker process of {self.name} (pid {process.pid}, worker "
            f"{worker + 1} of {self.count}) {how}. Training cannot go on without its "
            "batches; if the system ran out of memory, use fewer workers or a smaller "
            "batch_size or max_queue_size.")
        with self.lock:
            owed, self.owed[worker] = self.owed[worker], {}
            with contextlib.suppress(ReferenceError):
                self.pool.broken = error
        for future, slot, (epoch, _, index, *_) in owed.values():
            slot.busy = False
            future.set_exception(RuntimeError(
                f"{error} It was making batch {index} of epoch {epoch}."))

    def _failed(self, error: BaseException) -> None:
        """The receiving thread failed (a message it could not read): every batch owed
        fails, naming why, and so does every later one. Their slots stay busy: a worker
        may still be writing them."""
        broken = RuntimeError(
            f"kerasgen could not read what the worker processes of {self.name} sent "
            f"({type(error).__name__}: {error}). Training cannot go on without their "
            "batches; worker threads (use_multiprocessing=False) avoid the pipe.")
        with self.lock:
            owed = [task for tasks in self.owed for task in tasks.values()]
            self.owed = [{} for _ in self.owed]
            with contextlib.suppress(ReferenceError):
                self.pool.broken = broken
        for future, _, (epoch, _, index, *_) in owed:
            future.set_exception(RuntimeError(
                f"{broken} It was waiting for batch {index} of epoch {epoch}."))

