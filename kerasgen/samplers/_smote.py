"""SMOTE: synthetic over-sampling, planned as (base, neighbor slot, lam) triples and
realised at batch time, so no synthetic sample is ever materialised.

The plan is built in arrays of its final size (int32 indices below 2**31 samples, int16
slots, float32 lams) and put in order in place, so making it needs little more memory
than keeping it. The neighbor table (`samplers._neighbors.NeighborCache`) is kept in the
generator's `Memo`, never on the sampler, which several generators may share.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from kerasgen import _checks
from kerasgen import _seeding as seeding
from kerasgen.samplers._neighbors import NeighborCache
from kerasgen.samplers._plan import Memo, Plan, index_dtype
from kerasgen.samplers._resampler import StrategyResampler
from kerasgen._typing import SamplingStrategy

CHUNK = 1 << 16  # entries drawn or gathered at a time: temporaries stay small


class SMOTE(StrategyResampler):
    """SMOTE-style synthetic over-sampling, never materialised.

    For each class to grow, each synthetic sample is (i, j, lam): i a sample of the class,
    j one of its k nearest same-class neighbors in feature space, lam uniform in [0, 1);
    the batch realises x_i + lam * (x_j - x_i). The bases i go through the class in a
    seeded order, round after round (each sample is a base about equally often), so
    neighbors are computed only for the bases a batch needs, once each.

    Feature space: the data itself for arrays; for images, `features=` passed to the
    generator (embeddings, say) or small thumbnails computed once.
    """

    kind = "over"

    def __init__(self, k_neighbors: int = 5, sampling_strategy: SamplingStrategy = "auto",
                 seed: int | None = None) -> None:
        super().__init__(sampling_strategy, seed)
        self.k_neighbors = _checks.positive_int("k_neighbors", k_neighbors)

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        return {"k_neighbors": self.k_neighbors, **super().get_params(deep)}

    def plan(self, labels: npt.ArrayLike | None, seed: int, epoch: int, features: Any = None,
             memo: Memo | None = None, **context: Any) -> Plan:
        labels = self._labels(labels)
        targets = self._targets(labels, context)
        if features is None:
            raise ValueError("SMOTE needs a feature space: arrays give their data; for "
                             "image generators pass features= or let them make thumbnails.")
        rng = seeding.rng(seed, seeding.SAMPLER, epoch)
        neighbors = self._neighbors(features, labels, targets, memo)
        return _Drawing(labels, targets, neighbors).plan(rng)

    def _neighbors(self, features: Any, labels: np.ndarray, targets: dict[int, int],
                   memo: Memo | None) -> NeighborCache:
        """The neighbor table of the classes to grow: the one in `memo` (the generator's,
        kept across epochs) when it was made for these targets, else a new one."""
        grown = [c for c, t in targets.items() if t > np.count_nonzero(labels == c)]

        def make() -> NeighborCache:
            return NeighborCache(features, labels, grown, self.k_neighbors)

        if memo is None:  # fit_resample, or a plan asked for outside a generator
            return make()
        key = (len(labels), self.k_neighbors, tuple(sorted(targets.items())))
        return memo.get("SMOTE neighbors", key, make)


class _Drawing:
    """One epoch's SMOTE plan, drawn in imbalanced-learn-like rounds.

    Per class (in `targets` order): its members, then the synthetic entries that grow it:
    bases in rounds of seeded permutations of the class, a neighbor slot each, a lam
    each. Then the plan is shuffled so that the originals take random places while the
    synthetic entries keep their drawn order (bases are met round by round, and neighbor
    blocks are computed in turn).
    """

    def __init__(self, labels: np.ndarray, targets: dict[int, int],
                 neighbors: NeighborCache) -> None:
        self.labels = labels
        self.targets = targets
        self.neighbors = neighbors
        self.index_type = index_dtype(len(labels))  # plans stay compact
        self.sizes = {c: int(np.count_nonzero(labels == c)) for c in targets}
        self.num_new = sum(max(0, t - self.sizes[c]) for c, t in targets.items())
        self.length = sum(self.sizes.values()) + self.num_new

    def plan(self, rng: np.random.Generator) -> Plan:
        """The plan, each array made once at its final size."""
        source = np.empty(self.length, self.index_type)  # per class: members, then bases
        synthetic = np.zeros(self.length, bool)
        slots = np.empty(self.num_new, np.int16)
        lams = np.empty(self.num_new, np.float32)
        self._draw(rng, source, synthetic, slots, lams)
        indices, placed = _shuffle_originals(rng, source, synthetic)
        del source, synthetic
        all_slots = np.full(self.length, -1, np.int16)
        all_slots[placed] = slots
        del slots
        all_lams = np.zeros(self.length, np.float32)
        all_lams[placed] = lams
        return Plan(indices, all_slots, all_lams, self.neighbors)

    def _draw(self, rng: np.random.Generator, source: np.ndarray, synthetic: np.ndarray,
              slots: np.ndarray, lams: np.ndarray) -> None:
        """Fills `source` (and marks its synthetic entries), `slots` and `lams`."""
        at, new_at = 0, 0
        for c, target in self.targets.items():
            members = np.flatnonzero(self.labels == c).astype(self.index_type)
            source[at:at + len(members)] = members
            at += len(members)
            n_new = target - len(members)
            if n_new <= 0:
                continue
            _fill_bases(rng, members, source[at:at + n_new])
            synthetic[at:at + n_new] = True
            at += n_new
            k = self.neighbors.k_for(c)
            for a in range(0, n_new, CHUNK):  # as one draw of n_new, in small pieces
                b = min(a + CHUNK, n_new)
                slots[new_at + a:new_at + b] = rng.integers(0, k, b - a)
            for a in range(0, n_new, CHUNK):
                b = min(a + CHUNK, n_new)
                lams[new_at + a:new_at + b] = rng.random(b - a, dtype=np.float32)
            new_at += n_new


def _fill_bases(rng: np.random.Generator, members: np.ndarray, out: np.ndarray) -> None:
    """`out` filled with rounds of permutations of `members` (the last one cut short)."""
    for at in range(0, len(out), len(members)):
        take = min(len(members), len(out) - at)
        out[at:at + take] = rng.permutation(members)[:take]


def _shuffle_originals(rng: np.random.Generator, source: np.ndarray,
                       synthetic: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(indices, placed): `source` in a random order that keeps its synthetic entries in
    their order, and where they were placed (a mask over the plan).

    One shuffle of all positions; the places that drew a synthetic entry get the synthetic
    entries in source order. The shuffled positions become the indices in place, a
    block at a time, so no second array of the plan's length is made.
    """
    order = np.arange(len(source), dtype=index_dtype(len(source)))
    rng.shuffle(order)  # in place: no int64 copy of a long plan
    placed = synthetic[order]
    bases = source[synthetic]
    indices = order if order.dtype == source.dtype else np.empty(len(order), source.dtype)
    for a in range(0, len(order), CHUNK):
        indices[a:a + CHUNK] = source[order[a:a + CHUNK]]
    indices[placed] = bases
    return indices, placed
