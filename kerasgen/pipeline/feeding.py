"""Feeding: where a generator's batches are made, on demand or ahead of the caller.

This module alone decides where batches are made. `Placement` reads a generator's
`workers`, `use_multiprocessing`, `max_queue_size` and `prefetch` once; `Feeding` makes
each batch in one of four places:

- in the caller's thread, when asked for (workers <= 1 and prefetch=0, or inside a
  daemonic process, which may start none);
- ahead, on `ahead_threads` threads (`prefetch` batches, workers <= 1: one thread for
  custom subclasses, two for the image generators);
- ahead, on `workers` threads of the generator's own (workers > 1, in place of Keras's
  thread pool, up to max_queue_size batches);
- ahead, in `workers` processes of its own (use_multiprocessing=True, in place of
  Keras's process pool: _workers.WorkerPool, batches handed over in shared memory);
- ahead, on the actors of a Ray cluster (`engine=kg.RayEngine(...)`:
  pipeline.ray_pool.RayPool, the same pool interface over Ray actors).

Batches made ahead are kept by `pipeline.ahead.WorkAhead`, keyed by (epoch, batch index). Each
place makes batch b of epoch e with the same `pipeline.making.BatchMaker` from the same frozen
slice of the order (`EpochOrder.slice`), so a batch is byte-identical wherever it is
made; worker processes and Ray actors receive the maker and the order (`Recipe`), never
the generator.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kerasgen import _checks
from kerasgen.pipeline import ahead as _ahead
from kerasgen.pipeline import workers as _workers
from kerasgen.pipeline.ray_engine import RayEngine
from kerasgen.pipeline.ray_pool import RayPool
from kerasgen.sources import _core as sources
from kerasgen.loader import usable_cores

if TYPE_CHECKING:
    from concurrent.futures import Future

    from kerasgen.pipeline.making import BatchMaker
    from kerasgen.pipeline.order import EpochOrder
    from kerasgen.pipeline.stream_order import StreamOrder

    Order = EpochOrder | StreamOrder  # a permutation's, or a stream's


def prefetch_depth(prefetch: Any, auto: int) -> int:
    """`prefetch=` checked: batches worked ahead with workers <= 1 (`auto` for "auto")."""
    if prefetch == "auto":
        return auto
    if isinstance(prefetch, bool) or not isinstance(prefetch, numbers.Integral) or (
            prefetch < 0):
        _checks.fail("prefetch", "'auto' or a non-negative integer", prefetch)
    return int(prefetch)


def worker_processes(workers: Any = 1, use_multiprocessing: Any = False) -> int | None:
    """How many worker processes of its own a generator with these arguments runs (None:
    none), as Keras reads them: workers=0 starts no process either. A builder asks it
    before the generator is made (an image source's memory cache is then shared)."""
    if use_multiprocessing and isinstance(workers, int) and workers > 0:
        return workers
    return None


class Placement:
    """Where a generator's batches are made, from its arguments (checked here):
    `workers`, `use_multiprocessing` (False with workers=0), `max_queue_size`,
    `prefetch` ("auto": `prefetch_auto`), `ahead_threads` (threads making batches
    ahead with prefetch and one worker) and `engine` (None, or a `kg.RayEngine`: Ray
    actors make the batches, `workers` of them unless the engine says how many)."""

    def __init__(self, workers: Any = 1, use_multiprocessing: Any = False,
                 max_queue_size: Any = 10, prefetch: Any = "auto", prefetch_auto: int = 0,
                 ahead_threads: int = 1, engine: Any = None) -> None:
        self.workers = _checks.non_negative_int("workers", workers)
        self.processes = worker_processes(self.workers, use_multiprocessing) is not None
        self.max_queue_size = _checks.non_negative_int("max_queue_size", max_queue_size)
        self.prefetch = prefetch_depth(prefetch, prefetch_auto)
        self.ahead_threads = ahead_threads
        if engine is not None and not isinstance(engine, RayEngine):
            _checks.fail("engine", "None or a kg.RayEngine(...)", engine, TypeError)
        if engine is not None and self.processes:
            raise ValueError(
                "`engine` makes the batches on Ray actors, `use_multiprocessing=True` in "
                "worker processes of this machine: choose one. Received: engine="
                f"{engine!r}, use_multiprocessing=True.")
        self.engine: RayEngine | None = engine

    def share(self, source: Any) -> Any:
        """`source` as worker processes share it (an image source's memory cache in
        shared memory): its `for_processes(n)`, or the source itself."""
        return sources.for_processes(source, self.workers) if self.processes else source

    @property
    def elsewhere(self) -> bool:
        """Whether batches are made out of this process (worker processes, Ray actors),
        by a pool that receives the recipe (`Recipe`)."""
        return self.processes or self.engine is not None

    def check(self, maker: BatchMaker) -> None:
        """Refuses what the worker processes could not run: Keras layers in
        `batch_augment` (TensorFlow ops hang in a forked process)."""
        if self.processes and maker.keras_layers:
            raise ValueError(
                "Keras layers in `batch_augment` run TensorFlow ops, which hang in forked "
                "worker processes. Received: use_multiprocessing=True. Use worker threads "
                "(use_multiprocessing=False) or put the layers in the model."
            )


class Recipe:
    """What worker processes receive: the maker and a copy of the order. `batch` moves
    the order to the batch's epoch, resume offset, seed and batch order, then makes it
    (in a worker, the order is the worker's own)."""

    def __init__(self, maker: BatchMaker, order: Order) -> None:
        self.maker, self.order = maker, order

    def batch(self, epoch: int, offset: int, index: int, seed: int,
              batch_shuffle: bool) -> Any:
        self.order.move_to(epoch, offset, seed, batch_shuffle)
        return self.maker.make(self.order.slice(index, self.maker.foresee))


class Feeding:
    """How the batches of `maker` (in the epochs of `order`, the generator's own) reach
    the caller, where `placement` says. `pace(waited)` hears whether the caller waited
    for each batch made ahead (an image source sizes its decoding to it). `ahead=False`:
    made when asked for, always (a view for parallel readers, which ask out of order).
    `name` names the generator in errors (its class)."""

    def __init__(self, maker: BatchMaker, order: Order, placement: Placement,
                 pace: Callable[[bool], None] | None = None, ahead: bool = True,
                 name: str = "Generator") -> None:
        self.maker = maker
        self.order = order
        self.placement = placement
        self.pace = pace
        self.name = name
        self.pool: _workers.WorkerPool | RayPool | None = None  # the worker processes
        # or Ray actors, made on their first batch
        self.view: Order | None = None  # the order fixed at the epoch whose
        # batches are made ahead
        self.ahead = self._work_ahead() if ahead else None

    def _work_ahead(self) -> _ahead.WorkAhead | None:
        """The work-ahead (None where it does not apply): on worker processes of the
        generator's own with use_multiprocessing (none inside a worker, nor in any
        daemonic process), on `workers` threads of its own with workers > 1, else
        (prefetch > 0) on `ahead_threads` threads (never more than the usable cores):
        two for the image generators, so that one batch decodes while the pool finishes
        the last files of the other instead of idling at the batch's end."""
        place = self.placement
        depth = max(place.workers, place.max_queue_size or 10)  # Keras's queue, in batches
        if place.engine is not None:  # every batch asked of the actors, the first too
            depth = max(depth, place.engine.actors or 0)
            return _ahead.WorkAhead(self._make_ahead, depth, submit=self._submit,
                                    submit_asked=True)
        if place.processes:
            if not _workers.can_start():  # a worker (of kerasgen or of Keras's pool)
                return None
            return _ahead.WorkAhead(self._make_ahead, depth, submit=self._submit)
        if place.workers > 1:
            return _ahead.WorkAhead(self._make_ahead, depth, threads=place.workers)
        if not place.prefetch:
            return None
        threads = max(1, min(place.ahead_threads, place.prefetch, usable_cores()))
        return _ahead.WorkAhead(self._make_ahead, place.prefetch, pace=self.pace,
                                threads=threads)

    @property
    def own_workers(self) -> bool:
        """Whether worker threads or processes of the generator's own make its batches."""
        place = self.placement
        return self.ahead is not None and (place.elsewhere or place.workers > 1)

    def warm_up(self) -> None:
        """Starts the fork server now where batches will be made in worker processes."""
        if self.ahead is not None and self.placement.processes:
            _workers.warm_up()

    def prepare(self) -> None:
        """Pickles the maker and the order for the worker processes now (before the
        first batch), so that what cannot cross processes is an error naming it before
        training starts; Ray actors are started now (a recipe they cannot rebuild, or
        actors the cluster cannot place, is an error here)."""
        if self.ahead is not None and self.placement.elsewhere and self.pool is None:
            self.pool = self._new_pool()
            if isinstance(self.pool, RayPool):
                self.pool.start()

    def _new_pool(self) -> _workers.WorkerPool | RayPool:
        recipe = Recipe(self.maker, self.order.copy())
        engine = self.placement.engine
        if engine is not None:
            return RayPool(recipe, engine, self.placement.workers, self.name)
        return _workers.WorkerPool(recipe, self.placement.workers, self.name)

    def make(self, index: int) -> Any:
        """Batch `index` of the order's current epoch, made here and now."""
        return self.maker.make(self.order.slice(index, self.maker.foresee))

    def get(self, index: int, num_batches: int) -> Any:
        """Batch `index` (of `num_batches`) of the order's current epoch: made ahead
        (then the batches after it are queued) or made now."""
        if self.ahead is not None and (not self.placement.processes
                                       or _workers.can_start()):
            try:
                return self.ahead.get(self.order.epoch, int(index), num_batches)
            except BaseException:
                self._failed()
                raise
        # here, now: no work-ahead, or inside a daemonic process (a worker of Keras's own
        # pool, driven by hand), which may start no worker process of its own
        return self.make(index)

    def _failed(self) -> None:
        """A batch failed (or the wait for it was interrupted): `fit` ends here, so the
        worker processes end a moment later unless another batch is asked for first
        (WorkerPool.stop_soon): none is left running for a generator nobody reads."""
        if self.pool is not None:
            self.pool.stop_soon()

    def forget(self) -> None:
        """Drops the batches made ahead: the epoch, seed or position changed."""
        self.view = None
        if self.ahead is not None:
            self.ahead.reset()

    def idle(self) -> None:
        """Keras ended an epoch of a stream, whose batches go on in the next one: the
        batches made ahead are kept, and the worker processes end unless a batch is
        asked for within a few seconds (WorkerPool.stop_later)."""
        if self.pool is not None:
            self.pool.stop_later()

    def restart(self) -> None:
        """Drops the batches made ahead and the worker processes (the next batch starts
        new ones, with a copy of the order as it stands now: a stream's restored
        position)."""
        self.forget()
        pool, self.pool = self.pool, None
        if pool is not None:
            pool.stop(grace=0)

    def epoch_ended(self) -> None:
        """Forgets the batches made ahead; the worker processes end unless the next epoch
        begins within a few seconds (WorkerPool.stop_later): none outlives `fit` by
        more."""
        self.forget()
        if self.pool is not None:
            self.pool.stop_later()

    def _make_ahead(self, epoch: int, index: int) -> Any:
        """Batch `index` of `epoch`, made from a copy of the order fixed at that epoch
        (so that Keras's on_epoch_end, arriving while it is made, changes nothing in
        it)."""
        view = self.view
        if view is None or view.epoch != epoch:
            view = self.view = self.order.at_epoch(epoch)
        return self.maker.make(view.slice(index, self.maker.foresee))

    def _submit(self, epoch: int, index: int) -> Future[Any]:
        """Batch `index` of `epoch`, asked of the worker processes (a Future)."""
        if self.pool is None:
            self.pool = self._new_pool()
        order = self.order
        offset = order.offset if epoch == order.epoch else 0
        return self.pool.submit(epoch, offset, index, order.seed, order.batch_shuffle)
