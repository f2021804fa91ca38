"""The orders of a generator built without a sampler: `Shuffle` (shuffle=True), every
sample once in a new random order each epoch, and `Sequential` (shuffle=False), every
sample once in the source's order. Both are samplers (`Sampler`) returning a `Plan`."""

from __future__ import annotations

import typing
from collections.abc import Sized
from typing import Any

import numpy as np
import numpy.typing as npt

from kerasgen import _seeding as seeding
from kerasgen.samplers._plan import Plan


def _size(labels: npt.ArrayLike | None, num_samples: int | None) -> int:
    """The number of samples: `num_samples` when the generator gives it, else the labels'."""
    if num_samples is not None:
        return num_samples
    if labels is None:
        raise ValueError("`num_samples` must be given when `labels` is None (the samples "
                         "have no labels to count). Received: num_samples=None.")
    return len(typing.cast(Sized, labels))


class Shuffle:
    """The order of a generator built with shuffle=True (and no sampler): every sample
    once, in a new random order each epoch, drawn from (seed, epoch) alone."""

    def plan(self, labels: npt.ArrayLike | None, seed: int, epoch: int,
             num_samples: int | None = None, **context: Any) -> Plan:
        return Plan(seeding.rng(seed, seeding.ORDER, epoch).permutation(
            _size(labels, num_samples)))

    def __repr__(self) -> str:
        return "Shuffle()"


class Sequential:
    """The order of a generator built with shuffle=False (and no sampler): every sample
    once, in the source's order, every epoch."""

    def plan(self, labels: npt.ArrayLike | None, seed: int, epoch: int,
             num_samples: int | None = None, **context: Any) -> Plan:
        return Plan(np.arange(_size(labels, num_samples)))

    def __repr__(self) -> str:
        return "Sequential()"
