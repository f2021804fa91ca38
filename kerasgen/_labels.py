"""Label encoding: per-sample targets are encoded once, batches are gathered from them."""

from __future__ import annotations

import numbers
import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from kerasgen import _checks
from kerasgen.pipeline import batching
from kerasgen import _redact

LABEL_MODES = ("int", "categorical", "binary", "multi_label", "raw", "mask", "input", "boxes",
               "image", None)
MASK_FORMATS = ("ids", "one_hot")
CLASS_MODES = ("int", "categorical", "binary")

# How errors name sample (or row) i: a file, a row of a table...
Describe = Callable[[int], str]


def _plain(value: Any) -> Any:
    """A NumPy scalar as the Python value it holds, for names and messages."""
    return value.item() if isinstance(value, np.generic) else value


def _row_name(describe: Describe | None, i: int) -> str:
    return describe(i) if describe is not None else f"sample {i}"


def _is_missing(value: Any) -> bool:
    if value is None or type(value).__name__ in ("NAType", "NaTType"):  # pandas' pd.NA, NaT
        return True
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        # numpy's stubs take no numbers.Real, which np.isnan takes at run time
        return bool(np.isnan(value))  # type: ignore[call-overload]
    return isinstance(value, str) and value.strip() == ""


class Targets:
    """What a generator knows of its samples' targets.

    label_mode: the encoding of `batch` (None: no labels encoded; also for masks);
    class_ids: one int class id per sample, the `labels=` given (class names or ids) as
    ids into class_names (None for multi-label or non-class targets); multi_hot:
    (n, num_classes) uint8 for multi-label; raw: the targets as given (array or dict of
    arrays). `batch(indices)` builds y for one batch from the labels. A generator's
    targets (`generator_targets`) also know its mask_format (None unless its y are the
    masks loaded with the samples) and sample_weight; `for_batch` and `weights` then
    give a whole batch's targets.
    """

    def __init__(self, label_mode: str | None, class_ids: np.ndarray | None = None,
                 multi_hot: np.ndarray | None = None, raw: Any = None,
                 class_names: Iterable[str] | None = None,
                 num_classes: int | None = None) -> None:
        self.label_mode = label_mode
        self.class_ids = class_ids
        self.multi_hot = multi_hot
        self.raw = raw
        self.class_names = list(class_names) if class_names is not None else None
        self.num_classes = num_classes
        self.mask_format: str | None = None
        self.sample_weight: np.ndarray | None = None

    def for_batch(self, indices: np.ndarray, loaded: Any, describe: Describe,
                  owner: str) -> Any:
        """y of the batch of samples `indices`, from the y that the generator's
        `load_batch` returned (`loaded`): the masks encoded (mask mode), the labels
        encoded (a label mode; then nothing may be loaded), else `loaded` as it is.
        `describe` names a sample, `owner` the generator's class, in errors."""
        if self.mask_format is not None:
            if loaded is None:
                raise ValueError(f"label_mode='mask' needs masks, but {owner} loaded none: "
                                 "load_sample must return (x, mask).")
            return encode_masks(loaded, self.num_classes, self.mask_format, describe,
                                indices)
        if self.label_mode is None:
            return loaded
        if self.label_mode == "input":
            return None  # the input itself, once augmented: BatchMaker makes it
        if self.label_mode in ("boxes", "image"):  # the source loaded them
            if loaded is None:
                what, use = (("boxes", "kg.DetectionGenerator") if self.label_mode == "boxes"
                             else ("target images", "target_dir="))
                raise ValueError(f"label_mode={self.label_mode!r} needs {what}, but {owner} "
                                 f"loaded none: use {use}.")
            return loaded
        if loaded is not None:
            raise ValueError(
                f"load_sample() returned (x, y), but this generator also encodes "
                f"`labels` with label_mode={self.label_mode!r}. Pass label_mode=None "
                "to use load_sample's y (labels then only describe the classes), or "
                "return x alone."
            )
        return self.batch(indices)

    def weights(self, indices: np.ndarray) -> np.ndarray | None:
        """The sample weights of the samples `indices` (None without sample_weight)."""
        return None if self.sample_weight is None else self.sample_weight[indices]

    def class_counts(self, planned: Callable[[], np.ndarray],
                     ) -> dict[str, dict[Any, int]]:
        """{"before": {class: count}, "after": {class: count among the samples that
        `planned()` returns}}, classes by name where they have one."""
        if self.class_ids is None:
            raise ValueError("class_counts() needs one class label per sample.")
        names = self.class_names

        def named(ids: np.ndarray) -> dict[Any, int]:
            assert self.class_ids is not None  # checked above
            counts = np.bincount(self.class_ids[ids], minlength=self.num_classes or 0)
            return {(names[c] if names and c < len(names) else c): int(n)
                    for c, n in enumerate(counts)}

        after = planned()
        return {"before": named(np.arange(len(self.class_ids))), "after": named(after)}

    def batch(self, indices: np.ndarray) -> Any:
        mode = self.label_mode
        if mode is None:
            return None
        # the targets of a class mode hold class ids (and, for "categorical", how many
        # classes there are); those of "multi_label" the multi-hot rows
        if mode == "int":
            assert self.class_ids is not None
            return self.class_ids[indices].astype("int32")
        if mode == "categorical":
            assert self.class_ids is not None and self.num_classes is not None
            out = np.zeros((len(indices), self.num_classes), dtype="float32")
            out[np.arange(len(indices)), self.class_ids[indices]] = 1.0
            return out
        if mode == "binary":
            assert self.class_ids is not None
            return self.class_ids[indices].astype("float32")[:, None]
        if mode == "multi_label":
            assert self.multi_hot is not None
            return self.multi_hot[indices].astype("float32")
        if isinstance(self.raw, dict):
            return {k: np.take(v, indices, axis=0) for k, v in self.raw.items()}
        return np.take(self.raw, indices, axis=0)


def _check_ids(ids: np.ndarray, num_classes: int, describe: Describe | None) -> None:
    bad = np.flatnonzero((ids < 0) | (ids >= num_classes))
    if bad.size:
        i = int(bad[0])
        raise ValueError(
            f"Label ids must lie in [0, num_classes) = [0, {num_classes}). "
            f"Received: label {int(ids[i])} at {_row_name(describe, i)} "
            f"({bad.size} labels out of range in all). "
            "Pass `num_classes` or `class_names` that cover every label."
        )


def _resolve_num_classes(num_classes: int | None, inferred: int) -> int:
    if num_classes is None:
        return inferred
    num_classes = _checks.positive_int("num_classes", num_classes)
    return num_classes


def _as_ids(arr: np.ndarray) -> np.ndarray:
    """Class ids as int32 (half the memory of int64 for a million labels) when they fit."""
    if not arr.size:
        return np.zeros(0, np.int32)
    if np.issubdtype(arr.dtype, np.integer) and (arr.min() < -2**31 or arr.max() >= 2**31):
        return arr.astype(np.int64)
    return arr.astype(np.int32)


def _one_label_per_sample(values: Any, label_mode: str | None) -> list[Any] | np.ndarray:
    """`values` as a list or a 1-D array: an (n, 1) column flattened, other 2-D shapes
    refused (they are multi-hot rows or other targets)."""
    values = list(values) if not isinstance(values, np.ndarray) else values
    if isinstance(values, np.ndarray) and values.ndim == 2 and values.shape[1] == 1:
        values = values[:, 0]
    if isinstance(values, np.ndarray) and values.ndim != 1:
        raise ValueError(
            f"Expected one label per sample for label_mode={label_mode!r}. "
            f"Received: labels of shape {values.shape}. Use label_mode='multi_label' "
            "for multi-hot rows or label_mode='raw' for other targets."
        )
    return values


def _check_no_missing(values: Any, numeric: bool, describe: Describe | None) -> None:
    """Raises at the first missing or NaN label (vectorised for a numeric array: a million
    labels in milliseconds)."""
    if numeric:
        missing = np.flatnonzero(np.isnan(values)) if np.issubdtype(
            values.dtype, np.floating) else ()
        missing_at = [int(i) for i in missing[:1]]
    else:
        missing_at = [i for i, v in enumerate(values) if _is_missing(v)][:1]
    for i in missing_at:
        raise ValueError(
            f"Labels must not be missing or NaN. Received: {_plain(values[i])!r} at "
            f"{_row_name(describe, i)}. Fill or drop that row."
        )


# pandas' default `na_values` (pandas._libs.parsers.STR_NA_VALUES, case-sensitive), less
# the empty cell, which is a missing label here too
_MISSING_WORDS = frozenset({"-1.#IND", "1.#QNAN", "1.#IND", "-1.#QNAN", "#N/A N/A", "#N/A",
                            "N/A", "n/a", "NA", "<NA>", "#NA", "NULL", "null", "NaN", "-NaN",
                            "nan", "-nan", "None"})


def _warn_missing_words(values: Any, describe: Describe | None) -> None:
    """Warns when class names are words that pandas reads as a missing value ("NaN",
    "None", "NA"...): most likely an empty label exported as text, now a class."""
    found = [i for i, v in enumerate(values) if v.strip() in _MISSING_WORDS]
    if found:
        i = found[0]
        _redact.warn(
            f"{len(found)} label{'s' if len(found) > 1 else ''} read as a missing value "
            f"elsewhere (pandas reads {values[i]!r} as NaN): {values[i]!r} at "
            f"{_row_name(describe, i)}{' ...' if len(found) > 1 else ''}. kerasgen keeps "
            f"it as a class named {values[i]!r}; if the label is missing, fill or drop "
            "the row.", stacklevel=4)


def _check_not_mixed(values: Any, strings: list[bool]) -> None:
    """Raises when some labels are class names and others are not (`strings`: which
    are)."""
    if any(strings) and not all(strings):
        raise ValueError(
            "Labels must be all class names (str) or all integer ids, not a mix. "
            f"Received: {_plain(values[strings.index(False)])!r} and "
            f"{_plain(values[strings.index(True)])!r}."
        )


def _ids_of_names(values: Any, class_names: Iterable[str] | None, num_classes: int | None,
                  describe: Describe | None) -> tuple[np.ndarray, list[str], int]:
    """(ids, names, num_classes) of labels that are class names: ids into `class_names`
    (the sorted distinct labels by default); a label it lacks is an error."""
    names = [str(n) for n in (sorted(set(values)) if class_names is None
                              else class_names)]
    lookup = {name: k for k, name in enumerate(names)}
    unknown = [i for i, v in enumerate(values) if v not in lookup]
    if unknown:
        i = unknown[0]
        raise ValueError(
            f"Label {_plain(values[i])!r} at {_row_name(describe, i)} is not one of "
            f"`class_names`={names} ({len(unknown)} rows with unknown labels)."
        )
    ids = np.array([lookup[v] for v in values], dtype="int64")
    num_classes = _resolve_num_classes(num_classes, len(names))
    if num_classes < len(names):
        _checks.fail("num_classes", f"at least the number of classes ({len(names)})",
                     num_classes)
    return ids, names, num_classes


def _integer_ids(values: Any, label_mode: str | None,
                 describe: Describe | None) -> np.ndarray:
    """`values` (integer ids, booleans or whole numbers) as an array of class ids;
    anything else (text, real-valued numbers) is an error."""
    arr = np.asarray(values)
    if arr.dtype == bool or (arr.dtype == object and all(
            isinstance(v, (bool, np.bool_, numbers.Integral)) for v in arr)):
        arr = arr.astype("int64")  # True/False columns, or ints from a database
    if arr.size and not np.issubdtype(arr.dtype, np.number):
        raise TypeError(
            f"Labels must be class names (str) or integer ids for "
            f"label_mode={label_mode!r}. Received: dtype {arr.dtype}."
        )
    ids = _as_ids(arr)
    if arr.size and not np.issubdtype(arr.dtype, np.integer) and not np.array_equal(
            ids, arr):
        i = int(np.flatnonzero(ids != arr)[0])
        raise ValueError(
            f"Class ids must be integers. Received: {_plain(arr[i])!r} at "
            f"{_row_name(describe, i)}. Use label_mode='raw' for real-valued targets."
        )
    return ids


def _ids_of_numbers(values: Any, label_mode: str | None, class_names: Sequence[str] | None,
                    num_classes: int | None,
                    describe: Describe | None) -> tuple[np.ndarray, list[str], int]:
    """(ids, names, num_classes) of labels that are class ids: num_classes is
    len(class_names), else the largest id + 1, unless given; every id must lie below
    it."""
    ids = _integer_ids(values, label_mode, describe)
    inferred = len(class_names) if class_names is not None else (
        int(ids.max()) + 1 if ids.size else 0)
    num_classes = _resolve_num_classes(num_classes, inferred)
    _check_ids(ids, num_classes, describe)
    names = (list(class_names) if class_names is not None
             else [str(k) for k in range(num_classes)])
    return ids, names, num_classes


def _check_binary(label_mode: str | None, num_classes: int, names: Sequence[str]) -> None:
    """Refuses label_mode='binary' for more than two classes."""
    if label_mode == "binary" and num_classes > 2:
        raise ValueError(
            f"label_mode='binary' needs at most two classes. Received: {num_classes} "
            f"classes ({names[:5]}{'...' if len(names) > 5 else ''}). Use "
            "label_mode='categorical' or 'int'."
        )


def encode_class_labels(values: Any, label_mode: str | None,
                        class_names: Sequence[str] | None = None,
                        num_classes: int | None = None,
                        describe: Describe | None = None) -> Targets:
    """Targets from one label per sample: class names (str) or integer class ids."""
    values = _one_label_per_sample(values, label_mode)
    numeric = (isinstance(values, np.ndarray) and values.dtype != object
               and np.issubdtype(values.dtype, np.number))
    _check_no_missing(values, numeric, describe)
    strings = [False] * len(values) if numeric else [isinstance(v, str) for v in values]
    _check_not_mixed(values, strings)
    if any(strings):
        _warn_missing_words(values, describe)
    if len(values) and all(strings):
        ids, names, num_classes = _ids_of_names(values, class_names, num_classes, describe)
    else:
        ids, names, num_classes = _ids_of_numbers(values, label_mode, class_names,
                                                  num_classes, describe)
    _check_binary(label_mode, num_classes, names)
    return Targets(label_mode, class_ids=ids, class_names=names, num_classes=num_classes)


def _multi_hot_matrix(values: np.ndarray, class_names: Sequence[str] | None,
                      num_classes: int | None, describe: Describe | None) -> Targets:
    """Targets from an (n, C) numeric matrix, checked: no NaN, only 0 and 1, and
    `class_names` and `num_classes` (when given) agreeing with its C columns."""
    if np.issubdtype(values.dtype, np.floating) and np.isnan(values).any():
        i = int(np.flatnonzero(np.isnan(values).any(axis=1))[0])
        raise ValueError(
            f"Labels must not be NaN. Received: NaN at {_row_name(describe, i)}."
        )
    if not np.isin(values, (0, 1)).all():
        i = int(np.flatnonzero(~np.isin(values, (0, 1)).all(axis=1))[0])
        raise ValueError(
            "Multi-hot labels must hold only 0 and 1. Received: "
            f"{values[i].tolist()} at {_row_name(describe, i)}."
        )
    n_cols = values.shape[1]
    names = list(class_names) if class_names is not None else [str(k) for k in range(n_cols)]
    if len(names) != n_cols:
        _checks.fail("class_names", f"{n_cols} names, one per label column", class_names)
    num_classes = _resolve_num_classes(num_classes, n_cols)
    if num_classes != n_cols:
        _checks.fail("num_classes", f"the number of label columns ({n_cols})", num_classes)
    return Targets("multi_label", multi_hot=values.astype("uint8"),
                   class_names=names, num_classes=num_classes)


def _label_rows(values: Any, describe: Describe | None) -> list[list[Any]]:
    """One list of labels per sample (a single name or id becomes a list of one); a
    missing row, or a missing label in a row, is an error."""
    rows = []
    for i, row in enumerate(values):
        if isinstance(row, (str, numbers.Integral)):
            row = [row]
        if row is None or (isinstance(row, float) and np.isnan(row)):
            raise ValueError(f"Labels must not be missing. Received: {row!r} at "
                             f"{_row_name(describe, i)}. Give the sample its labels; a "
                             "sample with no labels is an empty list, or a row of zeros "
                             "in one 0/1 column per class.")
        row = list(row)
        if any(_is_missing(v) for v in row):
            raise ValueError(f"Labels must not be missing. Received: {row!r} at "
                             f"{_row_name(describe, i)}.")
        rows.append(row)
    return rows


def _id_rows_of_names(rows: list[list[Any]], flat: list[Any],
                      class_names: Iterable[str] | None, num_classes: int | None,
                      describe: Describe | None) -> tuple[list[list[int]], list[str], int]:
    """(id_rows, names, num_classes) of rows of class names: ids into `class_names`
    (the sorted distinct labels by default); a label it lacks is an error."""
    names = [str(n) for n in (sorted(set(flat)) if class_names is None
                              else class_names)]
    lookup = {name: k for k, name in enumerate(names)}
    for i, row in enumerate(rows):
        for v in row:
            if v not in lookup:
                raise ValueError(f"Label {_plain(v)!r} at {_row_name(describe, i)} is not one "
                                 f"of `class_names`={names}.")
    id_rows = [[lookup[v] for v in row] for row in rows]
    num_classes = _resolve_num_classes(num_classes, len(names))
    return id_rows, names, num_classes


def _id_rows_of_numbers(rows: list[list[Any]], flat: list[Any],
                        class_names: Sequence[str] | None,
                        num_classes: int | None) -> tuple[list[list[int]], list[str], int]:
    """(id_rows, names, num_classes) of rows of class ids: num_classes is
    len(class_names), else the largest id + 1, unless given."""
    id_rows = [[int(v) for v in row] for row in rows]
    inferred = (len(class_names) if class_names is not None
                else max(flat, default=-1) + 1)
    num_classes = _resolve_num_classes(num_classes, inferred)
    names = (list(class_names) if class_names is not None
             else [str(k) for k in range(num_classes)])
    return id_rows, names, num_classes


def _multi_hot_rows(id_rows: list[list[int]], num_classes: int,
                    describe: Describe | None) -> np.ndarray:
    """The (n, num_classes) uint8 multi-hot matrix of rows of class ids, each id checked
    to lie in [0, num_classes)."""
    multi_hot = np.zeros((len(id_rows), num_classes), dtype="uint8")
    for i, row in enumerate(id_rows):
        ids = np.asarray(row, dtype="int64")
        # mypy cannot infer a lambda whose default argument binds the row (`i=i`)
        _check_ids(ids, num_classes, lambda _, i=i: _row_name(describe, i))  # type: ignore[misc]
        multi_hot[i, ids] = 1
    return multi_hot


def encode_multi_labels(values: Any, class_names: Sequence[str] | None = None,
                        num_classes: int | None = None,
                        describe: Describe | None = None) -> Targets:
    """Targets from a (n, C) 0/1 matrix or from one list of labels per sample."""
    if (isinstance(values, np.ndarray) and values.ndim == 2
            and np.issubdtype(values.dtype, np.number)):
        return _multi_hot_matrix(values, class_names, num_classes, describe)
    rows = _label_rows(values, describe)
    flat = [v for row in rows for v in row]
    if flat and all(isinstance(v, str) for v in flat):
        id_rows, names, num_classes = _id_rows_of_names(rows, flat, class_names,
                                                        num_classes, describe)
    else:
        id_rows, names, num_classes = _id_rows_of_numbers(rows, flat, class_names,
                                                          num_classes)
    multi_hot = _multi_hot_rows(id_rows, num_classes, describe)
    return Targets("multi_label", multi_hot=multi_hot, class_names=names,
                   num_classes=num_classes)


def encode_raw(values: Any, describe: Describe | None = None) -> Targets:
    """Targets used as given; class ids are kept when they are one integer per sample."""
    if isinstance(values, dict):
        return Targets("raw", raw=values)
    arr = np.asarray(values)
    if np.issubdtype(arr.dtype, np.floating) and not np.isfinite(arr).all():
        bad = ~np.isfinite(arr.reshape(len(arr), -1))
        i = int(np.flatnonzero(bad.any(axis=1))[0])
        value = arr.reshape(len(arr), -1)[i][bad[i]][0]
        raise ValueError(f"Targets must not be NaN or infinite. Received: "
                         f"{'NaN' if np.isnan(value) else value} at {_row_name(describe, i)}.")
    class_ids = None
    flat = arr[:, 0] if arr.ndim == 2 and arr.shape[1] == 1 else arr
    if flat.ndim == 1 and np.issubdtype(flat.dtype, np.integer):
        class_ids = _as_ids(flat)
    return Targets("raw", raw=arr, class_ids=class_ids)


def encode(values: Any, label_mode: str | None, class_names: Sequence[str] | None = None,
           num_classes: int | None = None, describe: Describe | None = None) -> Targets:
    """Dispatches on label_mode; `values` None means the samples carry no targets."""
    _checks.one_of("label_mode", label_mode, LABEL_MODES)
    if label_mode == "mask":  # targets are the masks loaded with each sample
        label_mode = None
    if values is None:
        return Targets(None, class_names=class_names,
                       num_classes=num_classes if num_classes is not None
                       else (len(class_names) if class_names is not None else None))
    if isinstance(values, dict) and label_mode not in ("raw", None):
        raise ValueError(
            f"A dict of targets works with label_mode='raw' only. Received: "
            f"label_mode={label_mode!r}."
        )
    if label_mode == "multi_label":
        return encode_multi_labels(values, class_names, num_classes, describe)
    if label_mode in CLASS_MODES:
        if (label_mode == "categorical" and isinstance(values, np.ndarray)
                and values.ndim == 2 and values.shape[1] > 1):
            values = _one_hot_to_ids(values, describe)
        return encode_class_labels(values, label_mode, class_names, num_classes, describe)
    targets = encode_raw(values, describe)
    if label_mode is None:
        targets.label_mode = None
    targets.class_names = list(class_names) if class_names is not None else None
    targets.num_classes = (num_classes if num_classes is not None
                           else (len(class_names) if class_names is not None else None))
    return targets


def _length(values: Any) -> int:
    if isinstance(values, dict):
        return len(next(iter(values.values()))) if values else 0
    return len(values)


def generator_targets(num_samples: int, labels: Any, label_mode: str | None,
                      class_names: Sequence[str] | None = None,
                      num_classes: int | None = None, mask_format: str = "ids",
                      sample_weight: npt.ArrayLike | None = None,
                      describe: Describe | None = None) -> Targets:
    """The Targets of a generator from its arguments (`label_mode` resolved: not
    "auto"), checked: the label mode and mask format, labels that the mode needs and
    one per sample, and `sample_weight` (float32, one finite weight per sample)."""
    _checks.one_of("mask_format", mask_format, MASK_FORMATS)
    _checks.one_of("label_mode", label_mode, LABEL_MODES)
    if label_mode == "mask" and mask_format == "one_hot" and num_classes is None and (
            class_names is None):
        raise ValueError("mask_format='one_hot' needs `num_classes` (or `class_names`): "
                         "the width of the one-hot masks. Received: num_classes=None.")
    if label_mode == "boxes" and labels is not None:
        raise ValueError(
            "label_mode='boxes' takes each image's boxes and their classes from its "
            "annotations (kg.DetectionGenerator), so it takes no labels. Received: labels "
            "for label_mode='boxes'.")
    if label_mode == "image" and labels is not None:
        raise ValueError(
            "label_mode='image' makes each sample's target its paired image (target_dir=), "
            "so it takes no labels. Received: labels for label_mode='image'.")
    if label_mode == "input" and labels is not None:
        raise ValueError(
            "label_mode='input' makes each sample's target its own (augmented) input, so "
            "it takes no labels. Received: labels for label_mode='input'. Leave the "
            "labels out, or use another label_mode.")
    if labels is None and label_mode not in (None, "raw", "mask", "input", "boxes", "image"):
        raise ValueError(
            f"label_mode={label_mode!r} needs labels, but none were given. Pass "
            "`labels` (one per sample) or use label_mode=None."
        )
    if labels is not None and _length(labels) != num_samples:
        raise ValueError(
            f"`labels` must hold one entry per sample ({num_samples}). "
            f"Received: {_length(labels)} labels."
        )
    targets = encode(labels, label_mode, class_names, num_classes, describe=describe)
    if label_mode in ("input", "boxes", "image"):
        targets.label_mode = label_mode  # y is x (BatchMaker), or what the source loaded
    if label_mode == "mask":
        targets.mask_format = mask_format
    if sample_weight is not None and label_mode is None:
        raise ValueError(
            "`sample_weight` needs labels: with label_mode=None a batch is x alone, and "
            "the weights would be dropped. Received: sample_weight with label_mode=None. "
            "Give the generator labels (and a label_mode), or leave sample_weight out.")
    if sample_weight is not None:
        sample_weight = np.asarray(sample_weight, dtype="float32")
        if sample_weight.shape != (num_samples,):
            raise ValueError(
                f"`sample_weight` must have shape ({num_samples},), one weight "
                f"per sample. Received: shape {sample_weight.shape}."
            )
        if not np.isfinite(sample_weight).all():
            i = int(np.flatnonzero(~np.isfinite(sample_weight))[0])
            raise ValueError(f"`sample_weight` must be finite. Received: "
                             f"{sample_weight[i]} at {_row_name(describe, i)}.")
        targets.sample_weight = sample_weight
    return targets


def _one_hot_to_ids(values: np.ndarray, describe: Describe | None) -> np.ndarray:
    ok = np.isin(values, (0, 1)).all(axis=1) & (values.sum(axis=1) == 1)
    if not ok.all():
        i = int(np.flatnonzero(~ok)[0])
        raise ValueError(
            "2-D labels with label_mode='categorical' must be one-hot rows. Received: "
            f"{values[i].tolist()} at {_row_name(describe, i)}. Use "
            "label_mode='multi_label' for multi-hot rows."
        )
    return values.argmax(axis=1)


def encode_masks(masks: np.ndarray, num_classes: int | None, mask_format: str,
                 describe: Describe, indices: np.ndarray) -> np.ndarray:
    """Segmentation masks (n, h, w) of class ids -> int32 ids or float32 one-hot."""
    if masks.ndim == 4 and masks.shape[-1] == 1:
        masks = masks[..., 0]
    flat = batching.misfit(masks, "int32")  # a fraction (0.5) would become class 0
    if flat is not None:
        k = flat // max(1, masks[0].size)
        raise ValueError(
            f"Mask values must be whole class ids. Received: {masks.flat[flat].item()!r} "
            f"({masks.dtype}) in the mask of {describe(int(indices[k]))}. Return integer "
            "class ids (a float mask of 0.5 would become class 0).")
    if num_classes is not None:
        bad = (masks < 0) | (masks >= num_classes)
        if bad.any():
            k = int(np.flatnonzero(bad.reshape(len(masks), -1).any(axis=1))[0])
            raise ValueError(
                f"Mask values must be class ids in [0, {num_classes}). Received: "
                f"{int(masks[k][bad[k]][0])} in the mask of {describe(int(indices[k]))}. "
                "Pass a larger `num_classes`, or fix the mask."
            )
    if mask_format == "ids":
        return masks.astype("int32")
    out = np.zeros(masks.shape + (num_classes,), dtype="float32")
    np.put_along_axis(out, masks[..., None].astype("int64"), 1.0, axis=-1)
    return out


# ----------------------------------------------------------------- label columns of tables
# A CSV cell is text. It is read as a number only when it is written as one plainly:
# "7" and "-1" are integers (class ids), "0.5" and "7.0" are numbers; "007", "07" and "+7"
# stay text (names), so that zero-padded codes are never merged into one number.
_INTEGER = re.compile(r"-?(0|[1-9][0-9]*)\Z")
_DECIMAL = re.compile(r"[-+]?([0-9]+\.[0-9]*|\.[0-9]+|[0-9]+)([eE][-+]?[0-9]+)?\Z")
_PADDED = re.compile(r"[-+]?0[0-9]+\Z")
# characters that, inside a label cell, may separate several labels
SEPARATORS = (",", ";", "|", "\t")


def _cell_number(value: Any) -> Any:
    """The number a cell's text is written as (int, float), or the value unchanged."""
    if not isinstance(value, str):
        return value
    text = value.strip()
    if _INTEGER.match(text):
        return int(text)
    if text.lower() == "nan" or (_DECIMAL.match(text) and not _PADDED.match(text)):
        return float(text)
    return value


def _is_number(value: Any) -> bool:
    return isinstance(value, numbers.Real) or isinstance(value, np.number)


def _text(value: Any) -> str:
    return value.strip() if isinstance(value, str) else str(_plain(value))


def _missing_cell(value: Any) -> Any:
    """None for an empty cell, NaN or pandas' NA, else the value."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    return None if _is_missing(value) else value


def _where(describe: Describe | None, i: int) -> str:
    return describe(i) if describe is not None else f"row {i}"


def _class_values(values: list[Any], column: Any, class_names: Iterable[str] | None,
                  num_classes: int | None) -> list[Any] | np.ndarray:
    """One flat list of label cells (None where missing) as `encode` takes them: integer
    ids when every cell is a number and no two cells spell one number differently;
    class names (the cells' text) otherwise, or when `class_names` names every cell.
    The cells are judged once per distinct value (a column holds few)."""
    distinct = set(values) - {None}
    parsed = {v: _cell_number(v) for v in distinct}
    spellings: dict[float, set[str]] = {}  # number -> its texts ('7', '07', '7.0')
    for value in distinct:
        if isinstance(value, str) and _DECIMAL.match(value.strip()):
            spellings.setdefault(float(value), set()).add(value.strip())
    clashes = [sorted(s) for s in spellings.values() if len(s) > 1]
    if clashes:
        texts = ", ".join(repr(t) for t in clashes[0])
        _redact.warn(
            f"Labels {texts} of column {column!r} are written differently but read as the "
            f"same number; they are kept as {len(clashes[0])} different classes (labels "
            "are names unless every label is a plainly written integer). If they are one "
            "class, write them the same way.", stacklevel=5)
    names = None if class_names is None else {str(n) for n in class_names}
    if clashes or not all(_is_number(p) for p in parsed.values()) or (
            names is not None and all(_text(v) in names for v in distinct)):
        text = {v: _text(v) for v in distinct}  # names; numbers too when class_names say so
        return [None if v is None else text[v] for v in values]
    present = {int(p) for p in parsed.values() if not np.isnan(p) and float(p).is_integer()}
    if (class_names is None and num_classes is None and present and min(present) >= 0
            and len(present) < max(present) + 1 and all(
                np.isnan(p) or float(p).is_integer() for p in parsed.values())):
        absent = sorted(set(range(max(present) + 1)) - present)
        shown = ", ".join(map(str, absent[:10])) + (" ..." if len(absent) > 10 else "")
        found = [str(n) for n in sorted(present)]
        raise ValueError(
            f"Column {column!r} holds integer labels, which are class ids, but ids {shown} "
            f"of 0..{max(present)} have no row: they would be classes that no label names. "
            f"Pass num_classes={max(present) + 1} if these are the ids of "
            f"{max(present) + 1} classes, or class_names="
            f"{found[:10]}{'...' if len(found) > 10 else ''} if the numbers are the names "
            f"of {len(found)} classes.")
    out = [None if v is None else parsed[v] for v in values]
    if None not in distinct and None not in values and all(
            isinstance(p, int) and not isinstance(p, bool) for p in parsed.values()):
        return np.asarray(out, dtype="int64")  # the encoder's vectorised path
    return out


def delimiter_problem(cells: Sequence[Any], label_mode: str | None, delimiter: str | None,
                      column: Any = "label",
                      describe: Describe | None = None) -> tuple[str, str] | None:
    """A message when the cells of label column `column` look delimited in a way that
    `label_mode` and `label_delimiter` do not read, else None. Returns (kind, message):
    "error" for cells holding the delimiter under a single-label mode (each combination
    would become a class), "warning" for a likely wrong delimiter under "multi_label"."""
    texts = {c.strip() for c in cells if isinstance(c, str)} - {""}

    def first(found: set[str]) -> tuple[int, tuple[int, str]]:
        # (rows holding one of the texts `found`, the first's (i, cell))
        rows = [i for i, c in enumerate(cells) if isinstance(c, str) and c.strip() in found]
        return len(rows), (rows[0], cells[rows[0]].strip())

    if label_mode in CLASS_MODES and delimiter:
        holding = {t for t in texts if delimiter in t}
        if holding:
            n, (i, cell) = first(holding)
            return "error", (
                f"Column {column!r} holds {n} cells with the label delimiter "
                f"{delimiter!r} (e.g. {cell!r} at {_where(describe, i)}), but "
                f"label_mode={label_mode!r} reads one class per cell, so every combination "
                "would become a class of its own. For several labels per row pass "
                f"label_mode='multi_label' (and label_delimiter if they are not separated "
                f"by {delimiter!r}); if {delimiter!r} is part of the class names, pass "
                "label_delimiter=None.")
        return None
    if label_mode != "multi_label":
        return None
    if not delimiter or not any(delimiter in t for t in texts):
        for sep in SEPARATORS:
            holding = {t for t in texts if sep != delimiter and sep in t}
            if holding:
                n, (i, cell) = first(holding)
                return "warning", (
                    f"No cell of column {column!r} holds label_delimiter={delimiter!r}, "
                    f"but {n} cells hold {sep!r} (e.g. {cell!r} at {_where(describe, i)}), "
                    "and label_mode='multi_label' reads each of them as one label. If "
                    f"{sep!r} separates the labels, pass label_delimiter={sep!r}.")
        return None
    parts = {p.strip() for t in texts for p in t.split(delimiter)} - {""}
    for part in sorted(parts):
        for sep in SEPARATORS:
            pieces = [p.strip() for p in part.split(sep) if p.strip()]
            if sep != delimiter and len(pieces) > 1 and all(p in parts for p in pieces):
                _, (i, cell) = first({t for t in texts
                                      if part in [p.strip() for p in t.split(delimiter)]})
                return "warning", (
                    f"Column {column!r} mixes separators: {part!r} (in {cell!r} at "
                    f"{_where(describe, i)}) is the labels {pieces} joined by {sep!r}, not "
                    f"by label_delimiter={delimiter!r}, so it is read as one label. "
                    f"Separate every row's labels with {delimiter!r}.")
    return None


def check_delimiter(delimiter: Any) -> str | None:
    if delimiter is not None and (not isinstance(delimiter, str) or not delimiter):
        _checks.fail("label_delimiter", "a non-empty string, or None (one label per cell)",
                     delimiter)
    return delimiter


def split_cell(value: Any, delimiter: str | None) -> list[Any] | None:
    """The labels of one multi-label cell: a list, or None when the cell is missing."""
    value = _missing_cell(value)
    if isinstance(value, str):
        pieces = value.split(delimiter) if delimiter else [value]
        return [p.strip() for p in pieces if p.strip()]
    if value is None or isinstance(value, (list, tuple, set, np.ndarray)):
        return None if value is None else list(value)
    return [value]


def column_labels(cells: Sequence[Any], label_mode: str | None, delimiter: str | None = "|",
                  column: Any = "label", describe: Describe | None = None,
                  class_names: Iterable[str] | None = None,
                  num_classes: int | None = None) -> list[Any] | np.ndarray:
    """The cells of one label column (a CSV file's text, a DataFrame's or a query's
    values) as `encode` takes them, for a class mode or "multi_label".

    Refuses list cells and cells holding the delimiter under a single-label mode, and
    integer ids that leave a class without a row (unless `class_names` or `num_classes`
    say how many classes there are); warns of a likely wrong delimiter under
    "multi_label" and of labels such as '7' and '07' (kept as two classes)."""
    check_delimiter(delimiter)
    problem = delimiter_problem(cells, label_mode, delimiter, column, describe)
    if problem is not None and problem[0] == "error":
        raise ValueError(problem[1])
    if problem is not None:
        _redact.warn(problem[1], stacklevel=4)
    if label_mode != "multi_label":
        for i, cell in enumerate(cells):
            if isinstance(cell, (list, tuple, set, np.ndarray)):
                raise ValueError(
                    f"Column {column!r} holds lists of labels (e.g. {cell!r} at "
                    f"{_where(describe, i)}), but label_mode={label_mode!r} takes one class "
                    "per row. Pass label_mode='multi_label'.")
        return _class_values([_missing_cell(c) for c in cells], column, class_names,
                             num_classes)
    split = {c: split_cell(c, delimiter) for c in {c for c in cells if isinstance(c, str)}}
    rows = [split[c] if isinstance(c, str) else split_cell(c, delimiter) for c in cells]
    parts = list({v for row in rows if row for v in row})
    value = dict(zip(parts, _class_values(parts, column, class_names, num_classes)))
    return [None if row is None else [value[v] for v in row] for row in rows]


def check_same_classes(gen: Any, other: Any,
                       roles: tuple[str, str] = ("training", "validation")) -> None:
    """Raises when two generators given to one `fit` map classes to different ids, or
    make one-hot / multi-hot targets of different widths (any data with `class_names` is
    compared: a Keras `image_dataset_from_directory` too)."""
    mine = (getattr(gen, "class_names", None), getattr(gen, "num_classes", None))
    theirs = (getattr(other, "class_names", None), getattr(other, "num_classes", None))
    if not isinstance(mine[0], list) or not isinstance(theirs[0], list):
        return
    if mine[0] == theirs[0] and None in (mine[1], theirs[1]) or mine == theirs:
        return
    common = min(len(mine[0]), len(theirs[0]))
    widths = {getattr(gen, "label_mode", None), getattr(other, "label_mode", None)} & {
        "categorical", "multi_label"}
    if mine[0][:common] == theirs[0][:common] and not widths:
        return  # every class both know has one id, and no target's width depends on it

    def shown(names: list[Any]) -> str:
        return repr(names) if len(names) <= 20 else f"{names[:20]!r}[:20] of {len(names)}"

    first, second = roles
    differ = next((k for k, (a, b) in enumerate(zip(mine[0], theirs[0])) if a != b), None)
    if differ is not None:
        detail = (f"class id {differ} is {mine[0][differ]!r} in the {first} data and "
                  f"{theirs[0][differ]!r} in the {second} data")
    else:
        detail = (f"num_classes is {mine[1]} in the {first} data and {theirs[1]} in the "
                  f"{second} data")
    raise ValueError(
        f"The {first} and {second} generators given to fit have different classes: "
        f"{first} class_names={shown(mine[0])}, {second} class_names={shown(theirs[0])}, "
        f"so {detail}, and the {second} labels would be read wrongly. Build the "
        f"{second} generator with class_names=train.class_names (for a validation part of "
        "one table or folder, use validation_split and subset with the same seed).")


def check_fit_partners(gen: Any, fit_data: tuple[Any, Any] | None) -> None:
    """In `fit` (`fit_data` = its (x, validation_data), or None outside it): raises when
    `gen` is one of the two and the other, a kerasgen generator too, has other classes."""
    if fit_data is None:
        return
    x, validation = fit_data
    if gen is x and validation is not None:
        check_same_classes(gen, validation)
    elif gen is validation and x is not None:
        check_same_classes(x, gen)
