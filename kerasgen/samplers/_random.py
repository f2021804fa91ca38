"""Samplers that pick real samples: random over- and under-sampling (imbalanced-learn's
`RandomOverSampler` and `RandomUnderSampler`, drawn anew each epoch) and class-balanced
batches. Their plans are index arrays."""

from __future__ import annotations

import abc
from typing import Any

import numpy as np
import numpy.typing as npt

from kerasgen import _checks
from kerasgen.samplers import _resample_arrays
from kerasgen import _seeding as seeding
from kerasgen.samplers._plan import Plan
from kerasgen.samplers._resampler import Resampler, Resolved, StrategyResampler
from kerasgen.samplers._strategy import class_counts
from kerasgen import _redact


class RandomSampler(StrategyResampler, abc.ABC):
    """Draws each class's share of the plan from (seed, epoch) with `_draw`; shuffles the
    plan. `fit_resample` also sets `sample_indices_`, the plan it realised."""

    def plan(self, labels: npt.ArrayLike | None, seed: int, epoch: int,
             **context: Any) -> np.ndarray:
        labels = self._labels(labels)
        targets = self._targets(labels, context)
        rng = seeding.rng(seed, seeding.SAMPLER, epoch)
        parts = [self._draw(np.flatnonzero(labels == c), target, rng)
                 for c, target in targets.items()]
        return rng.permutation(np.concatenate(parts))

    @staticmethod
    @abc.abstractmethod
    def _draw(members: np.ndarray, target: int, rng: np.random.Generator) -> np.ndarray:
        """The plan's samples of one class: `target` of its `members`, drawn from `rng`."""

    def _learn(self, plan: np.ndarray | Plan, y_classes: _resample_arrays.ClassLabels,
               resolved: Resolved | None) -> None:
        super()._learn(plan, y_classes, resolved)
        self.sample_indices_ = np.asarray(plan)


class RandomOverSampler(RandomSampler):
    """Repeats random samples of the chosen classes up to the target counts, each epoch
    anew. Every original sample stays in the plan."""

    kind = "over"

    @staticmethod
    def _draw(members: np.ndarray, target: int, rng: np.random.Generator) -> np.ndarray:
        if target == len(members):
            return members
        return np.concatenate([members, rng.choice(members, target - len(members))])


class RandomUnderSampler(RandomSampler):
    """Keeps a random subset of the chosen classes, down to the target counts, drawn anew
    each epoch (so over several epochs every sample is seen)."""

    kind = "under"

    @staticmethod
    def _draw(members: np.ndarray, target: int, rng: np.random.Generator) -> np.ndarray:
        if target == len(members):
            return members
        return rng.choice(members, target, replace=False)


class BalancedBatchSampler(Resampler):
    """Every batch holds equal counts per class (as near as batch_size allows: the
    remainder slots go to classes in turn). An epoch is `num_batches` batches; by default
    enough for each sample of the majority class to be seen once. Smaller classes
    repeat, each in a fresh order every pass. (`n_batches`, the old name of
    `num_batches`, still works with a DeprecationWarning.) `fit_resample` sets
    `class_counts_`; as it neither over- nor under-samples by imbalanced-learn's rules, it
    sets no `sampling_strategy_`."""

    def __init__(self, num_batches: int | None = None, seed: int | None = None, *,
                 n_batches: int | None = None) -> None:
        if n_batches is not None:
            if num_batches is not None:
                raise TypeError("BalancedBatchSampler got `num_batches` and its deprecated "
                                "name `n_batches`. Pass num_batches= only.")
            _redact.warn("BalancedBatchSampler(n_batches=...) is deprecated: use "
                         "num_batches=.", DeprecationWarning, stacklevel=2)
            num_batches = n_batches
        super().__init__("all", seed)
        self.num_batches = (None if num_batches is None
                            else _checks.positive_int("num_batches", num_batches))

    @property
    def n_batches(self) -> int | None:
        """Deprecated: `num_batches`."""
        _redact.warn("BalancedBatchSampler.n_batches is deprecated: use num_batches.",
                     DeprecationWarning, stacklevel=2)
        return self.num_batches

    @property
    def sampling_strategy_(self) -> dict[Any, int]:
        """Deprecated: the class counts after `fit_resample` are `class_counts_`."""
        _redact.warn("BalancedBatchSampler.sampling_strategy_ is deprecated: the class "
                     "counts after fit_resample are `class_counts_`.", DeprecationWarning,
                     stacklevel=2)
        try:
            return self.class_counts_
        except AttributeError:
            raise AttributeError("'BalancedBatchSampler' object has no attribute "
                                 "'sampling_strategy_' (call fit_resample first)") from None

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        return {"num_batches": self.num_batches, "seed": self.seed}

    def plan(self, labels: npt.ArrayLike | None, seed: int, epoch: int, batch_size: int = 32,
             **context: Any) -> np.ndarray:
        labels = self._labels(labels)
        counts = class_counts(labels)
        classes = list(counts)
        if len(classes) < 2:
            raise ValueError("BalancedBatchSampler needs at least two classes.")
        if batch_size < len(classes):
            raise ValueError(f"`batch_size` ({batch_size}) must be at least the number of "
                             f"classes ({len(classes)}) for balanced batches.")
        rng = seeding.rng(seed, seeding.SAMPLER, epoch)
        per_class, extra = divmod(batch_size, len(classes))
        num_batches = self.num_batches or int(np.ceil(max(counts.values()) / per_class))
        streams = {}
        for c in classes:
            members = np.flatnonzero(labels == c)
            taken = num_batches * (per_class + 1)
            passes = int(np.ceil(taken / len(members)))
            streams[c] = np.concatenate([rng.permutation(members) for _ in range(passes)])
        used = {c: 0 for c in classes}
        batches = []
        order = rng.permutation(len(classes))
        for b in range(num_batches):
            lucky = {classes[order[(b * extra + k) % len(classes)]] for k in range(extra)}
            batch = []
            for c in classes:
                n = per_class + (c in lucky)
                batch.append(streams[c][used[c]:used[c] + n])
                used[c] += n
            batches.append(rng.permutation(np.concatenate(batch)))
        return np.concatenate(batches)
