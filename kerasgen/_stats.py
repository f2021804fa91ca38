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


class BatchTimings:
    """Time per stage and per batch, for the batches made in this process (the record
    behind `gen.stats()`; `kg.callbacks.PipelineStats` is the callback that logs it).

    Stage times are summed over batches; batches made at once by worker threads overlap,
    so the sums can exceed the wall time. `busy_s` sums the time spent inside `gen[i]`.
    """

    def __init__(self):
        self._lock = threading.Lock()
        self.reset()

    def reset(self):
        with self._lock:
            self.stages = dict.fromkeys(STAGES, 0.0)
            self.batches = 0
            self.samples = 0
            self.busy_s = 0.0
            self.first = None
            self.last = None
            self.produced = []  # completion times of batches, for the fit-wait estimate

    @contextlib.contextmanager
    def stage(self, name):
        start = time.perf_counter()
        try:
            yield
        finally:
            elapsed = time.perf_counter() - start
            with self._lock:
                self.stages[name] += elapsed

    def add(self, name, seconds):
        with self._lock:
            self.stages[name] += seconds

    def batch_done(self, start, samples):
        end = time.perf_counter()
        with self._lock:
            self.batches += 1
            self.samples += samples
            self.busy_s += end - start
            self.first = start if self.first is None else min(self.first, start)
            self.last = end if self.last is None else max(self.last, end)
            self.produced.append(end)
            if len(self.produced) > 100_000:
                del self.produced[:50_000]

    def summary(self):
        with self._lock:
            span = (self.last - self.first) if self.batches else 0.0
            return {
                "batches": self.batches,
                "samples": self.samples,
                "busy_s": round(self.busy_s, 6),
                "wall_s": round(span, 6),
                "batches_per_s": round(self.batches / span, 3) if span > 0 else None,
                "samples_per_s": round(self.samples / span, 3) if span > 0 else None,
                "stages_s": {k: round(v, 6) for k, v in self.stages.items()},
            }

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
