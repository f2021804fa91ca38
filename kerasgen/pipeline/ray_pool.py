"""Ray actors making a generator's batches (`RayPool`), for `engine=kg.RayEngine(...)`.

`RayPool` is what `pipeline.feeding.Feeding` uses of kerasgen's own worker pool
(`submit(epoch, offset, index, seed, batch_shuffle)` returning a Future, `stop`,
`stop_later`, `stop_soon`), over Ray actors instead of processes of this machine, so the
generator's work-ahead (`pipeline.ahead.WorkAhead`) gives the same ordered, bounded window
and the batches come back in the caller's order.

- The actors are an engine's (`RayCrew`), shared by the generators that use it (a
  training and a validation generator), started by the first and ended a few seconds
  after the last stops using them.
- The recipe (`pipeline.feeding.Recipe`: the batch maker and a copy of the order) is
  pickled once by Ray's cloudpickle (which keeps the owners of the Ray objects it holds:
  a Ray dataset's blocks) and put in Ray's object store; every actor unpickles it when
  the generator starts using the actors (`BatchActor.load`: an error then, not at batch
  900), so a batch asked of an actor is five numbers, and its bytes are those the
  training process would make.
- A batch whose actor died (killed, out of memory, its node gone: Ray's RayActorError,
  ActorUnavailableError, or the result lost with its node) is asked again, up to the
  engine's `max_retries` times, of the lost actor's replacement (where the cluster has
  room for one; else its slot is dropped and another actor makes it); the same bytes come
  back, so the epoch goes on.
- An error raised while making a batch (a corrupt file) is raised in the caller as
  itself, with a note saying it came from a Ray actor, as a worker process's would be.
- Batches arrive as Ray hands them over, read-only views of its object store; the arrays
  are copied out, so the caller holds ordinary writable arrays and the store frees them.
- `stop` leaves the crew (a batch its actors still owed this generator is dropped:
  CancelledError, which the work-ahead makes in the caller if asked for); `stop_later`
  does so IDLE_S seconds after an epoch unless the next one asks first.
"""

from __future__ import annotations

import os
import pickle
import threading
import uuid
import weakref
from concurrent.futures import CancelledError, Future
from typing import Any

import numpy as np

from kerasgen import _quiet
from kerasgen.pipeline.ray_engine import RUNNING, RayEngine
from kerasgen.pipeline.workers import ERROR_IDLE_S, IDLE_S, pickle_work

# Ray's exceptions after which a batch is asked again of a new actor (its actor or its
# node is gone); looked up by name, Ray being imported only once an engine connects
LOST = ("RayActorError", "ActorDiedError", "ActorUnavailableError", "ObjectLostError",
        "OwnerDiedError", "ObjectReconstructionFailedError", "NodeDiedError")


class BatchActor:
    """A Ray actor's state: the recipes of the generators it serves, each unpickled once
    (a few at most, the least recently used dropped); `batch(key, [payload], ...)` makes
    one batch. (Made a Ray actor class by `actor_class`; plain here, so that it pickles
    by reference.) The payload's reference comes nested in a list, so that Ray fetches
    it only where the recipe is not held yet."""

    KEPT = 8  # recipes kept per actor (a training and a validation generator: 2)

    def __init__(self) -> None:
        self.recipes: dict[str, Any] = {}

    def load(self, key: str, payload: list[Any]) -> tuple[int, str]:
        """Unpickles recipe `key` (if not held); then `where()`."""
        self._recipe(key, payload)
        return self.where()

    def where(self) -> tuple[int, str]:
        """(process id, Ray's id of its node)."""
        import ray

        return os.getpid(), ray.get_runtime_context().get_node_id()

    def forget(self, key: str) -> None:
        self.recipes.pop(key, None)

    def batch(self, key: str, payload: list[Any], epoch: int, offset: int, index: int,
              seed: int, batch_shuffle: bool) -> Any:
        return self._recipe(key, payload).batch(epoch, offset, index, seed, batch_shuffle)

    def _recipe(self, key: str, payload: list[Any]) -> Any:
        work = self.recipes.pop(key, None)
        if work is None:
            import ray

            try:
                with _quiet.tensorflow_quiet(default_level=None):
                    work = pickle.loads(ray.get(payload[0]))
            except Exception as error:
                if hasattr(error, "add_note"):
                    error.add_note("kerasgen: a Ray actor could not rebuild the generator's "
                                   "batch maker from its pickle (a module it names may not "
                                   "be installed on the cluster's nodes).")
                raise
            while len(self.recipes) >= self.KEPT:
                self.recipes.pop(next(iter(self.recipes)))
        self.recipes[key] = work  # the most recently used last
        return work


_ACTOR_CLASS: list[Any] = []  # ray.remote(BatchActor), made once


def actor_class(ray: Any) -> Any:
    if not _ACTOR_CLASS:
        _ACTOR_CLASS.append(ray.remote(max_restarts=0, max_task_retries=0)(BatchActor))
    return _ACTOR_CLASS[0]


class RayCrew:
    """The actors of one engine, shared by the generators that use it (a training and a
    validation generator): started by the first pool that needs them, ended once no pool
    does (`leave`). Engines with equal arguments share one crew (`crew_of`). A lost
    actor is replaced where the cluster has room for another, else its slot is dropped."""

    def __init__(self, engine: RayEngine) -> None:
        self.engine = engine
        self.ray = engine.connect()
        self.lock = threading.Lock()
        self.actors: list[Any] = []
        self.users: set[int] = set()  # ids of the pools using the actors
        self.turn = 0
        RUNNING[engine] = self.actors  # what engine.actor_handles() reads

    def join(self, user: int, workers: int, key: str, payload: Any) -> None:
        """Pool `user` (its id) uses the actors from now on: they are started where none
        run, and each unpickles the pool's recipe (`key`) before this returns (a recipe
        that cannot be rebuilt there, actors that cannot start: an error, and the pool
        is not counted)."""
        with self.lock:
            if not self.actors:
                self.engine.check_fits()
                count = self.engine.actor_count(workers)
                self.actors[:] = [self._new() for _ in range(count)]
            self.users.add(user)
            actors = list(self.actors)
        try:
            refs = [actor.load.remote(key, [payload]) for actor in actors]
            ready, waiting = self.ray.wait(refs, num_returns=len(refs),
                                           timeout=self.engine.start_timeout)
            for ref in ready:
                self.ray.get(ref)  # an actor that could not start, or load, raises here
            if waiting:
                raise TimeoutError(
                    f"{len(waiting)} of the {len(actors)} Ray actors of {self.engine!r} "
                    f"did not start within {self.engine.start_timeout:.0f} s "
                    f"(start_timeout): the cluster has no free resources for "
                    f"actor_options={self.engine.actor_options!r} now (free: "
                    f"{self.ray.available_resources()}); other actors may hold them.")
        except BaseException:
            self.leave(user)
            raise

    def leave(self, user: int) -> None:
        """Pool `user` (its id) no longer uses the actors: they end when no pool does."""
        with self.lock:
            self.users.discard(user)
            if self.users:
                return
            actors, self.actors[:] = list(self.actors), []
        _kill(self.ray, actors)

    def next_actor(self, prefer: Any = None) -> Any:
        """`prefer` while it is one of the actors, else an actor in turn; None when none
        is left."""
        with self.lock:
            if not self.actors:
                return None
            if prefer is not None and any(actor is prefer for actor in self.actors):
                return prefer
            actor = self.actors[self.turn % len(self.actors)]
            self.turn += 1
            return actor

    def replace(self, lost: Any) -> Any:
        """The actor in place of `lost` (started now, unless another caller did, or where
        the cluster has no room for one: its slot dropped, None)."""
        with self.lock:
            slot = next((k for k, actor in enumerate(self.actors) if actor is lost), None)
            if slot is None:
                return None  # replaced (or dropped) already
            try:
                self.engine.check_fits(free_only=True)
            except ValueError:
                del self.actors[slot]
                return None
            self.actors[slot] = self._new()
            return self.actors[slot]

    def _new(self) -> Any:
        return actor_class(self.ray).options(**self.engine.actor_options).remote()


_CREWS: dict[RayEngine, RayCrew] = {}


def crew_of(engine: RayEngine) -> RayCrew:
    """The crew of `engine` (of equal engines), made once per Ray session."""
    crew = _CREWS.get(engine)
    if crew is None or not crew.ray.is_initialized():
        crew = _CREWS[engine] = RayCrew(engine)
    return crew


class RayPool:
    """The Ray actors of `engine` (its crew: `workers` of them unless the engine says how
    many) making the batches of `work` (a Recipe) for the generator called `name` in
    errors. It joins the crew on `start()` (or the first submit) and leaves it on
    `stop()`."""

    def __init__(self, work: Any, engine: RayEngine, workers: int, name: str) -> None:
        self.engine = engine
        self.name = name
        self.workers = workers
        self.crew = crew_of(engine)
        self.payload = self.crew.ray.put(_pickled(self.crew.ray, work, name))
        self.key = f"{os.getpid()}-{id(self)}-{uuid.uuid4().hex}"
        self.lock = threading.Lock()  # held while joining or leaving the crew
        self.counting = threading.Lock()
        self.resent = 0  # batches asked again after their actor was lost
        self.joined = False
        self._idle: threading.Timer | None = None
        weakref.finalize(self, self.crew.leave, id(self))

    @property
    def actors(self) -> list[Any]:
        """The crew's actors now."""
        return list(self.crew.actors)

    def start(self) -> None:
        """Joins the crew, starting its actors where none run (an error where the cluster
        cannot place them, or they cannot rebuild the recipe)."""
        with self.lock:
            if self._idle is not None:  # the next epoch, or the next batch: they go on
                self._idle.cancel()
                self._idle = None
            if not self.joined:
                self.crew.join(id(self), self.workers, self.key, self.payload)
                self.joined = True

    def submit(self, epoch: int, offset: int, index: int, seed: int,
               batch_shuffle: bool = False) -> Future[Any]:
        future: Future[Any] = Future()
        future.set_running_or_notify_cancel()
        self.start()
        self._send(future, (epoch, offset, index, seed, batch_shuffle),
                   self.engine.max_retries)
        return future

    def _send(self, future: Future[Any], task: tuple[Any, ...], retries: int,
              prefer: Any = None, lost: BaseException | None = None) -> None:
        actor = self.crew.next_actor(prefer) if self.joined else None
        if actor is None:
            future.set_exception(CancelledError() if not self.joined else RuntimeError(
                f"batch {task[2]} of epoch {task[0]} of {self.name} has no Ray actor left "
                f"to make it: the actors of {self.engine!r} were lost and the cluster has "
                f"no room for new ones (free: {self.crew.ray.available_resources()})"
                + (f"; the last loss: {type(lost).__name__}: {lost}" if lost else "")))
            return
        ref = actor.batch.remote(self.key, [self.payload], *task)
        ref.future().add_done_callback(
            lambda done: self._arrived(done, future, task, retries, actor))

    def _arrived(self, done: Future[Any], future: Future[Any], task: tuple[Any, ...],
                 retries: int, actor: Any) -> None:
        """On Ray's callback thread: hands the batch over, or asks for it again of a new
        actor; whatever fails here fails the batch (never a Future left unanswered)."""
        try:
            try:
                batch = done.result()
            except BaseException as error:  # noqa: BLE001 - each kind handled below
                if not self.joined:
                    future.set_exception(CancelledError())
                elif _lost(error) and retries > 0:
                    with self.counting:
                        self.resent += 1
                    self._send(future, task, retries - 1, self.crew.replace(actor), error)
                else:
                    future.set_exception(_cause(error, task, self.name))
                return
            future.set_result(_writable(batch))
        except BaseException as error:  # noqa: BLE001 - the batch's error, not Ray's thread's
            if not future.done():
                future.set_exception(error)

    def stop(self, timer: threading.Timer | None = None, grace: float = 0.0) -> None:
        """Leaves the crew (whose actors end when no generator uses them; a batch they
        owed this pool is dropped); called by `timer`, only if no batch was asked for
        since it was set."""
        with self.lock:
            if timer is not None and timer is not self._idle:
                return
            if self._idle is not None:
                self._idle.cancel()
                self._idle = None
            if self.joined:
                self.joined = False
                for actor in self.crew.actors:  # others may go on using them
                    actor.forget.remote(self.key)
                self.crew.leave(id(self))

    def stop_later(self) -> None:
        """Leaves the crew IDLE_S seconds from now, unless a batch is asked for first."""
        self._stop_in(IDLE_S)

    def stop_soon(self) -> None:
        """A batch failed in the caller: leaves the crew ERROR_IDLE_S seconds from now,
        unless another batch is asked for first."""
        self._stop_in(ERROR_IDLE_S)

    def _stop_in(self, delay: float) -> None:
        with self.lock:
            if not self.joined:
                return
            if self._idle is not None:
                self._idle.cancel()
            timer = threading.Timer(delay, lambda: self.stop(timer))
            timer.daemon = True
            self._idle = timer
        timer.start()


def _pickled(ray: Any, work: Any, name: str) -> bytes:
    """`work` pickled for Ray actors: by Ray's cloudpickle, which keeps the owner of the
    Ray objects it holds (a Ray dataset's blocks: plain pickle loses it, and an actor's
    `ray.get` of them would wait forever) and sends what an actor could not import (a
    notebook's classes) by value. What cannot be pickled is `pickle_work`'s TypeError,
    naming the attribute."""
    try:
        return bytes(ray.cloudpickle.dumps(work, protocol=pickle.HIGHEST_PROTOCOL))
    except Exception:  # noqa: BLE001 - named below, or raised as it is
        pickle_work(work, name, ray_objects=True)  # raises the TypeError naming it
        raise


def _kill(ray: Any, actors: list[Any]) -> None:
    for actor in actors:
        try:
            if ray.is_initialized():
                ray.kill(actor, no_restart=True)
        except Exception:  # noqa: BLE001,S110 - Ray already shut down: nothing to end
            pass


def _lost(error: BaseException) -> bool:
    """Whether `error` says the actor or its node (not the batch) failed."""
    return any(cls.__name__ in LOST and cls.__module__.startswith("ray")
               for cls in type(error).__mro__)


def _cause(error: BaseException, task: tuple[Any, ...], name: str) -> BaseException:
    """What the caller raises for a batch that failed on an actor: the batch's own
    exception (Ray wraps it in a RayTaskError), with a note; Ray's error otherwise."""
    cause = getattr(error, "cause", None)
    if isinstance(cause, BaseException) and type(error).__name__.startswith("RayTaskError"):
        error = cause
    elif _lost(error):
        error = RuntimeError(
            f"batch {task[2]} of epoch {task[0]} of {name} could not be made: the Ray "
            f"actors making it were lost again and again (RayEngine(max_retries=...)): "
            f"{type(error).__name__}: {error}")
    if hasattr(error, "add_note"):
        error.add_note("kerasgen: raised on a Ray actor (engine=kg.RayEngine)")
    return error


def _writable(batch: Any) -> Any:
    """`batch` with its read-only arrays (views of Ray's object store) copied out."""
    if isinstance(batch, np.ndarray):
        return batch if batch.flags.writeable else batch.copy()
    if isinstance(batch, tuple):
        return tuple(_writable(part) for part in batch)
    if isinstance(batch, list):
        return [_writable(part) for part in batch]
    if isinstance(batch, dict):
        return {key: _writable(part) for key, part in batch.items()}
    return batch
