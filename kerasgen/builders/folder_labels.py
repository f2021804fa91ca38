"""A folder generator's `labels=` given as a list (Keras's form): checked as Keras checks
it, one per file, as class ids, class names or real values (a regression)."""

from __future__ import annotations

import numbers

import numpy as np

from kerasgen import _checks


def given_labels(labels, class_names, mask_dir=None, what="image file"):
    """The list of labels given as `labels=` (None for "inferred" or None), checked as
    Keras checks it."""
    if isinstance(labels, str) and labels == "inferred" or labels is None:
        return None
    if isinstance(labels, np.ndarray) and labels.ndim == 1:
        labels = labels.tolist()
    if not isinstance(labels, (list, tuple)):
        raise ValueError(
            "`labels` must be 'inferred' (labels from the subfolder names), None (no "
            f"labels) or a list/tuple of labels, one per {what}. Received: "
            f"labels={labels!r}"
        )
    if class_names is not None:
        raise ValueError(
            "`class_names` goes with labels='inferred' only: with a list of labels the "
            "classes are the sorted distinct labels. Received: labels=<a list of "
            f"{len(labels)}> and class_names={class_names!r}"
        )
    if mask_dir is not None:
        raise ValueError("`mask_dir` reads one mask per image; it takes no `labels` list.")
    return list(labels)


def check_count(labels, paths, directory):
    if len(labels) != len(paths):
        raise ValueError(
            f"`labels` must hold one label per image file. Received: {len(labels)} labels "
            f"for the {len(paths)} image files found in {directory} (in the order of "
            "gen.file_paths: os.walk's folders sorted by path, files sorted by name)."
        )


def is_row(value):
    return isinstance(value, (list, tuple, np.ndarray))


def value_labels(labels, paths, directory, label_mode):
    """The float32 targets of a list of labels holding real numbers (floats, or rows of
    numbers: Keras passes such labels on unchanged, as float32), or None for class ids
    or names."""
    if not any(isinstance(v, (float, np.floating)) or is_row(v) for v in labels):
        return None
    check_count(labels, paths, directory)
    for i, value in enumerate(labels):
        items = np.ravel(np.asarray(value, dtype=object)) if is_row(value) else [value]
        if not all(isinstance(x, numbers.Real) and not isinstance(x, (bool, np.bool_))
                   for x in items):
            raise ValueError(
                "`labels` holding real values (a regression) must hold numbers only, or "
                f"rows of numbers. Received: {value!r} for {paths[i]}.")
    if label_mode not in ("int", "raw", None):
        raise ValueError(
            f"label_mode={label_mode!r} encodes classes, and `labels` holds real values "
            "(a regression). Use label_mode='int' (as Keras, which passes them on as "
            "float32) or 'raw', or give integer class ids or class names.")
    try:
        return np.asarray(labels, dtype="float32")
    except ValueError:
        raise ValueError("`labels` rows of real values must all have one length. "
                         f"Received rows of lengths "
                         f"{sorted({len(v) if is_row(v) else 1 for v in labels})}.") from None


def list_labels(labels, paths, directory, num_classes):
    """(class ids, class names) of a list of labels given one per file of `paths`."""
    check_count(labels, paths, directory)
    numbers_given = [isinstance(v, numbers.Integral) and not isinstance(v, bool)
                     for v in labels]
    if all(numbers_given):
        ids = np.asarray(labels, dtype="int64")
        distinct = sorted(set(ids.tolist()))
        if num_classes is not None:
            return ids, [str(c) for c in range(_checks.positive_int("num_classes",
                                                                     num_classes))]
        missing = sorted(set(range(len(distinct))) - set(distinct))
        if missing:
            raise ValueError(
                "Integer `labels` must be class ids 0..n-1, each used. Received: labels "
                f"{distinct[:10]}{' ...' if len(distinct) > 10 else ''}; no file has "
                f"class {missing[:10]}. Renumber them, pass num_classes= (classes may then "
                "have no file), or pass the labels as class names (strings)."
            )
        return ids, [str(c) for c in distinct]
    if all(isinstance(v, str) for v in labels):
        names = sorted(set(labels))
        index = {name: k for k, name in enumerate(names)}
        return np.asarray([index[v] for v in labels], dtype="int64"), names
    first_is_name = isinstance(labels[0], str)
    bad = next(i for i, v in enumerate(labels)
               if isinstance(v, str) != first_is_name or not (first_is_name or numbers_given[i]))
    raise ValueError(
        "`labels` must be all integer class ids or all class names (strings). Received: "
        f"{labels[bad]!r} for {paths[bad]}."
    )
