"""Label encoding: per-sample targets are encoded once, batches are gathered from them.

The label modes, `Targets` (what the encoders make: class ids, multi-hot rows or raw
targets, one per sample, and each batch's y gathered from them) and the encoders: class
labels (`encode_class_labels`), multi-labels (`encode_multi_labels`), raw values
(`encode_raw`), `encode` (one of them by label mode) and segmentation masks
(`encode_masks`, per batch). A generator's targets, built and checked from its arguments,
are `labels.targets.generator_targets`; the label cells of tables are `labels.cells`."""

from __future__ import annotations

import numbers
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from kerasgen import _checks
from kerasgen.arrays import batching
from kerasgen import _redact

LABEL_MODES = ("int", "categorical", "binary", "multi_label", "raw", "mask", "input", "boxes",
               "image", None)
MASK_FORMATS = ("ids", "one_hot")
CLASS_MODES = ("int", "categorical", "binary")

# How errors name sample (or row) i: a file, a row of a table...
Describe = Callable[[int], str]


def plain(value: Any) -> Any:
    """A NumPy scalar as the Python value it holds, for names and messages."""
    return value.item() if isinstance(value, np.generic) else value


def row_name(describe: Describe | None, i: int) -> str:
    return describe(i) if describe is not None else f"sample {i}"


def is_missing(value: Any) -> bool:
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
            f"Received: label {int(ids[i])} at {row_name(describe, i)} "
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
        missing_at = [i for i, v in enumerate(values) if is_missing(v)][:1]
    for i in missing_at:
        raise ValueError(
            f"Labels must not be missing or NaN. Received: {plain(values[i])!r} at "
            f"{row_name(describe, i)}. Fill or drop that row."
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
            f"{row_name(describe, i)}{' ...' if len(found) > 1 else ''}. kerasgen keeps "
            f"it as a class named {values[i]!r}; if the label is missing, fill or drop "
            "the row.", stacklevel=4)


def _check_not_mixed(values: Any, strings: list[bool]) -> None:
    """Raises when some labels are class names and others are not (`strings`: which
    are)."""
    if any(strings) and not all(strings):
        raise ValueError(
            "Labels must be all class names (str) or all integer ids, not a mix. "
            f"Received: {plain(values[strings.index(False)])!r} and "
            f"{plain(values[strings.index(True)])!r}."
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
            f"Label {plain(values[i])!r} at {row_name(describe, i)} is not one of "
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
            f"Class ids must be integers. Received: {plain(arr[i])!r} at "
            f"{row_name(describe, i)}. Use label_mode='raw' for real-valued targets."
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
            f"Labels must not be NaN. Received: NaN at {row_name(describe, i)}."
        )
    if not np.isin(values, (0, 1)).all():
        i = int(np.flatnonzero(~np.isin(values, (0, 1)).all(axis=1))[0])
        raise ValueError(
            "Multi-hot labels must hold only 0 and 1. Received: "
            f"{values[i].tolist()} at {row_name(describe, i)}."
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
                             f"{row_name(describe, i)}. Give the sample its labels; a "
                             "sample with no labels is an empty list, or a row of zeros "
                             "in one 0/1 column per class.")
        row = list(row)
        if any(is_missing(v) for v in row):
            raise ValueError(f"Labels must not be missing. Received: {row!r} at "
                             f"{row_name(describe, i)}.")
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
                raise ValueError(f"Label {plain(v)!r} at {row_name(describe, i)} is not one "
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
        _check_ids(ids, num_classes, lambda _, i=i: row_name(describe, i))  # type: ignore[misc]
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
                         f"{'NaN' if np.isnan(value) else value} at {row_name(describe, i)}.")
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



def _one_hot_to_ids(values: np.ndarray, describe: Describe | None) -> np.ndarray:
    ok = np.isin(values, (0, 1)).all(axis=1) & (values.sum(axis=1) == 1)
    if not ok.all():
        i = int(np.flatnonzero(~ok)[0])
        raise ValueError(
            "2-D labels with label_mode='categorical' must be one-hot rows. Received: "
            f"{values[i].tolist()} at {row_name(describe, i)}. Use "
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

