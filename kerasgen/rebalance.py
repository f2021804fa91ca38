"""Standalone rebalancing of arrays, and class weights for `fit(class_weight=...)`."""

from __future__ import annotations

from typing import Any, Literal, overload

import numpy as np
import numpy.typing as npt

from kerasgen import _checks, samplers
from kerasgen._typing import SamplingStrategy

Method = Literal["smote", "oversample", "undersample"]

METHODS = {
    "smote": samplers.SMOTE,
    "oversample": samplers.RandomOverSampler,
    "undersample": samplers.RandomUnderSampler,
}


@overload
def rebalance(x: np.ndarray, y: np.ndarray, method: Method = ...,
              sampling_strategy: SamplingStrategy = ..., k_neighbors: int = ...,
              seed: int | None = ...) -> tuple[np.ndarray, np.ndarray]: ...


@overload
def rebalance(x: Any, y: Any, method: Method = ..., sampling_strategy: SamplingStrategy = ...,
              k_neighbors: int = ..., seed: int | None = ...) -> tuple[Any, Any]: ...


def rebalance(x: Any, y: Any, method: Method = "smote",
              sampling_strategy: SamplingStrategy = "auto", k_neighbors: int = 5,
              seed: int | None = 0) -> tuple[Any, Any]:
    """Returns (x_res, y_res): arrays resampled by `method`.

    method: "smote" (synthetic samples on segments between same-class neighbours),
    "oversample" (random repeats) or "undersample" (random subset). x may have any rank
    (tabular rows, images (n, h, w, c), sequences). y takes the forms imbalanced-learn
    takes: 1-D class labels of any type (ints, strings, ...) or one-hot rows; y_res comes
    back in the form, shape and dtype given (one-hot in, one-hot out), as does x_res.
    sampling_strategy as in imbalanced-learn, with its exact counts and errors (see
    docs/imbalance.md); dict keys are values of y. The result is shuffled from `seed`.
    Arrays in, arrays out; a list, a pandas Series or DataFrame comes back as one.
    """
    _checks.one_of("method", method, tuple(METHODS))
    if method == "smote":
        sampler = samplers.SMOTE(k_neighbors, sampling_strategy, seed)
    else:
        sampler = METHODS[method](sampling_strategy, seed)
    return sampler.fit_resample(x, y)


def class_weights(y: npt.ArrayLike) -> dict[int, float]:
    """{class id: weight} with scikit-learn's "balanced" formula,
    n_samples / (n_classes * count), for the classes present in `y`.

    `y` holds class ids (or one-hot rows, which are turned into ids).
    """
    ids = np.asarray(y)
    if ids.ndim == 2 and ids.shape[1] > 1:
        ids = ids.argmax(axis=1)
    ids = ids.reshape(-1)
    if ids.size == 0:
        raise ValueError("`y` must hold at least one label. Received: an empty array.")
    counts = samplers.class_counts(ids)
    n, k = ids.size, len(counts)
    return {c: n / (k * count) for c, count in counts.items()}
