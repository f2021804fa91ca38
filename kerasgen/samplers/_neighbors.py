"""SMOTE's neighbors: the k nearest same-class neighbors of the samples of the classes it
grows, found on demand in blocks (as the epoch reaches them) and kept.

Memory is what the table needs: one row of k int32 neighbors per sample of a class to grow
(the others have none), rows found by binary search in the sorted list of those samples
(no array over every sample), and no distances kept (the search returns indices only).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from kerasgen.samplers._plan import index_dtype
from kerasgen import _redact


class NeighborCache:
    """k nearest same-class neighbors, computed on demand in blocks and kept.

    Uses scikit-learn's NearestNeighbors (exact search), fitted once per class; queries
    run for blocks of consecutive bases as the epoch reaches them. Thread-safe: threads
    making batches at once search each missing block once.
    """

    def __init__(self, features: Any, labels: np.ndarray, classes: Sequence[int],
                 k_neighbors: int) -> None:
        self.features = features
        self.labels = labels
        self.k: dict[int, int] = {}
        self.models: dict[int, Any] = {}
        self.members: dict[int, np.ndarray] = {}
        self._lock = threading.Lock()
        index_type = index_dtype(len(labels))
        for c in classes:
            members = np.flatnonzero(labels == c).astype(index_type)
            self.k[c] = _class_k(c, len(members), k_neighbors)
            self.members[c] = members
        # the samples of the classes to grow, sorted: sample grown[r]'s neighbors are row r
        # of the table (-1: not found yet)
        self.grown = (np.sort(np.concatenate([self.members[c] for c in classes]))
                      if classes else np.zeros(0, index_type))
        self.table = np.full((len(self.grown), max(self.k.values(), default=1)), -1,
                             index_type)
        self._known = 0

    def k_for(self, c: int) -> int:
        """The neighbors searched for class `c` (k_neighbors, less for a small class)."""
        return self.k[c]

    def num_known(self) -> int:
        """How many samples' neighbors are known so far."""
        return self._known

    def known(self, bases: np.ndarray) -> bool:
        """Whether the neighbors of every one of `bases` are known."""
        return bool((self.table[self._rows(bases), 0] >= 0).all())

    def prepare(self, bases: np.ndarray) -> None:
        """Computes the neighbors of those `bases` not known yet."""
        with self._lock:
            missing = np.unique(bases[self.table[self._rows(bases), 0] < 0])
            if len(missing):
                self._compute(missing)

    def resolve(self, bases: np.ndarray, slots: np.ndarray) -> np.ndarray:
        """j for each (base, slot): the slot-th nearest same-class neighbor of base."""
        if not self.known(bases):
            self.prepare(bases)
        return self.table[self._rows(bases), slots].astype(np.int64)

    def _rows(self, bases: np.ndarray) -> np.ndarray:
        """The table rows of `bases` (samples of the classes to grow)."""
        return np.searchsorted(self.grown, bases)

    def _model(self, c: int) -> Any:
        """Class `c`'s NearestNeighbors, fitted on first use."""
        if c not in self.models:
            try:
                from sklearn.neighbors import NearestNeighbors
            except ImportError as error:
                raise ImportError('SMOTE needs scikit-learn: pip install "kerasgen3[imbalance]" '
                                  "(or pip install scikit-learn)") from error
            points = self._points(self.members[c])
            self.models[c] = NearestNeighbors(n_neighbors=self.k[c] + 1).fit(points)
        return self.models[c]

    def _points(self, indices: np.ndarray) -> Any:
        """The feature rows of `indices`, flat float32 (a scipy.sparse matrix's rows stay
        sparse: scikit-learn's neighbour search takes them so)."""
        rows = self.features[indices]
        if hasattr(rows, "tocsr"):
            return rows.tocsr().astype(np.float32)
        return np.asarray(rows, dtype=np.float32).reshape(len(indices), -1)

    def _compute(self, bases: np.ndarray) -> None:
        """Finds the neighbors of `bases` (none known yet), class by class; a sample is not
        its own neighbor."""
        for c in np.unique(self.labels[bases]):
            c = int(c)
            group = bases[self.labels[bases] == c]
            found = self._model(c).kneighbors(self._points(group), return_distance=False)
            members, k = self.members[c], self.k[c]
            rows = self._rows(group)
            for b, r, row in zip(group.tolist(), rows.tolist(), members[found]):
                self.table[r, :k] = row[row != b][:k]
            self._known += len(group)

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_lock"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()


def _class_k(c: int, size: int, k_neighbors: int) -> int:
    """The neighbors class `c` of `size` samples can have: k_neighbors, fewer (with a
    warning) for a class with no more samples than that, none for a single sample."""
    if size < 2:
        raise ValueError(f"SMOTE cannot synthesise class {c}: it has "
                         f"{size} sample; it needs at least two.")
    k = min(k_neighbors, size - 1)
    if k < k_neighbors:
        _redact.warn(f"Class {c} has {size} samples, fewer than "
                     f"k_neighbors + 1 = {k_neighbors + 1}; SMOTE uses k={k} "
                     "for it.", stacklevel=6)
    return k
