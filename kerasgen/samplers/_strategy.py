"""`sampling_strategy`, exactly as imbalanced-learn reads it: checked in a sampler's
`__init__`, resolved to {class id: count after sampling} when a plan is made.

One function per kind of strategy, found in a table (as imbalanced-learn's
`SAMPLING_TARGET_KIND` finds one per string): `RESOLVERS` maps the kind of a strategy
("name", "ratio", "dict", "callable", see `strategy_kind`) to its resolver, and `NAMED`
maps each string ("auto", "minority", ...) to the function choosing its classes. Every
resolver returns (targets, chosen): the count of every class after sampling (classes not
resampled keep theirs), and the classes the strategy names, for which imbalanced-learn's
`sampling_strategy_` has an entry.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from kerasgen import _checks
from kerasgen._typing import SamplingStrategy

Kind = Literal["over", "under"]
Resolved = tuple[dict[int, int], list[int]]

OVER_STRATEGIES = ("auto", "minority", "not minority", "not majority", "all")
UNDER_STRATEGIES = ("auto", "majority", "not minority", "not majority", "all")


def class_counts(labels: npt.ArrayLike) -> dict[int, int]:
    """{class id: count} for the classes present, ascending ids."""
    ids, counts = np.unique(np.asarray(labels), return_counts=True)
    return {int(c): int(n) for c, n in zip(ids, counts)}


def check_strategy(sampling_strategy: SamplingStrategy, kind: Kind) -> SamplingStrategy:
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


class Classes:
    """What a strategy is resolved against: each class id's count, the sampler's kind,
    and how classes are named (`class_names` inside a generator, or `classes`, the class
    values of fit_resample's y in id order); `y` is what a callable strategy gets."""

    def __init__(self, counts: dict[int, int], kind: Kind,
                 class_names: Sequence[str] | None = None,
                 classes: Sequence[Any] | None = None, y: Any = None) -> None:
        self.counts = counts
        self.kind = kind
        self.class_names = class_names
        self.classes = classes
        self.names = classes if classes is not None else class_names
        self.y = y
        # the first of equal classes, as imbalanced-learn's max/min over its sorted classes
        self.majority = max(counts, key=counts.__getitem__)
        self.minority = min(counts, key=counts.__getitem__)

    def name(self, c: int) -> str:
        """Class id `c` as an error message names it."""
        names = self.names
        return repr(names[c]) if names is not None and c < len(names) else str(c)

    def class_id(self, key: Any) -> int:
        """The class id a dict key of `sampling_strategy` means: a class value of `y` for
        fit_resample (`classes`), or a class id or name inside a generator."""
        if self.classes is not None:
            ids = {value: i for i, value in enumerate(self.classes)}
            if key in ids:
                return ids[key]
        elif isinstance(key, str):
            if self.class_names is not None and key in self.class_names:
                return list(self.class_names).index(key)
        elif isinstance(key, numbers.Integral) and not isinstance(key, bool):
            return int(key)
        present = self.classes if self.classes is not None else self.class_names
        raise ValueError(f"`sampling_strategy` names class {key!r}, which is not present in "
                         f"the data (classes: {present}). Use a class "
                         f"{'of y' if self.classes is not None else 'id or name'}.")


# ------------------------------------------------------------------ the named strategies
def _minority(classes: Classes) -> list[int]:
    return [classes.minority]


def _majority(classes: Classes) -> list[int]:
    return [classes.majority]


def _not_minority(classes: Classes) -> list[int]:
    return [c for c in classes.counts if c != classes.minority]


def _not_majority(classes: Classes) -> list[int]:
    return [c for c in classes.counts if c != classes.majority]


def _all(classes: Classes) -> list[int]:
    return list(classes.counts)


def _auto(classes: Classes) -> list[int]:
    """"auto": every class but the majority when over-sampling, but the minority when
    under-sampling."""
    return _not_majority(classes) if classes.kind == "over" else _not_minority(classes)


NAMED: dict[str, Callable[[Classes], list[int]]] = {
    "auto": _auto,
    "minority": _minority,
    "majority": _majority,
    "not minority": _not_minority,
    "not majority": _not_majority,
    "all": _all,
}


# ------------------------------------------------------------------ one resolver per kind
def resolve_name(strategy: str, classes: Classes) -> Resolved:
    """A string: the classes it names grow to the majority's count (over) or shrink to the
    minority's (under)."""
    chosen = NAMED[strategy](classes)
    counts = classes.counts
    goal = counts[classes.majority] if classes.kind == "over" else counts[classes.minority]
    return {c: (goal if c in chosen else n) for c, n in counts.items()}, chosen


def resolve_ratio(strategy: float, classes: Classes) -> Resolved:
    """A float (two classes only): minority / majority after sampling, with
    imbalanced-learn's truncating arithmetic."""
    counts = classes.counts
    if len(counts) != 2:
        raise ValueError("`sampling_strategy` as a float works for two classes only. "
                         f"Received: sampling_strategy={strategy} with {len(counts)} "
                         "classes; pass a dict {class: count} instead.")
    if classes.kind == "over":
        return _over_by_ratio(strategy, classes)
    return _under_by_ratio(strategy, classes)


def _over_by_ratio(strategy: float, classes: Classes) -> Resolved:
    """imbalanced-learn: int(n_majority * ratio - n) to add, truncated, at least 1."""
    counts, majority = classes.counts, classes.counts[classes.majority]
    out = dict(counts)
    ratio = float(strategy)
    for c, n in counts.items():
        if c == classes.majority:
            continue
        added = int(majority * ratio - n)
        if added <= 0:
            hint = _least_ratio(lambda r: int(majority * r - n) >= 1, (n + 1) / majority)
            raise ValueError(
                f"`sampling_strategy`={strategy} gives class {classes.name(c)} (the "
                f"minority, {n} samples) int({majority} * {strategy} - {n}) = {added} "
                f"samples to add; an over-sampler must add at least one, as in "
                f"imbalanced-learn. {hint}.")
        out[c] = n + added
    return out, [c for c in counts if c != classes.majority]


def _under_by_ratio(strategy: float, classes: Classes) -> Resolved:
    """imbalanced-learn: int(n_minority / ratio) kept, truncated, at most what there is."""
    counts, minority = classes.counts, classes.counts[classes.minority]
    out = dict(counts)
    ratio = float(strategy)
    for c, n in counts.items():
        if c == classes.minority:
            continue
        target = int(minority / ratio)
        if target > n:
            hint = _least_ratio(lambda r: int(minority / r) <= n, minority / (n + 1))
            raise ValueError(
                f"`sampling_strategy`={strategy} would grow class {classes.name(c)} from "
                f"{n} to int({minority} / {strategy}) = {target} samples; an "
                f"under-sampler only removes samples. {hint}.")
        out[c] = target
    return out, [c for c in counts if c != classes.minority]


def _least_ratio(works: Callable[[float], bool], start: float) -> str:
    """How to fix a float `sampling_strategy`: the smallest ratio with two decimals, up to 1,
    for which `works` (imbalanced-learn's truncating rule) holds, searched up from `start`."""
    ratio = max(0.01, math.floor(start * 100) / 100)
    while ratio <= 1:
        if works(ratio):
            return f"Pass a larger ratio: {ratio} is the smallest with two decimals that works"
        ratio = round(ratio + 0.01, 2)
    return "No ratio can: the two classes are equally large"


def resolve_dict(strategy: Mapping[Any, int], classes: Classes) -> Resolved:
    """A dict {class: count}: the count each named class ends with."""
    counts, names = classes.counts, classes.names
    out = dict(counts)
    chosen = []
    for key, value in strategy.items():
        c = classes.class_id(key)
        if c not in counts:
            raise ValueError(f"`sampling_strategy` names class {key!r}, which is not "
                             f"present in the data (classes with samples: "
                             f"{[names[i] if names else i for i in counts]}).")
        value = _checks.non_negative_int(f"sampling_strategy[{key!r}]", value)
        if classes.kind == "over" and value < counts[c]:
            raise ValueError(
                f"An over-sampler only adds samples: class {key!r} has {counts[c]}, "
                f"and sampling_strategy asks for {value}.")
        if classes.kind == "under" and value > counts[c]:
            raise ValueError(
                f"An under-sampler only removes samples: class {key!r} has "
                f"{counts[c]}, and sampling_strategy asks for {value}.")
        out[c] = value
        chosen.append(c)
    return out, chosen


def resolve_callable(strategy: Callable[[Any], Mapping[Any, int]],
                     classes: Classes) -> Resolved:
    """A callable y -> {class: count}: called once, its dict resolved as a dict."""
    returned = strategy(classes.y)
    if not isinstance(returned, Mapping):
        raise ValueError("`sampling_strategy` as a callable must return a dict {class: "
                         f"count}}. Received: it returned {returned!r}.")
    return resolve_dict(returned, classes)


RESOLVERS: dict[str, Callable[[Any, Classes], Resolved]] = {
    "name": resolve_name,
    "ratio": resolve_ratio,
    "dict": resolve_dict,
    "callable": resolve_callable,
}


def strategy_kind(strategy: SamplingStrategy) -> str:
    """The key of `RESOLVERS` for a strategy `check_strategy` accepted."""
    if isinstance(strategy, str):
        return "name"
    if isinstance(strategy, Mapping):
        return "dict"
    if callable(strategy):
        return "callable"
    return "ratio"


def resolve_strategy(labels: npt.ArrayLike, sampling_strategy: SamplingStrategy, kind: Kind,
                     class_names: Sequence[str] | None = None,
                     classes: Sequence[Any] | None = None, y: Any = None) -> Resolved:
    """(target_counts, the class ids the strategy names): imbalanced-learn's
    `sampling_strategy_` has an entry for exactly these classes. A callable gets `y`
    (default: `labels`)."""
    counts = class_counts(labels)
    if len(counts) < 2:
        raise ValueError(f"Resampling needs at least two classes; the labels hold only "
                         f"{list(counts)}.")
    strategy = check_strategy(sampling_strategy, kind)
    about = Classes(counts, kind, class_names, classes, labels if y is None else y)
    return RESOLVERS[strategy_kind(strategy)](strategy, about)


def target_counts(labels: npt.ArrayLike, sampling_strategy: SamplingStrategy,
                  kind: Kind, class_names: Sequence[str] | None = None,
                  *, classes: Sequence[Any] | None = None,
                  y: Any = None) -> dict[int, int]:
    """{class id: count after sampling}, exactly imbalanced-learn's counts.

    kind is "over" or "under"; `labels` hold class ids. Classes that are not resampled keep
    their count. Dict keys (also of a callable's dict) are class ids or `class_names`, or,
    when `classes` (the class values of fit_resample's y, in id order) is given, those
    values. A callable gets `y` (default: `labels`). Ties between equal classes break
    toward the smaller id, as imbalanced-learn's max/min over its sorted classes do.
    """
    return resolve_strategy(labels, sampling_strategy, kind, class_names, classes, y)[0]
