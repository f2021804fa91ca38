"""Windows of a time series: `TimeseriesGenerator` (Keras 2's class of that name, a
PyDataset again) and `timeseries_dataset_from_array` (Keras 3's function, its signature,
defaults and return type).

Both make their windows as views of the series at batch time (`sources._windows`): a
series of n steps stays n steps in memory, whatever the window length, where a window
array written out costs length x n. Both shuffle from kerasgen's seed, take samplers,
workers and `get_state`/`set_state`, and run without TensorFlow (format="tf" aside).
Read against Keras 3.15.1 (`keras/src/utils/timeseries_dataset_utils.py`) and Keras 2.x
(`keras_preprocessing.sequence.TimeseriesGenerator`); what differs is in docs/timeseries.md.
"""

from __future__ import annotations

import numbers
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from kerasgen import _checks
from kerasgen.base import Generator
from kerasgen.builders import array_checks, keras_functions
from kerasgen.builders.common import check_common
from kerasgen.sources._windows import Windows, WindowSource

__all__ = ["TimeseriesGenerator", "timeseries_dataset_from_array"]

LABEL_MODES = ("int", "categorical", "binary", "raw", None)
FORMATS = ("tf", "grain", "kerasgen")


def _series(data: Any, name: str = "data") -> np.ndarray:
    """`data` as an array with time on axis 0 (an array, a list, a DataFrame's values, an
    eager tensor): never copied when it is an array already."""
    if data is None:
        _checks.fail(name, "an array with time on axis 0", data, TypeError)
    series = np.asarray(data)
    if series.ndim == 0:
        _checks.fail(name, "an array with time on axis 0", data, TypeError)
    return series


def _whole(value: Any, name: str, low: int = 1) -> int:
    """`value` as an int of at least `low`, or a ValueError naming `name`."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < low:
        _checks.fail(name, f"an integer of at least {low}", value)
    return int(value)


def _checked_series(series: np.ndarray, name: str, dtype: str | None,
                    rescale: float | None = None) -> None:
    """The series can become batches of `dtype` (checked once, on the series, not on its
    windows)."""
    if dtype is not None:
        array_checks.check_convertible(series, name, dtype)
        array_checks.check_fits(series, name, dtype, rescale)


def _window_source(series: np.ndarray, targets: np.ndarray | None, windows: Windows,
                   common: dict[str, Any]) -> WindowSource:
    _checked_series(series, "data", common.get("dtype", "float32"))
    return WindowSource(series, targets, windows, class_names=common.get("class_names"))


class TimeseriesGenerator(Generator):
    """Keras 2's `TimeseriesGenerator`: batches of windows over a series, and the target of
    the step after each window.

    The sample of row r (r from `start_index + length` to `end_index`, `stride` apart) is
    `data[r - length:r:sampling_rate]`, its target `targets[r]`, as in Keras 2. Windows are
    views of `data` made at batch time: nothing the size of windows x length is ever
    made.

    Args:
        data: the series, time on axis 0 (an array, a list, a DataFrame's `.values`).
        targets: one target per step of `data` (the same length), or None (batches are
            the windows alone).
        length: the steps of `data` before row r a window covers.
        sampling_rate: the period between the steps of a window: a window holds
            ceil(length / sampling_rate) steps.
        stride: the period between successive windows' rows.
        start_index: steps before it are not used (a window's first step is at least
            `start_index`).
        end_index: the last row used (inclusive, as Keras 2); default `len(data) - 1`.
        shuffle: reshuffle the windows each epoch, from (seed, epoch): every window once
            per epoch (Keras 2 drew `batch_size` random rows, with repeats, unseeded).
        reverse: the steps of each window in reverse chronological order.
        batch_size: windows per batch (128, Keras 2's default).
        label_mode: "raw" (default with targets: as given), "int", "categorical" or
            "binary" (targets are classes: the samplers and `class_weights` apply), or
            None (windows alone).
        **common: seed, dtype ("float32" by default; None keeps data's own), sampler,
            augment (each window), batch_augment, drop_remainder, workers,
            use_multiprocessing, ... (see `kg.Generator`).

    `gen.data`, `gen.targets`, `gen.length`, `gen.sampling_rate`, `gen.stride`,
    `gen.start_index` (Keras 2's: the given one plus `length`), `gen.end_index`,
    `gen.reverse` are Keras 2's attributes.
    """

    def __init__(self, data: npt.ArrayLike, targets: npt.ArrayLike | None, length: int,
                 sampling_rate: int = 1, stride: int = 1, start_index: int = 0,
                 end_index: int | None = None, shuffle: bool = False, reverse: bool = False,
                 batch_size: int = 128, *,
                 label_mode: Literal["int", "categorical", "binary", "raw"] | None = "raw",
                 **common: Any) -> None:
        check_common(self, common)
        series = _series(data)
        target_array = None if targets is None else _series(targets, "targets")
        if target_array is not None and len(target_array) != len(series):
            raise ValueError(
                "`data` and `targets` must have the same length (one target per step). "
                f"Received: len(data)={len(series)}, len(targets)={len(target_array)}.")
        length = _whole(length, "length")
        sampling_rate = _whole(sampling_rate, "sampling_rate")
        stride = _whole(stride, "stride")
        start_index = _whole(start_index, "start_index", 0)
        if end_index is None:
            end_index = len(series) - 1
        end_index = _whole(end_index, "end_index", 0)
        if end_index >= len(series):
            raise ValueError(
                f"`end_index` must be a step of `data` (below its length, {len(series)}). "
                f"Received: end_index={end_index}.")
        if start_index + length > end_index:
            raise ValueError(
                f"`start_index + length` must be at most `end_index`, so that a row is "
                f"left to be the target of a window. Received: start_index={start_index}, "
                f"length={length}, end_index={end_index} ({start_index} + {length} > "
                f"{end_index}).")
        _checks.one_of("label_mode", label_mode, LABEL_MODES)
        if target_array is None:
            label_mode = None
        windows = Windows(first=start_index, stride=stride,
                          count=(end_index - start_index - length) // stride + 1,
                          steps=len(range(0, length, sampling_rate)), rate=sampling_rate,
                          target_first=start_index + length, reverse=bool(reverse))
        source = _window_source(series, target_array, windows, common)
        super().__init__(source=source, batch_size=batch_size, shuffle=shuffle,
                         label_mode=label_mode, **common)
        self.length, self.sampling_rate, self.stride = length, sampling_rate, stride
        self.reverse = bool(reverse)
        self.start_index, self.end_index = start_index + length, end_index

    @property
    def data(self) -> np.ndarray:
        """The series (as an array; the one the windows are views of)."""
        return self.source.series

    @property
    def targets(self) -> np.ndarray | None:
        """The targets, one per step (as an array), or None."""
        return self.source.targets

    @property
    def windows(self) -> Windows:
        """Where the windows and their targets lie in the series."""
        return self.source.windows


def timeseries_dataset_from_array(
    data: npt.ArrayLike,
    targets: npt.ArrayLike | None,
    sequence_length: int,
    sequence_stride: int = 1,
    sampling_rate: int = 1,
    batch_size: int | None = 128,
    shuffle: bool = False,
    seed: int | None = None,
    start_index: int | None = None,
    end_index: int | None = None,
    format: Literal["tf", "grain", "kerasgen"] = "tf",
    **options: Any,
) -> Any:
    """Keras's `keras.utils.timeseries_dataset_from_array`, made by kerasgen.

    Same arguments, defaults and meaning as Keras's: window i holds
    `data[start_index + i * sequence_stride + k * sampling_rate]` for k below
    `sequence_length`, and its target is `targets[start_index + i * sequence_stride]`
    (`targets[i]` is the target of the window starting at step i; give `data[:-d]` and
    `data[d:]` to predict d steps ahead). What Keras returns:

    - `format="tf"` (default): a `tf.data.Dataset` of `(windows, targets)` batches
      (windows alone with `targets=None`; single windows with `batch_size=None`). Every
      pass over it is a new epoch of the generator behind it.
    - `format="grain"`: a `grain.IterDataset` (pip install grain); runs without
      TensorFlow, as Keras's.
    - `format="kerasgen"`: the `kg.Generator` itself (a PyDataset), for any backend.

    Batches keep the data's and targets' dtypes, as Keras's. `**options` are
    `kg.Generator`'s (`dtype`, `sampler`, `batch_augment`, `workers`, ...). The dataset's
    `generator` is the kerasgen generator making its batches (`get_state()`, `epoch`).

    Where kerasgen differs (docs/timeseries.md):
        - `shuffle=True` draws a new order of every window each epoch from (seed,
          epoch); Keras shuffles the windows once and then within a buffer of 8 batches.
        - A series with no room for one window, or targets too short for the windows, is
          a ValueError naming them (Keras returns an empty dataset, or fails mid-epoch);
          so is `end_index=0`, which Keras reads as "no end".
    """
    series = _series(data)
    target_array = None if targets is None else _series(targets, "targets")
    _check_keras_arguments(len(series), start_index, end_index, sampling_rate,
                           sequence_stride, format)
    sequence_length = _whole(sequence_length, "sequence_length")
    keras_functions.check_unbatched(batch_size, format, options, "windows")
    first = start_index or 0
    end = len(series) if end_index is None else end_index
    room = end - first - (sequence_length - 1) * sampling_rate  # Keras's num_seqs
    if room < 1:
        raise ValueError(
            "`sequence_length` must leave room for one window between `start_index` and "
            f"`end_index`: a window spans (sequence_length - 1) * sampling_rate + 1 = "
            f"{(sequence_length - 1) * sampling_rate + 1} steps, and {end - first} are "
            f"there. Received: sequence_length={sequence_length}, "
            f"sampling_rate={sampling_rate}, start_index={start_index}, "
            f"end_index={end_index}, for data of length {len(series)}.")
    if target_array is not None:
        room = min(room, len(target_array))  # as Keras: targets may end the windows
        if room < 1 or (
                first + (room - 1) // sequence_stride * sequence_stride >= len(target_array)):
            raise ValueError(
                "`targets` must hold the target of every window: window i takes "
                "targets[start_index + i * sequence_stride]. Received: targets of length "
                f"{len(target_array)} with start_index={start_index}, which leaves no "
                "target for the last windows. Pass targets as long as data.")
    windows = Windows(first=first, count=(room - 1) // sequence_stride + 1,
                      stride=sequence_stride, steps=sequence_length, rate=sampling_rate,
                      target_first=first)
    options.setdefault("dtype", None)  # Keras's batches keep the data's dtype
    options.setdefault("label_mode", None if target_array is None else "raw")
    unbatched = batch_size is None
    # unbatched: batches of 32 that tf.data unbatches, single windows for grain
    size = (1 if format == "grain" else 32) if batch_size is None else batch_size
    source = _window_source(series, target_array, windows, options)
    gen = Generator(source=source, shuffle=shuffle, seed=seed, batch_size=size, **options)
    return keras_functions.dataset_of(gen, format, unbatched)


def _check_keras_arguments(size, start_index, end_index, sampling_rate, sequence_stride,
                           format):
    """Keras's own checks, in Keras's order, with kerasgen's messages."""
    if start_index is not None:
        _whole(start_index, "start_index", 0)
        if start_index >= size:
            raise ValueError(f"`start_index` must be lower than the length of the data "
                             f"({size}). Received: start_index={start_index}.")
    if end_index is not None:
        _whole(end_index, "end_index", 1)
        if start_index and end_index <= start_index:
            raise ValueError("`end_index` must be higher than `start_index`. Received: "
                             f"start_index={start_index}, end_index={end_index}.")
        if end_index >= size:
            raise ValueError(f"`end_index` must be lower than the length of the data "
                             f"({size}); None reads to its end. Received: "
                             f"end_index={end_index}.")
    for name, value in (("sampling_rate", sampling_rate),
                        ("sequence_stride", sequence_stride)):
        _whole(value, name)
        if value >= size:
            raise ValueError(f"`{name}` must be lower than the length of the data "
                             f"({size}). Received: {name}={value}.")
    if format not in FORMATS:
        _checks.fail("format", "'tf' (a tf.data.Dataset), 'grain' (a grain.IterDataset) "
                     "or 'kerasgen' (the kg.Generator)", format)
