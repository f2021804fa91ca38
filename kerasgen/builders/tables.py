"""The rows of a table of files (a CSV file, a DataFrame, a query's result): its columns
checked, its files resolved and found (or dropped, on_missing="skip"), its labels read,
and a seeded, stratified split of its rows with the classes of all of them."""

from __future__ import annotations

import numbers

import numpy as np

from kerasgen.labels import cells as label_cells
from kerasgen.labels import encoding as label_encoding
from kerasgen import _redact
from kerasgen.sources import _listing as listing


def count(n: int, noun: str) -> str:
    """'1 file', '3 files'."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


class ListedFile:
    """Names sample i of a table of files: its path and its row."""

    def __init__(self, paths: list[str], table: listing.Table) -> None:
        self.paths, self.table = paths, table

    def __call__(self, index: int) -> str:
        return f"{self.paths[index]} ({self.table.describe(index)})"


def table_columns(table, x_col, y_col, mask_col, label_mode):
    """The label columns (None without labels), each column named checked; `mask_col`
    is the column of masks or (label_mode="image") of target images."""
    table.column(x_col, "x_col")
    if mask_col is not None:
        table.column(mask_col, "target_col" if label_mode == "image" else "mask_col")
    if label_mode in (None, "mask", "input", "image"):
        return None
    y_cols = list(y_col) if isinstance(y_col, (list, tuple)) else [y_col]
    for name in y_cols:
        table.column(name, "y_col")
    if len(y_cols) > 1 and label_mode not in ("multi_label", "raw"):
        raise ValueError(
            f"Several `y_col` columns need label_mode='multi_label' (0/1 columns) "
            f"or 'raw' (numeric targets). Received: label_mode={label_mode!r}, "
            f"y_col={y_col!r}."
        )
    return y_cols


def listed_files(table, x_col, mask_col, directory, allow_outside, on_missing, store):
    """(image paths, mask paths or None, skipped paths) of the table's rows; rows whose
    files do not exist are an error, or (on_missing="skip") dropped with a warning."""
    paths = listing.resolve_paths(table.columns[x_col], table, directory,
                                  allow_outside, table.describe)
    masks = None if mask_col is None else listing.resolve_paths(
        table.columns[mask_col], table, directory, allow_outside, table.describe)
    found = listing.exists(paths + (masks or []), store)
    missing = [i for i in range(len(paths))
               if not found[i] or (masks is not None and not found[len(paths) + i])]
    if not missing:
        return paths, masks, []
    listed = ", ".join(f"{paths[i]} ({table.describe(i)})" for i in missing[:5])
    if on_missing == "raise":
        raise FileNotFoundError(
            f"{count(len(missing), 'file')} listed in {table.name()} "
            f"do{'es' if len(missing) == 1 else ''} not exist: {listed}"
            f"{' ...' if len(missing) > 5 else ''}. Fix the paths (or `directory`), "
            "or pass on_missing='skip' to drop those rows."
        )
    skipped = [paths[i] for i in missing]
    more = " ..." if len(missing) > 5 else ""
    _redact.warn(f"Skipping {count(len(missing), 'row')} of {table.name()} whose "
                 f"file{'s do' if len(missing) > 1 else ' does'} not exist: {listed}{more}. "
                 "`gen.skipped` lists them all.", stacklevel=4)
    gone = set(missing)
    keep = [i for i in range(len(paths)) if i not in gone]
    table.subset(keep)
    paths = [paths[i] for i in keep]
    masks = None if masks is None else [masks[i] for i in keep]
    if not paths:
        raise ValueError(f"No row of {table.name()} names an existing file.")
    return paths, masks, skipped


def csv_labels(table, y_cols, label_mode, delimiter, class_names=None, num_classes=None):
    """The label columns as the values `labels.encode` expects for `label_mode`."""
    if len(y_cols) > 1 or label_mode == "raw":
        columns = [[listing.parse_number(v) for v in table.columns[c]] for c in y_cols]
        rows = list(zip(*columns))
        for i, row in enumerate(rows):
            for name, value in zip(y_cols, row):
                if not isinstance(value, numbers.Real) or isinstance(value, bool):
                    raise ValueError(
                        f"Column {name!r} must hold numbers for label_mode="
                        f"{label_mode!r}. Received: {value!r} at {table.describe(i)}."
                    )
        matrix = np.asarray(rows, dtype="float32" if label_mode == "raw" else "float64")
        return matrix[:, 0] if label_mode == "raw" and len(y_cols) == 1 else matrix
    return label_cells.column_labels(table.columns[y_cols[0]], label_mode, delimiter,
                                    y_cols[0], table.describe, class_names, num_classes)


def split_rows(labels, num_rows, label_mode, class_names, num_classes, validation_split,
           subset, seed, describe, files=None):
    """(rows kept or None, class_names, num_classes) for a `validation_split` of a table:
    the folder's seeded, stratified split (`listing.validation_subset`), with the classes
    inferred from every row before splitting, so that the training and validation
    subsets share one class-id mapping even when one of them lacks a class."""
    if validation_split is None and subset is None:
        return None, class_names, num_classes
    targets = label_encoding.encode(labels, label_mode, class_names, num_classes, describe)
    keep = listing.validation_subset(targets.class_ids, num_rows, validation_split, subset,
                                     seed, files=files, describe=describe,
                                     class_names=targets.class_names)
    return keep, targets.class_names, targets.num_classes


def rows(values, keep):
    """The rows `keep` of a list or array (None stays None)."""
    if values is None or isinstance(values, np.ndarray):
        return None if values is None else values[keep]
    return [values[i] for i in keep]
