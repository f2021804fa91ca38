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
"""

from __future__ import annotations

import inspect
import math
import numbers
import re
import threading
import typing
import warnings
import zlib
from collections.abc import Mapping, Sequence
from typing import Any, Literal, overload

import numpy as np
import numpy.typing as npt

from kerasgen import _checks, _resample_arrays
from kerasgen import _batching as batching
from kerasgen import _seeding as seeding
from kerasgen._typing import SamplingStrategy

OVER_STRATEGIES = ("auto", "minority", "not minority", "not majority", "all")
UNDER_STRATEGIES = ("auto", "majority", "not minority", "not majority", "all")


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
    - `context`: keywords the generator adds: `num_samples`, `batch_size`, `class_names`
      and `features` (the feature space of a neighbor search). Take `**context` to
      accept them; a `plan(labels, seed, epoch)` without it is called without them.

    A generator's state (`get_state`) names its sampler by `repr(sampler)`, less the
    sampler's own `seed` and any memory address, and `set_state` refuses a state saved
    with another sampler (as grain compares `repr(sampler)`): give a sampler of your own
    a `__repr__` that shows its parameters.
    """

    def plan(self, labels: npt.ArrayLike | None, seed: int, epoch: int,
             **context: Any) -> np.ndarray | Plan:
        """The samples of `epoch`, in batch order: an index array or a `Plan`."""
        ...  # pragma: no cover


class Plan:
    """An epoch plan: sample `indices`; for synthetic entries a neighbor `slot` >= 0
    and a mixing weight `lam` (originals have slot -1), and `neighbors`, the
    `NeighborCache` that resolves (i, slot) to the neighbor j. (`neighbours`, the old
    spelling, still works with a DeprecationWarning.)"""

    def __init__(self, indices: npt.ArrayLike, slots: np.ndarray | None = None,
                 lams: np.ndarray | None = None, neighbors: NeighborCache | None = None, *,
                 neighbours: NeighborCache | None = None) -> None:
        if neighbours is not None:
            warnings.warn("Plan(neighbours=...) is deprecated: use neighbors= "
                          "(imbalanced-learn's spelling, as in k_neighbors).",
                          DeprecationWarning, stacklevel=2)
            neighbors = neighbours if neighbors is None else neighbors
        indices = np.asarray(indices)
        self.indices = indices if indices.dtype in (np.int32, np.int64) else indices.astype(
            np.int64)
        self.slots = slots
        self.lams = lams
        self.neighbors = neighbors  # resolves (i, slot) -> j
        self._synthetic_positions = None

    @property
    def neighbours(self) -> NeighborCache | None:
        """Deprecated: `neighbors`."""
        warnings.warn("Plan.neighbours is deprecated: use Plan.neighbors.",
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
        partners = np.full(len(indices), -1, dtype=np.int64)
        synthetic = slots >= 0
        bases = indices[synthetic]
        if not self.neighbors.known(bases):
            self.neighbors.prepare(self._upcoming_bases(start))
        partners[synthetic] = self.neighbors.resolve(bases, slots[synthetic])
        return indices, partners, self.lams[start:stop]

    def prepare_all(self) -> None:
        """Finds the neighbors of every synthetic entry now (before worker processes
        fork, so they inherit them instead of each searching anew)."""
        if self.slots is not None:
            self.neighbors.prepare(self.indices[self.slots >= 0])

    def _upcoming_bases(self, start):
        """Bases of the next synthetic entries from `start`: a block that doubles with what
        is already known (at least 256), so the first batch is quick and the whole epoch
        needs few neighbor queries."""
        if self._synthetic_positions is None:
            self._synthetic_positions = np.flatnonzero(self.slots >= 0)
        first = np.searchsorted(self._synthetic_positions, start)
        size = max(256, self.neighbors.num_known())
        return self.indices[self._synthetic_positions[first:first + size]]


def class_counts(labels: npt.ArrayLike) -> dict[int, int]:
    """{class id: count} for the classes present, ascending ids."""
    ids, counts = np.unique(np.asarray(labels), return_counts=True)
    return {int(c): int(n) for c, n in zip(ids, counts)}


def check_strategy(sampling_strategy: SamplingStrategy,
                   kind: Literal["over", "under"]) -> SamplingStrategy:
    """imbalanced-learn's check of the `sampling_strategy` parameter, done in `__init__`.

    kind is "over" or "under". A ValueError for every wrong value or type, as
    imbalanced-learn's InvalidParameterError is one (a list, say).
    """
    strategy = sampling_strategy
    allowed = OVER_STRATEGIES if kind == "over" else UNDER_STRATEGIES
    forms = ("a float in (0, 1] (two classes), one of " + ", ".join(map(repr, allowed))
             + ", a dict {class: count} or a callable y -> {class: count}")
    if isinstance(strategy, str):
        if strategy not in allowed:
            hint = {
                ("over", "majority"): "An over-sampler cannot grow the majority class "
                                      "(it is already the largest)",
                ("under", "minority"): "An under-sampler cannot shrink the minority class "
                                       "(it is already the smallest)",
            }.get((kind, strategy), "")
            _checks.fail("sampling_strategy", forms, strategy, hint=hint)
    elif isinstance(strategy, numbers.Real) and not isinstance(strategy, bool):
        if not 0 < strategy <= 1:
            _checks.fail("sampling_strategy", "a float in (0, 1] (minority / majority after "
                         "resampling)", strategy)
    elif not isinstance(strategy, Mapping) and not callable(strategy):
        hint = ("A list of classes is imbalanced-learn's form for cleaning samplers only; "
                "give a dict {class: count}" if isinstance(strategy, (list, tuple)) else "")
        _checks.fail("sampling_strategy", forms, strategy, hint=hint)
    return strategy


def _class_id(key, class_names, classes):
    """The class id a dict key of `sampling_strategy` means: a class value of `y` for
    fit_resample (`classes`), or a class id or name inside a generator."""
    if classes is not None:
        ids = {value: i for i, value in enumerate(classes)}
        if key in ids:
            return ids[key]
    elif isinstance(key, str):
        if class_names is not None and key in class_names:
            return list(class_names).index(key)
    elif isinstance(key, numbers.Integral) and not isinstance(key, bool):
        return int(key)
    present = classes if classes is not None else class_names
    raise ValueError(f"`sampling_strategy` names class {key!r}, which is not present in "
                     f"the data (classes: {present}). Use a class "
                     f"{'of y' if classes is not None else 'id or name'}.")


def target_counts(labels: npt.ArrayLike, sampling_strategy: SamplingStrategy,
                  kind: Literal["over", "under"], class_names: Sequence[str] | None = None,
                  *, classes: Sequence[Any] | None = None,
                  y: Any = None) -> dict[int, int]:
    """{class id: count after sampling}, exactly imbalanced-learn's counts.

    kind is "over" or "under"; `labels` hold class ids. Classes that are not resampled keep
    their count. Dict keys (also of a callable's dict) are class ids or `class_names`, or,
    when `classes` (the class values of fit_resample's y, in id order) is given, those
    values. A callable gets `y` (default: `labels`). Ties between equal classes break
    toward the smaller id, as imbalanced-learn's max/min over its sorted classes do.
    """
    return _resolve_strategy(labels, sampling_strategy, kind, class_names, classes, y)[0]


def _resolve_strategy(labels, sampling_strategy, kind, class_names, classes, y):
    """(target_counts, the class ids the strategy names): imbalanced-learn's
    `sampling_strategy_` has an entry for exactly these classes."""
    counts = class_counts(labels)
    if len(counts) < 2:
        raise ValueError(f"Resampling needs at least two classes; the labels hold only "
                         f"{list(counts)}.")
    strategy = check_strategy(sampling_strategy, kind)
    names = classes if classes is not None else class_names

    def name(c):
        return repr(names[c]) if names is not None and c < len(names) else str(c)

    if callable(strategy) and not isinstance(strategy, Mapping):
        strategy = strategy(labels if y is None else y)
        if not isinstance(strategy, Mapping):
            raise ValueError("`sampling_strategy` as a callable must return a dict {class: "
                             f"count}}. Received: it returned {strategy!r}.")
    majority = max(counts, key=counts.get)  # the first of equal ones, as imbalanced-learn
    minority = min(counts, key=counts.get)
    if isinstance(strategy, str):
        if strategy == "auto":
            strategy = "not majority" if kind == "over" else "not minority"
        chosen = {
            "minority": [minority],
            "majority": [majority],
            "not minority": [c for c in counts if c != minority],
            "not majority": [c for c in counts if c != majority],
            "all": list(counts),
        }[strategy]
        goal = counts[majority] if kind == "over" else counts[minority]
        return {c: (goal if c in chosen else n) for c, n in counts.items()}, chosen
    if isinstance(strategy, numbers.Real):
        ratio = float(strategy)
        if len(counts) != 2:
            raise ValueError("`sampling_strategy` as a float works for two classes only. "
                             f"Received: sampling_strategy={strategy} with {len(counts)} "
                             "classes; pass a dict {class: count} instead.")
        out = dict(counts)
        if kind == "over":
            # imbalanced-learn: int(n_majority * ratio - n), truncated, at least 1 to add
            for c, n in counts.items():
                if c != majority:
                    added = int(counts[majority] * ratio - n)
                    if added <= 0:
                        hint = _least_ratio(lambda r: int(counts[majority] * r - n) >= 1,
                                            (n + 1) / counts[majority])
                        raise ValueError(
                            f"`sampling_strategy`={strategy} gives class {name(c)} (the "
                            f"minority, {n} samples) int({counts[majority]} * {strategy} "
                            f"- {n}) = {added} samples to add; an over-sampler must add "
                            f"at least one, as in imbalanced-learn. {hint}.")
                    out[c] = n + added
            return out, [c for c in counts if c != majority]
        # imbalanced-learn: int(n_minority / ratio), truncated, at most what there is
        for c, n in counts.items():
            if c != minority:
                target = int(counts[minority] / ratio)
                if target > n:
                    hint = _least_ratio(lambda r: int(counts[minority] / r) <= n,
                                        counts[minority] / (n + 1))
                    raise ValueError(
                        f"`sampling_strategy`={strategy} would grow class {name(c)} from "
                        f"{n} to int({counts[minority]} / {strategy}) = {target} samples; "
                        f"an under-sampler only removes samples. {hint}.")
                out[c] = target
        return out, [c for c in counts if c != minority]
    out = dict(counts)
    chosen = []
    for key, value in strategy.items():
        c = _class_id(key, class_names, classes)
        if c not in counts:
            raise ValueError(f"`sampling_strategy` names class {key!r}, which is not "
                             f"present in the data (classes with samples: "
                             f"{[names[i] if names else i for i in counts]}).")
        value = _checks.non_negative_int(f"sampling_strategy[{key!r}]", value)
        if kind == "over" and value < counts[c]:
            raise ValueError(
                f"An over-sampler only adds samples: class {key!r} has {counts[c]}, "
                f"and sampling_strategy asks for {value}.")
        if kind == "under" and value > counts[c]:
            raise ValueError(
                f"An under-sampler only removes samples: class {key!r} has "
                f"{counts[c]}, and sampling_strategy asks for {value}.")
        out[c] = value
        chosen.append(c)
    return out, chosen


def _least_ratio(works, start):
    """How to fix a float `sampling_strategy`: the smallest ratio with two decimals, up to 1,
    for which `works` (imbalanced-learn's truncating rule) holds, searched up from `start`."""
    ratio = max(0.01, math.floor(start * 100) / 100)
    while ratio <= 1:
        if works(ratio):
            return f"Pass a larger ratio: {ratio} is the smallest with two decimals that works"
        ratio = round(ratio + 0.01, 2)
    return "No ratio can: the two classes are equally large"


class Shuffle:
    """The order of a generator built with shuffle=True (and no sampler): every sample
    once, in a new random order each epoch, drawn from (seed, epoch) alone."""

    def plan(self, labels: npt.ArrayLike | None, seed: int, epoch: int,
             num_samples: int | None = None, **context: Any) -> Plan:
        size = len(labels) if num_samples is None else num_samples
        return Plan(seeding.rng(seed, seeding.ORDER, epoch).permutation(size))

    def __repr__(self) -> str:
        return "Shuffle()"


class Sequential:
    """The order of a generator built with shuffle=False (and no sampler): every sample
    once, in the source's order, every epoch."""

    def plan(self, labels: npt.ArrayLike | None, seed: int, epoch: int,
             num_samples: int | None = None, **context: Any) -> Plan:
        return Plan(np.arange(len(labels) if num_samples is None else num_samples))

    def __repr__(self) -> str:
        return "Sequential()"


class _SamplerBase:
    """Shared parts of kerasgen's imbalance samplers: parameters stored as given, repr,
    and `fit_resample`. A sampler of your own needs none of it: see `Sampler`."""

    kind: Literal["over", "under"] | None = None

    def __init__(self, sampling_strategy: SamplingStrategy = "auto",
                 seed: int | None = None) -> None:
        if self.kind is not None:
            check_strategy(sampling_strategy, self.kind)
        self.sampling_strategy = sampling_strategy
        self._given_seed = seed  # None: drawn (check_seed tells the two apart)
        self.seed = seeding.resolve_seed(seed)

    def __repr__(self) -> str:
        params = ", ".join(f"{k}={v!r}" for k, v in self._params().items())
        return f"{type(self).__name__}({params})"

    def _params(self):
        return {"sampling_strategy": self.sampling_strategy, "seed": self.seed}

    def _labels(self, labels):
        if labels is None:
            raise ValueError(f"{type(self).__name__} needs one class label per sample; this "
                             "generator has none (label_mode 'multi_label', 'raw' floats, "
                             "'mask' or no labels).")
        return np.asarray(labels)

    def plan(self, labels: npt.ArrayLike | None, seed: int, epoch: int,
             **context: Any) -> np.ndarray | Plan:
        """The samples of `epoch`, in batch order (see `Sampler`)."""
        raise NotImplementedError

    @overload
    def fit_resample(self, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]: ...

    @overload
    def fit_resample(self, x: Any, y: Any) -> tuple[Any, Any]: ...

    def fit_resample(self, x: Any, y: Any) -> tuple[Any, Any]:
        """Resamples arrays (x of any rank) like imbalanced-learn; returns (x_res, y_res).

        `y` as imbalanced-learn takes it: 1-D class labels of any type (ints, strings, ...)
        or one-hot rows; `y_res` comes back in the same form and dtype (a list, a pandas
        Series or DataFrame too), and so does `x_res`. Dict keys of `sampling_strategy`
        are values of `y` (column indices for one-hot rows).

        Sets `class_counts_` ({class: count after resampling}) and, as imbalanced-learn
        does, `sampling_strategy_`: {class: samples added} for an over-sampler (SMOTE,
        RandomOverSampler), {class: count kept} for an under-sampler, with an entry for
        each class the strategy resamples; the random samplers also set
        `sample_indices_`.
        """
        y_classes = _resample_arrays.class_labels(y)
        x_rows = np.asarray(x)
        if x_rows.ndim == 0 or len(x_rows) != len(y_classes.ids):
            raise ValueError(f"`x` and `y` must hold the same number of samples. Received: "
                             f"x of shape {x_rows.shape}, {len(y_classes.ids)} labels in y.")
        context = {"classes": y_classes.classes, "y": y_classes.labels}
        if self.kind is not None:  # the strategy resolved once (a callable called once)
            targets, chosen = _resolve_strategy(y_classes.ids, self.sampling_strategy,
                                                self.kind, None, y_classes.classes,
                                                y_classes.labels)
            context["targets"] = targets
        plan = self.plan(y_classes.ids, self.seed, 0,
                         features=x_rows.reshape(len(x_rows), -1), **context)
        x_res, y_res = realise(plan, x_rows, y_classes.rows)
        taken = plan.indices if isinstance(plan, Plan) else np.asarray(plan)
        value = y_classes.classes
        self.class_counts_ = {value[c]: n
                              for c, n in class_counts(y_classes.ids[taken]).items()}
        if self.kind is not None:
            # imbalanced-learn's meaning: {class: samples to add} for an over-sampler,
            # {class: count to keep} for an under-sampler, for the classes resampled
            counts = class_counts(y_classes.ids)
            self.sampling_strategy_ = {
                value[c]: targets[c] - counts[c] if self.kind == "over" else targets[c]
                for c in sorted(set(chosen))}
        return _resample_arrays.restore(x_res, x), _resample_arrays.restore(y_res, y)


def _targets(sampler, labels, context):
    """target_counts for a sampler's plan: class names inside a generator, the class
    values of y (and y for a callable) from fit_resample, which resolves them first."""
    if context.get("targets") is not None:
        return context["targets"]
    return target_counts(labels, sampler.sampling_strategy, sampler.kind,
                         context.get("class_names"), classes=context.get("classes"),
                         y=context.get("y"))


def realise(plan: np.ndarray | Plan, x: np.ndarray,
            y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Materialises a plan over arrays: originals taken, synthetic samples blended."""
    if not isinstance(plan, Plan):
        plan = Plan(plan)
    indices, partners, lams = plan.batch(0, len(plan))
    x_res = np.take(x, indices, axis=0)
    if partners is not None:
        rows = partners >= 0
        x_res = batching.blend_rows(x_res, np.take(x, partners[rows], axis=0), lams[rows], rows)
    return x_res, np.take(y, indices, axis=0)


class _RandomSampler(_SamplerBase):
    """Draws each class's share of the plan from (seed, epoch); shuffles the plan."""

    def plan(self, labels: npt.ArrayLike | None, seed: int, epoch: int,
             **context: Any) -> np.ndarray:
        labels = self._labels(labels)
        targets = _targets(self, labels, context)
        rng = seeding.rng(seed, seeding.SAMPLER, epoch)
        parts = [self._draw(np.flatnonzero(labels == c), target, rng)
                 for c, target in targets.items()]
        plan = rng.permutation(np.concatenate(parts))
        self.sample_indices_ = plan
        return plan


class RandomOverSampler(_RandomSampler):
    """Repeats random samples of the chosen classes up to the target counts, each epoch
    anew. Every original sample stays in the plan."""

    kind = "over"

    @staticmethod
    def _draw(members, target, rng):
        if target == len(members):
            return members
        return np.concatenate([members, rng.choice(members, target - len(members))])


class RandomUnderSampler(_RandomSampler):
    """Keeps a random subset of the chosen classes, down to the target counts, drawn anew
    each epoch (so over several epochs every sample is seen)."""

    kind = "under"

    @staticmethod
    def _draw(members, target, rng):
        if target == len(members):
            return members
        return rng.choice(members, target, replace=False)


class BalancedBatchSampler(_SamplerBase):
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
            warnings.warn("BalancedBatchSampler(n_batches=...) is deprecated: use "
                          "num_batches=.", DeprecationWarning, stacklevel=2)
            num_batches = n_batches
        super().__init__("all", seed)
        self.num_batches = (None if num_batches is None
                            else _checks.positive_int("num_batches", num_batches))

    @property
    def n_batches(self) -> int | None:
        """Deprecated: `num_batches`."""
        warnings.warn("BalancedBatchSampler.n_batches is deprecated: use num_batches.",
                      DeprecationWarning, stacklevel=2)
        return self.num_batches

    @property
    def sampling_strategy_(self) -> dict[Any, int]:
        """Deprecated: the class counts after `fit_resample` are `class_counts_`."""
        warnings.warn("BalancedBatchSampler.sampling_strategy_ is deprecated: the class "
                      "counts after fit_resample are `class_counts_`.", DeprecationWarning,
                      stacklevel=2)
        try:
            return self.class_counts_
        except AttributeError:
            raise AttributeError("'BalancedBatchSampler' object has no attribute "
                                 "'sampling_strategy_' (call fit_resample first)") from None

    def _params(self):
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


class SMOTE(_SamplerBase):
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

    def _params(self):
        return {"k_neighbors": self.k_neighbors, **super()._params()}

    def plan(self, labels: npt.ArrayLike | None, seed: int, epoch: int, features: Any = None,
             **context: Any) -> Plan:
        labels = self._labels(labels)
        targets = _targets(self, labels, context)
        if features is None:
            raise ValueError("SMOTE needs a feature space: arrays give their data; for "
                             "image generators pass features= or let them make thumbnails.")
        rng = seeding.rng(seed, seeding.SAMPLER, epoch)
        neighbors = _neighbor_cache(self, features, labels, targets)
        index_type = np.int32 if len(labels) < 2**31 else np.int64  # plans stay compact
        indices, slots, lams = [], [], []
        for c, target in targets.items():
            members = np.flatnonzero(labels == c).astype(index_type)
            indices.append(members)
            slots.append(np.full(len(members), -1, np.int16))
            lams.append(np.zeros(len(members), np.float32))
            n_new = target - len(members)
            if n_new <= 0:
                continue
            k = neighbors.k_for(c)
            rounds = int(np.ceil(n_new / len(members)))
            bases = np.concatenate([rng.permutation(members) for _ in range(rounds)])[:n_new]
            indices.append(bases)
            slots.append(rng.integers(0, k, n_new).astype(np.int16))
            lams.append(rng.random(n_new, dtype=np.float32))
        indices, slots, lams = (np.concatenate(a) for a in (indices, slots, lams))
        order = _interleave(rng, slots >= 0)
        indices = indices[order]  # one array at a time: the plan's peak memory stays low
        slots = slots[order]
        lams = lams[order]
        del order
        return Plan(indices, slots, lams, neighbors)


def _interleave(rng, synthetic):
    """A random order that keeps the synthetic entries in their given order (so bases are
    met round by round, and neighbor blocks are computed in turn)."""
    index_type = np.int32 if len(synthetic) < 2**31 else np.int64
    order = np.arange(len(synthetic), dtype=index_type)
    rng.shuffle(order)  # in place: no int64 copy of a long plan
    places = np.flatnonzero(synthetic[order]).astype(index_type)
    order[places] = np.flatnonzero(synthetic).astype(index_type)
    return order


def _neighbor_cache(sampler, features, labels, targets):
    """One NeighborCache per (sampler, features, labels): reused across epochs."""
    key = (id(features), id(labels), tuple(sorted(targets.items())))
    cache = getattr(sampler, "_neighbors", None)
    if cache is None or cache.key != key:
        cache = NeighborCache(features, labels, [c for c, t in targets.items()
                                                  if t > (labels == c).sum()],
                               sampler.k_neighbors)
        cache.key = key
        sampler._neighbors = cache
    return cache


class NeighborCache:
    """k nearest same-class neighbors, computed on demand in blocks and kept.

    Uses scikit-learn's NearestNeighbors (exact search), fitted once per class; queries
    run for blocks of consecutive bases as the epoch reaches them.
    """

    def __init__(self, features: Any, labels: np.ndarray, classes: Sequence[int],
                 k_neighbors: int) -> None:
        self.features = features
        self.labels = labels
        self.k = {}
        self.models = {}
        self.members = {}
        self._lock = threading.Lock()
        for c in classes:
            members = np.flatnonzero(labels == c)
            if len(members) < 2:
                raise ValueError(f"SMOTE cannot synthesise class {c}: it has "
                                 f"{len(members)} sample; it needs at least two.")
            k = min(k_neighbors, len(members) - 1)
            if k < k_neighbors:
                warnings.warn(f"Class {c} has {len(members)} samples, fewer than "
                              f"k_neighbors + 1 = {k_neighbors + 1}; SMOTE uses k={k} "
                              "for it.", stacklevel=4)
            self.k[c] = k
            self.members[c] = members
        # Neighbours in one int32 table, a row per sample of the classes to grow
        # (-1: not found yet), and each sample's row.
        self.row = np.full(len(labels), -1, np.int32)
        grown = np.concatenate([self.members[c] for c in classes]) if classes else []
        self.row[grown] = np.arange(len(grown), dtype=np.int32)
        self.table = np.full((len(grown), max(self.k.values(), default=1)), -1, np.int32)
        self._known = 0

    def k_for(self, c: int) -> int:
        """The neighbors searched for class `c` (k_neighbors, less for a small class)."""
        return self.k[c]

    def _model(self, c):
        if c not in self.models:
            try:
                from sklearn.neighbors import NearestNeighbors
            except ImportError as error:
                raise ImportError('SMOTE needs scikit-learn: pip install "kerasgen3[imbalance]" '
                                  "(or pip install scikit-learn)") from error
            points = self._points(self.members[c])
            self.models[c] = NearestNeighbors(n_neighbors=self.k[c] + 1).fit(points)
        return self.models[c]

    def _points(self, indices):
        return np.asarray(self.features[indices], dtype=np.float32).reshape(len(indices), -1)

    def __getstate__(self):
        state = self.__dict__.copy()
        state["_lock"] = None
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def num_known(self) -> int:
        """How many samples' neighbors are known so far."""
        return self._known

    def known(self, bases: np.ndarray) -> bool:
        """Whether the neighbors of every one of `bases` are known."""
        return bool((self.table[self.row[bases], 0] >= 0).all())

    def prepare(self, bases: np.ndarray) -> None:
        """Computes the neighbors of those `bases` not known yet."""
        with self._lock:
            missing = np.unique(bases[self.table[self.row[bases], 0] < 0])
            if len(missing):
                self._compute(missing)

    def resolve(self, bases: np.ndarray, slots: np.ndarray) -> np.ndarray:
        """j for each (base, slot): the slot-th nearest same-class neighbor of base."""
        if not self.known(bases):
            self.prepare(bases)
        return self.table[self.row[bases], slots].astype(np.int64)

    def _compute(self, bases):
        for c in np.unique(self.labels[bases]):
            c = int(c)
            group = bases[self.labels[bases] == c]
            _, found = self._model(c).kneighbors(self._points(group))
            members, k = self.members[c], self.k[c]
            for b, row in zip(group.tolist(), members[found]):
                self.table[self.row[b], :k] = row[row != b][:k]
            self._known += len(group)


def as_sampler(sampler: Any) -> Sampler | None:
    """A `Sampler` (an object with plan(labels, seed, epoch, **context)) for any object
    `sampler=` accepts; None stays None."""
    if sampler is None:
        return None
    plan = getattr(sampler, "plan", None)
    if callable(plan):
        params = inspect.signature(plan).parameters.values()
        if any(p.kind is p.VAR_KEYWORD for p in params):
            return sampler
        return _PlanOnly(sampler)
    if callable(getattr(sampler, "fit_resample", None)):
        return _ImblearnSampler(sampler)
    _checks.fail("sampler", "None, a kg.samplers sampler, an imbalanced-learn sampler or "
                 "an object with a plan(labels, seed, epoch) method", sampler, TypeError)


def check_seed(sampler: Any, seed: int | None) -> None:
    """Refuses a kerasgen sampler built with a `seed` of its own inside a generator whose
    `seed` differs: a generator's order comes from the generator's seed (a sampler's own
    seed serves `fit_resample` only), so that seed would be silently ignored."""
    given = getattr(sampler, "_given_seed", None)
    if given is None or (seed is not None and given == seed):
        return
    drawn = " (None: a seed drawn at random)" if seed is None else ""
    raise ValueError(
        f"`seed` of {type(sampler).__name__}(seed={given!r}) is not used inside a "
        f"generator: the generator's `seed` draws every epoch's plan (a sampler's own seed "
        f"serves fit_resample only). Received: sampler seed={given!r}, generator "
        f"seed={seed!r}{drawn}. Pass seed={given!r} to the generator, and no seed to the "
        f"sampler.")


def identity(sampler: Any) -> str:
    """How a generator's state names `sampler`, so that `set_state` can refuse a state
    saved with another one (grain compares `repr(sampler)` the same way).

    The repr, less what differs between two builds of the same sampler: kerasgen
    samplers' own `seed` (inside a generator the generator's seed draws), an
    imbalanced-learn sampler's `random_state` (the generator sets it each epoch), memory
    addresses (a default repr, a lambda's). A repr over 200 characters is shortened to
    its class and a checksum.
    """
    if isinstance(sampler, _SamplerBase):
        params = {k: v for k, v in sampler._params().items() if k != "seed"}
    elif callable(getattr(sampler, "get_params", None)) and not callable(
            getattr(sampler, "plan", None)):  # an imbalanced-learn sampler
        params = {k: v for k, v in sorted(sampler.get_params(deep=False).items())
                  if k != "random_state"}
    else:
        params = None
    text = repr(sampler) if params is None else "{}({})".format(
        type(sampler).__name__, ", ".join(f"{k}={v!r}" for k, v in params.items()))
    text = re.sub(r" at 0x[0-9a-fA-F]+", "", text)
    if len(text) > 200:
        text = (f"{type(sampler).__module__}.{type(sampler).__qualname__}"
                f"(repr crc32 {zlib.crc32(text.encode()):08x})")
    return text


class _PlanOnly:
    """A sampler whose plan takes (labels, seed, epoch) only (picklable, unlike a lambda)."""

    def __init__(self, sampler):
        self.sampler = sampler

    def plan(self, labels, seed, epoch, **context):
        return self.sampler.plan(labels, seed, epoch)


class _ImblearnSampler:
    """Runs an imbalanced-learn under/over-sampler each epoch with a seed derived from
    (seed, epoch), on the generator's feature space (the data for arrays, `features=` or
    thumbnails for images), and takes its `sample_indices_` as the plan."""

    def __init__(self, sampler):
        self.sampler = sampler

    def plan(self, labels, seed, epoch, **context):
        if labels is None:
            raise ValueError("An imbalanced-learn sampler needs one class label per sample.")
        from sklearn.base import clone

        rng = seeding.rng(seed, seeding.SAMPLER, epoch)
        sampler = clone(self.sampler)
        if "random_state" in sampler.get_params():
            sampler.set_params(random_state=int(rng.integers(2**31)))
        features = context.get("features")
        if features is None:  # Random samplers never look at x
            x = np.arange(len(labels)).reshape(-1, 1)
        else:  # NearMiss, TomekLinks... choose by the features
            x = np.asarray(features[np.arange(len(labels))], np.float32).reshape(len(labels), -1)
        sampler.fit_resample(x, np.asarray(labels))
        if not hasattr(sampler, "sample_indices_"):
            raise TypeError(
                f"{type(sampler).__name__} makes new samples and has no `sample_indices_`, "
                "so it cannot pick samples inside a generator. Use kg.samplers.SMOTE, or "
                "kg.rebalance() on arrays.")
        return rng.permutation(np.asarray(sampler.sample_indices_))


def __getattr__(name):
    if name == "NeighbourCache":  # the old spelling, for one release
        warnings.warn("kerasgen.samplers.NeighbourCache is deprecated: use NeighborCache.",
                      DeprecationWarning, stacklevel=2)
        return NeighborCache
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
