"""The source protocol and the helpers over any source: `Source`, `BatchSource`,
`PrefetchingSource`; a source checked (`check`), what it refuses of a generator's
batches (`check_batches`), whether it skips bad files, its feature space, file paths,
sample shape, and its copy for worker processes. A batch request and a batch loaded
one sample at a time are `_batch_request`, rows of arrays `_arrays`, composition
(`concatenate`, `zip`) `_compose`. The public face is `kerasgen.sources` (its docstring
shows a source of one class)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from kerasgen.sources._batch_request import BatchRequest

__all__ = ["BatchSource", "Source"]


@runtime_checkable
class Source(Protocol):
    """What a generator needs of its data (see the module's docstring)."""

    @property
    def labels(self) -> Any:
        """One label per sample, as given (class names or ids, a list of labels per
        sample, any array for "raw"), or None."""

    @property
    def class_names(self) -> Sequence[str] | None:
        """The classes in class-id order, or None (then the sorted distinct labels)."""

    def __len__(self) -> int: ...

    def describe(self, index: int) -> str:
        """How error messages name sample `index` (a file, a row, a record...)."""

    def load(self, index: int) -> Any:
        """Sample `index`: x, or (x, y) when the sample carries its own target."""


@runtime_checkable
class BatchSource(Source, Protocol):
    """A source that loads whole batches (faster than one sample at a time)."""

    def load_batch(self, request: BatchRequest) -> tuple[Any, Any]:
        """(x, y or None) of `request.indices`: blended, augmented, converted to
        `request.dtype` and assembled."""


@runtime_checkable
class PrefetchingSource(Source, Protocol):
    """A source whose samples are fetched from far away (remote objects): told the
    samples of the coming batches, it starts fetching them at once."""

    @property
    def remote(self) -> bool:
        """Whether any sample is fetched from far away (else `prefetch` does nothing)."""

    def prefetch(self, indices: np.ndarray) -> None:
        """Starts fetching samples `indices` (returns at once)."""

    def forget(self) -> None:
        """Drops what was fetched ahead and not read (an epoch ended)."""


def features_of(source: Any) -> Any:
    """The source's SMOTE feature space (`features`), or None."""
    return getattr(source, "features", None)


def file_paths_of(source: Any) -> list[str] | None:
    """The source's `file_paths` (one path per sample), or None."""
    return getattr(source, "file_paths", None)


def for_processes(source: Any, processes: int) -> Any:
    """`source` as worker processes share it (an image source's memory cache in shared
    memory): its `for_processes(n)`, or the source itself."""
    share = getattr(source, "for_processes", None)
    return source if share is None else share(processes)


def check_batches(source: Any, dtype: str | None, label_mode: str | None,
                  class_ids: np.ndarray | None) -> None:
    """What a source refuses of a generator's batches: its own `check(dtype)` (an image
    source refuses a `rescale` of integer batches), and skipping bad files without a
    class to pick a stand-in from."""
    for part in _leaves(source):
        own = getattr(part, "check", None)
        if own is not None:
            own(dtype)
    if skips(source) and class_ids is None and label_mode not in (None, "mask", "input",
                                                                  "boxes", "image"):
        raise ValueError(
            "on_error='skip' replaces a bad image by another of its class, but with "
            f"label_mode={label_mode!r} samples have no single class, so the "
            "stand-in's image would not match the targets. Use on_error='raise' and "
            "gen.validate() to find the bad files first."
        )


def _leaves(source: Any) -> list[Any]:
    """The sources a composed source is made of (itself when it is not composed)."""
    parts = getattr(source, "parts", None)
    if parts is None:
        return [source]
    return [leaf for part in parts for leaf in _leaves(part)]


def skips(source: Any) -> bool:
    """Whether a bad file of `source` (or of a part of it) is skipped, not raised."""
    return any(getattr(getattr(leaf, "loader", None), "on_error", None) == "skip"
               for leaf in _leaves(source))


def check(source: Any) -> Any:
    """Refuses what is not a source, naming the member it lacks."""
    missing = [name for name in ("__len__", "describe", "load", "labels", "class_names")
               if not hasattr(source, name)]
    if missing:
        raise TypeError(
            f"`source` must be a kerasgen source: an object with __len__, describe(i), "
            f"load(i), labels and class_names (see kg.sources). Received: "
            f"{type(source).__name__}, which has no {', '.join(missing)}.")
    return source


def sample_shape_of(part: Any) -> tuple[int, ...] | None:
    """The shape of every sample of `part` where it is known before loading: an image
    source's (image_size and channels), an array source's rows; None otherwise."""
    loader = getattr(part, "loader", None)
    if loader is not None and hasattr(loader, "sample_shape"):
        return tuple(loader.sample_shape)
    x = getattr(part, "x", None)
    return tuple(x.shape[1:]) if isinstance(x, np.ndarray) else None


def source_of(value: Any) -> Any:
    """A source, or the source of a kerasgen generator (`gen.source`)."""
    return getattr(value, "source", value)
