"""Samples that are rows of in-memory arrays: `ArraySource`, and `as_arrays` (an array,
or a dict of arrays, checked, with the number of samples it holds)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from kerasgen.arrays import batching
from kerasgen import _checks
from kerasgen.sources._batch_request import BatchRequest, load_each

__all__ = ["ArraySource"]


def as_arrays(value: Any, name: str) -> tuple[Any, int]:
    """An ndarray, or a dict of ndarrays, with the number of samples they hold."""
    if isinstance(value, dict):
        if not value:
            _checks.fail(name, "a non-empty dict of arrays", value)
        arrays = {k: np.asarray(v) for k, v in value.items()}
        lengths = {k: len(v) for k, v in arrays.items()}
        if len(set(lengths.values())) != 1:
            raise ValueError(f"Every array of `{name}` must hold the same number of "
                             f"samples. Received lengths {lengths}.")
        return arrays, next(iter(lengths.values()))
    array = np.asarray(value)
    if array.ndim == 0:
        _checks.fail(name, "an array with one row per sample", value, TypeError)
    return array, len(array)


class ArraySource:
    """Samples that are rows of in-memory arrays.

    Args:
        x: an array (n, ...) or a dict of arrays (multi-input models).
        labels: one label per sample, or None.
        masks: segmentation masks (n, h, w[, 1]) returned as each sample's y, or None.
        class_names: the classes in class-id order, or None.
        describe: names sample i in errors (default: "sample i").
    """

    def __init__(self, x: Any, labels: Any = None, *, masks: np.ndarray | None = None,
                 class_names: Sequence[str] | None = None,
                 describe: Callable[[int], str] | None = None) -> None:
        self.x, self.num_samples = as_arrays(x, "x")
        self.labels = labels
        self.masks = masks
        self.class_names = None if class_names is None else list(class_names)
        self._describe = describe

    def __len__(self) -> int:
        return self.num_samples

    @property
    def features(self) -> np.ndarray | None:
        """x, the feature space SMOTE searches (None when x is a dict of arrays)."""
        return None if isinstance(self.x, dict) else self.x

    def describe(self, index: int) -> str:
        return f"sample {index}" if self._describe is None else self._describe(index)

    def load(self, index: int) -> Any:
        if isinstance(self.x, dict):
            x = {k: v[index] for k, v in self.x.items()}
        else:
            x = self.x[index]
        return x if self.masks is None else (x, self.masks[index])

    def load_batch(self, request: BatchRequest) -> tuple[Any, Any]:
        """Rows taken in one vectorised step per array (sample by sample when
        augmenting)."""
        if request.augment is not None:
            return load_each(request, self.load, self.describe)
        indices = request.indices
        x: Any
        with request.stage("read"):
            if isinstance(self.x, dict):
                x = {k: self._take(v, request) for k, v in self.x.items()}
            else:
                x = self._take(self.x, request)
            masks = None if self.masks is None else np.take(self.masks, indices, axis=0)
        with request.stage("assemble"):
            return batching.convert(x, request.dtype, request.rescale,
                                    request.buffers), masks

    def _take(self, array: np.ndarray, request: BatchRequest) -> np.ndarray:
        indices, partners, lams = request.indices, request.partners, request.lams
        rows = None
        if array.dtype != object:
            rows = request.buffers.empty((len(indices),) + array.shape[1:], array.dtype)
        rows = np.take(array, indices, axis=0, out=rows)
        if partners is None or lams is None:
            return rows
        synthetic = partners >= 0
        return batching.blend_rows(rows, np.take(array, partners[synthetic], axis=0),
                                   lams[synthetic], synthetic)
