"""What a generator does with the `sampler=` it is given: adapts it to a `Sampler`
(`as_sampler`), refuses a kerasgen sampler's own seed that would go unused
(`check_seed`), and names it for its saved state (`identity`)."""

from __future__ import annotations

import inspect
import re
import zlib
from typing import Any

import numpy as np
import numpy.typing as npt

from kerasgen import _checks
from kerasgen import _seeding as seeding
from kerasgen.samplers._plan import Plan, Sampler
from kerasgen.samplers._resampler import Resampler


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
        return PlanOnly(sampler)
    if callable(getattr(sampler, "fit_resample", None)):
        return ImblearnSampler(sampler)
    _checks.fail("sampler", "None, a kg.samplers sampler, an imbalanced-learn sampler or "
                 "an object with a plan(labels, seed, epoch) method", sampler, TypeError)


def check_seed(sampler: Any, seed: int | None) -> None:
    """Refuses a kerasgen sampler built with a `seed` of its own inside a generator whose
    `seed` differs: a generator's order comes from the generator's seed (a sampler's own
    seed serves `fit_resample` only), so that seed would be silently ignored."""
    given = sampler.given_seed if isinstance(sampler, Resampler) else None
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
    if isinstance(sampler, Resampler):
        params = {k: v for k, v in sampler.get_params().items() if k != "seed"}
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
        text = f"{_class_path(type(sampler))}(repr crc32 {zlib.crc32(text.encode()):08x})"
    return text


def _class_path(cls: type) -> str:
    """Where `cls` is imported from: kg.samplers' own classes by their public module
    (where states saved before they moved to modules of their own found them), any other
    where it is defined."""
    if cls.__module__.startswith("kerasgen.") and cls.__qualname__ in PUBLIC_CLASSES:
        return f"kerasgen.samplers.{cls.__qualname__}"
    return f"{cls.__module__}.{cls.__qualname__}"


# the classes kg.samplers re-exports from the modules that define them (named here, not
# imported: kerasgen.samplers imports this module); tests/test_samplers.py checks the list
PUBLIC_CLASSES = frozenset({
    "BalancedBatchSampler", "Memo", "NeighborCache", "Plan", "RandomOverSampler",
    "RandomUnderSampler", "SMOTE", "Sampler", "Sequential", "Shuffle"})


class PlanOnly:
    """A sampler whose plan takes (labels, seed, epoch) only (picklable, unlike a lambda)."""

    def __init__(self, sampler: Any) -> None:
        self.sampler = sampler

    def plan(self, labels: npt.ArrayLike | None, seed: int, epoch: int,
             **context: Any) -> np.ndarray | Plan:
        return self.sampler.plan(labels, seed, epoch)


class ImblearnSampler:
    """Runs an imbalanced-learn under/over-sampler each epoch with a seed derived from
    (seed, epoch), on the generator's feature space (the data for arrays, `features=` or
    thumbnails for images), and takes its `sample_indices_` as the plan."""

    def __init__(self, sampler: Any) -> None:
        self.sampler = sampler

    def plan(self, labels: npt.ArrayLike | None, seed: int, epoch: int,
             **context: Any) -> np.ndarray:
        if labels is None:
            raise ValueError("An imbalanced-learn sampler needs one class label per sample.")
        from sklearn.base import clone

        labels = np.asarray(labels)
        rng = seeding.rng(seed, seeding.SAMPLER, epoch)
        sampler = clone(self.sampler)
        if "random_state" in sampler.get_params():
            sampler.set_params(random_state=int(rng.integers(2**31)))
        features = context.get("features") if _reads_features(sampler) else None
        rows = _feature_rows(features, len(labels))
        bad = sorted(getattr(features, "bad", ()))  # skipped files: no features, left out
        keep = np.setdiff1d(np.arange(len(labels)), bad)
        sampler.fit_resample(rows[keep], labels[keep])
        if not hasattr(sampler, "sample_indices_"):
            raise TypeError(
                f"{type(sampler).__name__} makes new samples and has no `sample_indices_`, "
                "so it cannot pick samples inside a generator. Use kg.samplers.SMOTE, or "
                "kg.rebalance() on arrays.")
        return rng.permutation(keep[np.asarray(sampler.sample_indices_)])


def _reads_features(sampler: Any) -> bool:
    """Whether an imbalanced-learn sampler chooses by x: all but the random ones (a
    RandomOverSampler with `shrinkage` makes new samples from x)."""
    name = type(sampler).__name__
    if not type(sampler).__module__.startswith("imblearn."):
        return True
    if name == "RandomUnderSampler":
        return False
    return not (name == "RandomOverSampler" and sampler.get_params().get("shrinkage") is None)


def _feature_rows(features: Any, num_samples: int) -> np.ndarray:
    """The x an imbalanced-learn sampler is fitted on: the feature space as float32 rows
    (NearMiss, TomekLinks... choose by it), or the sample numbers where there is none
    (the random samplers never look at x)."""
    if features is None:
        return np.arange(num_samples).reshape(-1, 1)
    rows = np.asarray(features[np.arange(num_samples)], np.float32)
    return rows.reshape(num_samples, -1)
