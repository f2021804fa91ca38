"""kerasgen's own worker processes: batches made in other processes, handed over through
shared memory.

With `use_multiprocessing=True` a generator runs these instead of Keras's pool (see
_keras_compat.adopt_adapter). Keras's pool pickles every batch through a queue (a float
batch of 64 photos at 180x180 is 25 MB pickled, piped and unpickled) and forks the
training process, TensorFlow's or JAX's threads included. Here:

- Workers start with forkserver (spawn where there is none), never as a fork of the
  training process. They never run the user's script: the generator reaches them pickled
  by reference where a worker can import what it names (classes and functions of
  modules), and by value (cloudpickle) where it cannot: anything of `__main__` (a
  notebook cell, a script, stdin, `python -c`), a class defined inside a function, a
  lambda or closure. So no `if __name__ == "__main__":` guard is needed, and a notebook's
  classes work. What cannot be pickled either way is an error naming the attribute,
  raised before the first batch (`pickle_generator`).
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
  process's sentinel wake the receiving thread, no timeout involved.

Batch `index` of `epoch` is a pure function of the generator, its seed, the epoch and the
resume offset, so a task carries just those numbers.
"""

import contextlib
import mmap
import multiprocessing
import multiprocessing.connection
import os
import pickle
import signal
import sys
import threading
import traceback
import weakref
from concurrent.futures import Future
from multiprocessing import reduction

import numpy as np

from kerasgen import _quiet, _shm

ALIGN = 64
IDLE_S = 5.0  # how long worker processes wait for the next epoch (WorkerPool.stop_later)
# references of a free slot's array in `_Slot.free`: the attribute, getrefcount's argument
_FREE = 2


def context():
    """The multiprocessing context workers start in: forkserver, else spawn. The fork
    server imports kerasgen (so Keras and its backend) once, before any of their threads
    exist, and each worker is a fork of it: not an import each (5 s with TensorFlow)."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    ctx = multiprocessing.get_context("forkserver")
    from multiprocessing import forkserver

    server = forkserver._forkserver
    if getattr(server, "_forkserver_pid", None) is None:  # not started yet
        preload = list(getattr(server, "_preload_modules", ["__main__"]))
        if "kerasgen._preload" not in preload:  # kerasgen.base, quietly
            ctx.set_forkserver_preload(preload + ["kerasgen._preload"])
    return ctx


def warm_up():
    """Starts the fork server now (it imports kerasgen while the caller goes on), so the
    first workers start as forks of it, not after a wait."""
    ctx = context()
    if ctx.get_start_method() == "forkserver":
        from multiprocessing import forkserver

        with _main_hidden():
            forkserver.ensure_running()


def can_start():
    """Whether this process may start worker processes (a daemonic one, like the workers
    of Keras's or torch's pools, may not)."""
    return not multiprocessing.current_process().daemon


class WorkerPool:
    """`count` processes making batches of a copy of `generator` (pickled when they
    start): `submit(epoch, offset, index, seed)` returns a Future of the batch.

    The processes start on the first submit and end on `stop()`, or `stop_later()`: the
    generator calls it at the end of each epoch, and the processes end IDLE_S seconds
    later unless the next epoch asks for a batch first. So a `fit` keeps its workers from
    epoch to epoch (a start costs a fork, the generator's unpickling and the slots'
    mapping: measured, about 6% of the tutorial CNN's epoch on 2 cores), and none
    outlives it by more than IDLE_S. The fork server stays. The slots stay from epoch to
    epoch.
    """

    def __init__(self, generator, count):
        self.count = count
        self.payload, self.fds = pickle_generator(generator)
        self.name = type(generator).__name__
        self.lock = threading.Lock()
        self.slots = []
        self.slot_size = 1 << 20  # grown when a batch does not fit
        self.slot_numbers = 0
        self._crew = [None]  # the running processes (a box the finalizer shares)
        self.broken = None  # the error every later submit gets
        self._idle = None  # the pending stop_later (a threading.Timer)
        weakref.finalize(self, _stop_crew, self._crew)

    @property
    def crew(self):
        return self._crew[0]

    @crew.setter
    def crew(self, crew):
        self._crew[0] = crew

    def submit(self, epoch, offset, index, seed, batch_shuffle=False):
        future = Future()
        future.set_running_or_notify_cancel()
        with self.lock:
            if self._idle is not None:  # a new epoch: the processes go on
                self._idle.cancel()
                self._idle = None
            if self.broken is not None:
                future.set_exception(self.broken)
                return future
            if self.crew is None or self.crew.pid != os.getpid():
                self.crew = _Crew(self)
            slot = self._free_slot()
            slot.busy = True
            self.crew.send(future, slot, (epoch, offset, index, seed, batch_shuffle))
        return future

    def stop(self, timer=None):
        """Ends the worker processes (after the batches they were asked for); called by
        `timer`, only if no batch was asked for since it was set."""
        with self.lock:
            if timer is not None and timer is not self._idle:
                return
            if self._idle is not None:
                self._idle.cancel()
                self._idle = None
            crew, self.crew = self.crew, None
        if crew is not None and crew.pid == os.getpid():
            crew.stop()

    def stop_later(self):
        """Ends the worker processes IDLE_S seconds from now, unless a batch is asked for
        first (at once when the pool is broken)."""
        if self.broken is not None or IDLE_S <= 0:
            self.stop()
            return
        with self.lock:
            if self.crew is None:
                return
            if self._idle is not None:
                self._idle.cancel()
            timer = threading.Timer(IDLE_S, lambda: self.stop(timer))
            timer.daemon = True
            self._idle = timer
        timer.start()

    def _free_slot(self):
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

    def fits(self, needed):
        """Notes that a batch needed `needed` bytes: later slots are that big."""
        with self.lock:
            self.slot_size = max(self.slot_size, -(-needed // mmap.PAGESIZE) * mmap.PAGESIZE)


def pickle_generator(generator):
    """(payload, file descriptors of the shared caches it names): `generator` pickled for
    the worker processes, by reference, or by value (cloudpickle) where a worker could
    not import what the pickle names (see the module docstring). A TypeError naming the
    attributes that neither can pickle."""
    import cloudpickle

    with _shm.passing_fds([]) as fds:  # shared caches pass their memory along
        try:
            payload = pickle.dumps(generator, protocol=pickle.HIGHEST_PROTOCOL)
        except (pickle.PicklingError, AttributeError, TypeError):
            payload = None  # a lambda, a local class: by value
        if payload is None or b"__main__" in payload:
            try:
                payload = cloudpickle.dumps(generator, protocol=pickle.HIGHEST_PROTOCOL)
            except Exception as error:  # noqa: BLE001 - named, with what to do
                raise _unpicklable(generator, error) from error
    return payload, fds


def _unpicklable(generator, error):
    import cloudpickle

    names = []
    for name, value in generator.__getstate__().items():  # what pickling sends
        try:
            cloudpickle.dumps(value)
        except Exception:  # noqa: BLE001 - any failure names the attribute
            names.append(name)
    cls = type(generator).__name__
    what = (f"its attribute{'s' if len(names) > 1 else ''} "
            f"{', '.join(repr(n) for n in names)}" if names else "it")
    return TypeError(
        f"{cls} cannot be sent to worker processes (use_multiprocessing=True): {what} "
        f"cannot be pickled ({type(error).__name__}: {error}). Open files, locks, "
        "database connections and models cannot cross processes: create them in "
        "load_sample (once per process), or use worker threads "
        "(use_multiprocessing=False).")


def _stop_crew(box):
    """A pool was collected: its processes end."""
    crew = box[0]
    if crew is not None and crew.pid == os.getpid():
        crew.stop()


class _Slot:
    """A shared-memory block one batch is written into."""

    def __init__(self, number, capacity):
        self.number, self.capacity = number, capacity
        self.fd = _shm.shared_memory(capacity)
        self.array = np.frombuffer(mmap.mmap(self.fd, capacity), np.uint8)
        self.busy = False  # a worker is writing it
        self.close = weakref.finalize(self, os.close, self.fd)

    def free(self):
        return not self.busy and sys.getrefcount(self.array) == _FREE


class _Crew:
    """One start of a pool's processes, with the thread receiving their batches."""

    def __init__(self, pool):
        self.pool = weakref.proxy(pool)
        self.count, self.name = pool.count, pool.name
        self.pid = os.getpid()
        self.lock = pool.lock
        self.processes, self.conns = [], []
        self.known = []  # per worker: slot numbers it has mapped
        self.owed = []  # per worker: {task id: (future, slot, task)}
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

    def send(self, future, slot, task):
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

    def stop(self):
        with self.lock:
            self.stopping = True
            for conn in self.conns:
                with contextlib.suppress(OSError):
                    conn.send(None)
        for process in self.processes:
            process.join(timeout=10)
            if process.is_alive():
                process.terminate()
                process.join(timeout=5)
        self.thread.join(timeout=5)
        for conn in self.conns:
            conn.close()

    def _receive(self):
        waiting = {conn: k for k, conn in enumerate(self.conns)}
        sentinels = {process.sentinel: k for k, process in enumerate(self.processes)}
        while waiting:
            for ready in multiprocessing.connection.wait(list(waiting) + list(sentinels)):
                if ready in waiting:
                    worker = waiting[ready]
                    try:
                        message = ready.recv()
                    except (EOFError, OSError):
                        message = None
                    if message is not None:
                        self._deliver(worker, message)
                        continue
                    del waiting[ready]
                    self.processes[worker].join(timeout=1)
                elif ready in sentinels:
                    worker = sentinels.pop(ready)
                else:
                    continue
                if not self.stopping or self.owed[worker]:
                    self._died(worker)

    def _deliver(self, worker, message):
        kind, task_id = message[0], message[1]
        with self.lock:
            future, slot, task = self.owed[worker].pop(task_id)
        try:
            if kind == "done":
                result = _views(slot.array, message[2])
            elif kind == "pickled":  # it did not fit: later slots are made big enough
                result = message[2]
                with contextlib.suppress(ReferenceError):
                    self.pool.fits(message[3])
            else:
                error, trace = message[2], message[3]
                if hasattr(error, "add_note"):
                    error.add_note(f"kerasgen worker process traceback:\n{trace}")
                future.set_exception(error)
                return
        finally:
            slot.busy = False
        future.set_result(result)

    def _died(self, worker):
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


def _views(memory, layout):
    """The batch described by `layout`, as arrays viewing `memory`."""
    kind = layout[0]
    if kind == "array":
        _, offset, dtype, shape = layout
        dtype = np.dtype(dtype)
        size = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        return memory[offset:offset + size].view(dtype).reshape(shape)
    if kind == "value":
        return layout[1]
    if kind == "dict":
        return {key: _views(memory, part) for key, part in layout[1]}
    parts = [_views(memory, part) for part in layout[1]]
    return tuple(parts) if kind == "tuple" else parts


def _layout(batch, offset=0):
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
    return ("value", batch), offset


def _write(memory, batch, layout):
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
def _main_hidden():
    """Starts processes without multiprocessing's instruction to import the parent's
    `__main__` (the user's script) first; _serve imports it itself when needed."""
    main = sys.modules["__main__"]
    saved = {key: main.__dict__[key] for key in ("__file__", "__spec__")
             if key in main.__dict__}
    main.__dict__.pop("__file__", None)
    main.__dict__["__spec__"] = None
    try:
        yield
    finally:
        main.__dict__.pop("__spec__", None)
        main.__dict__.update(saved)


def _serve(conn):
    """A worker process: makes the batches asked for until told to stop."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent ends us (module docstring)
    payload = conn.recv_bytes()
    fds = [reduction.recv_handle(conn) for _ in range(conn.recv())]
    generator, failed = None, None
    try:
        with _shm.passing_fds(fds), _quiet.tensorflow_quiet(default_level=None):
            generator = pickle.loads(payload)  # it works nothing ahead: see _feeding
    except Exception as error:  # noqa: BLE001 - any failure is every task's error
        failed = error
        if hasattr(error, "add_note"):
            error.add_note("kerasgen: a worker process could not rebuild the generator from "
                           "its pickle (a module it names may not be importable there).")
    slots = {}
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
        try:
            if failed is not None:
                raise failed
            batch = generator._feeding.worker_batch(epoch, offset, index, seed,
                                                    batch_shuffle)
            layout, needed = _layout(batch)
            memory = slots[slot]
            if needed <= len(memory):
                _write(memory, batch, layout)
                reply = ("done", task_id, layout)
            else:
                reply = ("pickled", task_id, batch, needed)
        except Exception as error:  # noqa: BLE001 - sent to the caller, which raises it
            trace = traceback.format_exc()
            try:
                pickle.dumps(error)
            except Exception:  # noqa: BLE001 - whatever stops pickling it
                error = RuntimeError(f"{type(error).__name__}: {error}")
            reply = ("error", task_id, error, trace)
        try:
            conn.send(reply)
        except OSError:  # the parent is gone (killed, interrupted): end quietly
            return
