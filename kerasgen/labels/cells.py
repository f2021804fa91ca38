"""The label cells of tables: the cells of one label column (a CSV file's text, a
DataFrame's or a query's values) read as `labels.encoding.encode` takes them: numbers
where they are written plainly as numbers, several labels per cell split at a delimiter,
and the checks of a delimiter that would make labels silently wrong."""

from __future__ import annotations

import numbers
import re
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from kerasgen import _checks
from kerasgen import _redact
from kerasgen.labels.encoding import CLASS_MODES, Describe, is_missing, plain

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
    return value.strip() if isinstance(value, str) else str(plain(value))


def _missing_cell(value: Any) -> Any:
    """None for an empty cell, NaN or pandas' NA, else the value."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    return None if is_missing(value) else value


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

