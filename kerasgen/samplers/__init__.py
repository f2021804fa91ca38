"""Samplers: pure functions (labels, seed, epoch) -> plan, the `Sampler` protocol.

A plan is the list of samples of one epoch, in batch order. `Shuffle` and `Sequential`
are the generators' own orders (shuffle=True / False) and return a `Plan`; random
over/under-sampling and balanced batches give an index array; SMOTE gives a `Plan` whose
synthetic entries are (i, neighbor slot, lam), realised at batch time as
x_i + lam * (x_j - x_i), with j the slot-th nearest same-class neighbor of i, found only
when a batch needs it. Any object with a `plan` method as `Sampler` describes it is a
sampler too (docs/custom-datasets.md, "A sampler of your own").

`sampling_strategy` follows imbalanced-learn exactly (the same counts, ValueError where it
raises one): "auto", "minority", "majority", "not minority", "not majority", "all", a
float (two classes), a dict {class: count} or a callable y -> dict; inside a generator
dict classes by id or by name.

This package is the public face (its `__all__` holds what users import); each concept
lives in a module of its own:

- `_plan`: the `Sampler` protocol, `Plan`, `Memo` (a generator's store for its
  sampler), `realise` (a plan over arrays, for `fit_resample`);
- `_strategy`: `sampling_strategy`, checked and resolved, one function per kind;
- `_shuffle`: `Shuffle` and `Sequential`, the orders of generators without a sampler;
- `_resampler`: what kerasgen's imbalance samplers share (parameters, repr,
  `fit_resample`);
- `_random`: `RandomOverSampler`, `RandomUnderSampler`, `BalancedBatchSampler`;
- `_smote`: `SMOTE`; `_neighbors`: `NeighborCache`, its neighbor table;
- `_adapters`: what a generator does with `sampler=` (`as_sampler`,
  `check_seed`, `identity`), internal to the generators;
- `_resample_arrays`: `kg.rebalance`'s and `fit_resample`'s forms of `y`.
"""

from __future__ import annotations

from typing import Any

from kerasgen.samplers._neighbors import NeighborCache
from kerasgen.samplers._plan import Memo, Plan, Sampler
from kerasgen.samplers._random import BalancedBatchSampler, RandomOverSampler, RandomUnderSampler
from kerasgen.samplers._shuffle import Sequential, Shuffle
from kerasgen.samplers._smote import SMOTE
from kerasgen.samplers._strategy import (
    OVER_STRATEGIES,
    UNDER_STRATEGIES,
    check_strategy,
    class_counts,
    target_counts,
)
from kerasgen import _redact

__all__ = [
    "OVER_STRATEGIES",
    "SMOTE",
    "UNDER_STRATEGIES",
    "BalancedBatchSampler",
    "Memo",
    "NeighborCache",
    "Plan",
    "RandomOverSampler",
    "RandomUnderSampler",
    "Sampler",
    "Sequential",
    "Shuffle",
    "check_strategy",
    "class_counts",
    "target_counts",
]


def __getattr__(name: str) -> Any:
    if name == "NeighbourCache":  # the old spelling, for one release
        _redact.warn("kerasgen.samplers.NeighbourCache is deprecated: use NeighborCache.",
                     DeprecationWarning, stacklevel=2)
        return NeighborCache
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
