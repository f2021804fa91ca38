"""Sources composed as tf.data's datasets are: `ConcatSource` (`concatenate`: the samples
of several sources, one after the other, with one class-id mapping over all) and
`ZipSource` (`zip`: sample i of each source as one multi-input sample), and the checks
that keep the parts from being silently mixed (labels, label columns, sample shapes,
`rescale`, a generator's own options)."""

from __future__ import annotations

import builtins
import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from kerasgen.arrays import batching
from kerasgen import _checks
from kerasgen.sources._batch_request import BatchRequest, load_each
from kerasgen.sources._core import (BatchSource, check, features_of, file_paths_of,
                                    for_processes, sample_shape_of, skips, source_of)

__all__ = ["concatenate", "zip"]

zip_ = builtins.zip  # `zip` below is the sources' own, tf.data's name


def _named_labels(part: Any) -> tuple[Any, list[str] | None]:
    """(labels, class names) of a part of a concatenation, its labels read as class
    names where they are class ids of named classes (a generator's, or its source's),
    so that they mean the same in another part."""
    names = getattr(part, "class_names", None)
    labels = part.labels
    if hasattr(part, "source") and labels is None:  # a generator without class ids
        labels, names = part.source.labels, part.source.class_names
    if labels is None or names is None:
        return labels, None if names is None else list(names)
    ids = _class_ids(labels)
    if ids is not None:
        if len(ids) and (ids.min() < 0 or ids.max() >= len(names)):
            raise ValueError(
                f"A part's labels must be class ids of its {len(names)} class names "
                f"{list(names)}. Received: ids from {ids.min()} to {ids.max()}.")
        return [names[int(i)] for i in ids], list(names)
    return labels, list(names)


def _class_ids(labels: Any) -> np.ndarray | None:
    """`labels` as an int64 array when they are integer class ids, one per sample, in
    any form (an array, a list or tuple of Python or NumPy integers); else None (names,
    lists of labels per sample, targets)."""
    if isinstance(labels, np.ndarray):
        return labels.astype(np.int64) if labels.ndim == 1 and labels.dtype.kind in "iu" \
            else None
    values = list(labels)
    if values and all(isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))
                      for v in values):
        return np.asarray(values, dtype=np.int64)
    return None


_GENERATOR_OPTIONS = ("augment", "batch_augment", "sampler", "sample_weight")


def _refuse_dropped_options(parts: Sequence[Any]) -> None:
    """A composition takes each part's source (its samples and labels): a part that is
    a generator with options of its own (augmentation, a sampler, sample weights) is
    refused, naming them, rather than training without them."""
    for k, part in enumerate(parts):
        if not hasattr(part, "source"):
            continue
        given = [name for name in _GENERATOR_OPTIONS if getattr(part, name, None) is not None]
        if given:
            shown = ", ".join(f"{name}=" for name in given)
            raise ValueError(
                f"Part {k} of the composition is a generator with {shown} of its own, "
                "which a composition would drop: it takes each part's source (samples and "
                "labels) only. Pass them to the generator over the composition "
                "(kg.Generator(source=kg.sources.concatenate(...), augment=..., "
                "sample_weight=np.concatenate([...]))), or build the part without them.")


def _check_columns(named: list[tuple[Any, list[str] | None]]) -> None:
    """Refuses parts whose label columns (multi-hot or raw targets, one column per
    class) are named differently: column k would mean another class in each."""
    columns = [(k, names) for k, (labels, names) in enumerate(named)
               if isinstance(labels, np.ndarray) and labels.ndim == 2]
    if columns and any(names != columns[0][1] for _, names in columns):
        shown = ", ".join(f"part {k}: {names}" for k, names in columns)
        raise ValueError(
            "The parts of a concatenation must name their label columns alike, so that "
            f"column k is the same class in each. Received: {shown}. Give every part the "
            "same columns in the same order (y_col=[...]).")


class ConcatSource:
    """The samples of several sources, one after the other (tf.data's `concatenate`).

    Labels that are class ids of a part's `class_names` are read as those names, so
    one class-id mapping (the sorted union of the parts' classes, or the parts' common
    `class_names`) holds over all the parts.
    """

    def __init__(self, parts: Sequence[Any]) -> None:
        if len(parts) < 2:
            _checks.fail("sources", "two sources or more", list(parts))
        _refuse_dropped_options(parts)
        self.parts = [check(source_of(part)) for part in parts]
        self.starts = np.cumsum([0] + [len(p) for p in self.parts])
        named = [_named_labels(part) for part in parts]
        _check_columns(named)
        given = [labels is not None for labels, _ in named]
        if any(given) and not all(given):
            missing = [k for k, has in enumerate(given) if not has]
            raise ValueError(
                "Every part of a concatenation must have labels, or none. Received: "
                f"parts {missing} without labels, the others with.")
        self.labels = _joined([labels for labels, _ in named]) if all(given) else None
        names = [part_names for _, part_names in named]
        self.class_names: list[str] | None = None
        if names[0] is not None and all(n == names[0] for n in names):
            self.class_names = names[0]
        elif any(n is not None for n in names) and self.labels is not None:
            self.class_names = sorted({str(v) for v in self.labels})
        rescales = {getattr(part, "rescale", None) for part in self.parts}
        if len(rescales) > 1:
            raise ValueError(
                "The parts of a concatenation must share one `rescale`, which converts "
                f"their batches alike. Received: rescale {sorted(rescales, key=str)} in "
                "different parts.")
        self.rescale = rescales.pop()
        _check_sample_shapes(self.parts)

    def __len__(self) -> int:
        return int(self.starts[-1])

    def locate(self, index: int) -> tuple[int, int]:
        """(part, index in that part) of sample `index`."""
        part = int(self.parts_of(np.asarray([index]))[0])
        return part, int(index - self.starts[part])

    def parts_of(self, indices: np.ndarray) -> np.ndarray:
        """The part each of `indices` lies in, in one vectorised search."""
        return np.searchsorted(self.starts, indices, side="right") - 1

    def describe(self, index: int) -> str:
        part, local = self.locate(index)
        return self.parts[part].describe(local)

    def load(self, index: int) -> Any:
        part, local = self.locate(index)
        return self.parts[part].load(local)

    @property
    def features(self) -> _ConcatFeatures | None:
        """The parts' feature spaces as one, read lazily (None unless every part has
        one): SMOTE then decodes only the thumbnails it needs, as for one part."""
        spaces = [features_of(p) for p in self.parts]
        if any(s is None for s in spaces):
            return None
        return _ConcatFeatures(self, spaces)

    @property
    def file_paths(self) -> list[str] | None:
        paths = [file_paths_of(p) for p in self.parts]
        if any(p is None for p in paths):
            return None
        return [path for part in paths for path in part]  # type: ignore[union-attr]

    def for_processes(self, processes: int) -> ConcatSource:
        return ConcatSource([for_processes(p, processes) for p in self.parts])

    def load_batch(self, request: BatchRequest) -> tuple[Any, Any]:
        """Each part loads its rows (by its own `load_batch` where it has one), and the
        rows are put back in batch order. SMOTE partners from another part are loaded
        sample by sample."""
        part_of = self.parts_of(request.indices)
        partners = request.partners
        crossing = partners is not None and bool(np.any(
            (partners >= 0) & (self.parts_of(partners) != part_of)))
        if crossing:
            return load_each(request, self.load, self.describe)
        pieces = []
        for part in sorted(set(part_of.tolist())):
            rows = np.flatnonzero(part_of == part)
            start, end = int(self.starts[part]), int(self.starts[part + 1])
            sub = request.part(rows, request.indices[rows] - start, start, end)
            source = self.parts[part]
            loaded = (source.load_batch(sub) if isinstance(source, BatchSource)
                      else load_each(sub, source.load, source.describe))
            pieces.append((rows, loaded))
        return _scatter(pieces, len(request.indices), request, self.describe)


def _check_sample_shapes(parts: Sequence[Any]) -> None:
    """Parts whose samples have different shapes cannot share a batch: refused here,
    naming each part's shape, not in `fit` with a shape error naming nothing."""
    shapes = {k: sample_shape_of(part) for k, part in enumerate(parts)}
    known = {k: shape for k, shape in shapes.items() if shape is not None}
    if len(set(known.values())) > 1:
        listed = "; ".join(
            f"part {k} ({f'first sample {parts[k].describe(0)}' if len(parts[k]) else 'empty'}"
            f"): {shape}" for k, shape in known.items())
        raise ValueError(
            "The parts of a concatenation must give samples of one shape, to share a "
            f"batch. Received: {listed}. Give every part the same image_size and "
            "color_mode (or arrays of one row shape).")


class _ConcatFeatures:
    """The feature spaces of a concatenation's parts, indexed as one (rows read from
    each part's own space, lazily)."""

    def __init__(self, source: ConcatSource, spaces: list[Any]) -> None:
        self.source, self.spaces = source, spaces

    def __len__(self) -> int:
        return len(self.source)

    def __getitem__(self, indices: Any) -> np.ndarray:
        indices = np.atleast_1d(np.asarray(indices))
        parts = self.source.parts_of(indices)
        local = indices - self.source.starts[parts]
        rows: np.ndarray | None = None
        for part in np.unique(parts):
            where = np.flatnonzero(parts == part)
            values = np.asarray(self.spaces[part][local[where]], dtype=np.float32)
            if rows is None:
                rows = np.empty((len(indices),) + values.shape[1:], np.float32)
            rows[where] = values
        assert rows is not None
        return rows


def _joined(parts: list[Any]) -> Any:
    """The labels of the parts, one after the other."""
    if all(isinstance(p, np.ndarray) for p in parts):
        return np.concatenate(parts)
    return [value for part in parts for value in list(part)]


def _scatter(pieces: list[tuple[np.ndarray, tuple[Any, Any]]], n: int,
             request: BatchRequest, describe: Callable[[int], str]) -> tuple[Any, Any]:
    """One batch of `n` rows from (rows, (x, y)) pieces."""
    def gather(values: list[tuple[np.ndarray, Any]]) -> Any:
        first = values[0][1]
        if first is None:
            return None
        if isinstance(first, dict):
            return {key: gather([(rows, v[key]) for rows, v in values]) for key in first}
        arrays = [np.asarray(v) for _, v in values]
        dtype = batching.common_dtype(arrays, lambda k: describe(
            int(request.indices[values[k][0][0]])))
        out = np.empty((n,) + np.shape(first)[1:], dtype)
        for rows, value in values:
            if np.shape(value)[1:] != out.shape[1:]:
                raise ValueError(
                    "Every sample of a batch must have the same shape. Received: shape "
                    f"{np.shape(value)[1:]} for {describe(int(request.indices[rows[0]]))}, "
                    f"but {out.shape[1:]} for another part's samples. Give the parts of "
                    "a concatenation one image_size (or sample shape).")
            out[rows] = value
        return out

    with request.stage("assemble"):
        return (gather([(rows, loaded[0]) for rows, loaded in pieces]),
                gather([(rows, loaded[1]) for rows, loaded in pieces]))


class ZipSource:
    """Sample i of each source as one multi-input sample (tf.data's `zip`): x is the
    tuple of the parts' x (a dict with names), labelled by the first part with labels.
    """

    def __init__(self, parts: Sequence[Any], names: Sequence[str] | None = None) -> None:
        if len(parts) < 2:
            _checks.fail("sources", "two sources or more", list(parts))
        _refuse_dropped_options(parts)
        self.parts = [check(source_of(part)) for part in parts]
        self.names = None if names is None else list(names)
        lengths = [len(p) for p in self.parts]
        if len(set(lengths)) != 1:
            raise ValueError(f"The sources of a zip must hold the same number of samples. "
                             f"Received lengths {lengths}.")
        for k, part in enumerate(self.parts):
            if skips(part):
                raise ValueError(
                    f"Part {k} of the zip skips bad files (on_error='skip'), but a "
                    "stand-in for a bad sample of one part would not match sample i of "
                    "the others. Use on_error='raise' in a zip, and gen.validate() to "
                    "find the bad files first.")
        labelled = [k for k, p in enumerate(self.parts) if p.labels is not None]
        first = self.parts[labelled[0]] if labelled else None
        for k in labelled[1:]:
            if not _same_labels(self.parts[k], first):
                raise ValueError(
                    f"A zip takes its labels from its first part with labels (part "
                    f"{labelled[0]}), but part {k}'s labels differ. Zip parts without "
                    "labels (kg.sources.ArraySource(x)), or with the same labels.")
        self.labels = None if first is None else first.labels
        self.class_names = None if first is None else first.class_names
        self.rescale = None  # each part converts with its own (`_finish`)

    def __len__(self) -> int:
        return len(self.parts[0])

    def describe(self, index: int) -> str:
        return " and ".join(p.describe(index) for p in self.parts)

    def _join(self, xs: list[Any]) -> Any:
        return tuple(xs) if self.names is None else dict(zip_(self.names, xs))

    def load(self, index: int) -> Any:
        xs, y = [], None
        for part in self.parts:
            sample = part.load(index)
            x, part_y = sample if isinstance(sample, tuple) else (sample, None)
            xs.append(x)
            y = part_y if y is None else y
        return self._join(xs), y

    @property
    def features(self) -> np.ndarray | None:
        """The first part's feature space."""
        return features_of(self.parts[0])

    def for_processes(self, processes: int) -> ZipSource:
        return ZipSource([for_processes(p, processes) for p in self.parts], self.names)

    def load_batch(self, request: BatchRequest) -> tuple[Any, Any]:
        """Each part loads the batch (its own `load_batch` where it has one, with its
        own `rescale`); with augmentation, which sees the whole sample, sample by
        sample, each part's x converted with its `rescale`."""
        if request.augment is not None:
            return load_each(request, self.load, self.describe,
                             finish=self._finish(request))
        xs, y = [], None
        for part in self.parts:
            own = dataclasses.replace(request, rescale=getattr(part, "rescale", None))
            x, part_y = (part.load_batch(own) if isinstance(part, BatchSource)
                         else load_each(own, part.load, part.describe))
            xs.append(x)
            y = part_y if y is None else y
        return self._join(xs), y


    def _finish(self, request: BatchRequest) -> Callable[[Any], Any]:
        """Converts an assembled multi-input x, each part's with its own `rescale`."""
        rescales = [getattr(part, "rescale", None) for part in self.parts]

        def finish(x: Any) -> Any:
            values = list(x.values()) if isinstance(x, dict) else list(x)
            converted = [batching.convert(v, request.dtype, r, request.buffers)
                         for v, r in zip_(values, rescales)]
            return self._join(converted)
        return finish


def _same_labels(part: Any, other: Any) -> bool:
    """Whether two sources label their samples alike (as class names where named)."""
    (a, _), (b, _) = _named_labels(part), _named_labels(other)
    try:
        return bool(np.array_equal(np.asarray(a, dtype=object), np.asarray(b, dtype=object)))
    except ValueError:  # ragged label lists
        return list(map(list, a)) == list(map(list, b))


def concatenate(*sources: Any) -> ConcatSource:
    """The samples of `sources`, one after the other (see `ConcatSource`)."""
    return ConcatSource(sources)


def zip(*sources: Any, **named: Any) -> ZipSource:  # noqa: A001 - tf.data's name
    """Sample i of each source as one multi-input sample: `zip(a, b)` gives x = (x_a,
    x_b), `zip(image=a, meta=b)` x = {"image": x_a, "meta": x_b} (see `ZipSource`)."""
    if sources and named:
        raise TypeError("kg.sources.zip takes sources by position or by name, not both.")
    if named:
        return ZipSource(list(named.values()), list(named))
    return ZipSource(sources)
