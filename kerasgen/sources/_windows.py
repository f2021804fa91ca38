"""Samples that are windows of one series: `Windows` (where each window and its target lie)
and `WindowSource` (the windows as rows of a view of the series, never a copy of it).

Window i holds the steps `first + i * stride + k * rate` (k < steps) of the series, and its
target is `targets[target_first + i * stride]`. The windows are a strided view made once
(`numpy.lib.stride_tricks.sliding_window_view`): a batch copies only its own windows, so a
series of n steps costs n steps of memory, not windows x steps. Keras's
`timeseries_dataset_from_array` and Keras 2's `TimeseriesGenerator` both map onto it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from kerasgen.arrays import batching
from kerasgen.sources._arrays import ArraySource
from kerasgen.sources._batch_request import BatchRequest

__all__ = ["WindowFeatures", "WindowSource", "Windows"]


@dataclass(frozen=True)
class Windows:
    """Where `count` windows lie in a series: window i starts at step
    `first + i * stride` and holds `steps` steps `rate` apart (reversed in time with
    `reverse`); its target is the target at `target_first + i * stride`."""

    first: int
    count: int
    stride: int
    steps: int
    rate: int
    target_first: int = 0
    reverse: bool = False

    @property
    def span(self) -> int:
        """The steps of the series one window covers, first to last."""
        return (self.steps - 1) * self.rate + 1

    @property
    def last_step(self) -> int:
        """The last step of the series any window reads."""
        return self.first + (self.count - 1) * self.stride + self.span - 1

    @property
    def last_target(self) -> int:
        """The last target any window takes."""
        return self.target_first + (self.count - 1) * self.stride

    def steps_of(self, index: int) -> range:
        """The steps of the series window `index` holds, in its order."""
        start = self.first + index * self.stride
        steps = range(start, start + self.span, self.rate)
        return steps[::-1] if self.reverse else steps

    def step_indices(self, windows: np.ndarray) -> np.ndarray:
        """The steps of the series each of `windows` holds, (len(windows), steps)."""
        offsets = np.arange(self.steps, dtype=np.intp) * self.rate
        if self.reverse:
            offsets = offsets[::-1]
        starts = self.first + np.asarray(windows, dtype=np.intp) * self.stride
        return starts[:, None] + offsets

    def view(self, series: np.ndarray) -> np.ndarray:
        """The windows of `series`, (count, steps, ...): a read-only view of it."""
        every = np.lib.stride_tricks.sliding_window_view(series, self.span, axis=0)
        rows = every[self.first:self.first + (self.count - 1) * self.stride + 1:self.stride]
        windows = np.moveaxis(rows, -1, 1)[:, ::self.rate]
        return windows[:, ::-1] if self.reverse else windows

    def target_view(self, targets: np.ndarray) -> np.ndarray:
        """The windows' targets, (count, ...): a view of `targets`."""
        return targets[self.target_first:self.last_target + 1:self.stride]


class WindowFeatures:
    """The windows as a sampler's feature space (SMOTE's neighbour search, an
    imbalanced-learn sampler's rows): rows gathered from the series when asked, never
    all written out; pickled as the series and the geometry."""

    def __init__(self, series: np.ndarray, windows: Windows) -> None:
        self.series, self.windows = series, windows

    def __len__(self) -> int:
        return self.windows.count

    @property
    def shape(self) -> tuple[int, ...]:
        return (self.windows.count, self.windows.steps) + self.series.shape[1:]

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def dtype(self) -> np.dtype:
        return self.series.dtype

    def __getitem__(self, indices: Any) -> np.ndarray:
        rows = np.asarray(indices)
        gathered = np.take(self.series, self.windows.step_indices(rows.reshape(-1)), axis=0)
        return gathered[0] if rows.ndim == 0 else gathered


class WindowSource(ArraySource):
    """Windows of one series as samples (see the module's docstring).

    Args:
        series: the series, time on axis 0, (n, ...).
        targets: one target per step (indexed by `windows.target_first + i * stride`),
            or None.
        windows: where the windows and their targets lie; every step and target they
            read must be in `series` and `targets` (the builders check it).
        class_names: the classes in class-id order, or None.
    """

    def __init__(self, series: np.ndarray, targets: np.ndarray | None, windows: Windows,
                 *, class_names: Any = None) -> None:
        if windows.count < 1 or windows.last_step >= len(series) or (
                targets is not None and windows.last_target >= len(targets)):
            raise ValueError(f"{windows} reads past the series ({len(series)} steps) or "
                             "its targets.")
        # C order: a batch is one np.take of the series's rows (which would copy a strided
        # series whole, each time), written straight into the batch's buffer
        series = np.ascontiguousarray(series)
        self.series, self.targets, self.windows = series, targets, windows
        labels = None if targets is None else windows.target_view(targets)
        super().__init__(windows.view(series), labels, class_names=class_names)

    @property
    def features(self) -> WindowFeatures:
        """The windows as a sampler's feature space, gathered when asked (the view itself
        would be written out whole by a pickle or by `np.asarray`)."""
        return WindowFeatures(self.series, self.windows)

    def describe(self, index: int) -> str:
        steps = self.windows.steps_of(index)
        return (f"window {index} (steps {steps[0]} to {steps[-1]} of the series"
                + ("" if self.targets is None else
                   f", target {self.windows.target_first + index * self.windows.stride}")
                + ")")

    def _take(self, array: np.ndarray, request: BatchRequest) -> np.ndarray:
        """The windows of `request` (SMOTE's blended with their partners), gathered from
        the series by step index (np.take of the windows' view would copy it whole)."""
        indices, partners, lams = request.indices, request.partners, request.lams
        rows = request.buffers.empty((len(indices),) + array.shape[1:], self.series.dtype)
        np.take(self.series, self.windows.step_indices(indices), axis=0, out=rows)
        if partners is None or lams is None:
            return rows
        synthetic = partners >= 0
        others = np.take(self.series, self.windows.step_indices(partners[synthetic]), axis=0)
        return batching.blend_rows(rows, others, lams[synthetic], synthetic)

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled as the series and the geometry (worker processes get the series once,
        never the windows written out)."""
        return (WindowSource, (self.series, self.targets, self.windows),
                {"class_names": self.class_names})

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.class_names = state["class_names"]
