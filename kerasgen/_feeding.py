"""Feeding: where a generator's batches are made, on demand or ahead of the caller.

From the generator's `workers`, `use_multiprocessing` and `prefetch`, `Feeding` makes
each batch in one of four places:

- in the caller's thread, when asked for (workers <= 1 and prefetch=0, or inside a
  daemonic process, which may start none);
- ahead, on `ahead_threads` threads (`prefetch` batches, workers <= 1: one thread for
  custom subclasses, two for the image generators);
- ahead, on `workers` threads of the generator's own (workers > 1, in place of Keras's
  thread pool, up to max_queue_size batches);
- ahead, in `workers` processes of its own (use_multiprocessing=True, in place of
  Keras's process pool: _workers.WorkerPool, batches handed over in shared memory).

Batches made ahead are kept by `_ahead.WorkAhead`, keyed by (epoch, batch index). Each
place makes batch b of epoch e with the generator's `make_batch` on a view of it fixed at
epoch e, so a batch is byte-identical wherever it is made.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from kerasgen import _ahead, _checks, _workers
from kerasgen.loader import usable_cores

if TYPE_CHECKING:
    from concurrent.futures import Future

    from kerasgen._order import EpochOrder


class Fed(Protocol):
    """What feeding needs of a generator: its worker settings, its epoch, views of it
    at other epochs, and batches made here."""

    workers: int
    use_multiprocessing: bool
    max_queue_size: int
    prefetch: int
    ahead_threads: int

    @property
    def epoch(self) -> int: ...

    def at_epoch(self, epoch: int) -> Any: ...

    def make_batch(self, index: int) -> Any: ...


def prefetch_depth(prefetch: Any, auto: int) -> int:
    """`prefetch=` checked: batches worked ahead with workers <= 1 (`auto` for "auto")."""
    if prefetch == "auto":
        return auto
    if isinstance(prefetch, bool) or not isinstance(prefetch, numbers.Integral) or (
            prefetch < 0):
        _checks.fail("prefetch", "'auto' or a non-negative integer", prefetch)
    return int(prefetch)


class Feeding:
    """How `generator`'s batches (in the epochs of `order`, its own) reach the caller.
    `pace(waited)` hears whether the caller waited for each batch made ahead (an image
    source sizes its decoding to it). `ahead=False`: made when asked for, always (a view
    for parallel readers, which ask out of order)."""

    def __init__(self, generator: Fed, order: EpochOrder,
                 pace: Callable[[bool], None] | None = None, ahead: bool = True) -> None:
        self.generator = generator
        self.order = order
        self.pace = pace
        self.pool: _workers.WorkerPool | None = None  # the worker processes, made on
        # their first batch
        self.view: Any = None  # the generator fixed at the epoch whose batches are made ahead
        self.ahead = self._work_ahead() if ahead else None

    def _work_ahead(self) -> _ahead.WorkAhead | None:
        """The work-ahead (None where it does not apply): on worker processes of the
        generator's own with use_multiprocessing (none inside a worker, nor in any
        daemonic process), on `workers` threads of its own with workers > 1, else
        (prefetch > 0) on `ahead_threads` threads (the generator's; never more than the
        usable cores): two for the image generators, so that one batch decodes while
        the pool finishes the last files of the other instead of idling at the batch's
        end."""
        gen = self.generator
        depth = max(gen.workers, gen.max_queue_size or 10)  # Keras's queue, in batches
        if gen.use_multiprocessing:
            if not _workers.can_start():  # a worker (of kerasgen or of Keras's pool)
                return None
            return _ahead.WorkAhead(self._make_ahead, depth, submit=self._submit)
        if gen.workers > 1:
            return _ahead.WorkAhead(self._make_ahead, depth, threads=gen.workers)
        if not gen.prefetch:
            return None
        threads = max(1, min(gen.ahead_threads, gen.prefetch, usable_cores()))
        return _ahead.WorkAhead(self._make_ahead, gen.prefetch, pace=self.pace,
                                threads=threads)

    @property
    def own_workers(self) -> bool:
        """Whether worker threads or processes of the generator's own make its batches."""
        gen = self.generator
        return self.ahead is not None and (gen.use_multiprocessing or gen.workers > 1)

    def warm_up(self) -> None:
        """Starts the fork server now where batches will be made in worker processes."""
        if self.ahead is not None and self.generator.use_multiprocessing:
            _workers.warm_up()

    def prepare(self) -> None:
        """Pickles the generator for its worker processes now (before the first batch), so
        that what cannot cross processes is an error naming it before training starts."""
        gen = self.generator
        if self.ahead is not None and gen.use_multiprocessing and self.pool is None:
            self.pool = _workers.WorkerPool(gen, gen.workers)

    def get(self, index: int, num_batches: int) -> Any:
        """Batch `index` (of `num_batches`) of the generator's current epoch: made ahead
        (then the batches after it are queued) or made now."""
        gen = self.generator
        if self.ahead is not None and (not gen.use_multiprocessing or _workers.can_start()):
            try:
                return self.ahead.get(gen.epoch, int(index), num_batches)
            except BaseException:
                self._failed()
                raise
        # here, now: no work-ahead, or inside a daemonic process (a worker of Keras's own
        # pool, driven by hand), which may start no worker process of its own
        return gen.make_batch(index)

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

    def epoch_ended(self) -> None:
        """Forgets the batches made ahead; the worker processes end unless the next epoch
        begins within a few seconds (WorkerPool.stop_later): none outlives `fit` by
        more."""
        self.forget()
        if self.pool is not None:
            self.pool.stop_later()

    def _make_ahead(self, epoch: int, index: int) -> Any:
        """Batch `index` of `epoch`, made on a view fixed at that epoch (so that Keras's
        on_epoch_end, arriving while it is made, changes nothing in it)."""
        view = self.view
        if view is None or view.epoch != epoch:
            view = self.view = self.generator.at_epoch(epoch)
        return view.make_batch(index)

    def _submit(self, epoch: int, index: int) -> Future[Any]:
        """Batch `index` of `epoch`, asked of the worker processes (a Future)."""
        gen = self.generator
        if self.pool is None:
            self.pool = _workers.WorkerPool(gen, gen.workers)
        order = self.order
        offset = order.offset if epoch == order.epoch else 0
        return self.pool.submit(epoch, offset, index, order.seed, order.batch_shuffle)

    def worker_batch(self, epoch: int, offset: int, index: int, seed: int,
                     batch_shuffle: bool) -> Any:
        """In a worker process (its generator unpickled): batch `index` of `epoch` at
        resume `offset` (in the batch order `batch_shuffle` says), made now."""
        self.order.move_to(epoch, offset, seed, batch_shuffle)
        return self.generator.make_batch(index)

