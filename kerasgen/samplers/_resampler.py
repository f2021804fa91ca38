"""What kerasgen's imbalance samplers share: parameters stored as given, their repr, and
`fit_resample` (a plan realised over arrays, imbalanced-learn's way).

`Resampler` is the base of them all (`BalancedBatchSampler` directly);
`StrategyResampler` adds `sampling_strategy`, checked and resolved as imbalanced-learn
does (`samplers._strategy`), for the over- and under-samplers. Learned attributes (ending in `_`)
are set by `fit_resample` only, never by `plan`: a plan is a pure function of its
arguments, and one sampler object may serve several generators at once.
"""

from __future__ import annotations

from typing import Any, Literal, overload

import numpy as np
import numpy.typing as npt

from kerasgen.samplers import _resample_arrays
from kerasgen import _seeding as seeding
from kerasgen.samplers import _strategy as strategy_mod
from kerasgen.samplers._plan import Plan, realise
from kerasgen._typing import SamplingStrategy

Resolved = tuple[dict[int, int], list[int]]


class Resampler:
    """Shared parts of kerasgen's imbalance samplers: parameters stored as given, repr,
    and `fit_resample`. A sampler of your own needs none of it: see `Sampler`."""

    kind: Literal["over", "under"] | None = None

    def __init__(self, sampling_strategy: SamplingStrategy = "auto",
                 seed: int | None = None) -> None:
        if self.kind is not None:
            strategy_mod.check_strategy(sampling_strategy, self.kind)
        self.sampling_strategy = sampling_strategy
        self._given_seed = seed  # None: drawn (check_seed tells the two apart)
        self.seed = seeding.resolve_seed(seed)

    @property
    def given_seed(self) -> int | None:
        """The `seed` passed to `__init__` (None: `seed` was drawn at random)."""
        return self._given_seed

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """The parameters as `__init__` took them (what `repr` shows), as imbalanced-learn's
        samplers give theirs (`deep` is scikit-learn's argument; there is nothing nested
        to go into)."""
        return {"sampling_strategy": self.sampling_strategy, "seed": self.seed}

    def __repr__(self) -> str:
        params = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({params})"

    def _labels(self, labels: npt.ArrayLike | None) -> np.ndarray:
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
        context: dict[str, Any] = {"classes": y_classes.classes, "y": y_classes.labels}
        resolved = self._resolve_for_fit(y_classes)  # a callable strategy called once
        if resolved is not None:
            context["targets"] = resolved[0]
        plan = self.plan(y_classes.ids, self.seed, 0,
                         features=x_rows.reshape(len(x_rows), -1), **context)
        x_res, y_res = realise(plan, x_rows, y_classes.rows)
        self._learn(plan, y_classes, resolved)
        return _resample_arrays.restore(x_res, x), _resample_arrays.restore(y_res, y)

    def _resolve_for_fit(self, y_classes: _resample_arrays.ClassLabels) -> Resolved | None:
        """(targets, chosen) of `sampling_strategy` over fit_resample's y (None: the
        sampler has no strategy)."""
        return None

    def _learn(self, plan: np.ndarray | Plan, y_classes: _resample_arrays.ClassLabels,
               resolved: Resolved | None) -> None:
        """Sets the learned attributes of fit_resample: `class_counts_`."""
        taken = plan.indices if isinstance(plan, Plan) else np.asarray(plan)
        value = y_classes.classes
        self.class_counts_ = {value[c]: n for c, n in
                              strategy_mod.class_counts(y_classes.ids[taken]).items()}


class StrategyResampler(Resampler):
    """A sampler with imbalanced-learn's `sampling_strategy` (`kind` "over" or "under"):
    target counts resolved for each plan, `sampling_strategy_` learned by fit_resample."""

    kind: Literal["over", "under"]  # set by each subclass

    def _targets(self, labels: np.ndarray, context: dict[str, Any]) -> dict[int, int]:
        """target_counts for a plan: class names inside a generator, the class values of
        y (and y for a callable) from fit_resample, which resolves them first."""
        if context.get("targets") is not None:
            return context["targets"]
        return strategy_mod.target_counts(labels, self.sampling_strategy, self.kind,
                                          context.get("class_names"),
                                          classes=context.get("classes"), y=context.get("y"))

    def _resolve_for_fit(self, y_classes: _resample_arrays.ClassLabels) -> Resolved:
        return strategy_mod.resolve_strategy(y_classes.ids, self.sampling_strategy, self.kind,
                                             None, y_classes.classes, y_classes.labels)

    def _learn(self, plan: np.ndarray | Plan, y_classes: _resample_arrays.ClassLabels,
               resolved: Resolved | None) -> None:
        """Sets `class_counts_` and imbalanced-learn's `sampling_strategy_`:
        {class: samples to add} for an over-sampler, {class: count to keep} for an
        under-sampler, for the classes resampled."""
        super()._learn(plan, y_classes, resolved)
        assert resolved is not None  # this class's _resolve_for_fit never returns None
        targets, chosen = resolved
        counts = strategy_mod.class_counts(y_classes.ids)
        value = y_classes.classes
        self.sampling_strategy_ = {
            value[c]: targets[c] - counts[c] if self.kind == "over" else targets[c]
            for c in sorted(set(chosen))}
