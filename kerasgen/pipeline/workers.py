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
  raised before the first batch (`pickle_work`), and so is an object that would pickle
  but not work there: an open file (cloudpickle would send a copy of its text), an
  object that lives in a Ray cluster (an ObjectRef, an actor handle, a Ray dataset: a
  worker would start a Ray instance of its own; workers never do, see worker_loop).
- Workers ignore SIGINT: an interrupt (Ctrl-C, a notebook's stop button, which signals
  the kernel's process group) reaches the training loop, which ends them; a parent that
  is gone ends them without a traceback, at their next read of the pipe, and on Linux at
  once, mid-batch included (worker_loop.end_with_parent).
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

Here: the pool (`WorkerPool`: it starts, feeds and stops its processes, and keeps their
slots) and what makes the batches, pickled for them (`pickle_work`). The rest, by concept:
pipeline/worker_start.py (the fork server, its temporary folder, `can_start`),
pipeline/crew.py (one start of a pool's processes, and the thread receiving their
batches), pipeline/worker_loop.py (a worker process's main loop), pipeline/handover.py
(slots, a batch's layout in one, a worker's exceptions rebuilt).
"""

from __future__ import annotations

import inspect
import io
import mmap
import os
import pickle
import sys
import threading
import types
import weakref
from concurrent.futures import Future
from typing import Any

from kerasgen.pipeline import handover
from kerasgen.arrays import shm as _shm
from kerasgen.pipeline.crew import STOP_GRACE_S, Crew, stop_crew
from kerasgen.pipeline.worker_start import (
    TEMP_PREFIX,
    can_start,
    context,
    remove_orphans,
    temp_folder,
    warm_up,
)

# the names other modules read here (feeding: can_start, warm_up, WorkerPool; tests:
# remove_orphans)
__all__ = ["ERROR_IDLE_S", "HURRIED_GRACE_S", "IDLE_S", "STOP_GRACE_S", "TEMP_PREFIX",
           "WorkerPool", "can_start", "context", "pickle_work", "remove_orphans",
           "temp_folder", "warm_up"]

IDLE_S = 5.0  # how long worker processes wait for the next epoch (WorkerPool.stop_later)
ERROR_IDLE_S = 1.0  # how long they wait for another batch after one failed (stop_soon)
HURRIED_GRACE_S = 1.0  # the same as STOP_GRACE_S, when nobody waits for those batches


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
        self.slots: list[handover.Slot] = []
        self.slot_size = 1 << 20  # grown when a batch does not fit
        self.slot_numbers = 0
        # the running processes (a box the finalizer shares)
        self._crew: list[Crew | None] = [None]
        self.broken: Exception | None = None  # the error every later submit gets
        self._idle: threading.Timer | None = None  # the pending stop_later
        weakref.finalize(self, stop_crew, self._crew)

    @property
    def crew(self) -> Crew | None:
        return self._crew[0]

    @crew.setter
    def crew(self, crew: Crew | None) -> None:
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
                self.crew = Crew(self)
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

    def _free_slot(self) -> handover.Slot:
        """A slot nothing holds, of the current size (smaller ones are let go)."""
        for slot in [slot for slot in self.slots if slot.capacity < self.slot_size]:
            if slot.free():
                slot.close()
                self.slots.remove(slot)
        for slot in self.slots:
            if slot.capacity >= self.slot_size and slot.free():
                return slot
        slot = handover.Slot(self.slot_numbers, self.slot_size)
        self.slot_numbers += 1
        self.slots.append(slot)
        return slot

    def fits(self, needed: int) -> None:
        """Notes that a batch needed `needed` bytes: later slots are that big."""
        with self.lock:
            self.slot_size = max(self.slot_size, -(-needed // mmap.PAGESIZE) * mmap.PAGESIZE)


def pickle_work(work: Any, name: str, ray_objects: bool = False,
                ) -> tuple[bytes, list[int]]:
    """(payload, file descriptors of the shared caches it names): `work` pickled for the
    worker processes, by reference, or by value (cloudpickle) where a worker could not
    import what the pickle names (see the module docstring). A TypeError naming the
    attributes that neither can pickle (of the generator called `name`, or of the
    kerasgen objects it holds), and those that would pickle but not work in a worker:
    an open file (cloudpickle would send a copy of its text), and unless `ray_objects`
    (Ray actors, which are in the cluster, receive it) an object that lives in a Ray
    cluster (`_ray_types`: a worker would start a Ray instance of its own to use it)."""
    import cloudpickle

    refused = _refused_types(ray_objects)
    payload: bytes | None = None
    with _shm.passing_fds([]) as fds:  # shared caches pass their memory along
        try:
            payload = _dumps(work, refused if refused[1] else None)
        except Refused as error:
            raise _unpicklable(work, name, error, refused, ray_objects) from None
        except (pickle.PicklingError, AttributeError, TypeError):
            payload = None  # a lambda, a local class: by value
        if payload is None or b"__main__" in payload:
            try:
                payload = _dumps(work, refused, cloudpickle.Pickler)
            except Exception as error:  # noqa: BLE001 - named, with what to do
                raise _unpicklable(work, name, error, refused, ray_objects) from (
                    None if isinstance(error, Refused) else error)
    return payload, fds


class Refused(TypeError):
    """An object pickle_work does not send to worker processes (its message says what
    it is and why)."""


# the classes of objects that live in a Ray cluster only, by the module defining them:
# looked up where Ray is imported already (an object of theirs cannot exist otherwise)
RAY_CLASSES = {"ray._raylet": ("ObjectRef", "ObjectRefGenerator"),
               "ray._private.object_ref_generator": ("DynamicObjectRefGenerator",),
               "ray.actor": ("ActorHandle",),
               "ray.util.client.common": ("ClientActorHandle",),
               "ray.data.dataset": ("Dataset",),
               "ray.data.iterator": ("DataIterator",)}
# open files of the operating system (cloudpickle would send a copy of what they read)
OPEN_FILES = (io.FileIO, io.BufferedReader, io.BufferedWriter, io.BufferedRandom,
              io.TextIOWrapper)


def _ray_types() -> tuple[type, ...]:
    found = []
    for module, names in RAY_CLASSES.items():
        loaded = sys.modules.get(module)
        for class_name in names:
            cls = getattr(loaded, class_name, None)
            if isinstance(cls, type):
                found.append(cls)
    return tuple(found)


def _refused_types(ray_objects: bool) -> tuple[tuple[type, ...], tuple[type, ...]]:
    """(open file types, Ray types) that pickle_work refuses."""
    return OPEN_FILES, () if ray_objects else _ray_types()


def _refusal(obj: Any, refused: tuple[tuple[type, ...], tuple[type, ...]]) -> str | None:
    """Why `obj` is not sent to a worker process, or None."""
    files, ray_types = refused
    if ray_types and isinstance(obj, ray_types):
        return (f"a Ray {type(obj).__name__}, which lives in its Ray cluster: a worker "
                "process would start a Ray instance of its own to use it")
    if isinstance(obj, files):
        return (f"an open file ({getattr(obj, 'name', '?')!r}), which a worker process "
                "would get as a copy of what it reads, or not at all")
    return None


def _dumps(obj: Any, refused: tuple[tuple[type, ...], tuple[type, ...]] | None,
           base: type = pickle.Pickler) -> bytes:
    """`obj` pickled with `base` (pickle's or cloudpickle's Pickler); what `refused`
    holds raises Refused. No check at all where `refused` is None: pickle's own fast
    path (plain pickle refuses open files by itself; Ray types are there only where
    Ray is imported)."""
    buffer = io.BytesIO()
    if refused is None:
        pickle.Pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump(obj)
        return buffer.getvalue()
    outer, refusing = base, refused

    class Refusing(outer):  # type: ignore[valid-type,misc]
        def reducer_override(self, value: Any) -> Any:
            why = _refusal(value, refusing)
            if why is not None:
                raise Refused(why)
            parent = getattr(super(), "reducer_override", None)
            return NotImplemented if parent is None else parent(value)

    Refusing(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump(obj)
    return buffer.getvalue()


def _culprits(obj: Any, refused: tuple[tuple[type, ...], tuple[type, ...]],
              seen: set[int] | None = None) -> list[str]:
    """The names of `obj`'s attributes that cannot be pickled, looked for inside the
    kerasgen objects it holds (a maker's source, a subclass's generator): the user's
    own attributes, not the kerasgen objects around them (each looked in once); a
    function's variable named, and the way to an object refused (`_path`)."""
    seen = set() if seen is None else seen
    seen.add(id(obj))
    names = []
    for name, value in _parts(obj):
        holder = getattr(value, "__self__", value)  # a bound method: its object
        if _ours(holder) and id(holder) in seen:
            continue
        failure = _failure(value, refused)
        if failure is not None:
            inner = _culprits(holder, refused, seen) if _ours(holder) else []
            suffix, functions = _path(value, failure, refused)
            names.extend(inner or [f"'{name}{suffix}'" + ")" * functions])
    return names


def _parts(obj: Any) -> list[tuple[Any, Any]]:
    """(name, value) of what pickling `obj` pickles: its state's attributes, a list's or
    tuple's items, a dict's values (by key), a function's variables (closure and
    globals); the first 100 of each."""
    if isinstance(obj, (list, tuple)):
        return list(enumerate(obj))[:100]
    if isinstance(obj, dict):
        return list(obj.items())[:100]
    if isinstance(obj, types.FunctionType):
        try:
            found = inspect.getclosurevars(obj)
        except (TypeError, ValueError):
            return []
        return (list(found.nonlocals.items()) + list(found.globals.items()))[:100]
    try:
        state = obj.__getstate__() if hasattr(obj, "__getstate__") else vars(obj)
    except Exception:  # noqa: BLE001 - nothing more to name
        return []
    return list(state.items())[:100] if isinstance(state, dict) else []


def _path(value: Any, failure: Exception,
          refused: tuple[tuple[type, ...], tuple[type, ...]], depth: int = 0,
          ) -> tuple[str, int]:
    """(the way from `value` to what fails inside it, the functions on that way): a
    function's variable (`' (its variable 'ref`), and, to an object refused, an
    attribute (`.ref`) or item (`[0]`); at most 4 steps."""
    if depth >= 4 or _refusal(value, refused) is not None:
        return "", 0
    function = isinstance(value, types.FunctionType)
    if not (function or isinstance(failure, Refused)):
        return "", 0  # where pickle itself failed: the attribute is named, not its insides
    for part, inner in _parts(value):
        inner_failure = _failure(inner, refused)
        if inner_failure is not None:
            if function:
                step = f"' (its variable '{part}"
            elif isinstance(value, (list, tuple, dict)):
                step = f"[{part!r}]"
            else:
                step = f".{part}"
            rest, functions = _path(inner, inner_failure, refused, depth + 1)
            return step + rest, functions + function
    return "", 0


def _failure(value: Any, refused: tuple[tuple[type, ...], tuple[type, ...]],
             ) -> Exception | None:
    """Why `value` cannot be pickled for a worker process, or None."""
    import cloudpickle

    try:
        _dumps(value, refused, cloudpickle.Pickler)
    except Exception as error:  # noqa: BLE001 - any failure names the attribute
        return error
    return None


def _ours(value: Any) -> bool:
    """Whether `value` is an object of kerasgen's (a generator subclass included)."""
    return hasattr(value, "__dict__") and any(
        c.__module__.split(".")[0] == "kerasgen" for c in type(value).__mro__)


def _unpicklable(work: Any, name: str, error: Exception,
                 refused: tuple[tuple[type, ...], tuple[type, ...]],
                 ray_objects: bool = False) -> TypeError:
    """The TypeError naming what of `work` cannot go to the worker processes (or, with
    `ray_objects`, to Ray actors: engine=kg.RayEngine)."""
    names = list(dict.fromkeys(_culprits(work, refused)))
    where = ("Ray actors (engine=kg.RayEngine)" if ray_objects
             else "worker processes (use_multiprocessing=True)")
    what = (f"its attribute{'s' if len(names) > 1 else ''} "
            f"{', '.join(names)}" if names else "it")
    if isinstance(error, Refused):
        ray = "a Ray " in str(error)
        return TypeError(
            f"{name} cannot be sent to {where}: {what} "
            f"{'hold' if len(names) > 1 else 'holds'} {error}. "
            + ("Make its batches on Ray actors (engine=kg.RayEngine()), which are in the "
               "cluster, or use worker threads (use_multiprocessing=False)."
               if ray else
               "Open the file in load_sample (once per process), or use worker threads "
               "(use_multiprocessing=False)."))
    return TypeError(
        f"{name} cannot be sent to {where}: {what} "
        f"cannot be pickled ({type(error).__name__}: {error}). Open files, locks, "
        "database connections and models cannot cross processes: create them in "
        "load_sample (once per process), or use worker threads "
        f"({'no engine' if ray_objects else 'use_multiprocessing=False'}).")
