"""Pipeline statistics: where the time of making batches goes (like tf.data's stats).

One concept, three handles: `stats=True` (a generator argument) makes the generator keep
a `BatchTimings` here, `gen.stats()` returns its summary, and the Keras callback
`kg.callbacks.PipelineStats` logs that summary every epoch.
"""

import contextlib
import threading
import time

STAGES = ("list", "read", "decode", "augment", "assemble")
_OFF = contextlib.nullcontext()


class _Counts:
    """Batches served and made, and seconds per stage, since a start."""

    def __init__(self):
        self.stages = dict.fromkeys(STAGES, 0.0)
        self.batches = 0  # served: each batch of a pass once
        self.samples = 0
        self.made = 0
        self.busy_s = 0.0
        self.first = None
        self.last = None

    def span(self, start, end):
        self.first = start if self.first is None else min(self.first, start)
        self.last = end if self.last is None else max(self.last, end)

    def summary(self):
        span = (self.last - self.first) if self.batches and self.first is not None else 0.0
        return {
            "batches": self.batches,
            "samples": self.samples,
            "made": self.made,
            "busy_s": round(self.busy_s, 6),
            "wall_s": round(span, 6),
            "batches_per_s": round(self.batches / span, 3) if span > 0 else None,
            "samples_per_s": round(self.samples / span, 3) if span > 0 else None,
            "stages_s": {k: round(v, 6) for k, v in self.stages.items()},
        }


class BatchTimings:
    """The batches served and the time per stage of those made in this process (the
    record behind `gen.stats()`; `kg.callbacks.PipelineStats` is the callback that logs
    it), since the start and in the current pass (Keras's epoch, a for loop).

    `batches` and `samples` count what the caller used: each batch of a pass once,
    however often it was asked for, and not Keras's looks at batches before training
    (the tf.data adapter's peek, the JAX and torch trainers' build; see `Generator`).
    `made` counts the batches made here, work ahead included, which the stage times sum
    over; batches made at once by worker threads overlap, so the sums can exceed the
    wall time. `busy_s` sums the time spent making batches.
    """

    def __init__(self):
        self._lock = threading.Lock()
        self.reset()

    def reset(self):
        with self._lock:
            self.total = _Counts()
            self.current = _Counts()  # this pass
            self.produced = []  # completion times of batches, for the fit-wait estimate
            self._seen = set()  # (epoch, index) served in this pass

    @property
    def batches(self):
        return self.total.batches

    @contextlib.contextmanager
    def stage(self, name):
        start = time.perf_counter()
        try:
            yield
        finally:
            self.add(name, time.perf_counter() - start)

    def add(self, name, seconds):
        with self._lock:
            self.total.stages[name] += seconds
            self.current.stages[name] += seconds

    def batch_done(self, start):
        """A batch begun at `start` was made (here, now)."""
        end = time.perf_counter()
        with self._lock:
            for counts in (self.total, self.current):
                counts.made += 1
                counts.busy_s += end - start
                counts.span(start, end)
            self.produced.append(end)
            if len(self.produced) > 100_000:
                del self.produced[:50_000]

    def new_pass(self):
        """A pass over an epoch begins (Keras's epoch, a for loop): its batches count
        again, once each, and the pass's own count starts."""
        with self._lock:
            self._seen = set()
            self.current = _Counts()

    def served(self, epoch, index, samples):
        """Batch `index` of `epoch` reached the caller (counted once per pass)."""
        now = time.perf_counter()
        with self._lock:
            if (epoch, index) in self._seen:
                return
            self._seen.add((epoch, index))
            for counts in (self.total, self.current):
                counts.batches += 1
                counts.samples += samples
                counts.span(now, now)

    def summary(self, current=False):
        """The counts since the start (or, `current`, of this pass)."""
        with self._lock:
            return (self.current if current else self.total).summary()

    def __getstate__(self):  # a worker process starts its own count
        return {}

    def __setstate__(self, state):
        self._lock = threading.Lock()
        self.reset()

def report(timings, fit_wait_s, reset=False):
    """`gen.stats()`: the summary of `timings` (a BatchTimings, None when statistics are
    off) with `fit_wait_s`; `reset` starts a new count after reading."""
    if timings is None:
        raise ValueError("Statistics are off. Build the generator with stats=True.")
    summary = timings.summary()
    summary["fit_wait_s"] = fit_wait_s
    if reset:
        timings.reset()
    return summary


def stage(stats, name):
    """A timing context for `name`, or a shared no-op when stats are off."""
    return _OFF if stats is None else stats.stage(name)


def fit_wait(produced, start, step_ends):
    """Seconds the training steps waited for data: step k can start only when batch k is
    made, so it waited max(0, made_k - end of step k-1) (the epoch start for k = 0)."""
    made = sorted(t for t in produced if t >= start)
    if not made:
        return None
    wait, previous = 0.0, start
    for made_k, end in zip(made, step_ends):
        wait += max(0.0, made_k - previous)
        previous = end
    return wait
