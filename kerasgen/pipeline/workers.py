"""kerasgen's own worker processes: batches made in other processes, handed over through
shared memory.

With `use_multiprocessing=True` a generator runs these instead of Keras's pool (see
_keras_compat.adopt_adapter). Keras's pool pickles every batch through a queue (a float
batch of 64 photos at 180x180 is 25 MB pickled, piped and unpickled) and forks the
training process, TensorFlow's or JAX's threads included. Here:

- Workers start with forkserver (spawn where there is none), never as a fork of the
  training process. They never run the user's script: what makes the batches (the
  generator's batch maker and order, `pipeline.feeding.Recipe`) reaches them pickled
  by reference where a worker can import what it names (classes and functions of
  modules), and by value (cloudpickle) where it cannot: anything of `__main__` (a
  notebook cell, a script, stdin, `python -c`), a class defined inside a function, a
  lambda or closure. So no `if __name__ == "__main__":` guard is needed, and a notebook's
  classes work. What cannot be pickled either way is an error naming the attribute,
  raised before the first batch (`pickle_work`).
- Workers ignore SIGINT: an interrupt (Ctrl-C, a notebook's stop button, which signals
  the kernel's process group) reaches the training loop, which ends them; a parent that
  is gone ends them at their next read of the pipe, without a traceback.
- A worker writes each batch into a slot: anonymous shared memory (memfd, or an unlinked
  temporary file), mapped by both processes, its file descriptor passed once over the
  worker's pipe. Only the batch's layout (offsets, dtypes, shapes) crosses the pipe, and
  the arrays handed to the caller are views of the slot. A slot is written again only
  once nothing holds those arrays (reference counts, as in batching.BufferPool).
- A worker that dies (killed, out of memory) fails the batches it owed at once, with an
  error naming it, its exit code or signal and the batch: the pipe's end and the
  process's sentinel wake the receiving thread, no timeout involved. What it sent before
  dying is still delivered; nothing is made again, so no pass goes on with a batch
  missing (the pool stays broken: every later batch fails the same way).
- What a worker sends that the parent cannot unpickle (an exception whose class needs
  other arguments to be rebuilt, an object in a batch) fails that batch with an error
  naming its type and message; the receiving thread never dies, so no caller waits
  forever for a batch.
- A batch that fails in the caller (Feeding.get) ends the processes ERROR_IDLE_S seconds
  later, their queued batches dropped, unless another batch is asked for first: `fit`
  stops at a failed batch, and leaves no worker behind.
- The fork server's socket lives in multiprocessing's temporary folder; kerasgen makes
  that folder itself, as `kerasgen-<pid>-*` (holding a locked file while its process
  lives), so that one left by a killed process is removed when the next process starts
  kerasgen's workers (multiprocessing's own `pymp-*` folder would stay forever). The
  shared memory is anonymous: nothing in /dev/shm outlives a process.

Batch `index` of `epoch` is a pure function of the maker, the seed, the epoch and the
resume offset, so a task carries just those numbers (`work.batch(epoch, offset, index,
seed, batch_shuffle)` makes it in the worker).
"""

from __future__ import annotations

import contextlib
import mmap
import multiprocessing
import multiprocessing.connection
import multiprocessing.util
import os
import pickle
import re
import shutil
import signal
import sys
import tempfile
import threading
import time
import traceback
import weakref
from collections.abc import Iterator
from concurrent.futures import CancelledError, Future
from multiprocessing import reduction
from typing import Any

import numpy as np

from kerasgen import _atomic, _quiet
from kerasgen.pipeline import shm as _shm

ALIGN = 64
IDLE_S = 5.0  # how long worker processes wait for the next epoch (WorkerPool.stop_later)
ERROR_IDLE_S = 1.0  # how long they wait for another batch after one failed (stop_soon)
STOP_GRACE_S = 10.0  # how long a stop waits for the batches asked for (then: SIGTERM)
HURRIED_GRACE_S = 1.0  # the same, when nobody waits for those batches any more
TEMP_PREFIX = "kerasgen-"  # multiprocessing's temporary folder, as kerasgen makes it
_OWNER_FILE = "owner.lock"  # locked by the folder's process for as long as it lives
# the longest folder path that leaves room for "/listener-XXXXXXXX", the fork server's
# socket, in a Unix socket's 104 bytes (macOS; 108 on Linux), the final NUL included
_SOCKET_FOLDER_MAX = 104 - 1 - len("/listener-XXXXXXXX")
# references of a free slot's array in `_Slot.free`: the attribute, getrefcount's argument
_FREE = 2


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

    server = forkserver._forkserver
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

        with _main_hidden():
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
    config = multiprocessing.current_process()._config  # type: ignore[attr-defined]
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
    _lock(fd, wait=True)
    _temp["lock_fd"] = fd  # open (and locked) until this process ends
    return folder


def _remove_temp_folder(folder: str) -> None:
    """At exit: the folder goes, as multiprocessing's own would."""
    # multiprocessing's own settings of this process, which typeshed does not declare
    config = multiprocessing.current_process()._config  # type: ignore[attr-defined]
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
        return _lock(fd, wait=False)
    finally:
        os.close(fd)


def _lock(fd: int, wait: bool) -> bool:
    """Takes an exclusive lock of `fd` (released when the process ends, however it ends):
    False when another process holds it and `wait` is false."""
    import fcntl  # POSIX: reached only where workers start from a fork server

    try:
        fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
    except BlockingIOError:
        return False
    return True


class WorkerPool:
    """`count` processes making batches with a copy of `work` (pickled when they start;
    `work.batch(epoch, offset, index, seed, batch_shuffle)` makes one, see
    `pipeline.feeding.Recipe`), for the generator called `name` in errors:
    `submit(epoch, offset, index, seed)` returns a Future of the batch.

    The processes start on the first submit and end on `stop()`, or `stop_later()`: the
    generator calls it at the end of each epoch, and the processes end IDLE_S seconds
    later unless the next epoch asks for a batch first. So a `fit` keeps its workers from
    epoch to epoch (a start costs a fork, the generator's unpickling and the slots'
    mapping: measured, about 6% of the tutorial CNN's epoch on 2 cores), and none
    outlives it by more than IDLE_S. After a failed batch (`stop_soon()`, from
    Feeding.get) they end ERROR_IDLE_S seconds later, unless another batch is asked for.
    The fork server stays. The slots stay from epoch to epoch.
    """

    def __init__(self, work: Any, count: int, name: str) -> None:
        self.count = count
        self.payload, self.fds = pickle_work(work, name)
        self.name = name
        self.lock = threading.Lock()
        self._ending = threading.Lock()  # held while a crew stops
        self.slots: list[_Slot] = []
        self.slot_size = 1 << 20  # grown when a batch does not fit
        self.slot_numbers = 0
        # the running processes (a box the finalizer shares)
        self._crew: list[_Crew | None] = [None]
        self.broken: Exception | None = None  # the error every later submit gets
        self._idle: threading.Timer | None = None  # the pending stop_later
        weakref.finalize(self, _stop_crew, self._crew)

    @property
    def crew(self) -> _Crew | None:
        return self._crew[0]

    @crew.setter
    def crew(self, crew: _Crew | None) -> None:
        self._crew[0] = crew

    def submit(self, epoch: int, offset: int, index: int, seed: int,
               batch_shuffle: bool = False) -> Future[Any]:
        future: Future[Any] = Future()
        future.set_running_or_notify_cancel()
        with self.lock:
            if self._idle is not None:  # a new epoch, or the next batch: they go on
                self._idle.cancel()
                self._idle = None
            if self.broken is not None:
                future.set_exception(type(self.broken)(*self.broken.args))  # its own copy
                return future
            if self.crew is None or self.crew.pid != os.getpid():
                self.crew = _Crew(self)
            slot = self._free_slot()
            slot.busy = True
            self.crew.send(future, slot, (epoch, offset, index, seed, batch_shuffle))
        return future

    def stop(self, timer: threading.Timer | None = None, grace: float = STOP_GRACE_S,
             ) -> None:
        """Ends the worker processes, after the batches they were asked for (those not
        made within `grace` seconds are dropped: SIGTERM); called by `timer`, only if no
        batch was asked for since it was set."""
        with self.lock:
            if timer is not None and timer is not self._idle:
                return
            if self._idle is not None:
                self._idle.cancel()
                self._idle = None
            crew, self.crew = self.crew, None
        with self._ending:  # a stop under way (a timer's) ends before this one returns
            if crew is not None and crew.pid == os.getpid():
                crew.stop(HURRIED_GRACE_S if self.broken is not None else grace)

    def stop_later(self) -> None:
        """Ends the worker processes IDLE_S seconds from now, unless a batch is asked for
        first (at once when the pool is broken)."""
        if self.broken is not None or IDLE_S <= 0:
            self.stop()
            return
        self._stop_in(IDLE_S, STOP_GRACE_S)

    def stop_soon(self) -> None:
        """A batch failed in the caller: ends the worker processes ERROR_IDLE_S seconds
        from now, dropping the batches they were making, unless another batch is asked
        for first (a loop that goes on past a failed batch). On a timer's thread: the
        caller's error is not held up."""
        self._stop_in(ERROR_IDLE_S, HURRIED_GRACE_S)

    def _stop_in(self, delay: float, grace: float) -> None:
        with self.lock:
            if self.crew is None:
                return
            if self._idle is not None:
                self._idle.cancel()
            timer = threading.Timer(delay, lambda: self.stop(timer, grace))
            timer.daemon = True
            self._idle = timer
        timer.start()

    def _free_slot(self) -> _Slot:
        """A slot nothing holds, of the current size (smaller ones are let go)."""
        for slot in [slot for slot in self.slots if slot.capacity < self.slot_size]:
            if slot.free():
                slot.close()
                self.slots.remove(slot)
        for slot in self.slots:
            if slot.capacity >= self.slot_size and slot.free():
                return slot
        slot = _Slot(self.slot_numbers, self.slot_size)
        self.slot_numbers += 1
        self.slots.append(slot)
        return slot

    def fits(self, needed: int) -> None:
        """Notes that a batch needed `needed` bytes: later slots are that big."""
        with self.lock:
            self.slot_size = max(self.slot_size, -(-needed // mmap.PAGESIZE) * mmap.PAGESIZE)


def pickle_work(work: Any, name: str) -> tuple[bytes, list[int]]:
    """(payload, file descriptors of the shared caches it names): `work` pickled for the
    worker processes, by reference, or by value (cloudpickle) where a worker could not
    import what the pickle names (see the module docstring). A TypeError naming the
    attributes that neither can pickle (of the generator called `name`, or of the
    kerasgen objects it holds)."""
    import cloudpickle

    payload: bytes | None
    with _shm.passing_fds([]) as fds:  # shared caches pass their memory along
        try:
            payload = pickle.dumps(work, protocol=pickle.HIGHEST_PROTOCOL)
        except (pickle.PicklingError, AttributeError, TypeError):
            payload = None  # a lambda, a local class: by value
        if payload is None or b"__main__" in payload:
            try:
                payload = cloudpickle.dumps(work, protocol=pickle.HIGHEST_PROTOCOL)
            except Exception as error:  # noqa: BLE001 - named, with what to do
                raise _unpicklable(work, name, error) from error
    return payload, fds


def _culprits(obj: Any, seen: set[int] | None = None) -> list[str]:
    """The names of `obj`'s attributes that cannot be pickled, looked for inside the
    kerasgen objects it holds (a maker's source, a subclass's generator): the user's
    own attributes, not the kerasgen objects around them (each looked in once)."""
    import cloudpickle

    seen = set() if seen is None else seen
    seen.add(id(obj))
    state = obj.__getstate__() if hasattr(obj, "__getstate__") else vars(obj)
    names = []
    for name, value in (state.items() if isinstance(state, dict) else ()):
        holder = getattr(value, "__self__", value)  # a bound method: its object
        if _ours(holder) and id(holder) in seen:
            continue
        try:
            cloudpickle.dumps(value)
        except Exception:  # noqa: BLE001 - any failure names the attribute
            inner = _culprits(holder, seen) if _ours(holder) else []
            names.extend(inner or [name])
    return names


def _ours(value: Any) -> bool:
    """Whether `value` is an object of kerasgen's (a generator subclass included)."""
    return hasattr(value, "__dict__") and any(
        c.__module__.split(".")[0] == "kerasgen" for c in type(value).__mro__)


def _unpicklable(work: Any, name: str, error: Exception) -> TypeError:
    names = list(dict.fromkeys(_culprits(work)))
    what = (f"its attribute{'s' if len(names) > 1 else ''} "
            f"{', '.join(repr(n) for n in names)}" if names else "it")
    return TypeError(
        f"{name} cannot be sent to worker processes (use_multiprocessing=True): {what} "
        f"cannot be pickled ({type(error).__name__}: {error}). Open files, locks, "
        "database connections and models cannot cross processes: create them in "
        "load_sample (once per process), or use worker threads "
        "(use_multiprocessing=False).")


def _stop_crew(box: list[_Crew | None]) -> None:
    """A pool was collected: its processes end."""
    crew = box[0]
    if crew is not None and crew.pid == os.getpid():
        crew.stop()


class _Slot:
    """A shared-memory block one batch is written into."""

    def __init__(self, number: int, capacity: int) -> None:
        self.number, self.capacity = number, capacity
        self.fd = _shm.shared_memory(capacity)
        self.array = np.frombuffer(mmap.mmap(self.fd, capacity), np.uint8)
        self.busy = False  # a worker is writing it
        self.close = weakref.finalize(self, os.close, self.fd)

    def free(self) -> bool:
        return not self.busy and sys.getrefcount(self.array) == _FREE


class _Crew:
    """One start of a pool's processes, with the thread receiving their batches."""

    def __init__(self, pool: WorkerPool) -> None:
        self.pool: WorkerPool = weakref.proxy(pool)  # ReferenceError once it is collected
        self.count, self.name = pool.count, pool.name
        self.pid = os.getpid()
        self.lock = pool.lock
        self.processes: list[multiprocessing.process.BaseProcess] = []
        self.conns: list[multiprocessing.connection.Connection] = []
        self.known: list[set[int]] = []  # per worker: slot numbers it has mapped
        # per worker: {task id: (future, slot, task)}
        self.owed: list[dict[int, tuple[Future[Any], _Slot, tuple[Any, ...]]]] = []
        self.next_task = 0
        self.stopping = False
        ctx = context()
        with _main_hidden():
            for number in range(self.count):
                ours, theirs = multiprocessing.Pipe(duplex=True)
                process = ctx.Process(target=_serve, args=(theirs,),
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

    def send(self, future: Future[Any], slot: _Slot, task: tuple[Any, ...]) -> None:
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

    def _result(self, kind: str, message: tuple[Any, ...], slot: _Slot) -> Any:
        """The batch a message carries (raised: the batch's error)."""
        if kind == "done":
            return _views(slot.array, message[2])
        if kind == "pickled":  # it did not fit: later slots are made big enough
            with contextlib.suppress(ReferenceError):
                self.pool.fits(message[3])
            return _unpickled(message[2], "its batch")
        raise _rebuilt(*message[2:])

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


def _unpickled(data: bytes, what: str) -> Any:
    """pickle.loads(data); what cannot be rebuilt here is a RuntimeError naming `what`."""
    try:
        return pickle.loads(data)
    except Exception as error:  # noqa: BLE001 - whatever stops unpickling it
        raise RuntimeError(
            f"{what} was made in a kerasgen worker process, but cannot be unpickled in "
            f"the training process ({type(error).__name__}: {error}).") from None


def _rebuilt(data: bytes | None, summary: str, trace: str) -> BaseException:
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


def _views(memory: np.ndarray, layout: tuple[Any, ...]) -> Any:
    """The batch described by `layout`, as arrays viewing `memory`."""
    kind = layout[0]
    if kind == "array":
        _, offset, dtype, shape = layout
        dtype = np.dtype(dtype)
        size = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        return memory[offset:offset + size].view(dtype).reshape(shape)
    if kind == "value":  # pickled apart, so that what cannot be rebuilt fails one batch
        return _unpickled(layout[1], "a value of its batch")
    if kind == "dict":
        return {key: _views(memory, part) for key, part in layout[1]}
    parts = [_views(memory, part) for part in layout[1]]
    return tuple(parts) if kind == "tuple" else parts


def _layout(batch: Any, offset: int = 0) -> tuple[tuple[Any, ...], int]:
    """(layout, bytes needed): where each array of `batch` goes in a slot."""
    if isinstance(batch, np.ndarray) and batch.dtype != object:
        start = -(-offset // ALIGN) * ALIGN
        return ("array", start, batch.dtype.str, batch.shape), start + batch.nbytes
    if isinstance(batch, dict):
        parts = []
        for key, value in batch.items():
            part, offset = _layout(value, offset)
            parts.append((key, part))
        return ("dict", parts), offset
    if isinstance(batch, (tuple, list)):
        parts = []
        for value in batch:
            part, offset = _layout(value, offset)
            parts.append(part)
        return ("tuple" if isinstance(batch, tuple) else "list", parts), offset
    return ("value", pickle.dumps(batch, protocol=pickle.HIGHEST_PROTOCOL)), offset


def _write(memory: np.ndarray, batch: Any, layout: tuple[Any, ...]) -> None:
    kind = layout[0]
    if kind == "array":
        _views(memory, layout)[...] = batch
    elif kind == "dict":
        for key, part in layout[1]:
            _write(memory, batch[key], part)
    elif kind in ("tuple", "list"):
        for value, part in zip(batch, layout[1]):
            _write(memory, value, part)


@contextlib.contextmanager
def _main_hidden() -> Iterator[None]:
    """Starts processes without multiprocessing's instruction to import the parent's
    `__main__` (the user's script) first; _serve imports it itself when needed."""
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


def _serve(conn: multiprocessing.connection.Connection) -> None:
    """A worker process: makes the batches asked for until told to stop."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent ends us (module docstring)
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
            layout, needed = _layout(batch)
            memory = slots[slot]
            if needed <= len(memory):
                _write(memory, batch, layout)
                reply = ("done", task_id, layout)
            else:
                reply = ("pickled", task_id,
                         pickle.dumps(batch, protocol=pickle.HIGHEST_PROTOCOL), needed)
        except Exception as error:  # noqa: BLE001 - sent to the caller, which raises it
            reply = ("error", task_id) + _error_parts(error)
        try:
            conn.send(reply)
        except OSError:  # the parent is gone (killed, interrupted): end quietly
            return


def _error_parts(error: BaseException) -> tuple[bytes | None, str, str]:
    """(pickle or None, "Type: message", traceback) of the exception being handled: the
    parent rebuilds it from these (`_rebuilt`), or says what it was."""
    trace = traceback.format_exc()
    summary = f"{type(error).__name__}: {error}"
    try:
        data = pickle.dumps(error, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:  # noqa: BLE001 - whatever stops pickling it
        data = None
    return data, summary, trace
