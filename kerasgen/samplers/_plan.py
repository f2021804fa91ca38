"""The sampler protocol and what it returns: `Sampler`, `Plan`, and `Memo`, the store a
sampler may keep derived data in between the epochs of one generator.

A plan is the list of samples of one epoch, in batch order: an index array, or a `Plan`
whose synthetic entries are (i, neighbor slot, lam), realised at batch time as
x_i + lam * (x_j - x_i), with j the slot-th nearest same-class neighbor of i, resolved
by the plan's `neighbors` only when a batch needs it.
"""

from __future__ import annotations

import threading
import typing
from collections.abc import Callable, Hashable
from typing import Any

import numpy as np
import numpy.typing as npt

from kerasgen.arrays import batching
from kerasgen import _redact


def index_dtype(n: int) -> type[np.signedinteger[Any]]:
    """The smallest index type that holds indices below `n`: int32, or int64 past 2**31
    (plans and neighbor tables stay compact)."""
    return np.int32 if n < 2**31 else np.int64


@typing.runtime_checkable
class Sampler(typing.Protocol):
    """What `sampler=` takes: an object with a `plan` method (a structural type: no base
    class to inherit; `isinstance(obj, Sampler)` checks that `plan` is there).

    `plan(labels, seed, epoch, **context)` returns the samples of epoch `epoch`, in batch
    order: an integer index array (a sample may repeat or be left out; every index in
    [0, num_samples)), or a `Plan` when some samples are synthetic (SMOTE). It must be a
    pure function of its arguments (the same arguments give the same plan in every
    process): that is what makes an epoch reproducible, resumable, and the same with any
    workers and in every shard. Draw from `numpy.random.default_rng([seed, ..., epoch])`,
    never from global random state.

    - `labels`: one int class id per sample (`gen.labels`), or None when the samples have
      no single class (label_mode "multi_label", "raw" floats, "mask", no labels).
    - `seed`: the generator's seed. A kerasgen sampler's own `seed` serves `fit_resample`
      only: one that differs from the generator's is a ValueError when the generator is
      built.
    - `epoch`: the epoch number, 0 first.
    - `context`: keywords the generator adds: `num_samples`, `batch_size`, `class_names`,
      `features` (the feature space of a neighbor search) and `memo`, the generator's
      `Memo`: where a sampler keeps what it derives from the data once for every epoch
      (SMOTE's neighbor table), rather than on itself, since one sampler object may serve
      several generators. Take `**context` to accept them; a `plan(labels, seed, epoch)`
      without it is called without them.

    A generator's state (`get_state`) names its sampler by `repr(sampler)`, less the
    sampler's own `seed` and any memory address, and `set_state` refuses a state saved
    with another sampler (as grain compares `repr(sampler)`): give a sampler of your own
    a `__repr__` that shows its parameters.
    """

    def plan(self, labels: npt.ArrayLike | None, seed: int, epoch: int,
             **context: Any) -> np.ndarray | Plan:
        """The samples of `epoch`, in batch order: an index array or a `Plan`."""
        ...  # pragma: no cover


class Neighbors(typing.Protocol):
    """What a `Plan` asks of its `neighbors` (kg.samplers.NeighborCache is one): whether
    the neighbors of some bases are known, and j for (base, slot). `prepare` and
    `num_known` let it find them in blocks ahead of the batches that need them."""

    def known(self, bases: np.ndarray) -> bool: ...  # pragma: no cover

    def resolve(self, bases: np.ndarray, slots: np.ndarray) -> np.ndarray: ...  # pragma: no cover

    def prepare(self, bases: np.ndarray) -> None: ...  # pragma: no cover

    def num_known(self) -> int: ...  # pragma: no cover


class Plan:
    """An epoch plan: sample `indices`; for synthetic entries a neighbor `slot` >= 0
    and a mixing weight `lam` (originals have slot -1), and `neighbors`, the
    `NeighborCache` that resolves (i, slot) to the neighbor j. (`neighbours`, the old
    spelling, still works with a DeprecationWarning.)"""

    def __init__(self, indices: npt.ArrayLike, slots: np.ndarray | None = None,
                 lams: np.ndarray | None = None, neighbors: Neighbors | None = None, *,
                 neighbours: Neighbors | None = None) -> None:
        if neighbours is not None:
            _redact.warn("Plan(neighbours=...) is deprecated: use neighbors= "
                         "(imbalanced-learn's spelling, as in k_neighbors).",
                         DeprecationWarning, stacklevel=2)
            neighbors = neighbours if neighbors is None else neighbors
        indices = np.asarray(indices)
        self.indices = indices if indices.dtype in (np.int32, np.int64) else indices.astype(
            np.int64)
        self.slots = slots
        self.lams = lams
        self.neighbors = neighbors  # resolves (i, slot) -> j

    @property
    def neighbours(self) -> Neighbors | None:
        """Deprecated: `neighbors`."""
        _redact.warn("Plan.neighbours is deprecated: use Plan.neighbors.",
                     DeprecationWarning, stacklevel=2)
        return self.neighbors

    def __len__(self) -> int:
        return len(self.indices)

    def batch(self, start: int, stop: int,
              ) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
        """(indices, partners or None, lams or None) of positions [start, stop)."""
        indices = self.indices[start:stop]
        if self.slots is None:
            return indices, None, None
        slots = self.slots[start:stop]
        if not (slots >= 0).any():
            return indices, None, None
        neighbors, lams = self._resolver(), self._lams()
        partners = np.full(len(indices), -1, dtype=np.int64)
        synthetic = slots >= 0
        bases = indices[synthetic]
        if not neighbors.known(bases):
            neighbors.prepare(self._upcoming_bases(start, self.slots, neighbors))
        partners[synthetic] = neighbors.resolve(bases, slots[synthetic])
        return indices, partners, lams[start:stop]

    def prepare_all(self) -> None:
        """Finds the neighbors of every synthetic entry now (before worker processes
        fork, so they inherit them instead of each searching anew)."""
        if self.slots is not None:
            self._resolver().prepare(self.indices[self.slots >= 0])

    def _resolver(self) -> Neighbors:
        """`neighbors`, which a plan with synthetic entries cannot do without."""
        if self.neighbors is None:
            raise ValueError("`neighbors` must resolve the synthetic entries (slot >= 0) of "
                             "a Plan. Received: neighbors=None.")
        return self.neighbors

    def _lams(self) -> np.ndarray:
        """`lams`, which a plan with synthetic entries cannot do without."""
        if self.lams is None:
            raise ValueError("`lams` must give the mixing weight of the synthetic entries "
                             "(slot >= 0) of a Plan. Received: lams=None.")
        return self.lams

    def _upcoming_bases(self, start: int, slots: np.ndarray,
                        neighbors: Neighbors) -> np.ndarray:
        """Bases of the next synthetic entries from `start`: a block that doubles with what
        is already known (at least 256), so the first batch is quick and the whole epoch
        needs few neighbor queries. Found by scanning the slots from `start` in growing
        windows, so the plan keeps no array of synthetic positions."""
        size = max(256, neighbors.num_known())
        found, stop, window = [], start, 2 * size
        while size > 0 and stop < len(slots):
            positions = np.flatnonzero(slots[stop:stop + window] >= 0)[:size]
            found.append(self.indices[stop + positions])
            size -= len(positions)
            stop += window
            window *= 2
        return np.concatenate(found) if found else self.indices[:0]


class Memo:
    """The store a generator gives its sampler's `plan` (the `memo` keyword): what the
    sampler derives from the data once and reuses every epoch (SMOTE's neighbor table).

    It belongs to the generator's order, not to the sampler: the generator's views
    (`shard`, `at_epoch`) and its work-ahead threads share it (safely: a lock guards it),
    another generator built with the same sampler object has its own, and it travels
    with the generator to worker processes. A value is kept under a `name` for a `key`
    (the inputs it was made from); another key replaces it.
    """

    def __init__(self) -> None:
        self._entries: dict[str, tuple[Hashable, Any]] = {}
        self._lock = threading.Lock()

    def get(self, name: str, key: Hashable, make: Callable[[], Any]) -> Any:
        """The value kept under `name` if it was made for `key`; else `make()`, kept."""
        with self._lock:
            entry = self._entries.get(name)
            if entry is None or entry[0] != key:
                entry = self._entries[name] = (key, make())
            return entry[1]

    def __getstate__(self) -> dict[str, Any]:
        return {"_entries": self._entries}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._entries = state["_entries"]
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"Memo({sorted(self._entries)})"


def realise(plan: np.ndarray | Plan, x: np.ndarray,
            y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Materialises a plan over arrays: originals taken, synthetic samples blended."""
    if not isinstance(plan, Plan):
        plan = Plan(plan)
    indices, partners, lams = plan.batch(0, len(plan))
    x_res = np.take(x, indices, axis=0)
    if partners is not None and lams is not None:
        rows = partners >= 0
        x_res = batching.blend_rows(x_res, np.take(x, partners[rows], axis=0), lams[rows], rows)
    return x_res, np.take(y, indices, axis=0)
