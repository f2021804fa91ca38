"""Samples that are rows of in-memory arrays: `ArraySource`, and `as_arrays` (an array,
or a dict of arrays, checked, with the number of samples it holds)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from kerasgen.arrays import batching
from kerasgen.arrays.batching import is_sparse
from kerasgen import _checks
from kerasgen.sources._batch_request import BatchRequest, load_each

__all__ = ["ArraySource"]


def _array(value: Any) -> Any:
    """An ndarray of `value`, or a scipy.sparse one as CSR (rows taken cheaply), kept
    sparse: batches are its rows made dense."""
    return value.tocsr() if is_sparse(value) else np.asarray(value)


def as_arrays(value: Any, name: str) -> tuple[Any, int]:
    """An ndarray (or a scipy.sparse matrix, as CSR), or a dict of them, with the number
    of samples they hold."""
    if isinstance(value, dict):
        if not value:
            _checks.fail(name, "a non-empty dict of arrays", value)
        arrays = {k: _array(v) for k, v in value.items()}
        lengths = {k: v.shape[0] for k, v in arrays.items()}
        if len(set(lengths.values())) != 1:
            raise ValueError(f"Every array of `{name}` must hold the same number of "
                             f"samples. Received lengths {lengths}.")
        return arrays, next(iter(lengths.values()))
    array = _array(value)
    if array.ndim == 0:
        _checks.fail(name, "an array with one row per sample", value, TypeError)
    return array, array.shape[0]


class ArraySource:
    """Samples that are rows of in-memory arrays.

    Args:
        x: an array (n, ...) or a dict of arrays (multi-input models).
        labels: one label per sample, or None.
        masks: segmentation masks (n, h, w[, 1]) returned as each sample's y, or None.
        class_names: the classes in class-id order, or None.
        describe: names sample i in errors (default: "sample i").
        sparse: batch a scipy.sparse x's rows as a CSR matrix (dtype and rescale
            applied to its stored values, SMOTE's rows blended sparsely) rather than
            dense; each sample alone (`load`) stays dense.
    """

    def __init__(self, x: Any, labels: Any = None, *, masks: np.ndarray | None = None,
                 class_names: Sequence[str] | None = None,
                 describe: Callable[[int], str] | None = None, sparse: bool = False) -> None:
        self.x, self.num_samples = as_arrays(x, "x")
        self.sparse = sparse
        self.labels = labels
        self.masks = masks
        self.class_names = None if class_names is None else list(class_names)
        self._describe = describe

    def __len__(self) -> int:
        return self.num_samples

    @property
    def features(self) -> Any:
        """x, the feature space SMOTE searches (None when x is a dict of arrays)."""
        return None if isinstance(self.x, dict) else self.x

    def describe(self, index: int) -> str:
        return f"sample {index}" if self._describe is None else self._describe(index)

    def load(self, index: int) -> Any:
        if isinstance(self.x, dict):
            x = {k: _row(v, index) for k, v in self.x.items()}
        else:
            x = _row(self.x, index)
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
            if isinstance(x, dict):
                return {k: self._convert(v, request) for k, v in x.items()}, masks
            return self._convert(x, request), masks

    def _convert(self, rows: Any, request: BatchRequest) -> Any:
        if is_sparse(rows):  # its stored values, as a dense batch's would be
            rows.data = batching.convert(rows.data, request.dtype, request.rescale)
            return rows
        return batching.convert(rows, request.dtype, request.rescale, request.buffers)

    def _take(self, array: np.ndarray, request: BatchRequest) -> np.ndarray:
        if is_sparse(array):
            return _sparse_rows(array, request) if self.sparse else _dense_rows(array, request)
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


def _row(array: Any, index: int) -> Any:
    """Row `index` of `array`; of a sparse matrix, made dense."""
    return array[index].toarray()[0] if is_sparse(array) else array[index]


def _dense_rows(matrix: Any, request: BatchRequest) -> np.ndarray:
    """The rows of `request` (SMOTE's blended with their partners) of a sparse matrix,
    made dense straight into the batch's buffer."""
    indices, partners, lams = request.indices, request.partners, request.lams
    rows = request.buffers.empty((len(indices), matrix.shape[1]), matrix.dtype)
    matrix[indices].toarray(out=rows)
    if partners is None or lams is None:
        return rows
    synthetic = partners >= 0
    return batching.blend_rows(rows, matrix[partners[synthetic]].toarray(),
                               lams[synthetic], synthetic)


def _sparse_rows(matrix: Any, request: BatchRequest) -> Any:
    """The rows of `request` of a CSR matrix, as a CSR matrix (canonical: sorted column
    indices, no duplicates). SMOTE's rows, x_i + lam * (x_j - x_i), are computed as a
    dense batch computes them (in float32, rounded for integers), on the columns either
    row stores: made dense they are the dense batch's rows."""
    import scipy.sparse as sp  # type: ignore[import-untyped]

    indices, partners, lams = request.indices, request.partners, request.lams
    rows = matrix[indices]
    rows.sum_duplicates()  # and sorts each row's column indices, as tf.SparseTensor wants
    if partners is None or lams is None or not np.any(partners >= 0):
        return rows
    synthetic = np.flatnonzero(partners >= 0)
    kept = np.flatnonzero(partners < 0)
    base = rows[synthetic].astype(np.float32)
    step = sp.diags(lams[synthetic].astype(np.float32)) @ (
        matrix[partners[synthetic]].astype(np.float32) - base)
    mixed = sp.csr_matrix(base + step)
    if np.issubdtype(matrix.dtype, np.integer):
        mixed.data = np.rint(mixed.data)
    stacked = sp.vstack([rows[kept], mixed.astype(matrix.dtype)], format="csr")
    order = np.empty(len(indices), dtype=np.int64)  # row k of the batch: stacked[order[k]]
    order[np.concatenate([kept, synthetic])] = np.arange(len(indices))
    out = type(rows)(stacked[order])
    out.sum_duplicates()
    return out
