"""`fit_resample`'s arrays: class labels from every form of `y` imbalanced-learn accepts,
and results handed back in the form they came in.

`y` may be 1-D class labels of any type numpy can sort (ints, strings, bools, integral
floats), a column (n, 1), or one-hot rows (n, k) of 0/1 with one 1 per row; a list, a
pandas Series or DataFrame. Class ids are positions in the sorted class values, the order
imbalanced-learn's `np.unique` gives, so ties between equal classes break as there.
"""

import sys

import numpy as np


class ClassLabels:
    """`ids`: a class id per sample (0..k-1); `classes`: the class values in id order;
    `labels`: the 1-D labels imbalanced-learn would see (one-hot rows -> column index);
    `rows`: `y` as an array, the rows results are taken from."""

    def __init__(self, ids, classes, labels, rows):
        self.ids, self.classes, self.labels, self.rows = ids, classes, labels, rows


def class_labels(y):
    """ClassLabels of `y`; ValueError naming `y` and the row for a form that is not
    one class per sample."""
    rows = np.asarray(y)
    if rows.ndim not in (1, 2):
        raise ValueError("`y` must be 1-D class labels or 2-D one-hot rows (one 1 per "
                         f"row). Received: y with shape {rows.shape}.")
    if len(rows) == 0:
        raise ValueError("`y` must hold at least one label. Received: an empty array.")
    if rows.ndim == 2 and rows.shape[1] == 1:
        labels = rows[:, 0]
    elif rows.ndim == 2:
        labels = _one_hot_columns(rows)
    else:
        labels = rows
    _check_labels(labels)
    try:
        classes, ids = np.unique(labels, return_inverse=True)
    except TypeError as error:  # e.g. ints and strings mixed in an object array
        kinds = sorted({type(v).__name__ for v in labels.tolist()})
        raise ValueError(f"`y` mixes label types ({', '.join(kinds)}), which cannot be "
                         "ordered into classes. Give every label one type (all str, "
                         "say).") from error
    return ClassLabels(ids.reshape(-1).astype(np.int64), classes.tolist(), labels, rows)


def _one_hot_columns(rows):
    """The column of each row's 1, after checking the rows are one-hot."""
    if rows.dtype.kind not in "biuf":
        raise ValueError("2-D `y` must be one-hot rows of 0 and 1. Received: y of dtype "
                         f"{rows.dtype}. Pass 1-D class labels instead.")
    off = ~np.isin(rows, (0, 1))
    if off.any():
        r = int(np.flatnonzero(off.any(axis=1))[0])
        raise ValueError(f"2-D `y` must be one-hot rows of 0 and 1. Received: row {r} of y "
                         f"is {rows[r].tolist()}. Pass 1-D class labels, or one-hot rows.")
    ones = rows.sum(axis=1)
    if (ones != 1).any():
        r = int(np.flatnonzero(ones != 1)[0])
        what = ("no 1, so its class is unknown" if ones[r] == 0 else
                f"{int(ones[r])} 1s (multi-hot)")
        raise ValueError(f"2-D `y` must be one-hot rows (one 1 per row). Received: row {r} "
                         f"of y has {what}. Resampling needs one class per sample; "
                         "multi-label targets cannot be resampled by class.")
    return rows.argmax(axis=1)


def _check_labels(labels):
    kind = labels.dtype.kind
    if kind == "f":
        missing = np.isnan(labels)
        if missing.any():
            r = int(np.flatnonzero(missing)[0])
            raise ValueError(f"`y` must hold a class label for every sample. Received: y "
                             f"holds NaN (row {r}, {int(missing.sum())} rows in all).")
        fractional = labels != np.round(labels)
        if fractional.any():
            r = int(np.flatnonzero(fractional)[0])
            raise ValueError(
                f"`y` must hold class labels. Received: y holds non-integer numbers (row "
                f"{r}: {labels[r].item()!r}), a continuous target. imbalanced-learn refuses it "
                "too; cast class ids to int.")
    elif kind == "O":
        for r, value in enumerate(labels.tolist()):
            if _missing(value):
                raise ValueError(f"`y` must hold a class label for every sample. "
                                 f"Received: y holds {value!r} (row {r}).")


def _missing(value):
    if value is None:
        return True
    try:
        return bool(value != value)  # NaN
    except TypeError:  # pandas.NA
        return True


def restore(result, like):
    """`result` (an array) in the form of `like`: a list, a pandas Series or DataFrame
    (same name, columns and dtypes; a fresh index), or an array as it is."""
    if isinstance(like, list):
        return result.tolist()
    pd = sys.modules.get("pandas")  # a pandas object means pandas is imported
    if pd is not None and isinstance(like, pd.DataFrame):
        return pd.DataFrame(result, columns=like.columns).astype(like.dtypes.to_dict())
    if pd is not None and isinstance(like, pd.Series):
        return pd.Series(result, dtype=like.dtype, name=like.name)
    return result
