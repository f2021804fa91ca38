"""The bad-file policy of a loader: a file that cannot be read or decoded is an error
that names it, or (on_error="skip") a skipped file, warned of once and listed."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from kerasgen import _redact

# index -> (the samples that may stand in for it, in order; what they are called)
Substitutes = Callable[[int], "tuple[np.ndarray, str]"]

# what a bad file raises while it is read or decoded
BAD = (ValueError, FileNotFoundError)


class BadFiles:
    """`on_error` applied: `raised(error, path)` for "raise", `record(path, error)`
    for "skip"; `skipped` lists every file skipped so far (those the listing dropped
    first, then the bad ones met while loading), each once.

    Shared by a loader's threads; a copy in another process has its own lock."""

    def __init__(self, on_error: str, skipped: Iterable[str] = ()) -> None:
        self.on_error = on_error
        self.skipped = list(skipped)
        self._warned = False  # of a bad file met while loading
        self._lock = threading.Lock()

    @property
    def raising(self) -> bool:
        """Whether a bad file is an error (on_error="raise")."""
        return self.on_error == "raise"

    def record(self, path: str, error: Exception) -> None:
        """`path` skipped because of `error`: listed once, and the first one met while
        loading warned of (the listing warned of its own)."""
        with self._lock:
            if path in self.skipped:
                return
            self.skipped.append(path)
            first, self._warned = not self._warned, True
        if first:
            _redact.warn(f"Skipping an undecodable image, replaced by another sample of "
                         f"its class: {error} `gen.skipped` lists every skipped file; "
                         "`gen.validate()` finds them all up front.", stacklevel=2)

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_lock"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()


def bad_file(error: Exception, path: str) -> Exception:
    """`error` (a file that cannot be read or decoded) marked as a bad file, with the
    ways out in a note; `Generator.__getitem__` re-raises it without kerasgen's frames."""
    if not getattr(error, "kerasgen_bad_file", None):
        error.kerasgen_bad_file = path  # type: ignore[attr-defined]
        if hasattr(error, "add_note"):
            error.add_note(
                "kerasgen: to train past bad files, pass on_error='skip' (each is replaced "
                "by another image of its class, with a warning; gen.skipped lists them); "
                "to find them all first, run gen.validate() or `kerasgen inspect` on the "
                "folder or CSV file.")
    return error


def stand_in(loader: Any, index: int, out: np.ndarray, substitutes: Substitutes,
             with_mask: bool = False, mask_out: np.ndarray | None = None,
             exclude: int | None = None) -> tuple[int, np.ndarray | None]:
    """(index, mask or None) of the first good stand-in of `substitutes(index)` for the
    bad sample `index` of `loader` (an `ImageLoader`), decoded into `out` (and its mask
    into `mask_out`); each bad one met is recorded. None good is an error."""
    candidates, group = substitutes(index)
    for j in candidates:
        j = int(j)
        if j == exclude:
            continue
        try:
            loader.decode_into(j, out)
            return j, loader.load_mask(j, mask_out) if with_mask else None
        except BAD as error:
            loader.bad.record(loader.file_paths[j], error)
    raise ValueError(f"No image of {group} could be decoded to stand in for "
                     f"{loader.file_paths[index]}; `gen.skipped` lists the bad files.")
