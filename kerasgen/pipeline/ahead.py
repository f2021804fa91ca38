"""Work ahead: make the next batches while the training loop consumes this one.

The batches of an epoch are a pure function of (seed, epoch, batch number), so which
batch comes next is known: when batch i is asked for, batches i+1..i+depth are made on
background threads (one, or two for the image generators, whose decoding fans out to the
loader's pool) and handed over
when asked for. Keras's PyDataset path with `workers=1` computes each batch only when its
training loop asks (the JAX and torch backends wait for it; TensorFlow's `prefetch`
overlaps one batch at most), so without this nothing else decodes during a step.

Only a caller that walks the epoch in order benefits; any other order (Keras shuffling
the batches of an unshuffled generator, random access) turns the work-ahead off for the
rest of that epoch, so no work is wasted twice.
"""

import os
import threading
from concurrent.futures import CancelledError, ThreadPoolExecutor


class WorkAhead:
    """Batches made ahead of the caller, keyed by (epoch, batch index).

    `make(epoch, index)` builds a batch; it must depend on nothing else. Batches ahead
    are made by `submit(epoch, index)` (returning a Future) when given, else by `make` on
    `threads` background threads. `depth` is the most batches made or held ahead at once; after
    the first batch it is lowered, if need be, so that they fit in `budget_bytes` (one
    batch ahead at least). `pace(waited)`, when given, hears for each batch made ahead
    whether the caller had to wait for it. `threads`: background threads making batches
    (Keras's `workers`, or the generator's `ahead_threads`). `submit_asked`: the batch
    asked for is submitted too where nothing was made ahead (the first of an epoch, one
    asked out of order), instead of made by `make` in the caller (Ray actors: the
    training process leaves all the work to the cluster).
    """

    def __init__(self, make, depth, budget_bytes=256 << 20, submit=None, pace=None,
                 threads=1, submit_asked=False):
        self.make = make
        self.threads = threads
        self.submit = submit
        self.submit_asked = submit_asked and submit is not None
        self.pace = pace
        self.depth = depth
        self.budget_bytes = budget_bytes
        self._sized = False
        self._lock = threading.Lock()
        self._pending = {}  # (epoch, index) -> Future
        self._last = None  # the (epoch, index) asked for last
        self._off_epoch = None  # an epoch whose order turned out not sequential
        self._executor = None  # (pid, ThreadPoolExecutor): remade after a fork

    def get(self, epoch, index, num_batches):
        """Batch `index` of `epoch` (of `num_batches`), made ahead when it was foreseen;
        then queues the batches after it."""
        with self._lock:
            future = self._pending.pop((epoch, index), None)
            in_order = (index == 0 or self._last is None
                        or (epoch, index) == (self._last[0], self._last[1] + 1))
            if not in_order and future is None:
                self._off_epoch = epoch
            if future is None and self.submit_asked:
                future = self.submit(epoch, index)
            self._last = (epoch, index)
            off = self._off_epoch == epoch
            self._drop(lambda key: off or key[0] != epoch or key[1] < index)
            if not off:
                for ahead in range(index + 1, min(index + 1 + self.depth, num_batches)):
                    if (epoch, ahead) not in self._pending:
                        self._pending[(epoch, ahead)] = (
                            self.submit(epoch, ahead) if self.submit is not None
                            else self._pool().submit(self.make, epoch, ahead))
        if future is not None and self.pace is not None:
            self.pace(not future.done())
        batch = self._result(future, epoch, index)
        if not self._sized:
            self._sized = True
            self.depth = max(1, min(self.depth, self.budget_bytes // max(1, nbytes(batch))))
        return batch

    def _result(self, future, epoch, index):
        """The batch `future` holds, or made here: where nothing was made ahead, or where
        a worker dropped it (its processes stopped before making it: CancelledError)."""
        if future is not None:
            try:
                return future.result()
            except CancelledError:
                pass
        return self.make(epoch, index)

    def reset(self):
        """Forgets everything made ahead (a new epoch, a restored state)."""
        with self._lock:
            self._drop(lambda key: True)
            self._last = None

    def _drop(self, stale):
        for key in [key for key in self._pending if stale(key)]:
            self._pending.pop(key).cancel()  # one already running finishes unseen

    def _pool(self):
        executor = self._executor
        if executor is None or executor[0] != os.getpid():
            executor = self._executor = (os.getpid(), ThreadPoolExecutor(
                self.threads, thread_name_prefix="kerasgen-ahead"))
        return executor[1]

    def __getstate__(self):  # a copy (a worker process) starts with nothing ahead
        state = self.__dict__.copy()
        state.update(_lock=None, _pending={}, _last=None, _executor=None)
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._lock = threading.Lock()


def nbytes(batch):
    """Bytes held by the arrays of a batch (tuples, lists and dicts of arrays)."""
    if isinstance(batch, dict):
        return sum(nbytes(v) for v in batch.values())
    if isinstance(batch, (tuple, list)):
        return sum(nbytes(v) for v in batch)
    return int(getattr(batch, "nbytes", 0))
